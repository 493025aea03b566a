//! The watchdog on macOS and FreeBSD: a small `/bin/sh` process that outlives a killed executor just long enough to
//! kill the process groups of the commands it was running (Linux has a static binary for this and cgroups behind it;
//! here a POSIX shell is what every such system has).
//!
//! It reads lines on its standard input, a pipe whose only write end the executor holds (close-on-exec, so no command
//! inherits it): `+ PGID` when a command's group starts, `- PGID` once its tree has ended and been released, `quit`
//! when the executor shuts down cleanly (it then exits at once). At end of input — the executor died, `SIGKILL`
//! included, and the kernel closed the write end — it sends `SIGKILL` to every group still announced. It is in a
//! process group of its own and ignores the terminal's and the usual termination signals, so what stops the executor
//! (a Ctrl-C, a `SIGTERM` to its group) leaves it to do that.
//!
//! What it cannot do: follow processes that left their group (on FreeBSD they stay in the reaper's subtree, which ends
//! with the executor), or tell a group that emptied and whose id was reused between the tree's end and its release —
//! announced groups are released as soon as the executor sees their tree gone.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The watchdog's program: the groups announced, killed at end of input. Only numbers are ever kept or signalled.
const SCRIPT: &str = r#"trap '' HUP INT QUIT TERM PIPE
groups=' '
while IFS= read -r line; do
  case $line in
    quit) exit 0 ;;
    "+ "*) g=${line#+ } ;;
    "- "*) g=${line#- } ;;
    *) continue ;;
  esac
  case $g in ''|*[!0-9]*) continue ;; esac
  case $line in
    "+ "*) groups="$groups$g " ;;
    *) case $groups in *" $g "*) groups="${groups%% $g *} ${groups#* $g }" ;; esac ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
exit 0
"#;

/// A running watchdog: its input's write end and the process.
pub(crate) struct Watchdog {
    state: Mutex<Option<(ChildStdin, Child)>>,
}

impl Watchdog {
    /// Starts the watchdog; `None` (logged) when `/bin/sh` cannot run: commands then run without one.
    pub(crate) fn start() -> Option<Watchdog> {
        let started = Command::new("/bin/sh")
            .args(["-c", SCRIPT, "shellward-watchdog"])
            .env_clear()
            .env("PATH", "/bin:/usr/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let mut child = match started {
            Ok(child) => child,
            Err(e) => {
                tracing::warn!(
                    "cannot start the watchdog (/bin/sh: {e}): a killed shellward leaves its commands running"
                );
                return None;
            }
        };
        let input = child.stdin.take()?;
        // A watchdog that stops reading must never block a start: a line that does not fit is dropped.
        let fd = input.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on a descriptor this process owns (the pipe's write end, held in `input`).
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        Some(Watchdog {
            state: Mutex::new(Some((input, child))),
        })
    }

    /// Sends one line (`+ PGID\n`, `- PGID\n`).
    pub(crate) fn send(&self, line: &str) {
        if let Some((input, _)) = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            let _ = input.write_all(line.as_bytes());
        }
    }

    /// The executor is shutting down cleanly (its trees are gone): the watchdog exits without killing, and is
    /// reaped.
    pub(crate) fn quit(&self) {
        let taken = self.state.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((mut input, mut child)) = taken {
            let _ = input.write_all(b"quit\n");
            drop(input);
            let _ = child.wait();
        }
    }

    /// Closes the input without `quit`, as the executor's death does (for the tests).
    #[cfg(test)]
    pub(crate) fn abandon(&self) -> Option<Child> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .map(|(_, child)| child)
    }
}

impl Drop for Watchdog {
    /// A platform dropped without its shutdown (its executor's drop shuts it down first): let the watchdog go.
    fn drop(&mut self) {
        self.quit();
    }
}
