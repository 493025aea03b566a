//! Helpers for shellward's own tests: which processes are alive, with which environment, so a test can prove that
//! nothing it started survives (and that nothing it did not start was touched); [`rerun_in_fresh_process`], for a
//! test that needs a process of its own; [`python`] and [`node`], which provision the Python tools and the Node.js
//! client some tests need. Not part of any shipped crate.

// Unix only: the helpers read `/proc` and send signals.
#![cfg(unix)]
#![deny(missing_docs)]

pub mod compat;
pub mod node;
pub mod python;

use std::collections::HashSet;
use std::fs;
use std::time::{Duration, Instant};

/// One process as seen in `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// State letter (`R`, `S`, `Z`, ...).
    pub state: char,
}

impl Proc {
    /// Running or runnable (not a zombie).
    pub fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// A marker unique to this call in this run: `TAG-PID-N-NANOS` (the process id, a counter, and the time, so two runs
/// in a row never share one). Test trees carry it in their environment so their survivors can be found in `/proc`.
pub fn unique_mark(tag: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{tag}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// Every process in `/proc` now.
pub fn scan() -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &line[line.rfind(')')? + 1..];
            let mut f = rest.split_whitespace();
            let state = f.next()?.chars().next()?;
            let ppid = f.next()?.parse().ok()?;
            Some(Proc { pid, ppid, state })
        })
        .collect()
}

/// Whether the environment of `pid` holds exactly `entry` (`NAME=value`).
pub fn has_env(pid: i32, entry: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|kv| kv == entry.as_bytes()))
        .unwrap_or(false)
}

/// Living processes whose environment holds exactly `entry` (`NAME=value`).
pub fn with_env(entry: &str) -> HashSet<i32> {
    scan()
        .into_iter()
        .filter(|p| p.alive() && has_env(p.pid, entry))
        .map(|p| p.pid)
        .collect()
}

