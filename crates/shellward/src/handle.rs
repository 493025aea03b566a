//! [`Process`]: one started process as a handle, in the manner of tokio's `Child`. Its operations (view, read, write,
//! wait, signal) are methods on the handle, not ids passed to every call, and they go through this facade: a signal
//! is counted in the metrics as the `process_signal` tool counts it, whichever surface sends it. Hosts that stream a
//! process themselves (`shellward run`, the Coder routes) use this; the executor itself stays behind the facade.

use crate::{Shellward, ToolError};
use shellward_exec::{
    ContainmentKind, OutputRead, ProcessId, ProcessInfo, ProcessList, ReadOptions, Session,
    SignalKind, SignalOutcome,
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

impl Shellward {
    /// The handle of process `id` in `session`. Nothing is checked here: an operation on a process that is not kept
    /// (or is another session's) fails with [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
    pub(crate) fn process(&self, session: Option<&str>, id: &str) -> Process {
        Process {
            sw: self.clone(),
            id: ProcessId::from(id),
            session: session.map(Session::from),
        }
    }

    /// Every process `session` started that is still kept, background or foreground, running first, then newest
    /// first (for process APIs that list every start; the `process_list` tool lists background ones).
    pub(crate) fn all_processes(&self, session: Option<&str>) -> ProcessList {
        self.inner
            .runner
            .executor
            .list_all(session.map(Session::from).as_ref(), usize::MAX)
    }

    /// Every process kept, of every session, running first, then newest first (at most `limit`): the operator's view
    /// (`shellward ps`, `GET /v1/processes`), never a session's — a session sees its own through its handle.
    pub fn every_process(&self, limit: usize) -> ProcessList {
        self.inner.runner.executor.list_every_session(limit)
    }

    /// How process trees are contained here (cgroup, PID namespace, process group).
    pub fn containment(&self) -> ContainmentKind {
        self.inner.runner.executor.containment()
    }

    /// The per-session process limit in force, when the host has a writable `pids` cgroup.
    pub fn process_limit(&self) -> Option<u64> {
        self.inner.runner.executor.process_limit()
    }
}
