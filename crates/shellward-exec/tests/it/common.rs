//! Helpers for executor tests: marked process trees and survivor scans over `/proc`.

#![allow(dead_code)]

use shellward_exec::{ContainmentPreference, ExecPlan, Executor, ExecutorConfig};
use shellward_exec::{ProcessId, ReadOptions, Session};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The environment variable every process of a test tree inherits, so survivors can be found in `/proc`.
pub const MARK: &str = "SHELLWARD_TEST_MARK";

/// A marker unique to this call.
pub fn new_mark() -> String {
    shellward_test_support::unique_mark("m")
}

/// Living (non-zombie) processes whose environment carries `mark`.
pub fn marked(mark: &str) -> HashSet<i32> {
    shellward_test_support::with_env(&format!("{MARK}={mark}"))
}

/// Waits up to `limit` for every marked process to be gone; returns the survivors.
pub fn survivors_after(mark: &str, limit: Duration) -> HashSet<i32> {
    shellward_test_support::survivors_after(&format!("{MARK}={mark}"), limit)
}

/// Kills whatever survived (by pid, only marked processes) so a failing test does not leak.
pub fn kill_marked(mark: &str) {
    shellward_test_support::kill_with_env(&format!("{MARK}={mark}"));
}

/// A plan whose tree carries `mark`.
pub fn marked_plan(command: &str, mark: &str) -> ExecPlan {
    let mut plan = ExecPlan::new(command);
    plan.env.push((MARK.to_string(), mark.to_string()));
    plan
}

/// A command building a tree with every kind of member: a pipeline, a `&` child, `nohup`, `setsid`, a double-fork
/// daemon, a member ignoring SIGTERM, and a deep fork chain. It prints `ready` when all are started, then waits.
pub const NASTY_TREE: &str = r#"
sleep 301 | sleep 302 &
sleep 303 &
nohup sleep 304 >/dev/null 2>&1 &
setsid sleep 305 &
(setsid sh -c 'sleep 306 & exit 0' &)
sh -c 'trap "" TERM; while :; do sleep 1; done' &
sh -c 'sh -c "sh -c \"sh -c \\\"sleep 307\\\"\""' &
sleep 0.3
echo ready
wait
"#;

/// Both containment paths, for tests that must hold for each.
pub fn configs() -> Vec<(&'static str, ExecutorConfig)> {
    let fast = |containment| {
        let mut c = ExecutorConfig::default();
        c.containment = containment;
        c.grace = Duration::from_millis(300);
        c.drain = Duration::from_millis(300);
        c
    };
    let unconfined = |containment| {
        let mut c = fast(containment);
        c.pid_namespace = false;
        c
    };
    // The default init is the embedded static one; the process-group variant runs the init binary from disk.
    let mut group_namespaced = fast(ContainmentPreference::ProcessGroup);
    group_namespaced.init_program = Some(INIT.into());
    vec![
        ("auto", unconfined(ContainmentPreference::Auto)),
        (
            "process-group",
            unconfined(ContainmentPreference::ProcessGroup),
        ),
        ("auto + pid namespace", fast(ContainmentPreference::Auto)),
        ("process-group + pid namespace", group_namespaced),
    ]
}

/// This crate's namespace init binary on disk (dynamically linked).
pub const INIT: &str = env!("CARGO_BIN_EXE_shellward-init");

/// A config whose commands run in a PID namespace (when the host allows it) under the default, embedded init.
pub fn namespaced() -> ExecutorConfig {
    let mut c = ExecutorConfig::default();
    c.grace = Duration::from_millis(300);
    c.drain = Duration::from_millis(300);
    c
}

/// Waits until the output of `id` contains `needle` (or panics after 10 s).
pub async fn wait_for_output(ex: &Executor, id: &ProcessId, needle: &str) {
    wait_for_output_in(ex, id, None, needle).await
}

/// Reads `id`'s output (no session) with `options`.
pub async fn output_of(
    ex: &Executor,
    id: &ProcessId,
    options: ReadOptions,
) -> shellward_exec::OutputRead {
    ex.read_output(None, id, &options).await.unwrap()
}

/// [`wait_for_output`] for a process of `session`.
pub async fn wait_for_output_in(
    ex: &Executor,
    id: &ProcessId,
    session: Option<&Session>,
    needle: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ex
            .read_output(
                session,
                id,
                &ReadOptions::view()
                    .wait(Duration::from_millis(100))
                    .max_bytes(1 << 20),
            )
            .await
            .unwrap();
        if r.view.as_ref().unwrap().text.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "{id} never printed {needle:?}");
    }
}

/// Open file descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Zombie children of this process.
pub fn zombie_children() -> Vec<i32> {
    shellward_test_support::zombie_children()
}

/// Starts an executor whose commands run in PID namespaces, and proves it: a command sees itself as a low pid in a
/// `/proc` of its own. Panics when the host does not allow namespaces (this project's CI machine does).
pub async fn confined(config: ExecutorConfig) -> Executor {
    let ex = Executor::new(config).unwrap();
    let r = ex
        .execute(ExecPlan::new(
            "echo $$; ls /proc | grep -c '^[0-9]'; readlink /proc/self/ns/pid",
        ))
        .await
        .unwrap();
    assert!(
        ex.pid_namespaces(),
        "PID namespaces are not active here (run the tests as root); refusing to run commands that need them"
    );
    let lines: Vec<&str> = r.output.text.lines().collect();
    assert_eq!(lines.len(), 3, "{r:?}");
    let pid: i32 = lines[0].parse().unwrap();
    assert!(
        pid <= 3,
        "the shell is pid {pid}: not in a namespace of its own"
    );
    let visible: usize = lines[1].parse().unwrap();
    assert!(
        visible <= 6,
        "{visible} processes visible in /proc: it is not the namespace's own"
    );
    let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
    assert_ne!(
        lines[2],
        ours.to_str().unwrap(),
        "same PID namespace as the test"
    );
    ex
}

/// This process's directory in the cgroup v1 `pids` hierarchy (see [`shellward_exec::own_pids_dir`]).
pub fn own_pids_dir() -> Option<std::path::PathBuf> {
    shellward_exec::own_pids_dir()
}

/// The `pids` roots an executor in process `pid` made under [`own_pids_dir`].
pub fn pids_roots_of(pid: u32) -> Vec<String> {
    let Some(dir) = own_pids_dir() else {
        return Vec::new();
    };
    shellward_test_support::entries_with_prefix(&dir, "shellward-")
        .into_iter()
        .filter(|n| n.contains(&format!("-{pid}-")))
        .collect()
}

/// A scratch directory anyone may write (world-writable, as many socket directories are): what stops a command there
/// is the sandbox, not the permission, also in a normal user's rerun.
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

/// A change set as (path relative to `ws`, kind) pairs, in its order.
pub fn relative_kinds(
    set: &shellward_exec::ChangeSet,
    ws: &std::path::Path,
) -> Vec<(String, &'static str)> {
    set.changes
        .iter()
        .map(|c| {
            let path = c.path.strip_prefix(ws).unwrap_or(&c.path);
            (path.display().to_string(), c.kind.as_str())
        })
        .collect()
}

/// A workspace `ws` in a new temporary directory: `src/a.rs`, `src/b.rs`, `notes.txt`, a binary `blob`, a script
/// `run.sh`.
pub fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(ws.join("src/b.rs"), "fn b() {}\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.join("blob"), [0u8, 1, 2, 3, 255, 0, 7]).unwrap();
    std::fs::write(ws.join("run.sh"), "echo hi\n").unwrap();
    (dir, ws)
}