/// Waits up to `limit` for every living process carrying `entry` to be gone; returns the survivors.
pub fn survivors_after(entry: &str, limit: Duration) -> HashSet<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = with_env(entry);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs (by pid, after checking the entry once more) what carries `entry`, so a failing test leaks nothing.
pub fn kill_with_env(entry: &str) {
    for pid in with_env(entry) {
        if has_env(pid, entry) {
            // SAFETY: kill has no memory-safety preconditions; the pid was just checked to carry the test's marker.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Zombie children of this process.
pub fn zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    scan()
        .into_iter()
        .filter(|p| p.ppid == me && !p.alive())
        .map(|p| p.pid)
        .collect()
}

/// Entries of `dir` whose names start with `prefix` (for tests proving nothing was left behind).
pub fn entries_with_prefix(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The full name of test `$name` of the calling module as the test harness knows it (`serve::a_test` in a crate's one
/// test binary, `a_test` at its root), for [`rerun_in_fresh_process`], [`rerun_as_user`] and
/// [`as_unprivileged_user`].
#[macro_export]
macro_rules! test_path {
    ($name:literal) => {
        $crate::without_crate(concat!(module_path!(), "::", $name))
    };
}

/// `path` without its first segment (the test crate's name): the name the harness filters by.
pub fn without_crate(path: &'static str) -> &'static str {
    path.split_once("::").map_or(path, |(_, rest)| rest)
}

/// Whether this process is the fresh one [`rerun_in_fresh_process`] started (its `marker` variable is set).
pub fn in_fresh_process(marker: &str) -> bool {
    std::env::var_os(marker).is_some()
}

/// Runs the test `test` (its full path, e.g. `engine::tests::name`) of the current test binary again, alone, in a
/// fresh process with the environment variable `marker` set, and returns what it printed on standard output. For
/// tests that need a pristine process (free descriptor numbers, a mapping count no other test disturbs): the test
/// does its work when [`in_fresh_process`] says so, and otherwise calls this and checks the output. Panics with
/// both of the child's outputs when it fails.
pub fn rerun_in_fresh_process(test: &str, marker: &str) -> String {
    let exe = std::env::current_exe().expect("the path of the running test binary");
    let mut cmd = std::process::Command::new(&exe);
    cmd.env(marker, "1");
    rerun(cmd, test, "in its fresh process")
}

/// Runs `test` alone through `cmd` (the test binary, or a wrapper that starts it) and returns its standard output;
/// panics, saying `how` it ran, when it failed or did not run at all.
fn rerun(mut cmd: std::process::Command, test: &str, how: &str) -> String {
    let out = cmd
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {test} {how}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{test} failed {how}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "{test} did not run {how} (is the name its full path?): {stdout}"
    );
    stdout
}

/// The dedicated unprivileged user [`rerun_as_user`] runs tests as; created on first use when the tests run as root.
pub const TEST_USER: &str = "shellward-test";

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs the test `test` of the current test binary again, alone, as an unprivileged user, with `marker` set, and
/// returns its standard output (as [`rerun_in_fresh_process`]). As root, the user is [`TEST_USER`] (created with
/// `useradd --system` when missing) and the switch is `setpriv` with every capability and supplementary group
/// dropped; as a normal user already, the test reruns as that user. Panics when the user cannot be created or the
/// test fails there: a test of the non-root path must not pass without running it.
pub fn rerun_as_user(test: &str, marker: &str) -> String {
    rerun(this_binary_as_user(marker), test, "as an unprivileged user")
}

/// For a test of the non-root path: in the test's own process, reruns it alone as an unprivileged user (see
/// [`rerun_as_user`]), checks the rerun ran, and returns false (the caller returns); in the rerun, checks it is not
/// root, prints its uid and returns true (the caller goes on with the test's body).
pub fn as_unprivileged_user(test: &str, marker: &str) -> bool {
    if !in_fresh_process(marker) {
        let out = rerun_as_user(test, marker);
        assert!(out.contains("ran as uid "), "{out}");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_ne!(uid, 0, "the rerun is still root");
    println!("ran as uid {uid}");
    true
}

/// This test binary as the unprivileged user, with `marker` set and a scratch directory the user can write (for
/// whatever the tests make: their log directories) as its home, temporary and working directory.
fn this_binary_as_user(marker: &str) -> std::process::Command {
    let exe = std::env::current_exe().expect("the path of the running test binary");
    let mut cmd = command_as_user(&exe);
    let scratch = std::env::temp_dir();
    cmd.env(marker, "1")
        .env("HOME", &scratch)
        .env("TMPDIR", &scratch)
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(&scratch);
    cmd
}

/// Defines the test `$name` that reruns every other test of the calling module as a normal user, the rerun named by
/// the environment variable `$marker` (see [`rerun_module_as_user`]); doc comments before the name are the test's.
#[macro_export]
macro_rules! every_test_as_user {
    ($(#[$doc:meta])* $name:ident, $marker:expr) => {
        $(#[$doc])*
        #[test]
        fn $name() {
            $crate::rerun_module_as_user(module_path!(), stringify!($name), $marker);
        }
    };
}

/// The body of a module's "every test again as a normal user" test `this_test`: as root, and not already in that
/// rerun (`marker`), reruns every other test of `module` as [`TEST_USER`] and prints what they said (see
/// [`rerun_all_as_user`]); otherwise returns at once (this run is the normal user's, or the suite runs as one).
pub fn rerun_module_as_user(module: &'static str, this_test: &str, marker: &str) {
    if in_fresh_process(marker) || !is_root() {
        return;
    }
    println!("{}", rerun_all_as_user(module, &[this_test], marker));
}

/// Runs every test of the module `module` (the caller's `module_path!()`: the whole binary when that is its root) but
/// those named in `skip` (the caller, and tests whose subject needs root) again as an unprivileged user (as
/// [`rerun_as_user`]), with `marker` set, and returns its standard output: a whole suite proven on the non-root path
/// too. Panics with both outputs when any test fails or none ran.
pub fn rerun_all_as_user(module: &'static str, skip: &[&str], marker: &str) -> String {
    let mut cmd = this_binary_as_user(marker);
    if let Some((_, within)) = module.split_once("::") {
        cmd.arg(format!("{within}::"));
    }
    let out = cmd
        .args(skip.iter().flat_map(|s| ["--skip", s]))
        .output()
        .unwrap_or_else(|e| panic!("cannot rerun the suite as an unprivileged user: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the suite failed as an unprivileged user: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(" passed;") && !stdout.contains(" 0 passed;"),
        "no test ran as an unprivileged user: {stdout}"
    );
    stdout
}

/// A command that runs `program` as an unprivileged user: as root, [`TEST_USER`] (created when missing) through
/// `setpriv` with every capability and supplementary group dropped, with a compiled-policy cache of its own; as a
/// normal user already, that user.
pub fn command_as_user(program: &std::path::Path) -> std::process::Command {
    if !is_root() {
        return std::process::Command::new(program);
    }
    ensure_test_user();
    let mut c = std::process::Command::new("setpriv");
    c.args([
        &format!("--reuid={TEST_USER}"),
        &format!("--regid={TEST_USER}"),
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ])
    .arg(program)
    // The workspace's compiled-policy cache under target/ (`.cargo/config.toml`) is root's and private: the user
    // compiles into a cache of its own beside it.
    .env("SHELLWARD_CACHE_DIR", user_cache_dir());
    c
}

/// The unprivileged user's compiled-policy cache: `policy-cache-shellward-test` beside the workspace's own cache under
/// `target/` (where `SHELLWARD_CACHE_DIR` points during `cargo test`), made and given to [`TEST_USER`] here, so a run
/// leaves nothing in the machine's temporary directory; the temporary directory when no workspace cache is set.
fn user_cache_dir() -> std::path::PathBuf {
    let dir = match std::env::var_os("SHELLWARD_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .and_then(|p| p.parent().map(|parent| parent.to_path_buf()))
    {
        Some(target) => target.join(format!("policy-cache-{TEST_USER}")),
        None => return std::env::temp_dir().join(format!("{TEST_USER}-policy-cache")),
    };
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::process::Command::new("chown")
            .arg(format!("{TEST_USER}:{TEST_USER}"))
            .arg(&dir)
            .status();
    }
    dir
}

/// Creates [`TEST_USER`] when it does not exist (as root).
fn ensure_test_user() {
    let exists = std::process::Command::new("id")
        .arg(TEST_USER)
        .output()
        .is_ok_and(|o| o.status.success());
    if exists {
        return;
    }
    let out = std::process::Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            TEST_USER,
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run useradd to create {TEST_USER}: {e}"));
    // Another test binary may have created it meanwhile (exit 9: the user exists).
    assert!(
        out.status.success() || out.status.code() == Some(9),
        "cannot create the test user {TEST_USER}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A source tree of 10,000 files under `root/src`: 100 directories `m0`..`m99` of 100 files `f0.rs`..`f99.rs` (the
/// benchmarks' repository).
pub fn source_tree(root: &std::path::Path) {
    for d in 0..100 {
        let dir = root.join(format!("src/m{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}.rs")), format!("fn f{f}() {{}}\n")).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rerun names a test as the harness lists it: the module path within the test binary, without the crate.
    #[test]
    fn a_test_is_named_by_its_path_within_the_binary() {
        assert_eq!(without_crate("it::serve::a_test"), "serve::a_test");
        assert_eq!(without_crate("facade::a_test"), "a_test");
        assert_eq!(test_path!("a_test"), "tests::a_test");
    }

    /// The unprivileged user's policy cache goes beside the workspace's under `target/` (where `cargo test` points
    /// `SHELLWARD_CACHE_DIR`), not into the machine's temporary directory, where it used to stay behind.
    #[test]
    fn the_users_policy_cache_is_beside_the_workspaces_not_in_tmp() {
        let workspace =
            std::env::var_os("SHELLWARD_CACHE_DIR").expect("cargo sets SHELLWARD_CACHE_DIR");
        let dir = user_cache_dir();
        assert_ne!(
            dir,
            std::env::temp_dir().join(format!("{TEST_USER}-policy-cache")),
            "the old place, left behind in the temporary directory"
        );
        assert_eq!(
            dir.parent(),
            std::path::Path::new(&workspace).parent(),
            "{}",
            dir.display()
        );
        assert!(dir.is_dir(), "{}", dir.display());
    }
}
