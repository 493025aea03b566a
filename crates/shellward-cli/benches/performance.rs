//! `cargo bench -p shellward-cli --bench performance`: the performance table of issue 16, every row measured in one
//! run on this machine, each against its baseline or peer measured in the same run (paired and interleaved, so load
//! from elsewhere hits both sides alike).
//!
//! Rows: wake-ups of an idle `shellward mcp` and `serve`; the MCP round trip of `execute {"command": "true"}` against
//! the Python `mcp-shell-server` from PyPI (installed into this bench's own venv under `target/`; skipped with a
//! message when PyPI is unreachable), back to back and spaced out as an agent's calls are (`spaced`); `shellward run true` as a whole process against `sh -c true`; a policy decision
//! with a fresh and with a reused instance (`policy bench`); the executor's `true` against a raw spawn of
//! `sh -c true`, per containment path, and a start in a confined session (its sandbox, Landlock and the default
//! seccomp list) against an unconfined start; and `serve`'s throughput with 200 concurrent clients (and again with PID
//! namespaces off, and without per-command confinement) against the raw spawn rate, beside two floors measured in the same run: `sh -c true` spawned as
//! barely as possible into a PID and mount namespace of its own, directly and under a minimal init (the kernel's cost
//! of the per-command containment, with no shellward in it), and `process_list` through the same server and clients
//! (the protocol's cost); together they bound what any execute could reach on these cores. Set `SHELLWARD_BENCH_QUICK=1` for a short run (fewer samples, 3 s windows).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shellward");

#[path = "performance/floors.rs"]
mod floors;
#[path = "performance/sdk.rs"]
mod sdk;
#[path = "performance/size.rs"]
mod size;

use floors::{contained, namespaces_available, raw_sh, spawn_rate};

fn quick() -> bool {
    std::env::var_os("SHELLWARD_BENCH_QUICK").is_some()
}

/// Samples per side for the interleaved rows.
fn samples(full: usize) -> usize {
    if quick() { full / 5 } else { full }
}

fn window() -> Duration {
    Duration::from_secs(if quick() { 3 } else { 10 })
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Voluntary and involuntary context switches of every thread of `pid`.
fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// CPU time (user + system) of `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// A child that is killed when dropped.
struct Guard(Child);

impl Drop for Guard {
    /// TERM first, so the server shuts its executor down (log directory and `pids` root removed); KILL only if it
    /// has not exited within 5 s.
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid of our own unreaped child (it cannot have been reused before `wait`).
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes a bench configuration file `name` under the target directory; returns its path.
fn bench_config(name: &str, text: &str) -> String {
    let path = Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join(name);
    std::fs::write(&path, text).expect("write the bench config");
    path.display().to_string()
}

/// A configuration file turning PID namespaces off (the other rows use the defaults), to show what they cost.
fn no_namespace_config() -> String {
    bench_config(
        "bench-no-pid-namespace.toml",
        "[executor]\npid_namespace = false\n",
    )
}

/// No per-command confinement: writes unconfined, no seccomp filter, nothing hidden (the session sandbox stays).
fn unconfined_config() -> String {
    bench_config(
        "bench-unconfined.toml",
        "[confinement]\nwritable = \"any\"\ndeny_syscalls = []\ndeny_read = []\n",
    )
}

fn start_serve(extra: &[&str]) -> (Guard, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("SHELLWARD_CONFIG")
        .env_remove("SHELLWARD_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start shellward serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("shellward: listening on http://")
        .to_string();
    (Guard(child), addr)
}

// ---------------------------------------------------------------------------------------------------------------
// MCP over stdio, spoken directly (newline-delimited JSON-RPC).

struct Mcp {
    child: Guard,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(mut cmd: Command) -> Result<Mcp, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp {
            child: Guard(child),
            stdin,
            stdout,
            next: 1,
        };
        m.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "shellward-bench", "version": "0"}}),
        )?;
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(m)
    }

    fn send(&mut self, v: &Value) -> Result<(), String> {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("write: {e}"))
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let mut line = String::new();
            if self
                .stdout
                .read_line(&mut line)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("the server closed its output".into());
            }
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) {
                if v.get("error").is_some() {
                    return Err(format!("error reply: {v}"));
                }
                return Ok(v["result"].clone());
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

/// The target directory the bench binary was built in.
fn target_dir() -> Result<std::path::PathBuf, String> {
    Ok(Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .ok_or("no target directory")?
        .to_path_buf())
}

/// The peer, `mcp-shell-server` from PyPI, in a venv of its own under `target/` (with the MCP Python SDK it depends
/// on, which the SDK row uses as its client).
fn peer_command() -> Result<Command, String> {
    let venv = target_dir()?.join("bench-peer-venv");
    let exe = venv.join("bin/mcp-shell-server");
    if !exe.exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .map_err(|e| format!("python3 -m venv: {e}"))?
            .success()
            && Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "mcp-shell-server==1.1.14"])
                .status()
                .map_err(|e| format!("pip: {e}"))?
                .success();
        if !ok || !exe.exists() {
            return Err("could not install mcp-shell-server from PyPI".into());
        }
    }
    let mut cmd = Command::new(exe);
    cmd.env("ALLOW_COMMANDS", "true");
    Ok(cmd)
}

