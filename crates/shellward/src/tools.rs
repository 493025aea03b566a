//! The five agent tools: their arguments, results, JSON Schemas and the descriptions a model reads.
//!
//! The argument types are the single source of the schemas ([`ToolSpec::input_schema`] is generated from them with
//! schemars), so the schema a model sees and the parser that reads its call cannot drift apart.

mod changes;
mod text;
mod typed;

pub use changes::{
    ChangedCommand, ChangedPath, ChangesListArgs, ChangesListResult, ChangesUndoArgs,
    ChangesUndoResult,
};
pub use typed::{ToolCall, ToolOutput};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `execute`. Built with [`ExecuteArgs::new`] and its setters (the fields can grow).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ExecuteArgs {
    #[cfg_attr(
        not(windows),
        doc = "The shell command to run with `sh -c`. Do not end it with `&` to background it: set \
               `run_in_background` instead."
    )]
    #[cfg_attr(
        windows,
        doc = "The command line to run with `cmd.exe /d /s /c` (Windows: `&` separates commands there). To run \
               something in the background, set `run_in_background`."
    )]
    pub command: String,
    /// How long to wait for a foreground command, as a duration string: `500ms`, `30s`, `5m`, `1m30s`, `2h`. Default
    /// set by policy (usually 10s). When it expires the command usually keeps running in the background and you get
    /// its process id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Working directory for this call only (absolute, or relative to the server's working directory). Default: where
    /// the session's last command left off (a `cd` carries over to the next call, as in a terminal), else the
    /// server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// Start the command in the background and return at once with a `background_process_id`. Use it for dev
    /// servers, file watchers, `tail -f` and long builds; read their output later with `process_output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_in_background: Option<bool>,
    /// What happens when `timeout` expires: `"kill"` stops the command and everything it started (choose it for
    /// tests and builds that must not linger), `"background"` keeps it running and returns its process id (choose
    /// it for commands you want to check on later). Default set by policy (usually `"background"`); a policy may
    /// override your choice and says so in `notes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<OnTimeout>,
    /// Environment variables for this command only, e.g. `{"RUST_LOG": "debug"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// Keep stdin open so you can answer the program with `process_input` (a REPL such as `python3 -i`, a tool that
    /// asks questions, `cat`). The command starts in the background; the result holds what it printed until its
    /// output went quiet (its prompt) and its process id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// Run the command on a terminal (implies `interactive`): for programs that behave differently without one —
    /// prompts shown only on a terminal, password or yes/no questions, full-screen tools, `Ctrl-C` (`"\u0003"`
    /// through `process_input`) to interrupt. Output is shown without colours or cursor codes; the log keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
    /// Terminal rows with `tty` (default 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Terminal columns with `tty` (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// A unique string of yours (e.g. a UUID) naming this start, so a retry is safe: the same call sent again with the
    /// same `client_token` starts nothing new and returns the first call's result (`attached: true`); the token with
    /// a different call is refused. Use a new token for each new command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token: Option<String>,
    /// Preview only: run the command in a throwaway copy-on-write view of the writable paths, with no network and
    /// at most 10 s, and return what it would change (`preview.changes`: each path created, modified, deleted,
    /// renamed or mode-changed, with small diffs) without applying anything (`applied: false`). Use it before a
    /// command that deletes, resets or rewrites files. It cannot show effects outside the files (a push, a database,
    /// a network call: those fail in the preview), and the real run may differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<bool>,
}

/// What `execute` does with a foreground command whose timeout expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
// The schema's name for it stays what clients have seen.
#[schemars(rename = "OnTimeoutChoice")]
#[non_exhaustive]
pub enum OnTimeout {
    /// Stop the whole process tree; nothing is left running.
    Kill,
    /// Keep it running as a tracked background process and return its id.
    Background,
}

