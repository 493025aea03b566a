//! [`Process`]: one started process as a handle, in the manner of tokio's `Child`. Its operations (view, read, write,
//! wait, signal) are methods on the handle, not ids passed to every call, and they go through this facade: a signal
//! is counted in the metrics as the `process_signal` tool counts it, whichever surface sends it. Hosts that stream a
//! process themselves (`shellward run`, the Coder routes) use this; the executor itself stays behind the facade.

use crate::{Shellward, ToolError};
use shellward_exec::{
    ContainmentKind, OutputRead, ProcessInfo, ProcessList, SignalKind, SignalOutcome,
};
use std::time::Duration;

/// How much output one read returns at most by default.
const DEFAULT_READ_BYTES: usize = 256 * 1024;

/// What one [`Process::read`] asks for: the bytes after a cursor, or the head/tail view of everything; how long to
/// wait for something new (or the exit); whether to answer as soon as the output goes quiet; and how many bytes at
/// most. Build it with [`ReadOptions::after`] or [`ReadOptions::view`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReadOptions {
    cursor: Option<u64>,
    wait: Duration,
    idle: Option<Duration>,
    max_bytes: usize,
}

impl ReadOptions {
    /// The bytes after `cursor` (0 for all output from the start), at once (no wait), at most 256 KiB.
    pub fn after(cursor: u64) -> ReadOptions {
        ReadOptions {
            cursor: Some(cursor),
            wait: Duration::ZERO,
            idle: None,
            max_bytes: DEFAULT_READ_BYTES,
        }
    }

    /// The head/tail view of all output (the middle left out when it is long), at once (no wait).
    pub fn view() -> ReadOptions {
        ReadOptions {
            cursor: None,
            ..ReadOptions::after(0)
        }
    }

    /// Waits up to `wait` for new output (with a cursor) or for the exit (for the view) before answering.
    pub fn wait(mut self, wait: Duration) -> ReadOptions {
        self.wait = wait;
        self
    }

    /// Answers once the output has gone quiet for `idle` (a prompt, a banner, one burst of a build), the process
    /// exited, or the wait ended, whichever comes first.
    pub fn until_quiet(mut self, idle: Duration) -> ReadOptions {
        self.idle = Some(idle);
        self
    }

    /// At most `max_bytes` of output in this read (the rest stays for the next one, from the returned cursor).
    pub fn max_bytes(mut self, max_bytes: usize) -> ReadOptions {
        self.max_bytes = max_bytes;
        self
    }
}

/// A process this instance started, in one session. Cheap to clone. Operations on a process that is no longer kept
/// (or belongs to another session) fail with [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
#[derive(Clone)]
pub struct Process {
    sw: Shellward,
    id: String,
    session: Option<String>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("id", &self.id)
            .field("session", &self.session)
            .finish()
    }
}

impl Process {
    /// The process id the tools name it by (`p1`, `p2`, …).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session it belongs to.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Its details now: command, state, exit, output size, log file, labels.
    pub fn view(&self) -> Result<ProcessInfo, ToolError> {
        Ok(self.sw.inner.executor.info(&self.id, self.session())?)
    }

    /// Reads its output as `options` says.
    pub async fn read(&self, options: &ReadOptions) -> Result<OutputRead, ToolError> {
        Ok(self
            .sw
            .inner
            .executor
            .read_output_until_quiet(
                &self.id,
                self.session(),
                options.cursor,
                options.wait,
                options.idle,
                options.max_bytes,
            )
            .await?)
    }

    /// Writes `data` to its input (a pipe or its terminal), waiting at most `limit` for it to read. Returns the
    /// number of bytes written.
    pub async fn write(&self, data: &[u8], limit: Duration) -> Result<usize, ToolError> {
        Ok(self
            .sw
            .inner
            .executor
            .write_input(&self.id, self.session(), data, false, limit)
            .await?)
    }

    /// Ends its input (end of file on a pipe; `Ctrl-D` on a terminal), after writing `data`.
    pub async fn close_input(&self, data: &[u8], limit: Duration) -> Result<usize, ToolError> {
        Ok(self
            .sw
            .inner
            .executor
            .write_input(&self.id, self.session(), data, true, limit)
            .await?)
    }

    /// Waits until its command has ended, however long that takes, and returns its details then.
    pub async fn wait(&self) -> Result<ProcessInfo, ToolError> {
        Ok(self
            .sw
            .inner
            .executor
            .wait_exit(&self.id, self.session())
            .await?)
    }

    /// Terminates (SIGTERM, then SIGKILL after the grace period) or kills its whole tree, and waits until it is gone.
    /// Counted in the metrics like every signal. Refused ([`ToolErrorKind::NotAlive`](crate::ToolErrorKind::NotAlive))
    /// when nothing of the tree is alive.
    pub async fn signal(&self, kind: SignalKind) -> Result<SignalOutcome, ToolError> {
        let outcome = self
            .sw
            .inner
            .executor
            .signal(&self.id, kind, self.session())
            .await?;
        self.sw.inner.metrics.signal(match kind {
            SignalKind::Kill => "kill",
            _ => "terminate",
        });
        Ok(outcome)
    }
}

impl Shellward {
    /// The handle of process `id` in `session`. Nothing is checked here: an operation on a process that is not kept
    /// (or is another session's) fails with [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
    pub fn process(&self, session: Option<&str>, id: &str) -> Process {
        Process {
            sw: self.clone(),
            id: id.to_string(),
            session: session.map(str::to_string),
        }
    }

    /// Every process `session` started that is still kept, background or foreground, running first, then newest
    /// first (for process APIs that list every start; the `process_list` tool lists background ones).
    pub fn all_processes(&self, session: Option<&str>) -> ProcessList {
        self.inner.executor.list_filtered(session, usize::MAX, true)
    }

    /// How process trees are contained here (cgroup, PID namespace, process group).
    pub fn containment(&self) -> ContainmentKind {
        self.inner.executor.containment()
    }

    /// The per-session process limit in force, when the host has a writable `pids` cgroup.
    pub fn process_limit(&self) -> Option<u64> {
        self.inner.executor.process_limit()
    }
}
