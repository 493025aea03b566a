//! The facade's errors: a tool call's ([`ToolError`], with a [`ToolErrorKind`] surfaces map to status codes) and
//! building one's ([`BuildError`]).

use crate::config::ConfigError;
use serde_json::Value;
use shellward_exec::ExecError;

/// What kind of failure a [`ToolError`] is (HTTP surfaces map it to a status code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments are malformed or refer to something invalid (bad duration, empty command, missing workdir).
    InvalidArguments,
    /// No tool has this name.
    UnknownTool,
    /// No process with this id in the caller's session.
    UnknownProcess,
    /// The process exists but nothing of its tree is alive.
    NotAlive,
    /// Too many processes are running.
    Busy,
    /// The service is shutting down.
    Unavailable,
    /// Something failed on the host (spawning, setup).
    Internal,
    /// The request conflicts with an earlier one: its `client_token` was already used for a different call. Nothing
    /// was started.
    Conflict,
    /// No approval with this id waits in the caller's session (decided already, expired, or another session's).
    UnknownApproval,
    /// A policy asked for a person's approval and nobody gave it (declined, expired, nobody to ask). Nothing ran.
    NotApproved,
}

impl ToolErrorKind {
    /// The kind's name in JSON results (`invalid_arguments`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidArguments => "invalid_arguments",
            ToolErrorKind::UnknownTool => "unknown_tool",
            ToolErrorKind::UnknownProcess => "unknown_process",
            ToolErrorKind::NotAlive => "not_alive",
            ToolErrorKind::Busy => "busy",
            ToolErrorKind::Unavailable => "unavailable",
            ToolErrorKind::Internal => "internal",
            ToolErrorKind::Conflict => "conflict",
            ToolErrorKind::UnknownApproval => "unknown_approval",
            ToolErrorKind::NotApproved => "not_approved",
        }
    }
}

/// A tool call that could not be carried out. The message names what was wrong and what to do; an error that came
/// from the executor keeps it as its [`source`](std::error::Error::source) (for a host's logs; the model sees the
/// message). Two errors are equal when their kind and message are.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ToolError {
    /// The kind of failure.
    pub kind: ToolErrorKind,
    /// What went wrong and what to do instead.
    pub message: String,
    /// The executor's error this one was made from.
    #[source]
    source: Option<std::sync::Arc<ExecError>>,
}

impl PartialEq for ToolError {
    fn eq(&self, other: &ToolError) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for ToolError {}

impl ToolError {
    /// An error of `kind` saying `message` (what went wrong and what to do instead), for a surface that refuses a
    /// call itself.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::InvalidArguments, message)
    }

    /// The error as a JSON tool result: `{"success": false, "error": ..., "error_kind": ...}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "success": false,
            "error": self.message,
            "error_kind": self.kind.as_str(),
        })
    }
}

impl From<ExecError> for ToolError {
    fn from(e: ExecError) -> ToolError {
        let kind = match &e {
            ExecError::Workdir { .. }
            | ExecError::InvalidCommand(_)
            | ExecError::InvalidPlan(_) => ToolErrorKind::InvalidArguments,
            ExecError::UnknownProcess(_) | ExecError::Evicted { .. } => {
                ToolErrorKind::UnknownProcess
            }
            ExecError::NotAlive(_) => ToolErrorKind::NotAlive,
            ExecError::TooManyRunning { .. } | ExecError::TooManyRunningInSession { .. } => {
                ToolErrorKind::Busy
            }
            ExecError::ShuttingDown => ToolErrorKind::Unavailable,
            ExecError::NotInteractive(_) => ToolErrorKind::InvalidArguments,
            ExecError::InputClosed(_) => ToolErrorKind::NotAlive,
            ExecError::InputStalled { .. } => ToolErrorKind::Busy,
            ExecError::PreviewUnavailable(_) | ExecError::ChangesUnavailable(_) => {
                ToolErrorKind::Unavailable
            }
            ExecError::UndoRefused(_) => ToolErrorKind::Conflict,
            _ => ToolErrorKind::Internal,
        };
        // The executor says what to do in its own terms; a model acts through the tools, so name them.
        let message = match &e {
            ExecError::TooManyRunning { .. } | ExecError::TooManyRunningInSession { .. } => {
                format!("{e}. process_signal stops one; process_list shows what runs")
            }
            ExecError::UnknownProcess(id) => {
                format!("no process {id} (for this session); call process_list to see the ids")
            }
            ExecError::NotInteractive(id) => format!(
                "process {id} was not started interactive: its stdin is /dev/null. Start it again with \
                 interactive: true (a pipe) or tty: true (a terminal) to write to it"
            ),
            ExecError::UndoRefused(_) => format!(
                "{e}. Nothing was changed; changes_list shows this session's recorded commands"
            ),
            ExecError::PreviewUnavailable(_) => format!(
                "{e}. Nothing was run; without `preview` the command runs for real (`shellward sandbox check` \
                 shows what this host can preview)"
            ),
            _ => e.to_string(),
        };
        ToolError {
            kind,
            message,
            source: Some(std::sync::Arc::new(e)),
        }
    }
}

/// Why a [`Shellward`] (or a [`SandboxProbe`](crate::SandboxProbe)) could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The configuration (or a policy it names) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The policy engine could not be created.
    #[error("the policy engine could not be created: {0}")]
    Policy(#[from] shellward_policy::PolicyError),
    /// The executor could not be created.
    #[error(transparent)]
    Executor(#[from] ExecError),
    /// The audit log could not be opened.
    #[error("{0}")]
    Audit(std::io::Error),
    /// A scratch file or directory could not be made.
    #[error(
        "cannot make {path}: {source}; check that its directory is writable (TMPDIR for temporary files)"
    )]
    Scratch {
        /// What could not be made.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The executor's own messages name no tool; the facade's say which tool to call.
    #[test]
    fn executor_errors_become_tool_errors_that_name_the_tools() {
        let cases = [
            (
                ExecError::TooManyRunningInSession {
                    running: 8,
                    limit: 8,
                },
                "process_signal",
            ),
            (ExecError::UnknownProcess("p9-x".into()), "process_list"),
            (
                ExecError::NotInteractive("p9-x".into()),
                "interactive: true",
            ),
        ];
        for (e, tool) in cases {
            let plain = e.to_string();
            assert!(!plain.contains("process_"), "{plain}");
            assert!(!plain.contains("interactive: true"), "{plain}");
            let t = ToolError::from(e);
            assert!(t.message.contains(tool), "{}", t.message);
            // The executor's error stays reachable for a host's logs.
            let source = std::error::Error::source(&t).expect("the executor's error is the source");
            assert_eq!(source.to_string(), plain);
        }
        assert!(std::error::Error::source(&ToolError::invalid("bad")).is_none());
    }
}