/// Arguments of `process_output`. Built with [`ProcessOutputArgs::new`] and its setters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProcessOutputArgs {
    /// The process id returned by `execute` (`background_process_id` or `process_id`), e.g. `p3-k3x9q2mz`.
    pub process_id: String,
    /// Byte cursor to read from: pass the `cursor` of the previous result to get only new output. Omit it to get the
    /// head and tail of the whole output. `0` reads from the start (from the full log when the head/tail view
    /// dropped bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// How long to wait at most, as a duration string: `0s` returns a snapshot at once. Without `wait` the call
    /// returns when the process exits, when its output has been quiet for `idle` (default `1s`), or after `10s`:
    /// use the default to check on a server or answer a prompt. Give a `wait` (e.g. `"5m"`) to wait for a build
    /// or test run to finish: then it returns at exit, at new output (with `cursor`), or when `wait` is over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// Return once no new output has arrived for this long (`"300ms"` suits prompts); `"0s"` turns it off. Default
    /// `1s` when `wait` is not given, off when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
}

/// Arguments of `process_input`. Built with [`ProcessInputArgs::new`] and its setters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProcessInputArgs {
    /// The process id of a command started with `interactive` or `tty`.
    pub process_id: String,
    /// Text to write, exactly as given: end a line with `"\n"` to submit it. On a terminal `"\u0003"` is Ctrl-C
    /// (interrupts the running job), `"\u0004"` Ctrl-D (end of input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Raw bytes to write, base64-encoded (instead of `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_base64: Option<String>,
    /// Close stdin after writing (end of input: `cat`, `sort` and REPLs then finish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_stdin: Option<bool>,
    /// How long to wait for the answer at most (default `10s`); see `idle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// Return once the output has been quiet this long after the input (default `1s`; `"300ms"` for a fast prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
}

/// Arguments of `process_list` (none yet: [`ProcessListArgs::default`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProcessListArgs {}

/// The signal `process_signal` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SignalName {
    /// SIGTERM to the whole process tree, then SIGKILL to whatever is left after a grace period (2s by default).
    Terminate,
    /// SIGKILL to the whole process tree at once.
    Kill,
}

/// Arguments of `process_signal`. Built with [`ProcessSignalArgs::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProcessSignalArgs {
    /// The process id, e.g. `p3-k3x9q2mz`.
    pub process_id: String,
    /// `terminate` (graceful: SIGTERM, then SIGKILL after a grace period) or `kill` (SIGKILL at once). Both reach
    /// every process the command started.
    pub signal: SignalName,
}

impl ExecuteArgs {
    /// `execute` of `command`, everything else left to the policy.
    pub fn new(command: impl Into<String>) -> ExecuteArgs {
        ExecuteArgs {
            command: command.into(),
            ..ExecuteArgs::default()
        }
    }

    /// The foreground timeout, as a duration string (`"30s"`, `"5m"`).
    pub fn timeout(mut self, timeout: impl Into<String>) -> ExecuteArgs {
        self.timeout = Some(timeout.into());
        self
    }

    /// The working directory for this call.
    pub fn workdir(mut self, workdir: impl Into<String>) -> ExecuteArgs {
        self.workdir = Some(workdir.into());
        self
    }

    /// Runs it in the background (`run_in_background`).
    pub fn background(mut self, background: bool) -> ExecuteArgs {
        self.run_in_background = Some(background);
        self
    }

    /// What happens when the timeout expires.
    pub fn on_timeout(mut self, choice: OnTimeout) -> ExecuteArgs {
        self.on_timeout = Some(choice);
        self
    }

    /// Adds an environment variable for this command.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> ExecuteArgs {
        self.env
            .get_or_insert_with(Default::default)
            .insert(name.into(), value.into());
        self
    }

    /// Keeps stdin open for `process_input`.
    pub fn interactive(mut self, interactive: bool) -> ExecuteArgs {
        self.interactive = Some(interactive);
        self
    }

    /// Runs it on a terminal of `rows` × `cols` (the defaults, 24 × 80, where `None`).
    pub fn tty(mut self, rows: Option<u16>, cols: Option<u16>) -> ExecuteArgs {
        self.tty = Some(true);
        self.rows = rows;
        self.cols = cols;
        self
    }

    /// Names this start for safe retries (`client_token`).
    pub fn client_token(mut self, token: impl Into<String>) -> ExecuteArgs {
        self.client_token = Some(token.into());
        self
    }
}