fn mcp_round_trip() {
    println!(
        "\n## MCP round trip: tools/call execute {{\"command\": \"true\"}}, one session, sequential"
    );
    let mut ours = Command::new(BIN);
    ours.arg("mcp").env_remove("SHELLWARD_CONFIG");
    let mut sw = match Mcp::start(ours) {
        Ok(m) => m,
        Err(e) => return println!("shellward mcp did not start: {e}"),
    };
    let no_ns = no_namespace_config();
    let mut plain_cmd = Command::new(BIN);
    plain_cmd.args(["mcp", "--config", &no_ns]);
    let mut plain = Mcp::start(plain_cmd).expect("shellward mcp without namespaces");
    let mut peer = match peer_command().and_then(Mcp::start) {
        Ok(p) => Some(p),
        Err(e) => {
            println!("peer unavailable ({e}); shellward alone:");
            None
        }
    };
    let sw_args = json!({"name": "execute", "arguments": {"command": "true"}});
    let peer_args = json!({"name": "shell_execute", "arguments": {"command": ["true"]}});
    // Warm both up.
    for _ in 0..10 {
        let _ = sw.call("tools/call", sw_args.clone());
        let _ = plain.call("tools/call", sw_args.clone());
        if let Some(p) = peer.as_mut() {
            let _ = p.call("tools/call", peer_args.clone());
        }
    }
    let n = samples(300);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let (cpu_a0, cpu_b0) = (cpu_time(sw.pid()), peer.as_ref().map(|p| cpu_time(p.pid())));
    for _ in 0..n {
        let t = Instant::now();
        let r = sw
            .call("tools/call", sw_args.clone())
            .expect("shellward call");
        a.push(ms(t.elapsed()));
        assert_eq!(r["structuredContent"]["exit_code"], 0, "{r}");
        let t = Instant::now();
        plain
            .call("tools/call", sw_args.clone())
            .expect("shellward call");
        c.push(ms(t.elapsed()));
        if let Some(p) = peer.as_mut() {
            let t = Instant::now();
            p.call("tools/call", peer_args.clone()).expect("peer call");
            b.push(ms(t.elapsed()));
        }
    }
    let cpu_a = (cpu_time(sw.pid()) - cpu_a0).as_secs_f64() * 1000.0 / n as f64;
    println!(
        "shellward mcp          median {:6.2} ms   p90 {:6.2} ms   CPU {:5.2} ms/call   (target ≤ 3 ms and below the peer)",
        median(&a),
        percentile(&a, 0.9),
        cpu_a
    );
    println!(
        "shellward mcp, no PID namespace median {:6.2} ms   p90 {:6.2} ms",
        median(&c),
        percentile(&c, 0.9)
    );
    if let (Some(p), Some(c0)) = (peer.as_ref(), cpu_b0) {
        let cpu_b = (cpu_time(p.pid()) - c0).as_secs_f64() * 1000.0 / n as f64;
        println!(
            "mcp-shell-server 1.1.14 median {:6.2} ms   p90 {:6.2} ms   CPU {:5.2} ms/call",
            median(&b),
            percentile(&b, 0.9),
            cpu_b
        );
        println!(
            "ratio shellward / peer (medians): {:.2}",
            median(&a) / median(&b)
        );
    }
}

