//! Executor benchmarks, each against a baseline measured in the same run where one exists.
//!
//! Run: `cargo bench -p shellward-exec --bench executor` (add a group name to run one, e.g. `-- spawn`).
//!
//! - `spawn/*`: execute `true` end to end vs a raw `tokio::process::Command` spawn + wait of `sh -c true`;
//! - `namespace/*`: execute `true` in the session's sandbox (PID and mount namespace under the embedded static init)
//!   vs without, and vs a sandbox under the dynamically linked `shellward-init` from disk;
//! - `capture-1GiB/*`: capturing 1 GiB of output vs `sh -c 'head -c 1G /dev/zero | cat >/dev/null'`;
//! - `kill-100-tree`: SIGKILL of a 100-process tree until no member is alive;
//! - `list-1000`: list latency with 1,000 live background processes (RSS printed before and after starting them).
//!
//! `spawn` and `capture` also print a *paired* ratio: subject and baseline run alternately and the median of the
//! per-pair ratios is reported, which holds up better than two separate criterion estimates on a noisy machine.

use criterion::{Criterion, criterion_group, criterion_main};
use shellward_exec::{ExecPlan, Executor, ExecutorConfig, SignalKind};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l.to_string())
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Runs `baseline` and `subject` alternately `pairs` times and prints the median of the per-pair ratios
/// (subject / baseline) with its quartiles. On a shared machine whose speed drifts by tens of percent between
/// seconds, interleaving keeps both sides of each ratio under the same conditions; criterion's groups above measure
/// one side after the other.
type Run<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

fn paired<'a>(
    rt: &Runtime,
    label: &str,
    pairs: usize,
    mut baseline: impl FnMut() -> Run<'a>,
    mut subject: impl FnMut() -> Run<'a>,
) {
    let mut ratios = Vec::with_capacity(pairs);
    rt.block_on(async {
        for _ in 0..pairs {
            let t = Instant::now();
            baseline().await;
            let base = t.elapsed();
            let t = Instant::now();
            subject().await;
            ratios.push(t.elapsed().as_secs_f64() / base.as_secs_f64());
        }
    });
    ratios.sort_by(f64::total_cmp);
    let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f).round() as usize];
    println!(
        "{label}: paired ratio median {:.3} (quartiles {:.3} .. {:.3}, {pairs} interleaved pairs)",
        q(0.5),
        q(0.25),
        q(0.75)
    );
}

async fn raw_sh(script: &str) {
    let status = tokio::process::Command::new("sh")
        .args(["-c", script])
        .status()
        .await
        .unwrap();
    assert!(status.success());
}

fn spawn(c: &mut Criterion) {
    let rt = runtime();
    // The cgroup and process-group paths without a PID namespace (the `namespace` group measures that).
    let ex = rt.block_on(async {
        let mut config = ExecutorConfig::default();
        config.pid_namespace = false;
        Executor::new(config).unwrap()
    });
    println!("containment: {}", ex.containment());
    paired(
        &rt,
        "spawn: executor `true` / raw `sh -c true`",
        1_000,
        || Box::pin(raw_sh("true")),
        || {
            Box::pin(async {
                let r = ex.execute(ExecPlan::new("true")).await.unwrap();
                assert_eq!(r.exit.code(), Some(0));
            })
        },
    );
    let mut g = c.benchmark_group("spawn");
    g.bench_function("raw-tokio-sh-c-true", |b| {
        b.to_async(&rt).iter(|| async {
            let status = tokio::process::Command::new("sh")
                .args(["-c", "true"])
                .status()
                .await
                .unwrap();
            assert!(status.success());
        })
    });
    g.bench_function("executor-true", |b| {
        b.to_async(&rt).iter(|| async {
            let r = ex.execute(ExecPlan::new("true")).await.unwrap();
            assert_eq!(r.exit.code(), Some(0));
        })
    });
    // One executor at a time, as a host would run it (the fallback's quick exit check looks at the process's
    // children, and another executor's are not its own).
    rt.block_on(ex.shutdown());
    let pg = rt.block_on(async {
        let mut config = ExecutorConfig::default();
        config.containment = shellward_exec::ContainmentPreference::ProcessGroup;
        config.pid_namespace = false;
        Executor::new(config).unwrap()
    });
    g.bench_function("executor-true-process-group", |b| {
        b.to_async(&rt).iter(|| async {
            let r = pg.execute(ExecPlan::new("true")).await.unwrap();
            assert_eq!(r.exit.code(), Some(0));
        })
    });
    g.finish();
    paired(
        &rt,
        "spawn: process-group executor `true` / raw `sh -c true`",
        1_000,
        || Box::pin(raw_sh("true")),
        || {
            Box::pin(async {
                let r = pg.execute(ExecPlan::new("true")).await.unwrap();
                assert_eq!(r.exit.code(), Some(0));
            })
        },
    );
    rt.block_on(pg.shutdown());
}