impl ProcessOutputArgs {
    /// `process_output` of `process_id`: the head/tail view, waiting as the tool does by default.
    pub fn new(process_id: impl Into<String>) -> ProcessOutputArgs {
        ProcessOutputArgs {
            process_id: process_id.into(),
            ..ProcessOutputArgs::default()
        }
    }

    /// Reads the bytes after `cursor`.
    pub fn cursor(mut self, cursor: u64) -> ProcessOutputArgs {
        self.cursor = Some(cursor);
        self
    }

    /// Waits at most this long (a duration string; `"0s"`: a snapshot).
    pub fn wait(mut self, wait: impl Into<String>) -> ProcessOutputArgs {
        self.wait = Some(wait.into());
        self
    }

    /// Returns once the output has been quiet this long (a duration string; `"0s"`: off).
    pub fn idle(mut self, idle: impl Into<String>) -> ProcessOutputArgs {
        self.idle = Some(idle.into());
        self
    }
}

impl ProcessInputArgs {
    /// `process_input` to `process_id`, writing nothing yet.
    pub fn new(process_id: impl Into<String>) -> ProcessInputArgs {
        ProcessInputArgs {
            process_id: process_id.into(),
            ..ProcessInputArgs::default()
        }
    }

    /// The text to write.
    pub fn text(mut self, text: impl Into<String>) -> ProcessInputArgs {
        self.text = Some(text.into());
        self
    }

    /// Raw bytes to write, base64-encoded.
    pub fn bytes_base64(mut self, bytes: impl Into<String>) -> ProcessInputArgs {
        self.bytes_base64 = Some(bytes.into());
        self
    }

    /// Closes stdin after writing.
    pub fn close_stdin(mut self, close: bool) -> ProcessInputArgs {
        self.close_stdin = Some(close);
        self
    }

    /// Waits at most this long for the answer.
    pub fn wait(mut self, wait: impl Into<String>) -> ProcessInputArgs {
        self.wait = Some(wait.into());
        self
    }

    /// Returns once the output has been quiet this long after the input.
    pub fn idle(mut self, idle: impl Into<String>) -> ProcessInputArgs {
        self.idle = Some(idle.into());
        self
    }
}

impl ProcessSignalArgs {
    /// `process_signal` of `signal` to `process_id`.
    pub fn new(process_id: impl Into<String>, signal: SignalName) -> ProcessSignalArgs {
        ProcessSignalArgs {
            process_id: process_id.into(),
            signal,
        }
    }
}

/// The result of `execute`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ExecuteResult {
    /// The command ran and exited 0, or was started (or kept running) in the background.
    pub success: bool,
    /// The policy refused the command; `deny_reason` says why. Nothing was run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
    /// Why the policy refused the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_reason: Option<String>,
    /// The command that ran (a policy may have rewritten it, e.g. removed a trailing `&`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Exit code, when the command exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command (e.g. `SIGKILL`), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The foreground timeout expired.
    pub timed_out: bool,
    /// The command is still running (in the background).
    pub running: bool,
    /// Wall time in milliseconds.
    pub wall_duration_ms: u64,
    /// The output (stdout and stderr interleaved): the head and tail when it is long, with a marker where bytes were
    /// left out.
    pub output: String,
    /// Bytes left out of `output` (read them from `log_path` or with `process_output` and `cursor: 0`).
    pub output_omitted_bytes: u64,
    /// stderr, when the host captures it separately from `output` (head and tail, like `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// All output bytes so far.
    pub output_total_bytes: u64,
    /// A process kept the output open after the command exited, so later output was not waited for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_incomplete: bool,
    /// The command's tree reached its process limit (a fork bomb, runaway parallelism): forks past it failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub process_limit_hit: bool,
    /// The file holding the full output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<String>,
    /// Pass this to `process_output` as `cursor` to read only output that arrives later.
    pub cursor: u64,
    /// The process id for `process_output` and `process_signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// Set when the command runs on in the background (asked for, promoted by policy, or kept after a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_process_id: Option<String>,
    /// A background start that is ready: what its processes listen on (`tcp 127.0.0.1:5173`, `udp 0.0.0.0:5353`,
    /// `unix /tmp/app.sock`). Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listening: Vec<String>,
    /// What the policy changed and why, and what to do next.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<crate::Note>,
    /// This call was a retry of an earlier one with the same `client_token`: the result is that call's (its process,
    /// with its state now), and nothing new was started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// The sandbox the command ran in, in one line: where it may write, its network, what is hidden. Absent when
    /// nothing is confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<String>,
    /// The command waits for a person's approval and has not run: the approval's id, the question, and how long it
    /// may wait. The answer comes from the user (e.g. `POST /v1/approvals/{id}`), never from the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<Box<PendingApproval>>,
    /// `false` for a preview (`preview: true`): the command ran in a throwaway view and nothing of it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<bool>,
    /// A preview's change set: what the command would change in the writable paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Box<crate::preview::PreviewReport>>,
}