/// The same round trip as an agent makes it: calls spaced out (100 ms apart), so every call finds the server idle
/// and pays whatever a cold path costs (thread wake-ups, the kernel's cgroup migration lock). Against the peer, and
/// against shellward without the per-command process limit (what the `pids` group costs when calls are spaced).
fn mcp_spaced() {
    println!("\n## MCP round trip, calls 100 ms apart (as an agent makes them)");
    let gap = Duration::from_millis(100);
    let start = |extra: &[&str]| {
        let mut c = Command::new(BIN);
        c.arg("mcp").args(extra).env_remove("SHELLWARD_CONFIG");
        Mcp::start(c)
    };
    let mut sw = match start(&[]) {
        Ok(m) => m,
        Err(e) => return println!("shellward mcp did not start: {e}"),
    };
    let no_limit = bench_config(
        "bench-no-process-limit.toml",
        "[executor]\nmax_processes = 0\n",
    );
    let mut unlimited =
        start(&["--config", &no_limit]).expect("shellward mcp without a process limit");
    let mut peer = peer_command().and_then(Mcp::start).ok();
    let sw_args = json!({"name": "execute", "arguments": {"command": "true"}});
    let peer_args = json!({"name": "shell_execute", "arguments": {"command": ["true"]}});
    let n = samples(40);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n + 2 {
        std::thread::sleep(gap);
        let t = Instant::now();
        sw.call("tools/call", sw_args.clone())
            .expect("shellward call");
        let ours = ms(t.elapsed());
        std::thread::sleep(gap);
        let t = Instant::now();
        unlimited
            .call("tools/call", sw_args.clone())
            .expect("shellward call");
        let free = ms(t.elapsed());
        if let Some(p) = peer.as_mut() {
            std::thread::sleep(gap);
            let t = Instant::now();
            p.call("tools/call", peer_args.clone()).expect("peer call");
            if i >= 2 {
                b.push(ms(t.elapsed()));
            }
        }
        if i >= 2 {
            a.push(ours);
            c.push(free);
        }
    }
    println!(
        "shellward mcp          median {:6.2} ms   p90 {:6.2} ms",
        median(&a),
        percentile(&a, 0.9)
    );
    println!(
        "shellward mcp, max_processes = 0 median {:6.2} ms   p90 {:6.2} ms   (the pids group's share)",
        median(&c),
        percentile(&c, 0.9)
    );
    if !b.is_empty() {
        println!(
            "mcp-shell-server 1.1.14 median {:6.2} ms   p90 {:6.2} ms   ratio shellward / peer {:.2}",
            median(&b),
            percentile(&b, 0.9),
            median(&a) / median(&b)
        );
    }
}

fn idle_wakeups() {
    println!("\n## Idle wake-ups (context switches of every thread, after 1 s to settle)");
    let mut mcp = Command::new(BIN)
        .arg("mcp")
        .env_remove("SHELLWARD_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp");
    let _mcp_stdin = mcp.stdin.take();
    let mcp = Guard(mcp);
    let (serve, _) = start_serve(&[]);
    std::thread::sleep(Duration::from_secs(1));
    let (m0, s0) = (context_switches(mcp.0.id()), context_switches(serve.0.id()));
    let w = window();
    std::thread::sleep(w);
    let (m1, s1) = (context_switches(mcp.0.id()), context_switches(serve.0.id()));
    println!(
        "shellward mcp   {:.2} wake-ups/s   shellward serve {:.2} wake-ups/s   over {} s (target ≤ 1/s)",
        (m1 - m0) as f64 / w.as_secs_f64(),
        (s1 - s0) as f64 / w.as_secs_f64(),
        w.as_secs()
    );
}

