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

/// Sent before the question: whatever the command's earlier output (or anything else on this terminal) left
/// half-written is ended, so it cannot swallow, recolour or hide the question. CAN cancels an escape sequence in
/// progress, ST ends an OSC, DCS or APC string, SGR 0 undoes colours and concealed text, the cursor is shown again,
/// and the question starts at the beginning of a fresh line.
const CLEAN_LINE: &str = "\x18\x1b\\\x1b[0m\x1b[?25h\r\n";

/// The visible line the question follows.
const SEPARATOR: &str = "──────── shellward: approval needed ────────";

/// Everything written to the terminal to ask `prompt` (already made safe for a person: `ApprovalRequest::prompt`).
fn question_text(prompt: &str) -> String {
    format!(
        "{CLEAN_LINE}{SEPARATOR}\r\nA policy asks for your approval.\r\n{}\r\nRun it? [y/N] ",
        prompt.replace('\n', "\r\n")
    )
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
    let text = question_text(prompt);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_starts_clean_after_the_separator_and_carries_only_its_own_controls() {
        let request_prompt = shellward::shown::approval_question(
            "guard",
            None,
            "Discard?",
            "git reset --hard \x1b[2K\x1b[1G\u{202e}echo safe\r",
            None,
            None,
        );
        let text = question_text(&request_prompt);
        assert!(text.starts_with(CLEAN_LINE), "{text:?}");
        let body = &text[CLEAN_LINE.len()..];
        assert!(body.starts_with(SEPARATOR), "{body:?}");
        // After the clean line, the only control characters are the line ends shellward writes.
        let rest = body.replace("\r\n", "");
        assert!(!rest.chars().any(shellward::shown::is_hidden), "{rest:?}");
        assert!(
            rest.contains("git reset --hard \\x1b[2K\\x1b[1G\\u{202e}echo safe\\r"),
            "{rest}"
        );
    }
}