/// A command waiting for a person's approval (see [`ExecuteResult::pending_approval`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct PendingApproval {
    /// The approval's id.
    pub id: String,
    /// The policy's question for the person.
    pub question: String,
    /// The command that runs once approved.
    pub command: String,
    /// Milliseconds left before it expires (then it is denied and never runs).
    pub expires_in_ms: u64,
    /// What a preview showed the command would change (see [`crate::approval::ApprovalRequest::changes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
}

/// The result of `process_output`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ProcessOutputResult {
    /// Always true for a result (errors are reported separately).
    pub success: bool,
    /// The process id.
    pub process_id: String,
    /// Whether anything of the process tree is still running.
    pub running: bool,
    /// Exit code, once the command exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// New output after `cursor`, or the head/tail view when no cursor was given.
    pub output: String,
    /// Bytes not included: left out of the head/tail view, or no longer available between the cursor and `output`.
    pub output_omitted_bytes: u64,
    /// All output bytes so far.
    pub output_total_bytes: u64,
    /// Pass this as `cursor` next time to get only newer output.
    pub cursor: u64,
    /// The process is blocked reading its input (a prompt waits for an answer): answer with `process_input`. Only
    /// for processes started with `interactive`; absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_input: bool,
    /// The file holding the full output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<String>,
    /// Hints about what to do next.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<crate::Note>,
}

/// One process in `process_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ProcessEntry {
    /// The process id.
    pub process_id: String,
    /// The command.
    pub command: String,
    /// Its working directory.
    pub workdir: String,
    /// Whether anything of its tree is still running.
    pub running: bool,
    /// Exit code, once exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Start time, seconds since the Unix epoch.
    pub started_at_unix: u64,
    /// Exit time, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_at_unix: Option<u64>,
    /// Output bytes so far.
    pub output_bytes: u64,
    /// The file holding the full output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<String>,
}

/// The result of `process_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ProcessListResult {
    /// Always true for a result.
    pub success: bool,
    /// Running processes first, then newest first.
    pub processes: Vec<ProcessEntry>,
    /// Processes not listed because of the listing cap.
    pub omitted: usize,
}

/// The result of `process_signal`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ProcessSignalResult {
    /// The signal was delivered and the tree is gone.
    pub success: bool,
    /// The process id.
    pub process_id: String,
    /// Whether anything of the tree is still running (false after a successful signal).
    pub running: bool,
    /// Exit code of the command, if it exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// What happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<crate::Note>,
}

/// The name of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolName {
    /// `execute`
    Execute,
    /// `process_output`
    ProcessOutput,
    /// `process_list`
    ProcessList,
    /// `process_signal`
    ProcessSignal,
    /// `process_input`
    ProcessInput,
    /// `changes_list`
    ChangesList,
    /// `changes_undo`
    ChangesUndo,
}

impl ToolName {
    /// Every tool, in the order they are listed.
    pub const ALL: [ToolName; 7] = [
        ToolName::Execute,
        ToolName::ProcessOutput,
        ToolName::ProcessInput,
        ToolName::ProcessList,
        ToolName::ProcessSignal,
        ToolName::ChangesList,
        ToolName::ChangesUndo,
    ];

