//! The watchdog: a helper process that outlives a killed executor just long enough to kill what it started.
//!
//! It is a process, not a thread, because it must survive the executor's death (SIGKILL included). It is the
//! embedded static `shellward-init` binary in its watchdog mode (`shellward_init::watchdog`, which documents the
//! protocol and what it kills), started from the same sealed memfd as the namespace init: no shell to load and no
//! script to parse at every executor start. Where that binary cannot run (a build without it, a host that forbids
//! executing a memfd) the same protocol is served by a shell script.
//!
//! Without pidfds it proves what it can before it signals: a process is killed only when its environment, read just
//! before, carries this executor's tree marker, and a process group only when such a marked process is in it and the
//! executor had announced the group. (The remaining window between that read and the kill is a few microseconds;
//! the executor itself never signals a number it has not verified through a pidfd.)

use super::WATCHDOG_VAR;
use super::embedded_init::EmbeddedInit;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The running watchdog.
///
/// It reads commands from a pipe whose only write end is held by the executor (close-on-exec, so commands never
/// inherit it). When the executor dies — even by SIGKILL — the pipe reaches EOF and the watchdog kills the
/// executor's cgroup (which holds every tree, escapers included) and every process group it was told about.
pub(crate) struct Watchdog {
    pub(crate) child: Child,
    pub(crate) pipe: std::fs::File,
}

const WATCHDOG_SCRIPT: &str = r#"
cg="$1"; token="$2"; pids="$3"; pgs=" "
while read -r op pg; do
  case "$op" in
    +) pgs="$pgs$pg " ;;
    -) new=" "; for p in $pgs; do [ "$p" = "$pg" ] || new="$new$p "; done; pgs="$new" ;;
    quit) exit 0 ;;
  esac
done
if [ -n "$cg" ]; then echo 1 > "$cg/cgroup.kill" 2>/dev/null; fi
if [ -n "$token" ]; then
  round=0
  while [ $round -lt 50 ]; do
    round=$((round+1))
    found=$(grep -lzE "^SHELLWARD_TREE=$token/" /proc/[0-9]*/environ 2>/dev/null)
    [ -z "$found" ] && break
    for f in $found; do
      p=${f#/proc/}; p=${p%/environ}
      if read -r line < "/proc/$p/stat" 2>/dev/null; then
        rest=${line##*) }; set -- $rest
        case "$pgs" in *" $3 "*) kill -s KILL -- "-$3" 2>/dev/null ;; esac
      fi
      kill -s KILL "$p" 2>/dev/null
    done
  done
fi
for dir in "$cg" "$pids"; do
  [ -n "$dir" ] || continue
  i=0
  while [ $i -lt 50 ]; do
    for d in "$dir"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rmdir "$dir" 2>/dev/null && break
    i=$((i+1)); sleep 0.1
  done
done
"#;

/// Where the watchdog starts from: the executor's spawner thread (`platform::Platform`), whose marker token the
/// watchdog looks for.
pub(crate) trait Spawner {
    /// The executor's marker token (`SHELLWARD_TREE=TOKEN/…`).
    fn token(&self) -> &str;
    /// Runs `f` on the spawner thread and returns its result.
    fn on_spawner_sync<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R>;
}

impl Watchdog {
    /// Starts the watchdog (on the spawner thread, so the death signal of its leaders' thread does not apply to it):
    /// from `embedded` when given and runnable, else from a shell.
    pub(crate) fn start(
        cgroup_dir: Option<PathBuf>,
        pids_dir: Option<PathBuf>,
        embedded: Option<EmbeddedInit>,
        platform: &impl Spawner,
    ) -> io::Result<Watchdog> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
        let token = platform.token().to_string();
        let cg = cgroup_dir.map(|d| d.into_os_string()).unwrap_or_default();
        let pids = pids_dir.map(|d| d.into_os_string()).unwrap_or_default();
        let child = platform.on_spawner_sync(move || {
            if let Some(embedded) = embedded {
                let mut cmd = Command::new(embedded.path());
                cmd.arg0("shellward-watchdog")
                    .arg(shellward_init::WATCHDOG_ARG)
                    .arg(&cg)
                    .arg(&token)
                    .arg(&pids);
                match configure(&mut cmd, &r).and_then(|()| cmd.spawn()) {
                    // The memfd's descriptor stays open (an `Arc`) until the child has exec'd it.
                    Ok(child) => return Ok(child),
                    Err(e) => {
                        tracing::debug!("the static watchdog cannot run ({e}); using a shell")
                    }
                }
            }
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c")
                .arg(WATCHDOG_SCRIPT)
                .arg("shellward-watchdog")
                .arg(&cg)
                .arg(&token)
                .arg(&pids);
            configure(&mut cmd, &r)?;
            cmd.spawn()
        })??;
        // SAFETY: `w` is an owned, open pipe write end.
        let pipe = unsafe { std::fs::File::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(w)) };
        Ok(Watchdog { child, pipe })
    }
}

