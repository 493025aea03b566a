//! MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) for the `execute` calls of a client that
//! declared it: a call still running after [`TASK_AFTER`] is answered with a task (`resultType: "task"`) instead of
//! making the client wait; `tasks/get` reports it (`working` with how long and the last output line, then
//! `completed` with the very result `execute` returns), `tasks/cancel` stops its whole tree (as a cancelled call
//! does), and `tasks/update` writes to an interactive command's input (`inputResponses: {"stdin": "text"}`).
//!
//! Tasks belong to the connection (the session) that made them, at most [`MAX_TASKS`] unfinished at once and
//! [`MAX_KEPT`] in all, and are forgotten [`KEEP_ENDED`] after they end (swept when tasks are next touched: no timer
//! runs while idle). Clients
//! that did not declare the extension never see a task.

use rmcp::ErrorData;
use rmcp::model::{
    CreateTaskResult, DetailedTask, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use shellward::tools::{ExecuteArgs, ToolOutput};
use shellward::{Process, Shellward, ToolError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long an `execute` call runs before it is answered with a task instead.
pub const TASK_AFTER: Duration = Duration::from_secs(1);
/// Most unfinished tasks a connection may have; past it a long call is simply waited for.
pub const MAX_TASKS: usize = 64;
/// How long an ended task's result stays readable.
pub const KEEP_ENDED: Duration = Duration::from_secs(600);
/// Most tasks a connection keeps, ended ones included: past it the oldest ended one is forgotten early (each holds a
/// result), so a client making tasks in a loop cannot grow the server's memory without bound.
pub const MAX_KEPT: usize = 256;
/// How often a client is asked to poll.
const POLL_MS: u64 = 1000;

/// What becomes of an `execute` call: its result at once, or a task to poll.
pub enum Started {
    /// It ended within [`TASK_AFTER`] (or no task could be made).
    Done(Result<ToolOutput, ToolError>),
    /// It runs on as this task.
    Task(CreateTaskResult),
}

/// One connection's tasks.
#[derive(Clone, Default)]
pub struct Tasks(Arc<Mutex<HashMap<String, Entry>>>);

struct Entry {
    created: chrono::DateTime<chrono::Utc>,
    updated: chrono::DateTime<chrono::Utc>,
    state: State,
    /// When it ended (for [`KEEP_ENDED`]).
    ended: Option<Instant>,
    /// The running call: aborting it drops the `execute`, which stops the command's tree.
    abort: tokio::task::AbortHandle,
    /// The command's process, once started (for its last line and its input).
    process: Option<Process>,
    started: Instant,
}

enum State {
    Working,
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

impl Tasks {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes the tasks that ended more than [`KEEP_ENDED`] ago, and the oldest ended ones past [`MAX_KEPT`].
    fn sweep(map: &mut HashMap<String, Entry>) {
        Self::sweep_at(map, Instant::now());
    }

    /// [`Tasks::sweep`] as of `now`.
    fn sweep_at(map: &mut HashMap<String, Entry>, now: Instant) {
        map.retain(|_, e| {
            e.ended
                .is_none_or(|at| now.saturating_duration_since(at) < KEEP_ENDED)
        });
        while map.len() >= MAX_KEPT {
            let oldest = map
                .iter()
                .filter_map(|(id, e)| e.ended.map(|at| (at, id.clone())))
                .min();
            match oldest {
                Some((_, id)) => {
                    map.remove(&id);
                }
                None => break,
            }
        }
    }

    /// Runs `args` in `session` (`approver` answers first when a policy asks); a call still running after
    /// [`TASK_AFTER`] becomes a task of this connection.
    pub async fn execute(
        &self,
        sw: &Shellward,
        session: &str,
        args: ExecuteArgs,
        approver: std::sync::Arc<dyn shellward::Approver>,
    ) -> Started {
        let (started_tx, started_rx) = oneshot::channel::<Process>();
        let (sw2, session2) = (sw.clone(), session.to_string());
        let options = shellward::ExecuteOptions::new()
            .on_start(Box::new(move |p| {
                let _ = started_tx.send(p);
            }))
            .approver(approver);
        let mut run =
            tokio::spawn(async move { sw2.session(session2).execute(args, options).await });
        // Whatever happens to this call from here (a cancel drops it), the spawned run must not outlive it unowned.
        let guard = AbortOnDrop(Some(run.abort_handle()));
        if let Ok(joined) = tokio::time::timeout(TASK_AFTER, &mut run).await {
            return Started::Done(joined_output(joined));
        }
        let id = format!("task-{}", uuid::Uuid::new_v4());
        let now = chrono::Utc::now();
        let made = {
            let mut map = self.map();
            Self::sweep(&mut map);
            let open = map.values().filter(|e| e.ended.is_none()).count();
            if open < MAX_TASKS {
                map.insert(
                    id.clone(),
                    Entry {
                        created: now,
                        updated: now,
                        state: State::Working,
                        ended: None,
                        abort: run.abort_handle(),
                        process: None,
                        started: Instant::now(),
                    },
                );
            }
            open < MAX_TASKS
        };
        if !made {
            // Too many unfinished tasks: this call is waited for, as without tasks.
            let joined = run.await;
            drop(guard);
            return Started::Done(joined_output(joined));
        }
        guard.disarm();
        let (tasks, task_id) = (self.clone(), id.clone());
        tokio::spawn(async move {
            let process = started_rx.await.ok();
            if let Some(e) = tasks.map().get_mut(&task_id) {
                e.process = process;
            }
            let joined = run.await;
            tasks.finish(&task_id, joined);
        });
        Started::Task(CreateTaskResult::new(task_wire(
            &id,
            TaskStatus::Working,
            now,
            now,
            None,
        )))
    }

    /// Records how a task's run ended.
    fn finish(
        &self,
        id: &str,
        joined: Result<Result<shellward::tools::ExecuteResult, ToolError>, tokio::task::JoinError>,
    ) {
        let mut map = self.map();
        let Some(e) = map.get_mut(id) else {
            return;
        };
        if e.ended.is_some() {
            return; // cancelled meanwhile
        }
        e.state = match joined {
            Ok(result) => State::Completed(call_result(result.map(ToolOutput::Execute))),
            Err(j) if j.is_cancelled() => State::Cancelled,
            Err(j) => State::Failed(object(serde_json::json!({
                "code": -32603, "message": format!("the execute call failed: {j}")
            }))),
        };
        e.ended = Some(Instant::now());
        e.updated = chrono::Utc::now();
    }

    /// `tasks/get`: the task's state, with the result once it is done.
    pub async fn get(&self, id: &str) -> Result<DetailedTask, ErrorData> {
        let (process, seconds) = {
            let mut map = self.map();
            Self::sweep(&mut map);
            let e = map.get(id).ok_or_else(|| unknown(id))?;
            match &e.state {
                State::Working => (e.process.clone(), e.started.elapsed().as_secs()),
                _ => return Ok(detailed(id, e, None)),
            }
        };
        let line = match &process {
            Some(p) => crate::mcp::progress::last_line(p).await,
            None => None,
        };
        let message = match line {
            Some(l) => format!("running for {seconds} s; last output: {l}"),
            None => format!("running for {seconds} s; no output yet"),
        };
        let map = self.map();
        let e = map.get(id).ok_or_else(|| unknown(id))?;
        Ok(detailed(id, e, Some(message)))
    }

    /// `tasks/cancel`: stops the command's whole tree (terminate, grace, kill); the task ends `cancelled`.
    pub fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut map = self.map();
        let e = map.get_mut(id).ok_or_else(|| unknown(id))?;
        if e.ended.is_none() {
            e.abort.abort();
            e.state = State::Cancelled;
            e.ended = Some(Instant::now());
            e.updated = chrono::Utc::now();
        }
        Ok(())
    }

    /// `tasks/update`: `inputResponses.stdin` (a string, or an elicitation answer whose content holds `input`) is
    /// written to the command's input (an interactive `execute`, while it runs: also after the call completed with
    /// the command waiting for input).
    pub async fn update(&self, id: &str, responses: InputResponses) -> Result<(), ErrorData> {
        let process = {
            let map = self.map();
            let e = map.get(id).ok_or_else(|| unknown(id))?;
            // A completed call may have left its interactive command waiting for input: that is still written.
            if matches!(e.state, State::Cancelled) {
                return Err(ErrorData::invalid_params(
                    format!("task {id} was cancelled; its command is stopped"),
                    None,
                ));
            }
            e.process.clone().ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("task {id} has not started its command yet; try again"),
                    None,
                )
            })?
        };
        let text = responses
            .get("stdin")
            .and_then(|v| {
                v.as_str()
                    .map(str::to_string)
                    .or_else(|| v["content"]["input"].as_str().map(str::to_string))
            })
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    "tasks/update takes inputResponses {\"stdin\": \"text to write\"}",
                    None,
                )
            })?;
        process
            .write(text.as_bytes(), Duration::from_secs(5))
            .await
            .map(|_| ())
            .map_err(|e| ErrorData::invalid_params(e.message, None))
    }
}

