//! The operator's reviewer: a command that reads one approval request as JSON on stdin and prints one answer,
//! `{"decision": "approve" | "deny", "reason": "…"}` (optionally `"remember": "session"`), within a time limit.
//! Anything else — a timeout, a crash, a non-zero exit, output that is not one such object — is a deny: a broken
//! reviewer never lets a command through.

use super::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Most bytes of the reviewer's answer read (an answer is one small JSON object).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// A reviewer command (`[approvals.reviewer]`).
#[derive(Debug, Clone)]
pub struct Reviewer {
    command: Vec<String>,
    timeout: Duration,
}

impl Reviewer {
    /// The reviewer `command` (program and arguments, run directly, no shell), given `timeout` to answer.
    pub fn new(command: Vec<String>, timeout: Duration) -> Reviewer {
        Reviewer { command, timeout }
    }

    /// Runs the reviewer once on `request`; every failure is a deny naming what went wrong.
    async fn review(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        match tokio::time::timeout(self.timeout, self.run(request)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => deny(format!("the reviewer failed ({why}), so it counts as a no")),
            Err(_) => deny(format!(
                "the reviewer did not answer within {} s, so it counts as a no",
                self.timeout.as_secs_f64()
            )),
        }
    }

    async fn run(&self, request: &ApprovalRequest) -> Result<ApprovalAnswer, String> {
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| "its command is empty".to_string())?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // A reviewer still running when its time is up (this future dropped) is killed.
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {program:?}: {e}"))?;
        let mut group = GroupKill(child.id());
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        // The same JSON for its parser, with nothing in it a terminal would interpret should a person read it.
        let line = format!("{}\n", crate::shown::json(&request.to_json()));
        // A reviewer that does not read its stdin still gets to answer.
        let _ = stdin.write_all(line.as_bytes()).await;
        drop(stdin);
        let mut out = Vec::new();
        child
            .stdout
            .take()
            .ok_or("no stdout")?
            .take(MAX_ANSWER_BYTES)
            .read_to_end(&mut out)
            .await
            .map_err(|e| format!("reading its answer: {e}"))?;
        let status = child.wait().await;
        // Reaped: its process-group id may be reused from now on, so it is never signalled after this (a reviewer
        // that leaves processes behind after answering is the operator's program doing so).
        group.0 = None;
        let status = status.map_err(|e| format!("waiting for it: {e}"))?;
        if !status.success() {
            return Err(format!("it exited with {status}"));
        }
        parse_answer(&out)
    }
}

/// Kills the reviewer's whole process group when the review ends before the reviewer was reaped (timed out, failed
/// reading), so nothing it started outlives a review that did not finish.
struct GroupKill(Option<u32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 1)
        {
            // SAFETY: kill(2) takes no pointers. With a negative pid it signals the process group the reviewer
            // leads (started as a group leader, `process_group(0)`); the id cannot name another group while its
            // leader is unreaped, and it is still unreaped here: the guard is disarmed once `wait` reaped it, and
            // otherwise the child (declared before this guard, so dropped after it) has not been reaped yet.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// A reviewer's output as an answer: exactly one JSON object with `decision` `approve` or `deny`.
fn parse_answer(out: &[u8]) -> Result<ApprovalAnswer, String> {
    let text = std::str::from_utf8(out).map_err(|_| "its answer is not UTF-8".to_string())?;
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("its answer is not one JSON object ({e})"))?;
    let reason = value
        .get("reason")
        .and_then(|r| r.as_str())
        .map(str::to_string);
    match value.get("decision").and_then(|d| d.as_str()) {
        Some("approve") => Ok(ApprovalAnswer::Approve {
            remember: value.get("remember").and_then(|r| r.as_str()) == Some("session"),
        }),
        Some("deny") => Ok(ApprovalAnswer::Deny { reason }),
        other => Err(format!(
            "its answer's decision is {other:?}; print {{\"decision\": \"approve\"}} or {{\"decision\": \"deny\", \
             \"reason\": \"…\"}}"
        )),
    }
}

fn deny(reason: String) -> ApprovalAnswer {
    tracing::warn!("approval reviewer: {reason}");
    ApprovalAnswer::Deny {
        reason: Some(reason),
    }
}

impl Approver for Reviewer {
    fn name(&self) -> &str {
        "reviewer"
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(self.review(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_answer_approves() {
        assert_eq!(
            parse_answer(br#"{"decision": "approve"}"#),
            Ok(ApprovalAnswer::Approve { remember: false })
        );
        assert_eq!(
            parse_answer(b"{\"decision\": \"approve\", \"remember\": \"session\"}\n"),
            Ok(ApprovalAnswer::Approve { remember: true })
        );
        assert_eq!(
            parse_answer(br#"{"decision": "deny", "reason": "not on main"}"#),
            Ok(ApprovalAnswer::Deny {
                reason: Some("not on main".into())
            })
        );
        let not_json: &[u8] = b"\xff\xfe";
        let garbage = [
            "",
            "yes",
            r#"{"decision": "APPROVE"}"#,
            r#"{"decision": true}"#,
            r#"{"approve": 1}"#,
            r#"{"decision": "approve"} {"decision": "approve"}"#,
            r#"["approve"]"#,
        ];
        for garbage in garbage.iter().map(|g| g.as_bytes()).chain([not_json]) {
            assert!(parse_answer(garbage).is_err(), "{garbage:?}");
        }
    }
}
