//! One command's process tree on Windows: its job object. Membership is the job's (every process the command
//! starts is in it, and none can leave: breaking away is not allowed), so nothing outside the tree is ever signalled.

use super::job::Job;
use crate::sys::leader_reap::LeaderReap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};

/// What the portable core holds while a foreground command is waited for (nothing to hold on Windows).
pub(crate) struct EndCheck;

/// A contained process tree: the command's job.
#[derive(Debug)]
pub(crate) struct Tree {
    pid: i32,
    /// `None` once released (closing the handle kills whatever is left).
    job: Mutex<Option<Job>>,
    leader: Arc<LeaderReap>,
}

impl Tree {
    /// The tree of the leader `pid`, already in `job`.
    pub(crate) fn new(pid: i32, job: Job) -> Tree {
        Tree {
            pid,
            job: Mutex::new(Some(job)),
            leader: Arc::default(),
        }
    }

    fn with_job<R>(&self, f: impl FnOnce(&Job) -> R) -> Option<R> {
        self.job
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(f)
    }

    /// A fork refused by the limit is not reported on Windows.
    pub(crate) fn process_limit_hit(&self) -> bool {
        false
    }

    /// The leader's process id (also its console process group's id).
    pub(crate) fn pgid(&self) -> i32 {
        self.pid
    }

    /// The leader's reap state (clone it for a thread that waits for the leader).
    pub(crate) fn leader(&self) -> &Arc<LeaderReap> {
        &self.leader
    }

    /// The living members now.
    pub(crate) fn members(&self) -> Vec<u32> {
        self.with_job(Job::pids).unwrap_or_default()
    }

    /// Not detected on Windows.
    pub(crate) fn waiting_for_input(&self, _stdin: (u64, u64)) -> bool {
        false
    }

    /// Not detected on Windows: a background start is answered when its start-up window ends.
    pub(crate) fn listening(&self) -> Vec<String> {
        Vec::new()
    }

    /// The ids of the living members.
    pub(crate) fn member_pids(&self) -> Vec<i32> {
        self.members().into_iter().map(|p| p as i32).collect()
    }

    /// Nothing to prepare.
    pub(crate) fn prepare_end_check(&self) -> EndCheck {
        EndCheck
    }

    /// The reaper's orphan bookkeeping does not apply: no process outside the job is the executor's to reap.
    pub(crate) fn known(&self) -> HashMap<i32, u64> {
        HashMap::new()
    }

    /// Whether any process of the job is alive.
    pub(crate) fn alive(&self) -> bool {
        self.with_job(|j| j.active().map(|n| n > 0).unwrap_or(false))
            .unwrap_or(false)
    }

    /// Whether nothing of the tree can be alive.
    pub(crate) fn certainly_gone(&self) -> bool {
        !self.alive()
    }

    /// Asks the tree to end: a `Ctrl-Break` to the leader's console process group (the command was started as a
    /// group of its own). Processes without a console, or that ignore it, are killed after the grace period.
    pub(crate) fn terminate(&self) {
        // SAFETY: no pointers; a group id that is not ours fails harmlessly.
        let _ = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, self.pid as u32) };
    }

    /// Kills every process of the job at once.
    pub(crate) fn kill(&self) {
        if let Some(Err(e)) = self.with_job(Job::terminate) {
            tracing::warn!(pid = self.pid, "terminating the command's job failed: {e}");
        }
    }

    /// Nothing leaves a job.
    pub(crate) fn escapees(&self) -> Vec<u32> {
        Vec::new()
    }

    /// Nothing leaves a job.
    pub(crate) fn kill_escapees(&self) -> usize {
        0
    }

    /// Releases the job (what is left in it is killed as its handle closes).
    pub(crate) fn cleanup(&self) {
        self.job.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Releases the job once nothing in it is alive; returns whether it was released.
    pub(crate) fn try_cleanup(&self) -> bool {
        if self.alive() {
            return false;
        }
        self.cleanup();
        true
    }
}