fn capture(c: &mut Criterion) {
    let rt = runtime();
    let ex = rt.block_on(async { Executor::new(ExecutorConfig::default()).unwrap() });
    paired(
        &rt,
        "capture: executor `head -c 1G /dev/zero` / `sh -c 'head -c 1G /dev/zero | cat >/dev/null'`",
        25,
        || Box::pin(raw_sh("head -c 1G /dev/zero | cat >/dev/null")),
        || {
            Box::pin(async {
                let r = ex
                    .execute(ExecPlan::new("head -c 1G /dev/zero"))
                    .await
                    .unwrap();
                assert_eq!(r.output.total_bytes, 1 << 30);
            })
        },
    );
    let mut g = c.benchmark_group("capture-1GiB");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("baseline-head-pipe-cat", |b| {
        b.to_async(&rt).iter(|| async {
            let s = tokio::process::Command::new("sh")
                .args(["-c", "head -c 1G /dev/zero | cat >/dev/null"])
                .status()
                .await
                .unwrap();
            assert!(s.success());
        })
    });
    g.bench_function("executor-capture", |b| {
        b.to_async(&rt).iter(|| async {
            let r = ex
                .execute(ExecPlan::new("head -c 1G /dev/zero"))
                .await
                .unwrap();
            assert_eq!(r.output.total_bytes, 1 << 30);
        })
    });
    g.finish();
    rt.block_on(ex.shutdown());
}

fn kill_tree(c: &mut Criterion) {
    let rt = runtime();
    let ex = rt.block_on(async { Executor::new(ExecutorConfig::default()).unwrap() });
    let mut g = c.benchmark_group("kill-100-tree");
    g.sample_size(20);
    g.bench_function("sigkill-until-gone", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut plan = ExecPlan::new(
                        "i=0; while [ $i -lt 99 ]; do sleep 600 & i=$((i+1)); done; wait",
                    );
                    plan.background = true;
                    let r = ex.execute(plan).await.unwrap();
                    while ex.tree_members(None, &r.id).unwrap().len() < 100 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    let t = Instant::now();
                    ex.signal(None, &r.id, SignalKind::Kill).await.unwrap();
                    total += t.elapsed();
                    assert!(ex.tree_members(None, &r.id).unwrap().is_empty());
                }
                total
            })
        })
    });
    g.finish();
    rt.block_on(ex.shutdown());
}

fn list_1000(c: &mut Criterion) {
    let rt = runtime();
    let before = rss_kib();
    let ex = rt.block_on(async {
        let mut config = ExecutorConfig::default();
        config.max_running = 1_100;
        config.max_running_per_session = 1_100;
        let ex = Executor::new(config).unwrap();
        for _ in 0..1_000 {
            let mut plan = ExecPlan::new("sleep 600");
            plan.background = true;
            ex.execute(plan).await.unwrap();
        }
        ex
    });
    let after = rss_kib();
    println!(
        "RSS with 1,000 live background processes: {} KiB (before starting them: {} KiB)",
        after, before
    );
    let mut g = c.benchmark_group("list-1000");
    g.bench_function("list", |b| {
        b.iter(|| {
            let l = ex.list(None, 10_000);
            assert_eq!(l.processes.len(), 1_000);
        })
    });
    g.finish();
    rt.block_on(ex.shutdown());
}