    /// The tool's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Execute => "execute",
            ToolName::ProcessOutput => "process_output",
            ToolName::ProcessList => "process_list",
            ToolName::ProcessSignal => "process_signal",
            ToolName::ProcessInput => "process_input",
            ToolName::ChangesList => "changes_list",
            ToolName::ChangesUndo => "changes_undo",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The description a model reads.
    pub fn description(self) -> &'static str {
        match self {
            ToolName::Execute => EXECUTE_DESCRIPTION,
            ToolName::ProcessOutput => PROCESS_OUTPUT_DESCRIPTION,
            ToolName::ProcessList => PROCESS_LIST_DESCRIPTION,
            ToolName::ProcessSignal => PROCESS_SIGNAL_DESCRIPTION,
            ToolName::ProcessInput => PROCESS_INPUT_DESCRIPTION,
            ToolName::ChangesList => changes::CHANGES_LIST_DESCRIPTION,
            ToolName::ChangesUndo => changes::CHANGES_UNDO_DESCRIPTION,
        }
    }

    /// The JSON Schema of the tool's arguments, generated from the argument type.
    pub fn input_schema(self) -> serde_json::Value {
        match self {
            ToolName::Execute => schema_of::<ExecuteArgs>(),
            ToolName::ProcessOutput => schema_of::<ProcessOutputArgs>(),
            ToolName::ProcessList => schema_of::<ProcessListArgs>(),
            ToolName::ProcessSignal => schema_of::<ProcessSignalArgs>(),
            ToolName::ProcessInput => schema_of::<ProcessInputArgs>(),
            ToolName::ChangesList => schema_of::<ChangesListArgs>(),
            ToolName::ChangesUndo => schema_of::<ChangesUndoArgs>(),
        }
    }

    /// The JSON Schema of the tool's result, generated from the result type and made compact for the clients that
    /// validate every result against it (see [`compact`]): the fields every result has, typed; every field
    /// described in the schema's `description`.
    pub fn output_schema(self) -> serde_json::Value {
        compact(self.full_output_schema())
    }

    /// The JSON Schema of the tool's result with every field a typed, described property (what [`Self::output_schema`]
    /// is made from; for documentation and for checking results in tests).
    pub fn full_output_schema(self) -> serde_json::Value {
        match self {
            ToolName::Execute => schema_of::<ExecuteResult>(),
            ToolName::ProcessOutput => schema_of::<ProcessOutputResult>(),
            ToolName::ProcessList => schema_of::<ProcessListResult>(),
            ToolName::ProcessSignal => schema_of::<ProcessSignalResult>(),
            ToolName::ProcessInput => schema_of::<ProcessOutputResult>(),
            ToolName::ChangesList => schema_of::<ChangesListResult>(),
            ToolName::ChangesUndo => schema_of::<ChangesUndoResult>(),
        }
    }

    /// A one-line reminder of the arguments, used in error messages.
    pub fn usage(self) -> &'static str {
        match self {
            ToolName::Execute => {
                r#"{"command": "...", "timeout"?: "30s", "workdir"?: "dir", "run_in_background"?: true, "interactive"?: true, "tty"?: true}"#
            }
            ToolName::ProcessOutput => {
                r#"{"process_id": "p1-k3x9q2mz", "cursor"?: 0, "wait"?: "10s"}"#
            }
            ToolName::ProcessList => "{}",
            ToolName::ProcessSignal => {
                r#"{"process_id": "p1-k3x9q2mz", "signal": "terminate" | "kill"}"#
            }
            ToolName::ProcessInput => {
                r#"{"process_id": "p1-k3x9q2mz", "text"?: "print(6*7)\n", "bytes_base64"?: "...", "close_stdin"?: true}"#
            }
            ToolName::ChangesList => r#"{"max_paths"?: 50}"#,
            ToolName::ChangesUndo => r#"{"process_id"?: "p1-k3x9q2mz", "force"?: false}"#,
        }
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON Schema of `T`, in the draft-07 dialect. Stock MCP clients validate every structured result against the
/// tool's output schema, and the Python SDK (`jsonschema.validate`) checks the schema itself against its dialect's
/// meta-schema on every call first: for these schemas that costs several times more under draft 2020-12 (the MCP
/// default when `$schema` is absent) than under draft-07, which both SDKs support (the TypeScript SDK's ajv
/// defaults to it). The bench's SDK rows measure it.
fn schema_of<T: JsonSchema>() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    portable(schema.to_value())
}