fn whole_process() {
    println!("\n## Whole process (fork, exec, wait), interleaved");
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("sh -c true", vec!["-c", "true"], "sh"),
        ("shellward --version", vec!["--version"], BIN),
        (
            "shellward policy check -- true",
            vec!["policy", "check", "--", "true"],
            BIN,
        ),
        ("shellward run true", vec!["run", "--", "true"], BIN),
        (
            "shellward run true, no PID ns",
            vec!["run", "--config", leak(no_namespace_config()), "--", "true"],
            BIN,
        ),
    ];
    let n = samples(100);
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..n {
        for (i, (_, args, program)) in cases.iter().enumerate() {
            let t = Instant::now();
            let s = Command::new(program)
                .args(args)
                .env_remove("SHELLWARD_CONFIG")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run");
            times[i].push(ms(t.elapsed()));
            assert!(s.success(), "{program} {args:?}: {s}");
        }
    }
    for ((name, _, _), t) in cases.iter().zip(&times) {
        println!(
            "{name:32} median {:6.2} ms   p90 {:6.2} ms",
            median(t),
            percentile(t, 0.9)
        );
    }
    println!("(target: shellward run true ≤ 6 ms)");
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Commands for the native reference: the kinds an agent sends (plain, compound, a trailing `&`, a dev server).
const REFERENCE_COMMANDS: &[&str] = &[
    "ls -la src",
    "cargo test --workspace 2>&1 | tail -20",
    "npm run dev &",
    "cd web && npm install && npm run build",
    "git status && git diff --stat",
    "python3 -m http.server 8000",
];

/// Median nanoseconds of the default policy's decision compiled natively (no WebAssembly, no host): a reference for
/// how fast this machine is right now, measured between the rounds of the reused-instance row.
fn native_reference_ns(evaluations: usize) -> f64 {
    use shellward_default_policy::{decide, settings::Settings};
    let settings = Settings::default();
    let requests: Vec<decide::Request> = REFERENCE_COMMANDS
        .iter()
        .map(|c| decide::Request {
            command: c.to_string(),
            ..Default::default()
        })
        .collect();
    let mut ns = Vec::with_capacity(evaluations);
    for i in 0..evaluations {
        let request = &requests[i % requests.len()];
        let t = Instant::now();
        std::hint::black_box(decide::evaluate(&settings, std::hint::black_box(request)));
        ns.push(t.elapsed().as_nanos() as f64);
    }
    median(&ns)
}

fn policy_rows() {
    println!("\n## Default policy, one decision (shellward policy bench default)");
    // Rounds of `policy bench` alternate with the native reference, so a slow phase of this shared machine shows in
    // both: the ratio is comparable across runs where the absolute figure is not.
    let rounds = if quick() { 2 } else { 5 };
    let (mut fresh, mut fresh_p99, mut reused, mut reused_p99, mut native) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        native.push(native_reference_ns(if quick() { 20_000 } else { 100_000 }) / 1000.0);
        let out = Command::new(BIN)
            .args(["policy", "bench", "default", "--json", "--iterations"])
            .arg(if quick() { "2000" } else { "20000" })
            .output()
            .expect("policy bench");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let us = |k: &str, f: &str| v[k][f].as_f64().unwrap_or(f64::NAN) / 1000.0;
        fresh.push(us("fresh_instance", "median_ns"));
        fresh_p99.push(us("fresh_instance", "p99_ns"));
        reused.push(us("reused_instance", "median_ns"));
        reused_p99.push(us("reused_instance", "p99_ns"));
    }
    native.push(native_reference_ns(if quick() { 20_000 } else { 100_000 }) / 1000.0);
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "fresh instance per evaluation  median {:7.1} µs   p99 {:8.1} µs   (target ≤ 40 µs)",
        median(&fresh),
        median(&fresh_p99)
    );
    println!(
        "reused instance                median {:7.2} µs   p99 {:8.2} µs   (target ≤ 2 µs)   rounds: {}",
        median(&reused),
        median(&reused_p99),
        list(&reused)
    );
    println!(
        "native reference (same decision logic compiled for the host, between the rounds) median {:.2} µs   \
         rounds: {}   reused ÷ native {:.2}",
        median(&native),
        list(&native),
        median(&reused) / median(&native)
    );
}

