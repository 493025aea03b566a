//! Helpers shared by the end-to-end tests of the `shellward` binary: the one support module of the crate's test
//! binary (`tests/it/main.rs`), used by every test module as `crate::cli`. The portable part (the binary, a command line with the test environment's
//! shellward settings removed, output as text) builds everywhere; the rest (process markers scanned in `/proc`,
//! signals, a served instance) is Unix only. The stock-SDK client scripts live in `tests/support/`.

#![allow(dead_code)]

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// The environment variable every process of a test tree inherits, so survivors can be found in `/proc`.
/// Not `SHELLWARD_*`: the host's own variables never reach commands.
pub const MARK: &str = "SW_TEST_MARK";

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_shellward")
}

/// The workspace's root directory (where `policies/`, `docs/` and `README.md` are).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `shellward ARGS`, stdin from `/dev/null`, without the test environment's `SHELLWARD_CONFIG`, `SHELLWARD_TOKEN`
/// and `SHELLWARD_LOG` (a developer's own settings must not change what a test sees).
pub fn shellward(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .env_remove("SHELLWARD_CONFIG")
        .env_remove("SHELLWARD_TOKEN")
        .env_remove("SHELLWARD_LOG")
        .stdin(Stdio::null());
    c
}

/// Runs `shellward ARGS` (see [`shellward`]) to its end.
pub fn output(args: &[&str]) -> Output {
    shellward(args).output().expect("run shellward")
}

/// Starts `command` with its standard output piped: the child, and its output to read line by line.
pub fn spawn_reading(command: &mut Command) -> (Child, BufReader<ChildStdout>) {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("start shellward");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdout)
}

/// The base URL `shellward serve` announces on its first line (`shellward: listening on URL`).
pub fn announced_base(stdout: &mut BufReader<ChildStdout>) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    line.trim()
        .strip_prefix("shellward: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string()
}

/// Standard output as text (lossy).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stdout of a run that must have exited `code` (the assertion shows both streams).
#[track_caller]
pub fn stdout_exited(o: &Output, code: i32) -> String {
    let stdout = stdout(o);
    assert_eq!(o.status.code(), Some(code), "{stdout}{}", stderr(o));
    stdout
}

