//! Undo recording's cost per command (issue 61's targets, on a 10,000-file repository: a command changing one file
//! costs at most 10 ms more, median, and at most 20 % of running `true`; one changing nothing at most 2 ms more).
//!
//! Paired and interleaved: each round runs `true` and then a one-file change (`echo N >> src/m0/f0.rs`) in a session
//! that does not record and in one that does, in the same repository; the medians of the per-round differences are
//! printed with the ratio to `true`'s own run. The recorded session's first command (which takes the baseline: a copy
//! of the repository) is timed apart. `cargo bench -p shellward-exec --bench undo` (Linux; `ROUNDS` sets the rounds).

#[cfg(target_os = "linux")]
fn main() {
    use shellward_exec::{ExecPlan, Executor, ExecutorConfig};
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn plan(command: &str, dir: &Path, recorded: bool) -> ExecPlan {
        let mut p = ExecPlan::new(command);
        p.workdir = Some(dir.to_path_buf());
        p.session = Some(if recorded { "recorded" } else { "plain" }.into());
        p.record = recorded.then(|| dir.to_path_buf());
        p.timeout = Some(Duration::from_secs(60));
        p
    }
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    }
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(51);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ex = Executor::new(ExecutorConfig::default()).unwrap();
        let repo = tempfile::tempdir().unwrap();
        shellward_test_support::source_tree(repo.path());
        let dir = repo.path();
        let timed = |command: String, recorded: bool| {
            let ex = ex.clone();
            async move {
                let t = Instant::now();
                let r = ex.execute(plan(&command, dir, recorded)).await.unwrap();
                assert_eq!(r.exit.code(), Some(0), "{:?}", r.output.text);
                t.elapsed().as_secs_f64() * 1e3
            }
        };
        timed("true".into(), false).await;
        let baseline = timed("true".into(), true).await;
        let (mut plain_true, mut extra_true, mut extra_change) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..rounds {
            let a = timed("true".into(), false).await;
            let b = timed("true".into(), true).await;
            let c = timed(format!("echo {n} >> src/m0/f0.rs"), false).await;
            let d = timed(format!("echo {n} >> src/m0/f1.rs"), true).await;
            plain_true.push(a);
            extra_true.push(b - a);
            extra_change.push(d - c);
        }
        let list = ex.changes(Some(&"recorded".into())).await.unwrap();
        assert!(
            list.commands.iter().all(|c| c.changes.totals.modified == 1),
            "each recorded change is one modified file"
        );
        let (t, et, ec) = (median(plain_true), median(extra_true), median(extra_change));
        println!(
            "undo recording, 10,000 files, {rounds} paired rounds: `true` runs in {t:.2} ms; recording adds \
             {et:.2} ms to a command that changes nothing (target <= 2 ms) and {ec:.2} ms to one that changes one \
             file (target <= 10 ms), {:.0} % of `true` (target <= 20 %); the first recorded command, which copies \
             the repository, took {baseline:.0} ms",
            100.0 * ec / t
        );
        ex.shutdown().await;
    });
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("undo recording needs Linux");
}