/// What both forms of the watchdog start with: a clean environment that marks it, the pipe's read end as its
/// standard input, no output, and a process group of its own.
fn configure(cmd: &mut Command, pipe: &OwnedFd) -> io::Result<()> {
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env(WATCHDOG_VAR, "1")
        .stdin(Stdio::from(pipe.try_clone()?))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own process group: terminal signals go to the foreground group (the executor's), not to it. Set through
    // `posix_spawn` (no `pre_exec` hook), so starting it does not copy the executor's page tables the way a `fork`
    // would: about a millisecond saved for a large host process (`shellward run`'s start).
    cmd.process_group(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::TREE_VAR;
    use super::*;
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    /// A `sleep 30` with `marker` as its tree marker (none when `None`), in process group `group` (its own when 0).
    fn sleeper(marker: Option<&str>, group: i32) -> Child {
        let mut cmd = Command::new("sleep");
        cmd.arg("30").env_remove(TREE_VAR).process_group(group);
        if let Some(m) = marker {
            cmd.env(TREE_VAR, m);
        }
        cmd.spawn().unwrap()
    }

    /// The child's wait status once it has exited, waiting up to `limit`.
    fn ended_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Both forms, the static binary and the shell script, keep to one protocol: at end of input (the executor died)
    /// they kill the processes carrying their executor's marker and, in an announced group holding one, the unmarked
    /// members too; a process marked by another executor, and a group never announced, are left alone; `quit` ends
    /// them with nothing killed.
    #[test]
    fn both_forms_kill_only_what_the_marker_and_the_announcements_allow() {
        // The spawner thread's part, played by this thread: the protocol is what is tested.
        struct Inline(String);
        impl Spawner for Inline {
            fn token(&self) -> &str {
                &self.0
            }
            fn on_spawner_sync<R: Send + 'static>(
                &self,
                f: impl FnOnce() -> R + Send + 'static,
            ) -> io::Result<R> {
                Ok(f())
            }
        }
        let token = format!("watchdog-test-{}", std::process::id());
        let platform = Inline(token.clone());
        let mut forms = vec![None];
        if let Some(embedded) = super::super::embedded_init::load().unwrap() {
            forms.insert(0, Some(embedded));
        }
        for embedded in forms {
            let form = if embedded.is_some() { "static" } else { "sh" };
            // `quit`: nothing is killed, the watchdog exits.
            let mut ours = sleeper(Some(&format!("{token}/t1")), 0);
            let mut dog = Watchdog::start(None, None, embedded.clone(), &platform).unwrap();
            writeln!(dog.pipe, "quit").unwrap();
            assert!(
                ended_within(&mut dog.child, Duration::from_secs(5)).is_some_and(|s| s.success()),
                "{form}"
            );
            assert!(
                ours.try_wait().unwrap().is_none(),
                "{form}: quit killed a process"
            );
            // End of input.
            let mut unmarked_member = sleeper(None, ours.id() as i32);
            let mut theirs = sleeper(Some("someone-else/t1"), 0);
            let mut unannounced = sleeper(Some(&format!("{token}/t2")), 0);
            let mut unannounced_member = sleeper(None, unannounced.id() as i32);
            let mut dog = Watchdog::start(None, None, embedded, &platform).unwrap();
            writeln!(dog.pipe, "+ {}\n+ 999999\n- 999999", ours.id()).unwrap();
            drop(dog.pipe);
            assert!(
                ended_within(&mut dog.child, Duration::from_secs(10)).is_some(),
                "{form}: still running"
            );
            for (name, child) in [
                ("marked", &mut ours),
                ("in an announced group", &mut unmarked_member),
                ("marked, group not announced", &mut unannounced),
            ] {
                let status = ended_within(child, Duration::from_secs(5));
                assert_eq!(
                    status.and_then(|s| s.signal()),
                    Some(libc::SIGKILL),
                    "{form}: {name}"
                );
            }
            for (name, child) in [
                ("another executor's", &mut theirs),
                (
                    "unmarked in a group never announced",
                    &mut unannounced_member,
                ),
            ] {
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "{form}: {name} was killed"
                );
                child.kill().unwrap();
                child.wait().unwrap();
            }
        }
    }
}