/// Aborts the spawned run when the call is dropped before its task exists.
struct AbortOnDrop(Option<tokio::task::AbortHandle>);

impl AbortOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

fn joined_output(
    joined: Result<Result<shellward::tools::ExecuteResult, ToolError>, tokio::task::JoinError>,
) -> Result<ToolOutput, ToolError> {
    match joined {
        Ok(r) => r.map(ToolOutput::Execute),
        Err(e) => Err(ToolError::new(
            shellward::ToolErrorKind::Internal,
            format!("the execute call failed: {e}"),
        )),
    }
}

/// The `CallToolResult` a completed call answers with, as a JSON object.
fn call_result(outcome: Result<ToolOutput, ToolError>) -> JsonObject {
    object(serde_json::to_value(crate::mcp::result::tool_result(outcome)).unwrap_or_default())
}

fn object(v: serde_json::Value) -> JsonObject {
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "no task {id} in this session (ended tasks are kept {} minutes)",
            KEEP_ENDED.as_secs() / 60
        ),
        None,
    )
}

fn task_wire(
    id: &str,
    status: TaskStatus,
    created: chrono::DateTime<chrono::Utc>,
    updated: chrono::DateTime<chrono::Utc>,
    message: Option<String>,
) -> Task {
    let mut t = Task::new(id, status, created.to_rfc3339(), updated.to_rfc3339())
        .with_ttl_ms(KEEP_ENDED.as_millis() as u64)
        .with_poll_interval_ms(POLL_MS);
    if let Some(m) = message {
        t = t.with_status_message(m);
    }
    t
}

