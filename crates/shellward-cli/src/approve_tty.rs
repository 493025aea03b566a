//! `shellward run`'s approver: when a policy asks, the person at the terminal answers (`y`, `n`, or `a` to remember
//! it for the run's session); without a terminal nobody can be asked, unless the operator pre-approved with
//! `--approve`.

use shellward::approval::BoxFuture;
use shellward::{ApprovalAnswer, ApprovalRequest, Approver};
use std::io::{BufRead, IsTerminal, Write};

/// Asks on the controlling terminal, or answers for the operator (`--approve`).
pub struct TerminalApprover {
    /// The operator approved asked commands in advance (`run --approve`).
    pub pre_approved: bool,
}

impl Approver for TerminalApprover {
    fn name(&self) -> &str {
        if self.pre_approved {
            "operator (--approve)"
        } else {
            "user at the terminal"
        }
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        if self.pre_approved {
            return Box::pin(async { ApprovalAnswer::Approve { remember: false } });
        }
        // Only a person at a terminal can answer: stdin a terminal, and the terminal itself to write the question.
        if !std::io::stdin().is_terminal() {
            return Box::pin(async { ApprovalAnswer::Unavailable });
        }
        let prompt = request.prompt();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_on_tty(&prompt))
                .await
                .unwrap_or(ApprovalAnswer::Unavailable)
        })
    }
}

/// Writes the question to the terminal and reads one line of answer; anything but yes is no.
fn ask_on_tty(prompt: &str) -> ApprovalAnswer {
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return ApprovalAnswer::Unavailable;
    };
    let text = format!("shellward: a policy asks for your approval.\n{prompt}\nRun it? [y/N] ");
    if tty.write_all(text.as_bytes()).is_err() {
        return ApprovalAnswer::Unavailable;
    }
    let mut line = String::new();
    if std::io::BufReader::new(tty).read_line(&mut line).is_err() {
        return ApprovalAnswer::Unavailable;
    }
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalAnswer::Approve { remember: false },
        _ => ApprovalAnswer::Deny {
            reason: Some("answered no at the terminal".into()),
        },
    }
}
