//! Reading a process's output: [`Executor::read_output`] from a cursor or as a head/tail view, waiting for new output,
//! for quiet (`until_quiet`) or for an interactive command to block on its input.

use super::{Executor, INPUT_CHECK, INPUT_SETTLE, input_identity};
use crate::error::ExecError;
use crate::ids::{ProcessId, Session};
use crate::output::ReadOptions;
use crate::registry::Proc;
use crate::results::{ExitState, OutputRead};
use std::sync::atomic::Ordering;
use std::time::SystemTime;

impl Executor {
    /// Reads output as `options` says. With a cursor ([`ReadOptions::after`]): the bytes after it (at most
    /// `max_bytes`), waiting up to `wait` for new output or the exit when there is nothing new yet. Without
    /// ([`ReadOptions::view`]): the head/tail view, after waiting up to `wait` for the process to exit. A `wait` of
    /// zero is a snapshot.
    ///
    /// With [`ReadOptions::until_quiet`] it returns once the output has gone quiet: when the process exits, when no
    /// new output has arrived for `idle` (counted from the call and from each new chunk), when an interactive
    /// command blocks reading its input, or at `wait` — whichever comes first. A prompt, a server's banner or one
    /// burst of a build's output comes back as soon as it is complete; a poll of a silent server costs `idle`, not
    /// `wait`.
    pub async fn read_output(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
        options: &ReadOptions,
    ) -> Result<OutputRead, ExecError> {
        let ReadOptions {
            cursor,
            wait,
            idle,
            max_bytes,
        } = *options;
        let proc = self.find(session, id)?;
        // Whether a read at `c` would return something: new bytes that make at least one whole character (the
        // first bytes of a character still arriving are not enough) or bytes skipped.
        let readable = |c: u64| {
            let out = proc.out.lock().unwrap_or_else(|p| p.into_inner());
            let probe = out.read(c, 4);
            probe.next_cursor > c || probe.skipped_bytes > 0
        };
        let done = |p: &Proc| p.leader_exited() && *p.readers_done.borrow();
        let mut waiting = false;
        if let Some(idle) = idle
            && !wait.is_zero()
            && !done(&proc)
        {
            let mut tick = proc.tick.subscribe();
            let deadline = tokio::time::Instant::now() + wait;
            let mut quiet_at = tokio::time::Instant::now() + idle;
            let mut last_output = tokio::time::Instant::now();
            // An interactive command is also watched for blocking on its input: a prompt is answered as soon as it
            // is printed, not after the idle window.
            let stdin = input_identity(&proc);
            while !done(&proc) {
                let now = tokio::time::Instant::now();
                let check = stdin.map(|_| now + INPUT_CHECK);
                let until = quiet_at.min(deadline).min(check.unwrap_or(deadline));
                match tokio::time::timeout_at(until, tick.changed()).await {
                    Ok(Ok(())) => {
                        last_output = tokio::time::Instant::now();
                        quiet_at = last_output + idle;
                    }
                    Ok(Err(_)) => break,
                    Err(_) => {
                        let now = tokio::time::Instant::now();
                        // Quiet for `idle`, or the wait is over.
                        if now >= quiet_at.min(deadline) {
                            break;
                        }
                        if let Some(stdin) = stdin
                            && now >= last_output + INPUT_SETTLE
                            && proc.tree.waiting_for_input(stdin)
                        {
                            waiting = true;
                            break;
                        }
                    }
                }
            }
        } else if !wait.is_zero() && !done(&proc) {
            let mut tick = proc.tick.subscribe();
            let _ = tokio::time::timeout(wait, async {
                loop {
                    if done(&proc) || cursor.is_some_and(readable) {
                        return;
                    }
                    if tick.changed().await.is_err() {
                        return;
                    }
                }
            })
            .await;
        }
        if !done(&proc) {
            self.let_drain_finish(&proc).await;
        }
        // The process's state is taken before its output: output that arrives in between is left for the next read.
        // Taken after, a read could say "ended, output closed" beside a chunk that misses the last bytes, and a
        // caller that stops there (at `next_cursor == total_bytes`) would lose them.
        let exit = proc.exit_state();
        let output_closed = done(&proc);
        let running = exit == ExitState::Running
            || !proc.cleaned.load(Ordering::Relaxed) && proc.command_alive();
        #[cfg(all(test, unix))]
        super::tests::between_state_and_output(&proc).await;
        let out = proc.out.lock().unwrap_or_else(|p| p.into_inner());
        let (chunk, view, next) = match cursor {
            Some(c) => {
                let chunk = out.read(c, max_bytes);
                let next = chunk.next_cursor;
                (Some(chunk), None, next)
            }
            None => (None, Some(out.view()), out.total()),
        };
        drop(out);
        let waiting = waiting
            || (exit == ExitState::Running
                && input_identity(&proc).is_some_and(|stdin| proc.tree.waiting_for_input(stdin)));
        Ok(OutputRead {
            chunk,
            view,
            waiting_for_input: waiting,
            next_cursor: next,
            running,
            exit,
            output_closed,
        })
    }

    /// When the process has ended but its pipes are still being drained (usually for microseconds; until the drain
    /// bound when something outside the tree holds them), lets that finish, so that a read reporting "not running"
    /// has all the output.
    async fn let_drain_finish(&self, proc: &Proc) {
        let exited_at = proc.exit.borrow().as_ref().map(|(_, at)| *at);
        if let Some(at) = exited_at
            && let Some(left) = self
                .inner
                .config
                .drain
                .checked_sub(SystemTime::now().duration_since(at).unwrap_or_default())
            && (proc.cleaned.load(Ordering::Relaxed) || !proc.command_alive())
        {
            let _ = tokio::time::timeout(left, proc.wait_readers()).await;
        }
    }
}