/// An output schema as stock MCP clients validate it fast. The Python SDK meta-validates the schema before every
/// result it checks, at about 50 µs per subschema (jsonschema 4.26, measured): a property per field made that 1.1 ms
/// of every call. So the compact form keeps one subschema per field every result carries (`required`, each with its
/// type), no nested definitions (an array is `{"type": "array"}`), and moves every field's description, optional ones
/// included, into the schema's own `description` (one string, checked once). Results still validate against it, and
/// a reader still finds every field and what it means.
fn compact(full: serde_json::Value) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let required: Vec<String> = full["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let mut fields = Vec::new();
    let mut properties = Map::new();
    for (name, property) in full["properties"].as_object().into_iter().flatten() {
        // `["string", "null"]` for an optional field: the null is never sent (absent instead), so name the type.
        let ty = match &property["type"] {
            Value::Array(types) => types
                .iter()
                .find(|t| t.as_str() != Some("null"))
                .cloned()
                .unwrap_or(Value::Null),
            Value::Null if property.get("$ref").is_some() || property.get("items").is_some() => {
                json!("object")
            }
            other => other.clone(),
        };
        let is_required = required.contains(name);
        let mut text = property["description"]
            .as_str()
            .unwrap_or("")
            .replace('\n', " ");
        // An array of records (the process list's entries): their fields, named with their types.
        if let Some(entry) = property["items"]["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/definitions/"))
            .and_then(|d| full["definitions"][d]["properties"].as_object())
        {
            let names: Vec<String> = entry
                .iter()
                .map(|(field, p)| {
                    let ty = match &p["type"] {
                        Value::Array(types) => types.iter().find(|t| t.as_str() != Some("null")),
                        other => Some(other),
                    };
                    format!(
                        "`{field}` ({})",
                        ty.and_then(Value::as_str).unwrap_or("any")
                    )
                })
                .collect();
            text.push_str(&format!(" Each entry has {}.", names.join(", ")));
        }
        fields.push(format!(
            "`{name}` ({}{}): {text}",
            ty.as_str().unwrap_or("any"),
            if is_required { "" } else { ", optional" }
        ));
        if is_required {
            properties.insert(name.clone(), json!({ "type": ty }));
        }
    }
    let about = full["description"].as_str().unwrap_or("").to_string();
    json!({
        "$schema": full["$schema"],
        "title": full["title"],
        "description": format!("{about}\n\nFields:\n- {}", fields.join("\n- ")),
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

/// Drops the integer `format`s schemars adds (`uint64`, `int32`, ...): they are not JSON Schema formats, and
/// validating clients (ajv in the MCP TypeScript SDK) warn about each one. `minimum: 0` still says "unsigned".
fn portable(mut schema: serde_json::Value) -> serde_json::Value {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                let integer_format = map
                    .get("format")
                    .and_then(|f| f.as_str())
                    .is_some_and(|f| f.starts_with("int") || f.starts_with("uint"));
                if integer_format {
                    map.remove("format");
                }
                map.values_mut().for_each(walk);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

/// A tool as an MCP server or HTTP API lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Wire name.
    pub name: &'static str,
    /// Description for the model.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub input_schema: serde_json::Value,
    /// JSON Schema of the result.
    pub output_schema: serde_json::Value,
}

/// Every tool's spec.
pub fn tool_specs() -> Vec<ToolSpec> {
    ToolName::ALL
        .into_iter()
        .map(|t| ToolSpec {
            name: t.as_str(),
            description: t.description(),
            input_schema: t.input_schema(),
            output_schema: t.output_schema(),
        })
        .collect()
}

const EXECUTE_DESCRIPTION: &str = "\
Run a shell command (sh -c) in a non-interactive environment: stdin is closed, pagers and editors are disabled, \
colours are off (set interactive=true to talk to it, below). Returns its exit code and output (stdout and stderr interleaved; long output keeps the head and tail \
and the full text goes to log_path).

Foreground (the default): waits up to `timeout` (a duration string such as \"30s\", \"5m\", \"1m30s\"; default 10s). \
If the command is still running when the timeout expires it usually keeps running in the background: the result has \
running=true and a background_process_id; read more with process_output or stop it with process_signal.

Background: set run_in_background=true for anything that does not finish on its own: dev servers (npm run dev, \
cargo watch, python -m http.server), file watchers, `tail -f`, long builds or test suites you want to check on later. \
The call returns with background_process_id as soon as the process listens on a port or socket (`listening` says on \
what: the server is ready), or exits (a start-up failure: its exit code and output are in the result), and at the \
latest after a few seconds (then it is running but not listening yet).

Do NOT append `&` to background a command, and do not use nohup/setsid/disown: the process would be lost. Use \
run_in_background instead (a trailing `&` is converted for you, with a note). Read the `notes` in the result: they say \
what the policy changed and what to do next. A command refused by policy returns success=false with deny_reason.

Interactive programs: set interactive=true to keep stdin open (a REPL such as `python3 -i`, a script that asks \
questions, `cat`), or tty=true when the program needs a terminal (prompts shown only on a terminal, password or \
yes/no questions, Ctrl-C). Either starts it in the background and returns what it printed until it went quiet (its \
prompt) with its process_id; answer with process_input. Without them a command reading stdin sees end of input at \
once.

on_timeout: \"kill\" for builds and tests that must not linger past `timeout`; \"background\" (the usual default) to \
keep a slow command and check on it with process_output.";

const PROCESS_OUTPUT_DESCRIPTION: &str = "\
Read the output of a process started by execute (background, or kept running after a timeout, or finished). \
Without `wait` it returns when the process exits or its output has been quiet for `idle` (default 1s), at most after \
10s: use that to check on a server or read a prompt (an interactive process blocked reading its input is answered \
at once, with `waiting_for_input` true). Give `wait` (e.g. \"5m\") to wait for a build or test run to \
finish. With `cursor` (from the previous result) it returns only output produced after it, waiting up to `wait` (default \"10s\"; \
\"0s\" returns at once) for something new or for the process to exit; pass the returned cursor next time so every \
byte is read exactly once. Without cursor it returns the head and tail of the whole output once the process exits or \
`wait` passes. cursor 0 reads from the beginning, including bytes the head/tail view left out. The result says \
whether the process is still running and its exit code once it has exited.";

const PROCESS_INPUT_DESCRIPTION: &str = "\
Write to the stdin of a process started with interactive=true or tty=true, then return what it printed in answer: \
the call returns as soon as the process waits for input again (then `waiting_for_input` is true: its prompt is in \
the output), when the output has been quiet for `idle` (default 1s), when the process exits, or after `wait` \
(default 10s). Send `text` exactly as typed — end a line with \"\\n\" to submit it; on a tty \"\\u0003\" is Ctrl-C \
(interrupts the running job, the shell stays), \"\\u0004\" Ctrl-D — or raw bytes as `bytes_base64`. close_stdin=true \
ends the input (cat, sort and REPLs then finish). A process that does not read its input makes the call fail after \
a few seconds with how much was written, instead of hanging.";

const PROCESS_LIST_DESCRIPTION: &str = "\
List the processes you started that run in the background (or ran there recently): running ones first, then newest \
first, with id, command, running state, exit code and output size. Use it to find a process id you lost.";

const PROCESS_SIGNAL_DESCRIPTION: &str = "\
Stop a process started by execute, together with every process it started (its whole tree, including daemons that \
detached). signal \"terminate\" sends SIGTERM and, after a grace period, SIGKILL to whatever is left; \"kill\" sends \
SIGKILL at once. Returns when the tree is gone. Fails when nothing of the tree is running any more.";
