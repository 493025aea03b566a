//! A preview's cost against the command's own run (issue 61's target: a preview of `rm -rf src` in a 10,000-file
//! repository returns its change set within 2x the command's run time plus 200 ms).
//!
//! Paired and interleaved: each round runs `rm -rf src` for real in a fresh copy (made before the timer starts) and
//! then previews it in a copy that stays; the medians and the ratio `preview / (2 x run + 200 ms)` are printed (at
//! most 1 meets the target). `cargo bench -p shellward-exec --bench preview` (Linux; `ROUNDS` sets the rounds).

#[cfg(target_os = "linux")]
fn main() {
    use shellward_exec::{Confinement, ExecPlan, Executor, ExecutorConfig, Network, PreviewLimits};
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn plan(dir: &Path) -> ExecPlan {
        let mut p = ExecPlan::new("rm -rf src");
        p.workdir = Some(dir.to_path_buf());
        p.session = Some("bench".into());
        p.confinement = Confinement::new(Some(vec![dir.to_path_buf()]), Network::None);
        p.timeout = Some(Duration::from_secs(60));
        p
    }
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(11);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ex = Executor::new(ExecutorConfig::default()).unwrap();
        let kept = tempfile::tempdir().unwrap();
        shellward_test_support::source_tree(kept.path());
        let limits = PreviewLimits::default();
        let (mut runs, mut previews) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let fresh = tempfile::tempdir().unwrap();
            shellward_test_support::source_tree(fresh.path());
            let t = Instant::now();
            let r = ex.execute(plan(fresh.path())).await.unwrap();
            runs.push(t.elapsed());
            assert!(!fresh.path().join("src").exists(), "{:?}", r.output.text);
            let t = Instant::now();
            let p = ex.preview(plan(kept.path()), &limits).await.unwrap();
            previews.push(t.elapsed());
            assert_eq!(p.changes.totals.deleted, 10_101);
        }
        runs.sort();
        previews.sort();
        let (run, preview) = (runs[rounds / 2], previews[rounds / 2]);
        let target = run * 2 + Duration::from_millis(200);
        println!(
            "rm -rf src, 10,000 files, {rounds} rounds: run median {:.1} ms, preview median {:.1} ms, \
             target 2 x run + 200 ms = {:.1} ms, ratio {:.2} (quartiles of the preview {:.1}-{:.1} ms)",
            run.as_secs_f64() * 1e3,
            preview.as_secs_f64() * 1e3,
            target.as_secs_f64() * 1e3,
            preview.as_secs_f64() / target.as_secs_f64(),
            previews[rounds / 4].as_secs_f64() * 1e3,
            previews[rounds * 3 / 4].as_secs_f64() * 1e3,
        );
        ex.shutdown().await;
    });
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("previews need Linux");
}
