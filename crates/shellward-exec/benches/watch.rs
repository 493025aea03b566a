//! What watching a confined command's writes costs (`ExecutorConfig::watch_writes`, which reports refused writes
//! with their paths): each call that writes a path makes a round trip to the executor.
//!
//! Paired and interleaved: each round runs `true`, then a command writing `FILES` files in its workspace (one
//! `open(O_CREAT|O_WRONLY|O_TRUNC)` each, by the shell's redirection) and removing them (`rm -f`, one `unlinkat`
//! each), once on an executor that watches and once on one that does not, with the same write confinement; the
//! medians of the per-round differences are printed, per command and per watched call.
//! `cargo bench -p shellward-exec --bench watch` (Linux; `ROUNDS` sets the rounds, `FILES` the files).

#[cfg(target_os = "linux")]
fn main() {
    use shellward_exec::{Confinement, ExecPlan, Executor, ExecutorConfig, Network};
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn plan(command: &str, dir: &Path) -> ExecPlan {
        let mut p = ExecPlan::new(command);
        p.workdir = Some(dir.to_path_buf());
        p.confinement = Confinement::new(Some(vec![dir.to_path_buf()]), Network::Host);
        p.timeout = Some(Duration::from_secs(60));
        p
    }
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    }
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(default)
    };
    let (rounds, files) = (var("ROUNDS", 31), var("FILES", 1000));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let executor = |watch| {
            let mut c = ExecutorConfig::default();
            c.watch_writes = watch;
            Executor::new(c).unwrap()
        };
        let (watched, plain) = (executor(true), executor(false));
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let write = format!("i=0; while [ $i -lt {files} ]; do : > f$i; i=$((i+1)); done; rm -f f*");
        let timed = |ex: &Executor, command: &str| {
            let (ex, p) = (ex.clone(), plan(command, dir));
            async move {
                let t = Instant::now();
                let r = ex.execute(p).await.unwrap();
                assert_eq!(r.exit.code(), Some(0), "{:?}", r.output.text);
                t.elapsed().as_secs_f64() * 1e3
            }
        };
        let r = watched.execute(plan("echo x > /proc/version_x 2>/dev/null; true", dir)).await.unwrap();
        assert!(r.confinement.writes_watched, "the watch is on here: {r:?}");
        let (mut base, mut extra_true, mut plain_write, mut extra_write) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let a = timed(&plain, "true").await;
            let b = timed(&watched, "true").await;
            let c = timed(&plain, &write).await;
            let d = timed(&watched, &write).await;
            base.push(a);
            extra_true.push(b - a);
            plain_write.push(c);
            extra_write.push(d - c);
        }
        let (t, et, w, ew) = (
            median(base),
            median(extra_true),
            median(plain_write),
            median(extra_write),
        );
        println!(
            "write watch, {rounds} paired rounds: `true` runs in {t:.2} ms unwatched, {et:+.2} ms watched; writing and \
             removing {files} files runs in {w:.1} ms unwatched, {ew:+.1} ms watched ({:+.0} %, {:.1} µs per watched \
             call)",
            100.0 * ew / w,
            1e3 * ew / (2 * files) as f64
        );
        watched.shutdown().await;
        plain.shutdown().await;
    });
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("the write watch needs Linux");
}