fn detailed(id: &str, e: &Entry, message: Option<String>) -> DetailedTask {
    let payload = match &e.state {
        State::Working => TaskPayload::Working,
        State::Completed(r) => TaskPayload::Completed { result: r.clone() },
        State::Failed(err) => TaskPayload::Failed { error: err.clone() },
        State::Cancelled => TaskPayload::Cancelled,
    };
    let task = task_wire(id, payload.status(), e.created, e.updated, message);
    DetailedTask::new(task, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ended: Option<Instant>) -> Entry {
        let now = chrono::Utc::now();
        Entry {
            created: now,
            updated: now,
            state: State::Cancelled,
            ended,
            abort: tokio::spawn(async {}).abort_handle(),
            process: None,
            started: Instant::now(),
        }
    }

    /// A client making tasks in a loop keeps at most MAX_KEPT of them: the oldest ended ones go first, unfinished
    /// ones never; ended ones past KEEP_ENDED go at the next sweep.
    #[tokio::test]
    async fn the_kept_tasks_are_bounded_oldest_ended_first() {
        let mut map = HashMap::new();
        let base = Instant::now();
        for i in 0..MAX_KEPT + 10 {
            let ended = (i % 2 == 0).then(|| base + Duration::from_millis(i as u64));
            map.insert(format!("t{i}"), entry(ended));
        }
        Tasks::sweep(&mut map);
        assert!(map.len() < MAX_KEPT, "{}", map.len());
        assert!(
            !map.contains_key("t0") && !map.contains_key("t2"),
            "the oldest ended go first"
        );
        assert!(
            (0..MAX_KEPT + 10)
                .filter(|i| i % 2 == 1)
                .all(|i| map.contains_key(&format!("t{i}")))
        );
        let mut old = HashMap::new();
        old.insert(
            "gone".to_string(),
            entry(Instant::now().checked_sub(KEEP_ENDED + Duration::from_secs(1))),
        );
        old.insert("running".to_string(), entry(None));
        Tasks::sweep(&mut old);
        assert_eq!(old.keys().collect::<Vec<_>>(), ["running"]);
    }
}