/// Standard error as text (lossy).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output, then standard error, as text.
pub fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// Writes `contents` to `name` in `dir` and returns its path.
pub fn write_file(
    dir: impl AsRef<Path>,
    name: impl AsRef<Path>,
    contents: impl AsRef<[u8]>,
) -> PathBuf {
    let path = dir.as_ref().join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A file for a test to approve or refuse destroying, and the command that destroys it (`shred -u`, which the
/// built-in guard asks about).
pub fn victim(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = write_file(dir, name, "data\n");
    (path.clone(), format!("shred -u {}", path.display()))
}

// Not every test file uses the Unix part.
#[cfg(unix)]
#[allow(unused_imports)]
pub use unix::*;

/// What only Unix has: markers found in `/proc`, signals, a served instance.
#[cfg(unix)]
mod unix {
    use super::MARK;
    pub use nix::sys::signal::Signal;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};

    /// Starts `shellward serve ARGS` with the tree marker `mark`, extra variables and the given stderr, and returns it
    /// with the base URL it announces on its first line of stdout (`http://127.0.0.1:PORT` or `unix:PATH`).
    /// `SHELLWARD_CONFIG`, `SHELLWARD_TOKEN` and `SHELLWARD_LOG` of the test's environment are not passed. Its stdout is
    /// closed after that line (see [`start_serve_keeping_stdout`] for a test that checks how it exits).
    pub fn start_serve(
        args: &[&str],
        env: &[(&str, &str)],
        mark: &str,
        stderr: std::process::Stdio,
    ) -> (std::process::Child, String) {
        let (child, base, _stdout) = start_serve_keeping_stdout(args, env, mark, stderr);
        (child, base)
    }

    /// [`start_serve`], also returning its stdout: kept open until it exits, what it prints as it stops does not meet a
    /// closed pipe.
    pub fn start_serve_keeping_stdout(
        args: &[&str],
        env: &[(&str, &str)],
        mark: &str,
        stderr: std::process::Stdio,
    ) -> (
        std::process::Child,
        String,
        std::io::BufReader<std::process::ChildStdout>,
    ) {
        let mut command = super::shellward(&["serve"]);
        command
            .args(args)
            .env(MARK, mark)
            .envs(env.iter().copied())
            .stderr(stderr);
        let (child, mut stdout) = super::spawn_reading(&mut command);
        let base = super::announced_base(&mut stdout);
        (child, base, stdout)
    }

    /// Starts `command` (a `shellward mcp` command line) on piped stdin and stdout, stderr discarded, without the test's
    /// `SHELLWARD_CONFIG`; returns it with its stdin and its stdout to read lines from.
    pub fn start_stdio(
        mut command: std::process::Command,
    ) -> (
        std::process::Child,
        std::process::ChildStdin,
        std::io::BufReader<std::process::ChildStdout>,
    ) {
        use std::process::Stdio;
        let mut child = command
            .env_remove("SHELLWARD_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP server");
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        (child, stdin, stdout)
    }

    /// A marker unique to this call.
    pub fn new_mark(tag: &str) -> String {
        shellward_test_support::unique_mark(tag)
    }

    /// Living processes carrying `mark` now.
    pub fn survivors_now(mark: &str) -> Vec<i32> {
        shellward_test_support::with_env(&format!("{MARK}={mark}"))
            .into_iter()
            .collect()
    }

    /// Living processes carrying `mark`, after waiting up to 5 s for them to go.
    pub fn survivors(mark: &str) -> Vec<i32> {
        let entry = format!("{MARK}={mark}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left: Vec<i32> = shellward_test_support::with_env(&entry)
                .into_iter()
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills (by pid) whatever carries `mark`, so a failing test leaks nothing.
    pub fn kill_marked(mark: &str) {
        shellward_test_support::kill_with_env(&format!("{MARK}={mark}"));
    }

    /// Sends `sig` to a child we started.
    pub fn signal(child: &std::process::Child, sig: Signal) {
        let _ = kill(Pid::from_raw(child.id() as i32), sig);
    }

    /// Waits for a child up to `limit`; kills it and panics when it does not exit.
    pub fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
        wait_exit_labeled(child, limit, "")
    }

    /// [`wait_exit`], naming the case (`label`) in the panic. Before the child is killed, the panic records what it was
    /// doing: each thread's name, state and kernel wait channel (and kernel stack where readable), and its children.
    pub fn wait_exit_labeled(
        child: &mut std::process::Child,
        limit: Duration,
        label: &str,
    ) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let snapshot = what_it_is_doing(child.id());
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "shellward {label} did not exit within {limit:?}; at that moment:\n{snapshot}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Each thread of `pid` (name, state, wait channel, kernel stack where readable) and each child process of it.
    fn what_it_is_doing(pid: u32) -> String {
        let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
        // `/proc/…/stat`: the fields after the parenthesised name (state is the first, the parent's pid the second).
        let after_name = |stat: &str| -> Vec<String> {
            stat.rsplit_once(") ")
                .map(|(_, rest)| rest.split(' ').map(str::to_string).collect())
                .unwrap_or_default()
        };
        let mut out = String::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let tid = task.file_name().to_string_lossy().into_owned();
                let base = format!("/proc/{pid}/task/{tid}");
                let state = after_name(&read(format!("{base}/stat")))
                    .first()
                    .cloned()
                    .unwrap_or_default();
                out.push_str(&format!(
                    "  thread {tid} {} state {state} wchan {}\n",
                    read(format!("{base}/comm")).trim(),
                    read(format!("{base}/wchan")).trim()
                ));
                for frame in read(format!("{base}/stack")).lines().take(12) {
                    out.push_str(&format!("      {frame}\n"));
                }
            }
        }
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for p in procs.flatten() {
                let name = p.file_name().to_string_lossy().into_owned();
                if !name.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let fields = after_name(&read(format!("/proc/{name}/stat")));
                if fields.get(1).is_some_and(|ppid| *ppid == pid.to_string()) {
                    out.push_str(&format!(
                        "  child {name} {} state {}\n",
                        read(format!("/proc/{name}/comm")).trim(),
                        fields[0]
                    ));
                }
            }
        }
        out
    }

    /// Context switches of every thread of `pid` so far (voluntary and not), from `/proc/PID/task/*/status`.
    pub fn context_switches(pid: u32) -> u64 {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return 0;
        };
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
            .flat_map(|status| {
                status
                    .lines()
                    .filter(|l| l.contains("ctxt_switches:"))
                    .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// Wake-ups of an idle process: its context switches over `window`, after `settle`.
    pub fn idle_wakeups(pid: u32, settle: Duration, window: Duration) -> u64 {
        std::thread::sleep(settle);
        let before = context_switches(pid);
        std::thread::sleep(window);
        context_switches(pid) - before
    }

    /// A `shellward serve` started by a test, on a free loopback port unless the test names the listener; stopped by
    /// [`Server::stop`] (which proves nothing it started survives), or killed with what it started when dropped.
    pub struct Server {
        /// The server process.
        pub child: std::process::Child,
        /// Its base URL (`http://127.0.0.1:PORT`, or `unix:/path`).
        pub base: String,
        /// The marker every process it starts carries.
        pub mark: String,
    }

    impl Server {
        /// Starts `shellward serve` with extra arguments.
        pub fn start(extra: &[&str]) -> Server {
            Server::start_with_env(extra, &[])
        }

        /// Starts `shellward serve` with extra arguments and variables in its environment.
        pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
            let mark = new_mark("serve");
            // A free loopback port unless the test names the listener.
            let listen: &[&str] = if extra.contains(&"--listen") {
                &[]
            } else {
                &["--listen", "127.0.0.1:0"]
            };
            let (child, base) = start_serve(
                &[listen, extra].concat(),
                env,
                &mark,
                std::process::Stdio::inherit(),
            );
            Server { child, base, mark }
        }

        /// Stops the server with SIGTERM and proves nothing it started survives.
        pub fn stop(mut self) {
            signal(&self.child, Signal::SIGTERM);
            let status = wait_exit(&mut self.child, Duration::from_secs(30));
            let left = survivors(&self.mark);
            kill_marked(&self.mark);
            assert!(status.success(), "serve exited with {status}");
            assert!(left.is_empty(), "survivors after shutdown: {left:?}");
        }
    }

    /// A test that fails before `stop` must not leave its server (or what it started) running.
    impl Drop for Server {
        fn drop(&mut self) {
            if self.child.try_wait().ok().flatten().is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
                kill_marked(&self.mark);
            }
        }
    }
}
