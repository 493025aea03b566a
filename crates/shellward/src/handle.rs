//! [`Process`]: one started process as a handle, in the manner of tokio's `Child`. Its operations (view, read, write,
//! wait, signal) are methods on the handle, not ids passed to every call, and they go through this facade: a signal
//! is counted in the metrics as the `process_signal` tool counts it, whichever surface sends it. Hosts that stream a
//! process themselves (`shellward run`, the Coder routes) use this; the executor itself stays behind the facade.

use crate::{Shellward, ToolError};
use shellward_exec::{
    OutputRead, ProcessId, ProcessInfo, ReadOptions, Session, SignalKind, SignalOutcome,
};
use std::time::Duration;

/// A process this instance started, in one session. Cheap to clone. Operations on a process that is no longer kept
/// (or belongs to another session) fail with [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
#[derive(Clone)]
pub struct Process {
    sw: Shellward,
    id: ProcessId,
    session: Option<Session>,
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
    pub fn id(&self) -> &ProcessId {
        &self.id
    }

    /// The session it belongs to.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// Its details now: command, state, exit, output size, log file, labels.
    pub fn view(&self) -> Result<ProcessInfo, ToolError> {
        Ok(self
            .sw
            .inner
            .runner
            .executor
            .info(self.session(), &self.id)?)
    }

    /// Reads its output as `options` says.
    pub async fn read(&self, options: &ReadOptions) -> Result<OutputRead, ToolError> {
        Ok(self
            .sw
            .inner
            .runner
            .executor
            .read_output(self.session(), &self.id, options)
            .await?)
    }

    /// Writes `data` to its input (a pipe or its terminal), waiting at most `limit` for it to read. Returns the
    /// number of bytes written.
    pub async fn write(&self, data: &[u8], limit: Duration) -> Result<usize, ToolError> {
        Ok(self
            .sw
            .inner
            .runner
            .executor
            .write_input(self.session(), &self.id, data, limit)
            .await?)
    }

    /// Ends its input (end of file on a pipe; `Ctrl-D` on a terminal), after writing `data`.
    pub async fn close_input(&self, data: &[u8], limit: Duration) -> Result<usize, ToolError> {
        Ok(self
            .sw
            .inner
            .runner
            .executor
            .close_input(self.session(), &self.id, data, limit)
            .await?)
    }

    /// Waits until its command has ended, however long that takes, and returns its details then.
    pub async fn wait(&self) -> Result<ProcessInfo, ToolError> {
        Ok(self
            .sw
            .inner
            .runner
            .executor
            .wait_exit(self.session(), &self.id)
            .await?)
    }

    /// Terminates (SIGTERM, then SIGKILL after the grace period) or kills its whole tree, and waits until it is gone.
    /// Counted in the metrics like every signal. Refused ([`ToolErrorKind::NotAlive`](crate::ToolErrorKind::NotAlive))
    /// when nothing of the tree is alive.
    pub async fn signal(&self, kind: SignalKind) -> Result<SignalOutcome, ToolError> {
        let outcome = self
            .sw
            .inner
            .runner
            .executor
            .signal(self.session(), &self.id, kind)
            .await?;
        self.sw.inner.metrics.signal(match kind {
            SignalKind::Kill => "kill",
            _ => "terminate",
        });
        Ok(outcome)
    }
}

impl Process {
    /// The handle of process `id` in `session` of `sw`. Nothing is checked here: an operation on a process that is
    /// not kept (or is another session's) fails with
    /// [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
    pub(crate) fn new(sw: &Shellward, session: Option<&str>, id: &str) -> Process {
        Process {
            sw: sw.clone(),
            id: ProcessId::from(id),
            session: session.map(Session::from),
        }
    }
}
