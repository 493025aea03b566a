//! Progress of a running `execute` for an MCP client that asked for it (a `progressToken` in the call's `_meta`):
//! about once a second, `notifications/progress` with the seconds elapsed as the progress and a message saying so
//! with the output's last line (cleaned as the model reads output, at most [`MAX_LINE_CHARS`] characters). Nothing is
//! sent without a token, and nothing runs between ticks (the ticker sleeps; no output is read until a tick).

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use shellward::tools::{ExecuteArgs, ToolOutput};
use shellward::{Process, ReadOptions, Shellward, ToolError};
use std::time::Duration;

/// How often progress is reported.
pub const PERIOD: Duration = Duration::from_secs(1);
/// Longest last line a progress message carries.
pub const MAX_LINE_CHARS: usize = 120;

/// Runs `args` in `session`, reporting progress to `peer` under `token` until the result is ready; `approver` answers
/// first when a policy asks.
pub async fn execute_reporting(
    sw: &Shellward,
    session: &str,
    args: ExecuteArgs,
    token: ProgressToken,
    peer: Peer<RoleServer>,
    approver: std::sync::Arc<dyn shellward::Approver>,
) -> Result<ToolOutput, ToolError> {
    let (started_tx, started) = tokio::sync::oneshot::channel::<Process>();
    let options = shellward::ExecuteOptions::new()
        .on_start(Box::new(move |process| {
            let _ = started_tx.send(process);
        }))
        .approver(approver);
    let at = sw.session(session);
    let run = at.execute(args, options);
    let report = async move {
        // A denied command (or a retry attached to an earlier result) never starts: nothing to report.
        let Ok(process) = started.await else {
            return std::future::pending().await;
        };
        let since = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(since + PERIOD, PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            ticks.tick().await;
            let secs = since.elapsed().as_secs();
            let message = match last_line(&process).await {
                Some(line) => format!("running for {secs} s; last output: {line}"),
                None => format!("running for {secs} s; no output yet"),
            };
            let param =
                ProgressNotificationParam::new(token.clone(), secs as f64).with_message(message);
            if peer.notify_progress(param).await.is_err() {
                // The client is gone: the call ends with the connection.
                return std::future::pending().await;
            }
        }
    };
    tokio::select! {
        result = run => result.map(ToolOutput::Execute),
        never = report => never,
    }
}

/// The last non-empty line of `process`'s output so far, shortened.
pub async fn last_line(process: &Process) -> Option<String> {
    let read = process.read(&ReadOptions::view()).await.ok()?;
    let text = read.view?.text;
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    Some(shorten(line))
}

/// `line` cut to [`MAX_LINE_CHARS`] characters (a marker shows the cut), control characters dropped.
fn shorten(line: &str) -> String {
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() <= MAX_LINE_CHARS {
        return clean;
    }
    let mut cut: String = clean.chars().take(MAX_LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_last_line_is_cleaned_and_shortened() {
        assert_eq!(super::shorten("  building\u{7} x"), "  building x");
        let long = "y".repeat(500);
        let short = super::shorten(&long);
        assert_eq!(short.chars().count(), super::MAX_LINE_CHARS);
        assert!(short.ends_with('…'));
    }
}