fn executor_ratio() {
    use shellward_exec::{ContainmentPreference, ExecPlan, Executor, ExecutorConfig};
    println!(
        "\n## Executor: execute(`true`) ÷ raw tokio::process `sh -c true`, paired (median of per-pair ratios)"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The PID-namespace row runs under the default init: the static one embedded in the executor.
    let config = |containment, namespace: bool| {
        let mut c = ExecutorConfig::default();
        c.containment = containment;
        c.pid_namespace = namespace;
        c
    };
    let paths = [
        (
            "cgroup",
            config(ContainmentPreference::Auto, false),
            "≤ 1.25",
        ),
        (
            "process group",
            config(ContainmentPreference::ProcessGroup, false),
            "≤ 1.20",
        ),
        (
            "cgroup + PID namespace",
            config(ContainmentPreference::Auto, true),
            "(reported)",
        ),
        (
            "cgroup, no process limit",
            {
                // What the per-command `pids` group (cgroup v1) costs: the cgroup row without it.
                let mut c = config(ContainmentPreference::Auto, false);
                c.limits.max_processes = None;
                c
            },
            "(reported)",
        ),
    ];
    for (name, config, target) in paths {
        let ex = rt
            .block_on(async { Executor::new(config) })
            .expect("executor");
        let n = samples(300);
        let (mut ratios, mut ours, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n + 10 {
            let t = Instant::now();
            let r = rt
                .block_on(ex.execute(ExecPlan::new("true")))
                .expect("execute");
            let a = t.elapsed();
            assert_eq!(r.exit.code(), Some(0));
            let t = Instant::now();
            rt.block_on(async {
                tokio::process::Command::new("sh")
                    .args(["-c", "true"])
                    .status()
                    .await
            })
            .unwrap();
            let b = t.elapsed();
            if i >= 10 {
                ratios.push(a.as_secs_f64() / b.as_secs_f64());
                ours.push(ms(a));
                raw.push(ms(b));
            }
        }
        println!(
            "{name:24} ratio {:5.2} (target {target})   execute {:5.2} ms, raw {:5.2} ms (medians)   namespaces: {}",
            median(&ratios),
            median(&ours),
            median(&raw),
            ex.pid_namespaces()
        );
        rt.block_on(ex.shutdown());
    }
    confined_start(&rt);
}

/// The start of a command in a confined session against an unconfined start, paired and interleaved: `true` in the
/// session's sandbox (PID and mount namespace, made at the session's first command) with writes confined by Landlock
/// and the default seccomp list, as the default policy runs commands, against `true` from an executor with no
/// namespace and no confinement.
fn confined_start(rt: &tokio::runtime::Runtime) {
    use shellward_exec::{Confinement, ExecPlan, Executor, ExecutorConfig, Network};
    let (confined, plain) = rt.block_on(async {
        let confined = Executor::new(ExecutorConfig::default()).expect("executor");
        confined
            .execute(ExecPlan::new("true"))
            .await
            .expect("the session's first command");
        let mut config = ExecutorConfig::default();
        config.pid_namespace = false;
        (confined, Executor::new(config).expect("executor"))
    });
    let writable = Some(vec![
        std::env::temp_dir(),
        "/var/tmp".into(),
        std::env::current_dir().unwrap(),
    ]);
    let confinement = Confinement::new(writable, Network::Host)
        .deny_syscalls(shellward_exec::DEFAULT_DENIED_SYSCALLS.iter().copied());
    let n = samples(300);
    let (mut ratios, mut ours, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n + 10 {
        let mut plan = ExecPlan::new("true");
        plan.confinement = confinement.clone();
        let t = Instant::now();
        let r = rt.block_on(confined.execute(plan)).expect("execute");
        let a = t.elapsed();
        assert_eq!(r.exit.code(), Some(0));
        let t = Instant::now();
        let r = rt
            .block_on(plain.execute(ExecPlan::new("true")))
            .expect("execute");
        let b = t.elapsed();
        assert_eq!(r.exit.code(), Some(0));
        if i >= 10 {
            ratios.push(a.as_secs_f64() / b.as_secs_f64());
            ours.push(ms(a));
            base.push(ms(b));
        }
    }
    println!(
        "{:24} ratio {:5.2} (target ≤ 1.2)   confined {:5.2} ms, unconfined {:5.2} ms (medians)   namespaces: {}, \
         Landlock ABI {}",
        "confined session start",
        median(&ratios),
        median(&ours),
        median(&base),
        confined.pid_namespaces(),
        Executor::landlock_abi()
    );
    rt.block_on(async {
        confined.shutdown().await;
        plain.shutdown().await;
    });
}

/// Calls per second of `tool` with JSON `body` answered by `serve` started with `extra`, `clients` concurrent clients
/// (one session each) looping it for one window; with every latency and the error count.
fn serve_rate(
    extra: &[&str],
    clients: usize,
    tool: &'static str,
    body: &'static str,
) -> (f64, Vec<f64>, u64) {
    let (serve, addr) = start_serve(extra);
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for c in 0..clients {
        let stop = stop.clone();
        let addr = addr.clone();
        handles.push(std::thread::spawn(move || {
            let request = format!(
                "POST /v1/tools/{tool} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n\
                 X-Shellward-Session: c{c}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut conn: Option<BufReader<std::net::TcpStream>> = None;
            while !stop.load(Ordering::Relaxed) {
                let s = match conn.as_mut() {
                    Some(s) => s,
                    None => match std::net::TcpStream::connect(&addr) {
                        Ok(s) => {
                            let _ = s.set_nodelay(true);
                            conn.insert(BufReader::new(s))
                        }
                        Err(_) => {
                            errors += 1;
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    },
                };
                let t = Instant::now();
                let ok = s.get_mut().write_all(request.as_bytes()).is_ok()
                    && read_response(s) == Some(200);
                if ok {
                    lat.push(ms(t.elapsed()));
                } else {
                    errors += 1;
                    conn = None;
                }
            }
            (lat, errors)
        }));
    }
    let w = window();
    std::thread::sleep(w);
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    let mut errors = 0;
    for h in handles {
        let (l, e) = h.join().unwrap();
        lat.extend(l);
        errors += e;
    }
    drop(serve);
    (lat.len() as f64 / w.as_secs_f64(), lat, errors)
}

fn throughput() {
    println!(
        "\n## serve throughput: 200 concurrent clients looping execute {{\"command\": \"true\"}} on loopback"
    );
    let clients = 200;
    let execute = r#"{"command":"true"}"#;
    let (rate, lat, errors) =
        serve_rate(&["--max-connections", "512"], clients, "execute", execute);
    let (rate_no_ns, lat_no_ns, errors_no_ns) = serve_rate(
        &[
            "--max-connections",
            "512",
            "--config",
            &no_namespace_config(),
        ],
        clients,
        "execute",
        execute,
    );
    let (rate_unconfined, lat_unconfined, errors_unconfined) = serve_rate(
        &["--max-connections", "512", "--config", &unconfined_config()],
        clients,
        "execute",
        execute,
    );
    // The same clients and requests through the same server, answered without a command: what the protocol costs
    // (the clients included, on the same cores).
    let (rate_list, lat_list, errors_list) =
        serve_rate(&["--max-connections", "512"], clients, "process_list", "{}");
    // The raw spawn rate of `sh -c true` on the same cores, and the same inside a fresh PID and mount namespace.
    let raw_rate = spawn_rate(raw_sh);
    let contained_rates = namespaces_available().then(|| {
        (
            spawn_rate(|| contained(false)),
            spawn_rate(|| contained(true)),
        )
    });
    println!(
        "{:.0} executes/s, p50 {:.1} ms, p99 {:.1} ms, {errors} errors; raw sh -c true {:.0}/s; ratio {:.2} (target ≥ 0.8)",
        rate,
        median(&lat),
        percentile(&lat, 0.99),
        raw_rate,
        rate / raw_rate
    );
    println!(
        "no PID ns: {:.0} executes/s, p50 {:.1} ms, p99 {:.1} ms, {errors_no_ns} errors; ratio to raw {:.2}",
        rate_no_ns,
        median(&lat_no_ns),
        percentile(&lat_no_ns, 0.99),
        rate_no_ns / raw_rate
    );
    println!(
        "no per-command confinement (writes, seccomp, hidden paths): {:.0} executes/s, p50 {:.1} ms, p99 {:.1} ms, \
         {errors_unconfined} errors; ratio to raw {:.2}",
        rate_unconfined,
        median(&lat_unconfined),
        percentile(&lat_unconfined, 0.99),
        rate_unconfined / raw_rate
    );
    println!(
        "process_list (no command): {:.0} calls/s, p50 {:.1} ms, p99 {:.1} ms, {errors_list} errors",
        rate_list,
        median(&lat_list),
        percentile(&lat_list, 0.99),
    );
    match contained_rates {
        Some((bare, init)) => {
            println!(
                "raw sh -c true in its own PID + mount namespace with a /proc (clone, mounts, exec): {bare:.0}/s, \
                 {:.2} of raw; under a minimal init (one more clone, a wait): {init:.0}/s, {:.2} of raw",
                bare / raw_rate,
                init / raw_rate
            );
            // CPU-bound on the same cores, a server that spawned commands under an init at no cost of its own and
            // answered as cheaply as `process_list` is answered could reach no more than this.
            let bound = 1.0 / (1.0 / init + 1.0 / rate_list);
            println!(
                "bound for execute with that containment and this protocol (1 / (1/init + 1/process_list)): \
                 {bound:.0}/s, {:.2} of raw; serve ÷ bound {:.2}",
                bound / raw_rate,
                rate / bound
            );
        }
        None => {
            println!("(no contained reference: this process cannot make PID and mount namespaces)")
        }
    }
}

/// Reads one HTTP/1.1 response with a Content-Length body; returns its status.
fn read_response(s: &mut BufReader<std::net::TcpStream>) -> Option<u16> {
    let mut status = None;
    let mut len = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if s.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if status.is_none() {
            status = l.split(' ').nth(1).and_then(|c| c.parse().ok());
        } else if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    status
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects rows by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    println!(
        "shellward performance, {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick() { "quick run" } else { "full run" }
    );
    if want("idle") {
        idle_wakeups();
    }
    if want("mcp") {
        mcp_round_trip();
    }
    if want("spaced") {
        mcp_spaced();
    }
    if want("sdk") {
        sdk::through_the_sdks();
    }
    if want("process") {
        whole_process();
    }
    if want("policy") {
        policy_rows();
    }
    if want("executor") {
        executor_ratio();
    }
    if want("throughput") {
        throughput();
    }
    if want("size") {
        size::binary_size();
    }
}