/// The cost of the session sandbox per command: `true` started into the session's PID and mount namespace (made once,
/// at the first command, under the embedded static init) against the same executor settings without one, and
/// against a sandbox whose pid 1 is the dynamically linked `shellward-init` from disk, interleaved.
fn namespace(c: &mut Criterion) {
    let rt = runtime();
    let (plain, ns, from_disk) = rt.block_on(async {
        let mut config = ExecutorConfig::default();
        config.pid_namespace = false;
        let plain = Executor::new(config).unwrap();
        let ns = Executor::new(ExecutorConfig::default()).unwrap();
        ns.execute(ExecPlan::new("true")).await.unwrap();
        let mut config = ExecutorConfig::default();
        config.init_program = Some(env!("CARGO_BIN_EXE_shellward-init").into());
        let from_disk = Executor::new(config).unwrap();
        from_disk.execute(ExecPlan::new("true")).await.unwrap();
        (plain, ns, from_disk)
    });
    println!(
        "pid namespaces active: {} (embedded init), {} (init from disk)",
        ns.pid_namespaces(),
        from_disk.pid_namespaces()
    );
    let run = |ex: &Executor| {
        let ex = ex.clone();
        move || -> Run<'static> {
            let ex = ex.clone();
            Box::pin(async move {
                let r = ex.execute(ExecPlan::new("true")).await.unwrap();
                assert_eq!(r.exit.code(), Some(0));
            })
        }
    };
    paired(
        &rt,
        "namespace: executor `true` in a PID namespace (embedded init) / without",
        500,
        run(&plain),
        run(&ns),
    );
    paired(
        &rt,
        "namespace: embedded static init / dynamically linked shellward-init from disk",
        500,
        run(&from_disk),
        run(&ns),
    );
    let mut g = c.benchmark_group("namespace");
    for (name, ex) in [
        ("executor-true-plain", &plain),
        ("executor-true-pid-namespace", &ns),
        ("executor-true-pid-namespace-init-from-disk", &from_disk),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                ex.execute(ExecPlan::new("true")).await.unwrap();
            })
        });
    }
    g.finish();
    rt.block_on(async {
        plain.shutdown().await;
        ns.shutdown().await;
        from_disk.shutdown().await;
    });
}

/// The cost of per-command confinement in the same session sandbox: `true` with writes confined (Landlock, the
/// ruleset built once) and with a network of its own, each against the same command unconfined, interleaved.
fn confinement(c: &mut Criterion) {
    use shellward_exec::{Confinement, Network};
    let rt = runtime();
    let ex = rt.block_on(async {
        let ex = Executor::new(ExecutorConfig::default()).unwrap();
        ex.execute(ExecPlan::new("true")).await.unwrap();
        ex
    });
    println!(
        "pid namespaces active: {}; Landlock ABI {}",
        ex.pid_namespaces(),
        Executor::landlock_abi()
    );
    let writable = Some(vec![
        std::env::temp_dir(),
        "/var/tmp".into(),
        std::env::current_dir().unwrap(),
    ]);
    let run = |confinement: Confinement| {
        let ex = ex.clone();
        move || -> Run<'static> {
            let ex = ex.clone();
            let mut plan = ExecPlan::new("true");
            plan.confinement = confinement.clone();
            Box::pin(async move {
                let r = ex.execute(plan).await.unwrap();
                assert_eq!(r.exit.code(), Some(0));
            })
        }
    };
    let none = Confinement::none();
    let writes = Confinement::new(writable.clone(), Network::Host);
    let filtered = Confinement::new(writable.clone(), Network::Host)
        .deny_syscalls(shellward_exec::DEFAULT_DENIED_SYSCALLS.iter().copied());
    let offline = Confinement::new(writable.clone(), Network::None);
    let loopback = Confinement::new(writable.clone(), Network::Loopback);
    let proxied =
        Confinement::new(writable, Network::Host).allow_only(["pypi.org", "*.npmjs.org:443"]);
    paired(
        &rt,
        "confinement: writes confined (Landlock) / unconfined, same session sandbox",
        500,
        run(none.clone()),
        run(writes.clone()),
    );
    paired(
        &rt,
        "confinement: writes confined + seccomp filter (the default list) / unconfined, same session sandbox",
        500,
        run(none.clone()),
        run(filtered.clone()),
    );
    paired(
        &rt,
        "confinement: writes confined + network none / unconfined, same session sandbox",
        500,
        run(none.clone()),
        run(offline.clone()),
    );
    paired(
        &rt,
        "confinement: writes confined + network loopback (the session's namespace) / unconfined, same session sandbox",
        300,
        run(none.clone()),
        run(loopback.clone()),
    );
    paired(
        &rt,
        "confinement: writes confined + network allow-list (the session's namespace for that list, its proxy) / unconfined, same session sandbox",
        300,
        run(none.clone()),
        run(proxied.clone()),
    );
    let mut g = c.benchmark_group("confinement");
    for (name, confinement) in [
        ("executor-true-unconfined", none),
        ("executor-true-writes", writes),
        ("executor-true-writes-seccomp", filtered),
        ("executor-true-writes-network-none", offline),
        ("executor-true-writes-network-loopback", loopback),
        ("executor-true-writes-network-allow", proxied),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| {
                let mut plan = ExecPlan::new("true");
                plan.confinement = confinement.clone();
                let ex = ex.clone();
                async move {
                    ex.execute(plan).await.unwrap();
                }
            })
        });
    }
    g.finish();
    rt.block_on(ex.shutdown());
}

criterion_group!(
    benches,
    spawn,
    namespace,
    confinement,
    capture,
    kill_tree,
    list_1000
);
criterion_main!(benches);
