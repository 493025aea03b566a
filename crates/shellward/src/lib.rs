//! shellward for hosts that embed it: a policy chain and a process executor behind the five agent tools.
//!
//! This crate owns the agent-facing surface and nothing below it: argument validation, the tool schemas and
//! descriptions ([`tools`]), the configuration file ([`config`]), mapping a request through the policy chain
//! (`shellward-policy`) to a plan the executor (`shellward-exec`) runs, and shaping results a model can act on.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use shellward::{Shellward, tools::ExecuteArgs};
//! let sw = Shellward::builder().build()?; // embedded default policy, default limits
//! let result = sw
//!     .execute(Some("session-1"), ExecuteArgs { command: "npm run dev &".into(), ..Default::default() })
//!     .await?;
//! assert!(result.running); // the trailing `&` was turned into a tracked background process
//! sw.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Every method takes the caller's session id (or `None`); a process is visible only to the session that started
//! it. Errors are [`ToolError`]s whose text tells the caller what to do; a tool never panics on bad input.

mod active;
mod audit;
pub mod config;
mod confinement;
pub mod idempotency;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(not(feature = "metrics"))]
#[path = "metrics_off.rs"]
mod metrics;
pub mod oci;
pub mod tools;
mod watch;

pub use active::{PolicyFailure, PolicyStatus, PolicySummary};
pub use audit::{AuditConfig, RECORD_VERSION, request_from_record, request_json};
pub use confinement::{ConfinementConfig, DEFAULT_DENY_READ, DEFAULT_WRITABLE};
pub use watch::PolicyWatcher;

/// Loads the policy chain a configuration describes (every policy compiled, checked and configured, nothing run) and
/// returns what it is made of, as `shellward policy list` shows it.
pub fn load_policy_summaries(config: &Config) -> Result<Vec<PolicySummary>, BuildError> {
    let engine = PolicyEngine::new(config.sandbox.clone())?;
    Ok(active::load(config, &engine)?.summaries.get().to_vec())
}

pub use config::{
    AuthEntry, Config, ConfigError, PolicyEntry, PolicySource, Problem, ToolLimits, valid_session,
};
pub use shellward_exec::{
    Confinement, Enforced, ExecPlan, Executor, ExecutorConfig, Network, init_main_if_requested,
};

/// The Rust examples of the project's README, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExamples;
pub use shellward_policy::{Decision, PolicyChain, PolicyEngine, SandboxConfig};

use serde_json::Value;
use shellward_exec::{ExecError, ExecResult, ExitState, SignalKind, StdinMode, TimeoutAction};
use shellward_policy::duration::{ACCEPTED_FORMS, format_millis, parse_millis};
use shellward_policy::{OnTimeout, Outcome, Request};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tools::{
    ExecuteArgs, ExecuteResult, ProcessEntry, ProcessInputArgs, ProcessListArgs, ProcessListResult,
    ProcessOutputArgs, ProcessOutputResult, ProcessSignalArgs, ProcessSignalResult, SignalName,
    ToolName,
};

/// What kind of failure a [`ToolError`] is (HTTP surfaces map it to a status code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        }
    }
}

/// A tool call that could not be carried out. The message names what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// The kind of failure.
    pub kind: ToolErrorKind,
    /// What went wrong and what to do instead.
    pub message: String,
}

impl ToolError {
    fn invalid(message: impl Into<String>) -> ToolError {
        ToolError {
            kind: ToolErrorKind::InvalidArguments,
            message: message.into(),
        }
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
            ExecError::Workdir { .. } | ExecError::InvalidCommand(_) => {
                ToolErrorKind::InvalidArguments
            }
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
            _ => ToolErrorKind::Internal,
        };
        ToolError {
            kind,
            message: e.to_string(),
        }
    }
}

/// Why a [`Shellward`] could not be built.
#[derive(Debug, thiserror::Error)]
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
}

/// Builds a [`Shellward`]: start from a [`Config`] (or the defaults) and override parts.
#[derive(Debug, Default)]
pub struct ShellwardBuilder {
    config: Config,
    chain: Option<PolicyChain>,
    surface: Option<String>,
}

impl ShellwardBuilder {
    /// Uses this configuration (policy chain, sandbox, executor, tool limits).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Uses an already loaded policy chain instead of the one the configuration names.
    pub fn policy_chain(mut self, chain: PolicyChain) -> Self {
        self.chain = Some(chain);
        self
    }

    /// Names the surface this instance serves (`serve`, `mcp`, `run`; default `library`), for the audit log.
    pub fn surface(mut self, surface: impl Into<String>) -> Self {
        self.surface = Some(surface.into());
        self
    }

    /// Replaces the executor settings.
    pub fn executor_config(mut self, executor: ExecutorConfig) -> Self {
        self.config.executor = executor;
        self
    }

    /// Replaces the tool limits.
    pub fn tool_limits(mut self, limits: ToolLimits) -> Self {
        self.config.tools = limits;
        self
    }

    /// The executor's settings with the host's own files ([`Config::host_files`]) read-only for commands. The caches
    /// are made first (private to this user) when missing: a path that does not exist when a command starts cannot be
    /// protected, and the command could then plant entries in it.
    fn executor_config_for_build(&self) -> ExecutorConfig {
        let mut executor = self.config.executor.clone();
        for dir in self
            .config
            .sandbox
            .cache_dir
            .iter()
            .cloned()
            .chain(oci::default_cache_dir())
        {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir);
        }
        executor.read_only_paths.extend(self.config.host_files());
        executor.hidden_paths.extend(self.config.host_secrets());
        // What commands may not read: hidden in every session's sandbox like the host's secrets.
        executor
            .hidden_paths
            .extend(self.config.confinement.deny_read.iter().cloned());
        executor
    }

    /// Loads the policies and starts the executor. Needs a Tokio runtime (the executor spawns its reaper task).
    ///
    /// The two are independent, so the policies load (precompiled components deserialized, instances configured) on
    /// a helper thread while this thread sets up the executor (cgroups, log directory, watchdog): a one-shot
    /// `shellward run` starts milliseconds sooner on two cores. A policy error is reported first, as before; the
    /// executor started meanwhile is dropped, which stops it.
    pub fn build(self) -> Result<Shellward, BuildError> {
        let executor_config = self.executor_config_for_build();
        let (active, executor) = match self.chain {
            Some(chain) => {
                let summaries = chain
                    .policies()
                    .iter()
                    .map(|p| PolicySummary {
                        name: p.name().to_string(),
                        source: "host".into(),
                        digest: String::new(),
                        wit_version: p.info().wit_version.clone(),
                        settings_digest: String::new(),
                        fail_open: false,
                        loaded_at: 0,
                    })
                    .collect();
                let active = active::Active::new(
                    active::Loaded {
                        chain: Arc::new(chain),
                        summaries: Arc::new(active::Summaries::given(summaries)),
                    },
                    None,
                );
                (active, Executor::new(executor_config))
            }
            None => {
                let config = &self.config;
                // Captures only a reference, so it is `Copy`: the helper thread gets one copy, the fallback another.
                let load = || -> Result<_, BuildError> {
                    let engine = PolicyEngine::new(config.sandbox.clone())?;
                    let loaded = active::load(config, &engine)?;
                    Ok((loaded, engine))
                };
                let (loaded, executor) = std::thread::scope(|scope| {
                    let policies = std::thread::Builder::new()
                        .name("shellward-policy-load".into())
                        .spawn_scoped(scope, load);
                    let executor = Executor::new(executor_config);
                    let loaded = match policies {
                        Ok(handle) => handle
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                        // No thread to be had: load here instead.
                        Err(_) => load(),
                    };
                    (loaded, executor)
                });
                let (loaded, engine) = loaded?;
                let active = active::Active::new(loaded, Some((self.config.clone(), engine)));
                (active, executor)
            }
        };
        let executor = executor?;
        let audit = match &self.config.audit {
            Some(a) => Some(audit::AuditLog::open(a).map_err(BuildError::Audit)?),
            None => None,
        };
        let base_workdir = self
            .config
            .executor
            .default_workdir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .map(|w| std::path::absolute(&w).unwrap_or(w))
            .unwrap_or_else(|| PathBuf::from("/"));
        if base_workdir == Path::new("/")
            && self
                .config
                .confinement
                .writable
                .iter()
                .flatten()
                .any(|w| w == "$WORKDIR")
        {
            tracing::warn!(
                target: "shellward::notice",
                "the working directory is /: commands may not write there ($WORKDIR would make every path writable); \
                 set [executor] workdir to the project's directory"
            );
        }
        Ok(Shellward {
            inner: Arc::new(Inner {
                drain: self.config.executor.drain,
                active,
                metrics: metrics::Metrics::new(),
                audit,
                surface: self.surface.unwrap_or_else(|| "library".into()),
                executor,
                limits: self.config.tools.clone(),
                default_workdir: self.config.executor.default_workdir.clone(),
                session_dirs: std::sync::Mutex::new(std::collections::HashMap::new()),
                execute_tokens: idempotency::TokenIndex::new(MAX_CLIENT_TOKENS),
                retention: self.config.executor.retention,
                confinement: self.config.confinement.clone(),
                base_workdir,
                cwd_dir: tempfile::Builder::new()
                    .prefix(".shellward-cwd-")
                    .tempdir()
                    .ok(),
                posix_shell: self
                    .config
                    .executor
                    .shell
                    .first()
                    .and_then(|p| Path::new(p).file_name())
                    .is_some_and(|n| {
                        matches!(
                            n.to_str(),
                            Some("sh" | "bash" | "dash" | "zsh" | "ksh" | "ash")
                        )
                    }),
            }),
        })
    }
}

struct Inner {
    drain: Duration,
    active: active::Active,
    metrics: metrics::Metrics,
    audit: Option<audit::AuditLog>,
    surface: String,
    executor: Executor,
    limits: ToolLimits,
    default_workdir: Option<PathBuf>,
    /// Each session's working directory, as its last foreground `execute` left it (a terminal keeps its `cd`).
    session_dirs: std::sync::Mutex<std::collections::HashMap<Option<String>, PathBuf>>,
    /// The executor's shell understands `trap … EXIT` (how a command's last directory is learned).
    posix_shell: bool,
    /// `execute` results by client token (idempotent starts).
    execute_tokens: idempotency::TokenIndex<ExecuteResult>,
    /// How long the executor keeps an exited process (`[executor] retention`): how long a token's deny is kept.
    retention: Duration,
    /// What each command may touch (`[confinement]`).
    confinement: ConfinementConfig,
    /// The directory `$WORKDIR` names in `[confinement] writable`: the configured working directory, else where this
    /// process started — never a call's `workdir` or a session's `cd` (the model would widen its own sandbox).
    base_workdir: PathBuf,
    /// A private directory for the files through which commands report their last working directory (writable to
    /// every confined command); removed with this instance.
    cwd_dir: Option<tempfile::TempDir>,
}

impl Inner {
    /// Reloads the policy chain, counting the result.
    fn reload(&self) -> Result<usize, ConfigError> {
        let r = self.active.reload();
        self.metrics.reload(r.is_ok());
        self.metrics.failed_policies(&self.active.status().failed);
        r
    }

    /// [`Inner::reload`], logging the outcome as one line; returns whether the new chain is in force.
    fn reload_logged(&self, why: &str) -> bool {
        match self.reload() {
            Ok(n) => {
                tracing::info!(target: "shellward::notice", "{why}: reloaded the policy chain ({n} policies)");
                true
            }
            Err(e) => {
                tracing::error!(target: "shellward::notice", "{why}: keeping the previous policy chain: {e}");
                false
            }
        }
    }
}

/// A policy chain and an executor behind the five agent tools. Cheap to clone (shared).
#[derive(Clone)]
pub struct Shellward {
    inner: Arc<Inner>,
}

/// What the policy chain decided for an `execute` call, and the plan the executor would run.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The command as the caller asked for it (before any policy rewrote it).
    pub asked: String,
    /// The caller's session.
    pub session: Option<String>,
    /// The chain's decision (outcome, who denied, faults).
    pub decision: Decision,
    /// The plan for the executor, when the outcome is run.
    pub plan: Option<ExecPlan>,
    /// The request the chain decided (what a replay re-decides).
    pub request: Request,
}

/// A decision as the caller acts on it: run this plan (with the policies' notes), or refuse (with the reason and the
/// policy that refused). Every surface reads decisions through this one type.
// One per decision, consumed at once: boxing the plan would cost an allocation per command for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Run the plan.
    Run {
        /// What the executor runs.
        plan: ExecPlan,
        /// The policies' notes for the agent, in chain order.
        notes: Vec<String>,
    },
    /// Do not run it.
    Deny {
        /// Why, for the agent (never empty).
        reason: String,
        /// The policy that denied (`a policy` when unknown).
        by: String,
    },
}

impl Decided {
    /// The decision as a [`Verdict`].
    pub fn verdict(&self) -> Verdict {
        match (&self.plan, &self.decision.outcome) {
            (Some(plan), Outcome::Run(p)) => Verdict::Run {
                plan: plan.clone(),
                notes: p.notes.clone(),
            },
            (_, outcome) => Verdict::Deny {
                reason: reason_text(match outcome {
                    Outcome::Deny(r) => r.clone(),
                    Outcome::Run(_) => String::new(),
                }),
                by: self
                    .decision
                    .denied_by
                    .clone()
                    .unwrap_or_else(|| "a policy".into()),
            },
        }
    }
}

/// The stdin an `execute` call asks for: `/dev/null`, a pipe (`interactive`), or a terminal (`tty`, sized by
/// `rows`/`cols`).
fn stdin_mode(args: &ExecuteArgs) -> Result<StdinMode, ToolError> {
    let tty = args.tty.unwrap_or(false);
    if !tty && (args.rows.is_some() || args.cols.is_some()) {
        return Err(ToolError::invalid(
            "rows and cols size a terminal: set tty: true as well (or leave them out)",
        ));
    }
    if tty {
        let rows = args.rows.unwrap_or(24);
        let cols = args.cols.unwrap_or(80);
        if !(1..=1000).contains(&rows) || !(1..=1000).contains(&cols) {
            return Err(ToolError::invalid(format!(
                "a terminal of {rows} rows × {cols} columns is not possible; give 1 to 1000 of each (e.g. 24 × 80)"
            )));
        }
        return Ok(StdinMode::Terminal { rows, cols });
    }
    Ok(if args.interactive.unwrap_or(false) {
        StdinMode::Pipe
    } else {
        StdinMode::Null
    })
}

fn check_text(what: &str, text: &str) -> Result<(), ToolError> {
    if text.contains('\0') {
        return Err(ToolError::invalid(format!(
            "{what} contains a NUL byte; remove it (a shell command cannot carry NUL bytes)"
        )));
    }
    Ok(())
}

fn parse_duration(what: &str, text: &str, allow_zero: bool) -> Result<Duration, ToolError> {
    match parse_millis(text) {
        Ok(0) if !allow_zero => Err(ToolError::invalid(format!(
            "{what} must be greater than zero; use {ACCEPTED_FORMS}"
        ))),
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(e) => Err(ToolError::invalid(format!("{what}: {e}"))),
    }
}

/// How long a `process_input` write may wait for the process to read.
const INPUT_LIMIT: Duration = Duration::from_secs(5);

/// How many `execute` results client tokens keep at most (the oldest finished go first).
const MAX_CLIENT_TOKENS: usize = 4096;

/// A client token must be non-empty, visible text, at most [`idempotency::MAX_TOKEN_BYTES`].
fn check_client_token(token: &str) -> Result<(), ToolError> {
    check_text("client_token", token)?;
    if token.trim().is_empty() {
        return Err(ToolError::invalid(
            "client_token is empty; omit it, or give a unique string (e.g. a UUID) for this call",
        ));
    }
    if token.len() > idempotency::MAX_TOKEN_BYTES {
        return Err(ToolError::invalid(format!(
            "client_token is {} bytes; the limit is {} (a UUID is 36)",
            token.len(),
            idempotency::MAX_TOKEN_BYTES
        )));
    }
    Ok(())
}

/// What makes two `execute` calls the same call: every argument but the token, and the host's extra environment.
fn execute_fingerprint(args: &ExecuteArgs, env: &[(String, String)]) -> idempotency::Fingerprint {
    let args = ExecuteArgs {
        client_token: None,
        ..args.clone()
    };
    // Serializing plain strings, numbers and a BTreeMap cannot fail; an empty encoding would only make calls alike.
    let encoded = serde_json::to_vec(&args).unwrap_or_default();
    let env: Vec<u8> = env
        .iter()
        .flat_map(|(k, v)| [k.as_bytes(), b"\0", v.as_bytes(), b"\0"])
        .flatten()
        .copied()
        .collect();
    idempotency::Fingerprint::of([encoded.as_slice(), env.as_slice()])
}

fn exit_fields(exit: &ExitState) -> (Option<i32>, Option<String>) {
    (exit.code(), exit.signal().map(str::to_string))
}

impl Shellward {
    /// A builder starting from the defaults (embedded default policy, default limits).
    pub fn builder() -> ShellwardBuilder {
        ShellwardBuilder::default()
    }

    /// The executor (for hosts that need its lower-level API).
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// The policy chain in force now (a reload replaces it; a holder of this `Arc` keeps the one it has).
    pub fn chain(&self) -> Arc<PolicyChain> {
        self.inner.active.chain()
    }

    /// What the active chain is made of: name, source, digests, WIT version, load time per policy.
    pub fn policies(&self) -> Arc<Vec<PolicySummary>> {
        self.inner.active.summaries()
    }

    /// The chain's load status: the policies in force, and what the last load attempt (a reload after a change in
    /// the drop-in directory or the configuration file, or SIGHUP) could not load while they kept serving.
    pub fn policy_status(&self) -> PolicyStatus {
        self.inner.active.status()
    }

    /// Loads the chain again — the configuration file's `[[policy]]` entries (when built from a file) and the
    /// drop-in directory — and swaps it in atomically once every policy loaded and configured. On failure the chain
    /// in force stays and the error names the file and why. Calls in flight finish on the chain they started with.
    /// Returns the number of policies in the new chain.
    pub fn reload_policies(&self) -> Result<usize, ConfigError> {
        self.inner.reload()
    }

    /// The metrics in the Prometheus text format (what `GET /metrics` serves); the series are listed in the README.
    pub fn metrics_text(&self) -> String {
        self.inner
            .metrics
            .encode(self.inner.executor.running_count())
    }

    /// [`Self::reload_policies`], logging the outcome as one line (`info` on success, `error` naming the file on
    /// failure); returns whether the new chain is in force. For signal handlers (`SIGHUP`).
    pub fn reload_policies_logged(&self, why: &str) -> bool {
        self.inner.reload_logged(why)
    }

    /// Watches the drop-in directory and the configuration file, reloading (debounced) on every change until the
    /// returned watcher is dropped. `None` when there is nothing to watch.
    pub fn watch_policies(&self) -> Result<Option<PolicyWatcher>, ConfigError> {
        watch::watch(Arc::downgrade(&self.inner), self.inner.active.watched())
            .map_err(|e| ConfigError::plain(format!("cannot watch the policy files: {e}")))
    }

    /// The tool limits in force.
    pub fn limits(&self) -> &ToolLimits {
        &self.inner.limits
    }

    /// Runs a tool by wire name with JSON arguments and returns its JSON result (what MCP and HTTP surfaces call).
    /// Arguments that do not match the tool's schema are an [`ToolErrorKind::InvalidArguments`] error naming the
    /// expected shape.
    pub async fn call(
        &self,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let Some(name) = ToolName::parse(tool) else {
            return Err(ToolError {
                kind: ToolErrorKind::UnknownTool,
                message: format!(
                    "unknown tool {tool:?}; the tools are execute, process_output, process_input, \
                     process_list and process_signal"
                ),
            });
        };
        // A missing arguments object is an empty one (process_list takes none).
        let arguments = if arguments.is_null() {
            Value::Object(Default::default())
        } else {
            arguments
        };
        fn parse<T: serde::de::DeserializeOwned>(name: ToolName, v: Value) -> Result<T, ToolError> {
            serde_json::from_value(v).map_err(|e| {
                ToolError::invalid(format!(
                    "invalid arguments for {name}: {e}; expected {}",
                    name.usage()
                ))
            })
        }
        fn to_json<T: serde::Serialize>(v: T) -> Result<Value, ToolError> {
            serde_json::to_value(v).map_err(|e| ToolError {
                kind: ToolErrorKind::Internal,
                message: format!("could not encode the result: {e}"),
            })
        }
        match name {
            ToolName::Execute => to_json(self.execute(session, parse(name, arguments)?).await?),
            ToolName::ProcessOutput => to_json(
                self.process_output(session, parse(name, arguments)?)
                    .await?,
            ),
            ToolName::ProcessList => {
                to_json(self.process_list(session, parse(name, arguments)?).await?)
            }
            ToolName::ProcessSignal => to_json(
                self.process_signal(session, parse(name, arguments)?)
                    .await?,
            ),
            ToolName::ProcessInput => {
                to_json(self.process_input(session, parse(name, arguments)?).await?)
            }
        }
    }

    /// Validates `execute` arguments and runs the policy chain on them, without running anything. `env` is extra
    /// environment for the command (the policy sees it and may change it).
    pub fn decide(
        &self,
        session: Option<&str>,
        args: &ExecuteArgs,
        env: &[(String, String)],
    ) -> Result<Decided, ToolError> {
        let limits = &self.inner.limits;
        if args.command.trim().is_empty() {
            return Err(ToolError::invalid(
                "command is empty; give the shell command to run, e.g. {\"command\": \"ls -la\"}",
            ));
        }
        check_text("command", &args.command)?;
        if args.command.len() > limits.max_command_bytes {
            return Err(ToolError::invalid(format!(
                "command is {} bytes; the limit is {} bytes. Write a long script to a file and run the file \
                 instead",
                args.command.len(),
                limits.max_command_bytes
            )));
        }
        let stdin = stdin_mode(args)?;
        let timeout_ms = match &args.timeout {
            None => None,
            Some(t) => Some(parse_duration("timeout", t, false)?.as_millis() as u64),
        };
        if let Some(w) = &args.workdir {
            check_text("workdir", w)?;
            if w.is_empty() {
                return Err(ToolError::invalid(
                    "workdir is empty; omit it to use the default directory or give a directory",
                ));
            }
        }
        // The call's own variables first, then the host's (e.g. the process API's `env`), which win.
        let env: Vec<(String, String)> = args
            .env
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(env.iter().cloned())
            .collect();
        let env = &env;
        for (k, v) in env {
            check_text("an environment variable", k)?;
            check_text("an environment variable", v)?;
            if k.is_empty() || k.contains('=') {
                return Err(ToolError::invalid(format!(
                    "environment variable name {k:?} is invalid (empty or contains '=')"
                )));
            }
        }
        let mut context = vec![("tool".to_string(), "execute".to_string())];
        if let Some(s) = session {
            context.push(("session-id".to_string(), s.to_string()));
        }
        let request = Request {
            command: args.command.clone(),
            workdir: args.workdir.clone(),
            timeout_ms,
            background: args.run_in_background,
            on_timeout: args.on_timeout.map(|c| match c {
                tools::OnTimeoutChoice::Kill => OnTimeout::Kill,
                tools::OnTimeoutChoice::Background => OnTimeout::Background,
            }),
            env: env.to_vec(),
            context,
            interactive: stdin.interactive(),
            tty: matches!(stdin, StdinMode::Terminal { .. }),
        };
        let chain_started = std::time::Instant::now();
        let mut decision = self.inner.active.chain().evaluate(&request);
        let chain_seconds = chain_started.elapsed().as_secs_f64();
        for ((policy, _), kind) in decision.faults.iter().zip(&decision.fault_kinds) {
            self.inner.metrics.fault(policy, kind);
        }
        for (policy, fault) in &decision.faults {
            tracing::warn!(policy = %policy, error = %fault, "policy fault");
        }
        // A working directory a policy chose must exist: if it does not, that is the policy's fault, reported as a
        // deny naming it (the caller's own workdir is checked by the executor and reported as the caller's).
        if let (Outcome::Run(p), Some(by)) = (&decision.outcome, &decision.workdir_by)
            && let Some(w) = &p.workdir
        {
            let path = match &self.inner.default_workdir {
                Some(base) if Path::new(w).is_relative() => base.join(w),
                _ => PathBuf::from(w),
            };
            if !path.is_dir() {
                let problem = if path.exists() {
                    "is not a directory"
                } else {
                    "does not exist"
                };
                tracing::warn!(policy = %by, workdir = %path.display(), "policy chose a working directory that {problem}");
                decision.outcome = Outcome::Deny(format!(
                    "The command was not run: policy {by} set the working directory to {}, which {problem}. This is \
                     the policy's fault, not the command's; tell the operator.",
                    path.display()
                ));
                decision.denied_by = Some(by.clone());
            }
        }
        let plan = match &decision.outcome {
            Outcome::Deny(_) => None,
            Outcome::Run(p) => {
                let workdir = p.workdir.as_ref().map(|w| {
                    let path = PathBuf::from(w);
                    match &self.inner.default_workdir {
                        Some(base) if path.is_relative() => base.join(path),
                        _ => path,
                    }
                });
                let mut confinement = self.inner.confinement.for_command(&self.inner.base_workdir);
                if let (Some(paths), Some(dir)) =
                    (confinement.writable.as_mut(), &self.inner.cwd_dir)
                {
                    // Where the command reports its last directory (see `cwd_trap`).
                    paths.push(dir.path().to_path_buf());
                }
                Some(ExecPlan {
                    command: p.command.clone(),
                    workdir,
                    confinement,
                    env: p.env.clone(),
                    background: p.background,
                    timeout: if p.background {
                        None
                    } else {
                        p.timeout_ms.map(Duration::from_millis)
                    },
                    on_timeout: match p.on_timeout {
                        OnTimeout::Kill => TimeoutAction::Kill,
                        OnTimeout::Background => TimeoutAction::Background,
                    },
                    session: session.map(str::to_string),
                    startup_wait: p.background.then_some(limits.startup_wait),
                    deadline: None,
                    labels: Vec::new(),
                    // The policies' decision: they may turn a terminal or an open stdin off (never on: a policy
                    // cannot make a command wait for input nobody asked to give).
                    stdin: match stdin {
                        StdinMode::Terminal { .. } if p.tty => stdin,
                        StdinMode::Terminal { .. } | StdinMode::Pipe if p.interactive || p.tty => {
                            StdinMode::Pipe
                        }
                        _ => StdinMode::Null,
                    },
                })
                .map(|mut plan| {
                    if plan.stdin.interactive() {
                        // An interactive program waits for its input: it runs in the background, and the call
                        // returns once it has gone quiet (its prompt), not at a foreground timeout.
                        plan.background = true;
                        plan.timeout = None;
                        plan.startup_wait = None;
                    }
                    plan
                })
            }
        };
        self.inner
            .metrics
            .decision(decision.denied_by.as_deref(), chain_seconds);
        Ok(Decided {
            asked: args.command.clone(),
            session: session.map(str::to_string),
            decision,
            plan,
            request,
        })
    }

    /// `execute`: runs the policy chain, then the executor.
    pub async fn execute(
        &self,
        session: Option<&str>,
        args: ExecuteArgs,
    ) -> Result<ExecuteResult, ToolError> {
        self.execute_with_env(session, args, Vec::new()).await
    }

    /// `execute` with extra environment variables for the command.
    ///
    /// With a `client_token`, the call is idempotent within its session: a retry of the same call (same arguments,
    /// same extra environment) returns the first call's result with `attached: true` and starts nothing, waiting for
    /// it when the first call is still running; the token with different arguments is a
    /// [`ToolErrorKind::Conflict`]. The first call runs on its own task, so a caller that goes away (a dropped
    /// connection) does not take the result its retry will ask for with it. A first call that fails before it has a
    /// result (an error, not a deny) releases the token. Results are kept as long as the executor keeps their process
    /// (`[executor] retention`).
    pub async fn execute_with_env(
        &self,
        session: Option<&str>,
        args: ExecuteArgs,
        env: Vec<(String, String)>,
    ) -> Result<ExecuteResult, ToolError> {
        let Some(token) = args.client_token.clone() else {
            return self.execute_now(session, args, env).await;
        };
        check_client_token(&token)?;
        let scope = idempotency::TokenScope {
            session: session.map(str::to_string),
            within: None,
        };
        let fingerprint = execute_fingerprint(&args, &env);
        // A released token (the first call failed before it had a result) is claimed again; a few rounds at most.
        for _ in 0..3 {
            let claim = self.inner.execute_tokens.claim(
                scope.clone(),
                &token,
                fingerprint,
                |scope, first, age| self.token_expired(scope, first, age),
            );
            match claim {
                idempotency::Claim::Mismatch => {
                    return Err(ToolError {
                        kind: ToolErrorKind::Conflict,
                        message: format!(
                            "client_token {token:?} was already used in this session for a different call; nothing \
                             was started. Use a new client_token for a new command (send the same token only to \
                             retry the very same call)"
                        ),
                    });
                }
                idempotency::Claim::Retry(retry) => {
                    if let Ok(first) = retry.outcome(None).await {
                        return Ok(self.attached(first, session, &token));
                    }
                }
                idempotency::Claim::First(first) => {
                    let this = self.clone();
                    let owned = session.map(str::to_string);
                    let task = tokio::spawn(async move {
                        let r = this.execute_now(owned.as_deref(), args, env).await;
                        if let Ok(result) = &r {
                            first.publish(result.clone());
                        }
                        r
                    });
                    return task.await.map_err(|e| ToolError {
                        kind: ToolErrorKind::Internal,
                        message: format!("the execute call failed on its task: {e}"),
                    })?;
                }
            }
        }
        Err(ToolError {
            kind: ToolErrorKind::Busy,
            message: format!(
                "the call first sent with client_token {token:?} keeps failing before it starts; send it again"
            ),
        })
    }

    /// Whether the result a client token names is gone: its process left the executor's registry, or (a deny,
    /// which has no process) it is older than the executor's retention.
    fn token_expired(
        &self,
        scope: &idempotency::TokenScope,
        first: &ExecuteResult,
        age: Duration,
    ) -> bool {
        match &first.process_id {
            Some(id) => self
                .inner
                .executor
                .info(id, scope.session.as_deref())
                .is_err(),
            None => age >= self.inner.retention,
        }
    }

    /// A retry's answer: the first call's result, its process's state brought up to date, marked `attached`.
    fn attached(&self, first: ExecuteResult, session: Option<&str>, token: &str) -> ExecuteResult {
        let mut r = first;
        r.attached = true;
        let what = match &r.process_id {
            Some(id) => format!("started as {id}"),
            None if r.denied => "denied".to_string(),
            None => "run".to_string(),
        };
        let mut notes = vec![format!(
            "A retry: client_token {token:?} was already {what} by an earlier call; nothing new was started. This is \
             that call's result."
        )];
        if let Some(id) = r.process_id.clone()
            && r.running
            && let Ok(info) = self.inner.executor.info(&id, session)
            && !info.running
        {
            let (exit_code, signal) = exit_fields(&info.exit);
            r.running = false;
            r.exit_code = exit_code;
            r.signal = signal;
            notes.push(format!(
                "{id} has ended since ({}); read its output with process_output.",
                match (&r.exit_code, &r.signal) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "unknown status".into(),
                }
            ));
        }
        notes.append(&mut r.notes);
        r.notes = notes;
        r
    }

    /// `execute` without a client token: the session's working directory, the policies, the executor.
    async fn execute_now(
        &self,
        session: Option<&str>,
        args: ExecuteArgs,
        env: Vec<(String, String)>,
    ) -> Result<ExecuteResult, ToolError> {
        // The session's working directory, as its last command left it, unless the call names one (which wins for
        // this call and leaves the session's alone). The policies see it in the request.
        let mut args = args;
        let follow = args.workdir.is_none();
        if follow && let Some(dir) = self.session_dir(session) {
            args.workdir = Some(dir.display().to_string());
        }
        let decided = self.decide(session, &args, &env)?;
        self.run_decided_with(decided, follow).await
    }

    /// The working directory `session`'s commands continue in, when one was left and still exists.
    fn session_dir(&self, session: Option<&str>) -> Option<PathBuf> {
        let mut dirs = self
            .inner
            .session_dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = session.map(str::to_string);
        match dirs.get(&key) {
            Some(dir) if dir.is_dir() => Some(dir.clone()),
            Some(_) => {
                dirs.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Runs what [`Shellward::decide`] decided: a deny becomes a `success: false` result with the reason, a plan
    /// goes to the executor.
    pub async fn run_decided(&self, decided: Decided) -> Result<ExecuteResult, ToolError> {
        self.run_decided_with(decided, false).await
    }

    /// [`Shellward::run_decided`]; with `follow`, a foreground command's last working directory becomes its
    /// session's (see [`cwd_trap`]).
    async fn run_decided_with(
        &self,
        decided: Decided,
        follow: bool,
    ) -> Result<ExecuteResult, ToolError> {
        let record = self
            .inner
            .audit
            .as_ref()
            .map(|_| self.decision_record(&decided));
        let session = decided.session.clone();
        let (plan, notes) = match decided.verdict() {
            Verdict::Run { plan, notes } => (plan, notes),
            Verdict::Deny { reason, by } => {
                if let (Some(audit), Some(record)) = (&self.inner.audit, record) {
                    audit.record(record);
                }
                return Ok(ExecuteResult {
                    success: false,
                    denied: true,
                    deny_reason: Some(reason),
                    // The reason is in deny_reason; the note only points there (a long reason is not sent twice).
                    notes: vec![format!("Not run: denied by {by}; deny_reason says why.")],
                    ..Default::default()
                });
            }
        };
        let mut plan = plan;
        let timeout = plan.timeout;
        // What the executor does with leftovers at the deadline: stop them when the timeout kills.
        let kills_leftovers = matches!(plan.on_timeout, shellward_exec::TimeoutAction::Kill);
        let command = plan.command.clone();
        let cwd_file =
            (follow && self.inner.posix_shell && !plan.background && !plan.stdin.interactive())
                .then(|| cwd_file(self.inner.cwd_dir.as_ref().map(|d| d.path())))
                .flatten();
        if let Some(file) = &cwd_file {
            plan.command = cwd_trap(file, &plan.command);
        }
        let startup = plan.background.then_some(plan.startup_wait).flatten();
        let background = plan.background;
        let asked = plan.confinement.clone();
        let interactive = plan.stdin.interactive();
        let r = self
            .start_recorded(plan, background, record, session.clone())
            .await?;
        let id = r.id.clone();
        if let Some(file) = cwd_file {
            if r.running {
                // Kept running after its timeout: its directory is not the session's; remove the file once it ends.
                let executor = self.inner.executor.clone();
                let (id, session) = (id.clone(), session.clone());
                tokio::spawn(async move {
                    let _ = executor.wait_exit(&id, session.as_deref()).await;
                    let _ = std::fs::remove_file(&file);
                });
            } else if let Some(dir) = read_cwd_file(&file) {
                self.inner
                    .session_dirs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(session.clone(), dir);
            }
        }
        let held = r.confinement.clone();
        let mut result = shape_execute(r, command, notes, timeout, kills_leftovers);
        result.confinement = confinement::line(
            &asked,
            &held,
            &self.inner.confinement.deny_read,
            self.inner.executor.pid_namespaces(),
        );
        if !result.success
            && !result.running
            && let Some(note) = confinement::refusal_note(&asked, &held, &result.output)
        {
            result.notes.push(note);
        }
        if interactive {
            self.first_prompt(&mut result, &id, session.as_deref())
                .await?;
        }
        if let Some(window) = startup
            && !result.running
        {
            let how = match (&result.exit_code, &result.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "an unknown status".into(),
            };
            result.notes.push(format!(
                "It exited during start-up (within {}) with {how}, so it is not running in the background; its \
                 output is above.",
                format_millis(window.as_millis() as u64)
            ));
        }
        Ok(result)
    }

    /// An interactive start: waits until the program's output goes quiet (its prompt) or it exits, and puts that
    /// output in the result with how to answer it.
    async fn first_prompt(
        &self,
        result: &mut ExecuteResult,
        id: &str,
        session: Option<&str>,
    ) -> Result<(), ToolError> {
        let limits = &self.inner.limits;
        let read = self
            .inner
            .executor
            .read_output_until_quiet(
                id,
                session,
                None,
                limits.default_wait,
                Some(limits.default_idle),
                limits.max_read_bytes,
            )
            .await?;
        if let Some(view) = read.view {
            result.output = view.text;
            result.output_omitted_bytes = view.omitted_bytes;
            result.output_total_bytes = view.total_bytes;
        }
        result.cursor = read.next_cursor;
        result.running = read.running;
        let (exit_code, signal) = exit_fields(&read.exit);
        result.exit_code = exit_code;
        result.signal = signal;
        result
            .notes
            .retain(|n| !n.starts_with("Running in the background as"));
        if read.running {
            result.success = true;
            result.notes.push(format!(
                "Interactive: {id} waits for input. Answer with process_input (process_id {id}, text ending in \
                 \"\\n\"); close_stdin ends its input; process_signal stops it."
            ));
        } else {
            result.success = exit_code == Some(0);
            result.background_process_id = None;
            result.notes.push(format!(
                "It ended before any input was written ({}); its output is above.",
                match (&exit_code, &result.signal) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "unknown status".into(),
                }
            ));
        }
        Ok(())
    }

    /// `process_input`: writes text or bytes to an interactive process's stdin (closing it when asked), then returns
    /// what it printed after that, as `process_output` does with the output's cursor from before the write.
    pub async fn process_input(
        &self,
        session: Option<&str>,
        args: ProcessInputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        use base64::Engine;
        check_text("process_id", &args.process_id)?;
        let id = args.process_id.trim().to_string();
        let data: Vec<u8> = match (&args.text, &args.bytes_base64) {
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid(
                    "give either text or bytes_base64, not both",
                ));
            }
            (Some(t), None) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .map_err(|e| {
                    ToolError::invalid(format!(
                        "bytes_base64 is not valid base64 ({e}); encode the bytes with the standard alphabet"
                    ))
                })?,
            (None, None) if args.close_stdin == Some(true) => Vec::new(),
            (None, None) => {
                return Err(ToolError::invalid(
                    "nothing to write: give text (e.g. \"yes\\n\"), bytes_base64, or close_stdin: true",
                ));
            }
        };
        const MAX_INPUT: usize = 1 << 20;
        if data.len() > MAX_INPUT {
            return Err(ToolError::invalid(format!(
                "the input is {} bytes; at most {MAX_INPUT} bytes go in one call (write a file and redirect it \
                 instead)",
                data.len()
            )));
        }
        // The answer is what comes after the input.
        let before = self
            .inner
            .executor
            .read_output(&id, session, None, Duration::ZERO, 0)
            .await?
            .next_cursor;
        self.inner
            .executor
            .write_input(
                &id,
                session,
                &data,
                args.close_stdin.unwrap_or(false),
                INPUT_LIMIT,
            )
            .await?;
        let mut result = self
            .process_output(
                session,
                ProcessOutputArgs {
                    process_id: id,
                    cursor: Some(before),
                    wait: args.wait,
                    idle: args.idle.or_else(|| {
                        Some(format_millis(
                            self.inner.limits.default_idle.as_millis() as u64
                        ))
                    }),
                },
            )
            .await?;
        if args.close_stdin == Some(true) {
            result.notes.insert(0, "stdin is closed now.".into());
        }
        Ok(result)
    }

    /// Starts a decided run tracked in the background and returns at once, for a host that streams the output and
    /// enforces the timeout itself (as `shellward run` does): no start-up wait, no foreground timeout, the decision and
    /// the end recorded (audit log, metrics) as for `execute`. A deny is an error naming the policy and the reason.
    pub async fn start_tracked(&self, decided: Decided) -> Result<ExecResult, ToolError> {
        let mut record = self
            .inner
            .audit
            .as_ref()
            .map(|_| self.decision_record(&decided));
        let session = decided.session.clone();
        let mut plan = match decided.verdict() {
            Verdict::Run { plan, .. } => plan,
            Verdict::Deny { reason, by } => {
                if let (Some(audit), Some(record)) = (&self.inner.audit, record.take()) {
                    audit.record(record);
                }
                return Err(ToolError::invalid(format!("denied by {by}: {reason}")));
            }
        };
        let background = plan.background;
        plan.background = true;
        plan.timeout = None;
        plan.startup_wait = None;
        Ok(self
            .start_recorded(plan, background, record, session)
            .await?)
    }

    /// Runs a plan on the executor and records it: the decision's audit record (with the process id, or the start
    /// error), the execute metrics (`background` is the mode the policies decided), and how the process ends.
    async fn start_recorded(
        &self,
        plan: ExecPlan,
        background: bool,
        record: Option<Value>,
        session: Option<String>,
    ) -> Result<ExecResult, ExecError> {
        let r = self.inner.executor.execute(plan).await;
        if let (Some(audit), Some(mut record)) = (&self.inner.audit, record) {
            match &r {
                Ok(r) => record["process_id"] = serde_json::json!(r.id),
                Err(e) => record["error"] = serde_json::json!(e.to_string()),
            }
            audit.record(record);
        }
        let r = r?;
        self.inner
            .metrics
            .execute(background, r.spawn_micros, r.timed_out);
        self.audit_end(&r, session);
        Ok(r)
    }

    /// How long output is drained after a command's leader exits (`[executor] drain`).
    pub fn drain(&self) -> Duration {
        self.inner.drain
    }

    /// The audit record of a decision (the process id is added once it started).
    fn decision_record(&self, decided: &Decided) -> Value {
        let policies: Vec<Value> = self
            .policies()
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "digest": p.digest}))
            .collect();
        let faults: Vec<Value> = decided
            .decision
            .faults
            .iter()
            .map(|(policy, error)| serde_json::json!({"policy": policy, "error": error}))
            .collect();
        let mut record = serde_json::json!({
            "type": "decision",
            "v": audit::RECORD_VERSION,
            "surface": self.inner.surface,
            "session": decided.session,
            "tool": "execute",
            "command": decided.asked,
            "request": audit::request_json(&decided.request),
            "policies": policies,
            "faults": faults,
        });
        match (&decided.decision.outcome, &decided.plan) {
            (Outcome::Run(p), Some(plan)) => {
                record["outcome"] = "run".into();
                record["plan"] = serde_json::json!({
                    "command": plan.command,
                    "workdir": plan.workdir,
                    "mode": if plan.background { "background" } else { "foreground" },
                    "timeout_ms": plan.timeout.map(|t| t.as_millis() as u64),
                    "on_timeout": match plan.on_timeout {
                        TimeoutAction::Kill => "kill",
                        _ => "background",
                    },
                });
                record["notes"] = serde_json::json!(p.notes);
            }
            (Outcome::Deny(reason), _) => {
                record["outcome"] = "deny".into();
                record["reason"] = serde_json::json!(reason);
                record["denied_by"] = serde_json::json!(decided.decision.denied_by);
            }
            (Outcome::Run(_), None) => record["outcome"] = "deny".into(),
        }
        record
    }

    /// Records how a started process ended: now when it already has, otherwise when it does (on a task of its own).
    fn audit_end(&self, r: &ExecResult, session: Option<String>) {
        let Some(audit) = &self.inner.audit else {
            return;
        };
        let include_output = audit.include_output;
        if !r.running {
            let (code, signal) = exit_fields(&r.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": self.inner.surface,
                "session": session,
                "process_id": r.id,
                "exit_code": code,
                "signal": signal,
                "timed_out": r.timed_out,
                "duration_ms": r.wall_ms,
                "output_bytes": r.output.total_bytes,
                "leftover_processes": r.leftover_processes,
            });
            if include_output {
                record["output"] = serde_json::json!(r.output.text);
            }
            audit.record(record);
            return;
        }
        let this = self.clone();
        let id = r.id.clone();
        let (started, before) = (std::time::Instant::now(), r.wall_ms);
        tokio::spawn(async move {
            let Ok(info) = this.inner.executor.wait_exit(&id, session.as_deref()).await else {
                return;
            };
            let (code, signal) = exit_fields(&info.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": this.inner.surface,
                "session": session,
                "process_id": id,
                "exit_code": code,
                "signal": signal,
                "timed_out": false,
                "duration_ms": before + started.elapsed().as_millis() as u64,
                "output_bytes": info.output_bytes,
            });
            if include_output
                && let Ok(read) = this
                    .inner
                    .executor
                    .read_output(&id, session.as_deref(), None, Duration::ZERO, 64 * 1024)
                    .await
                && let Some(view) = read.view
            {
                record["output"] = serde_json::json!(view.text);
            }
            if let Some(audit) = &this.inner.audit {
                audit.record(record);
            }
        });
    }

    /// `process_output`: output since a cursor (or the head/tail view), waiting up to `wait`.
    pub async fn process_output(
        &self,
        session: Option<&str>,
        args: ProcessOutputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        check_text("process_id", &args.process_id)?;
        let limits = &self.inner.limits;
        let mut notes = Vec::new();
        let mut wait = match &args.wait {
            None => limits.default_wait,
            Some(w) => parse_duration("wait", w, true)?,
        };
        if wait > limits.max_wait {
            notes.push(format!(
                "wait was shortened to {} (the longest allowed); call again to wait longer.",
                format_millis(limits.max_wait.as_millis() as u64)
            ));
            wait = limits.max_wait;
        }
        // An explicit wait means "wait for it"; without one, a quiet process is answered after `default_idle`.
        let idle = match (&args.idle, &args.wait) {
            (Some(i), _) => Some(parse_duration("idle", i, true)?),
            (None, None) => Some(limits.default_idle),
            (None, Some(_)) => None,
        }
        .filter(|i| !i.is_zero());
        let id = args.process_id.trim();
        let read = self
            .inner
            .executor
            .read_output_until_quiet(id, session, args.cursor, wait, idle, limits.max_read_bytes)
            .await?;
        let info = self.inner.executor.info(id, session)?;
        let (output, omitted, total) = match (&read.chunk, &read.view) {
            (Some(c), _) => (c.text.clone(), c.skipped_bytes, c.total_bytes),
            (None, Some(v)) => (v.text.clone(), v.omitted_bytes, v.total_bytes),
            (None, None) => (String::new(), 0, 0),
        };
        if read.next_cursor < total {
            notes.push(format!(
                "{} more bytes are available now; call process_output again with cursor {}.",
                total - read.next_cursor,
                read.next_cursor
            ));
        } else if read.waiting_for_input {
            notes.push(format!(
                "{id} is waiting for input: answer with process_input (process_id {id}), then read on from cursor {}.",
                read.next_cursor
            ));
        } else if read.running {
            notes.push(format!(
                "{id} is still running; call process_output with cursor {} for newer output, or process_signal \
                 to stop it.",
                read.next_cursor
            ));
        }
        if args.cursor.is_none() && omitted > 0 {
            notes.push(format!(
                "{omitted} bytes were left out of the middle; read them with cursor 0 (or from log_path)."
            ));
        }
        let (exit_code, signal) = exit_fields(&read.exit);
        Ok(ProcessOutputResult {
            success: true,
            process_id: id.to_string(),
            running: read.running,
            exit_code,
            signal,
            output,
            output_omitted_bytes: omitted,
            output_total_bytes: total,
            cursor: read.next_cursor,
            waiting_for_input: read.waiting_for_input,
            log_path: info.log_path.map(|p| p.display().to_string()),
            notes,
        })
    }

    /// `process_list`: the session's processes, running first, then newest first.
    pub async fn process_list(
        &self,
        session: Option<&str>,
        _args: ProcessListArgs,
    ) -> Result<ProcessListResult, ToolError> {
        let list = self
            .inner
            .executor
            .list(session, self.inner.limits.list_limit);
        Ok(ProcessListResult {
            success: true,
            processes: list
                .processes
                .into_iter()
                .map(|p| {
                    let (exit_code, signal) = exit_fields(&p.exit);
                    ProcessEntry {
                        process_id: p.id,
                        command: p.command,
                        workdir: p.workdir.display().to_string(),
                        running: p.running,
                        exit_code,
                        signal,
                        started_at_unix: p.started_at_unix,
                        exited_at_unix: p.exited_at_unix,
                        output_bytes: p.output_bytes,
                        log_path: p.log_path.map(|l| l.display().to_string()),
                    }
                })
                .collect(),
            omitted: list.omitted,
        })
    }

    /// `process_signal`: terminate or kill a whole process tree.
    pub async fn process_signal(
        &self,
        session: Option<&str>,
        args: ProcessSignalArgs,
    ) -> Result<ProcessSignalResult, ToolError> {
        check_text("process_id", &args.process_id)?;
        let id = args.process_id.trim();
        let kind = match args.signal {
            SignalName::Terminate => SignalKind::Terminate,
            SignalName::Kill => SignalKind::Kill,
        };
        let outcome = self.inner.executor.signal(id, kind, session).await?;
        self.inner.metrics.signal(match kind {
            SignalKind::Kill => "kill",
            _ => "terminate",
        });
        let info = self.inner.executor.info(id, session)?;
        let (exit_code, signal) = exit_fields(&info.exit);
        let mut notes = vec![match args.signal {
            SignalName::Terminate => format!(
                "{id} and every process it started were terminated (SIGTERM, then SIGKILL for what remained)."
            ),
            SignalName::Kill => {
                format!("{id} and every process it started were killed (SIGKILL).")
            }
        }];
        if outcome.escaped_killed > 0 {
            notes.push(format!(
                "{} process(es) of {id} had left its containment (moved to another cgroup); they were found by their \
                 marker and killed.",
                outcome.escaped_killed
            ));
        }
        if outcome.survivors > 0 {
            notes[0] = format!(
                "{id} was signalled, but {} process(es) of its tree are still alive: they may have escaped \
                 containment. Check with process_list, and tell the operator.",
                outcome.survivors
            );
        }
        Ok(ProcessSignalResult {
            success: !info.running && outcome.survivors == 0,
            process_id: id.to_string(),
            running: info.running || outcome.survivors > 0,
            exit_code,
            signal,
            notes,
        })
    }

    /// Terminates every process tree this instance started and waits for them; removes its logs and cgroups.
    pub async fn shutdown(&self) {
        self.inner.executor.shutdown().await;
        // Ends of processes stopped by the shutdown are recorded by their waiters; give them a moment, then flush.
        if let Some(audit) = &self.inner.audit {
            tokio::time::sleep(Duration::from_millis(50)).await;
            audit.close();
        }
    }
}

/// A fresh file name for a command to leave its last working directory in (`None` when the temporary directory's
/// path could not be quoted safely in the trap).
fn cwd_file(dir: Option<&Path>) -> Option<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let file = dir?.join(format!(
        ".shellward-cwd-{}-{n}-{nanos:x}",
        std::process::id()
    ));
    let text = file.to_str()?;
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b))
        .then_some(file)
}

/// `command` prefixed (on its first line, so line numbers in the shell's messages stay the same) with an `EXIT` trap
/// that writes the shell's last working directory to `file`: it runs however the command ends (`exit 3` too) and
/// changes neither its output nor its exit status. A command that sets its own `EXIT` trap replaces it (the session
/// keeps its directory then).
fn cwd_trap(file: &Path, command: &str) -> String {
    format!(
        "trap 'pwd -P >| {} 2>/dev/null' EXIT; {command}",
        file.display()
    )
}

/// Reads and removes what [`cwd_trap`] wrote: an existing absolute directory, else `None`. The file is opened without
/// following a link or blocking on a FIFO, and only a small regular file is read.
fn read_cwd_file(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file);
    let _ = std::fs::remove_file(file);
    let mut f = opened.ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.by_ref().take(4096).read_to_string(&mut text).ok()?;
    let dir = PathBuf::from(text.trim_end_matches('\n'));
    (dir.is_absolute() && dir.is_dir()).then_some(dir)
}

/// Bytes left out of a result past which the note suggests searching the log rather than paging through it (four
/// calls of the default page size).
const SEARCH_THE_LOG_PAST: u64 = 256 * 1024;

/// The note for output left out of a result's middle: where the rest is, and — when there is much of it — to search
/// the log with a command (`grep`, `tail`) instead of paging through it 64 KiB at a time.
fn omitted_note(omitted: u64, id: &str, log: Option<&std::path::Path>) -> String {
    let pager = format!("process_output (process_id {id}, cursor 0)");
    match log {
        Some(log) if omitted > SEARCH_THE_LOG_PAST => {
            let log = shell_quote(&log.display().to_string());
            format!(
                "{omitted} bytes of output were left out of the middle. The whole output is in {log}: search it with \
                 a command such as `grep -n -i error {log}` or `tail -n 200 {log}` rather than paging through it with \
                 {pager}."
            )
        }
        Some(log) => format!(
            "{omitted} bytes of output were left out of the middle; read them with {pager} or from {}.",
            log.display()
        ),
        None => format!(
            "{omitted} bytes of output were left out of the middle; read them with {pager}."
        ),
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially, else single-quoted.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn reason_text(reason: String) -> String {
    if reason.trim().is_empty() {
        "the policy refused the command (it gave no reason)".into()
    } else {
        reason
    }
}

/// Turns an executor result into the tool result, with notes saying what to do next.
fn shape_execute(
    r: ExecResult,
    command: String,
    mut notes: Vec<String>,
    timeout: Option<Duration>,
    kills_leftovers: bool,
) -> ExecuteResult {
    let (exit_code, signal) = exit_fields(&r.exit);
    let id = r.id.clone();
    let timeout_text = timeout
        .map(|t| format_millis(t.as_millis() as u64))
        .unwrap_or_default();
    if !r.listening.is_empty() {
        notes.push(format!(
            "Ready: {id} is listening on {}.",
            r.listening
                .iter()
                .map(|l| l.split_once(' ').map_or(l.as_str(), |(_, a)| a))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let background_id = if r.running {
        if r.timed_out {
            notes.push(format!(
                "Still running as {id} after the {timeout_text} timeout. Call process_output with process_id \
                 {id} (and cursor {}) to read more, or process_signal to stop it.",
                r.cursor
            ));
        } else if notes
            .iter()
            .any(|n| n.contains("process_output") && n.contains("process_signal"))
        {
            // A policy's note already says how to follow up (the trailing-`&` rewrite does): one note per fact.
            notes.push(format!("Running in the background as {id}."));
        } else {
            notes.push(format!(
                "Running in the background as {id}. Call process_output with process_id {id} to read its \
                 output, process_signal to stop it."
            ));
        }
        Some(id.clone())
    } else {
        if r.timed_out {
            notes.push(format!(
                "Timed out after {timeout_text}; the command and every process it started were terminated. Run it \
                 with a longer timeout, or with run_in_background and poll process_output."
            ));
        }
        if r.leftover_processes > 0 {
            let fate = match timeout.filter(|_| kills_leftovers) {
                Some(_) => format!(
                    "they will be stopped when the {timeout_text} timeout (counted from the start) is reached; stop \
                     them sooner with process_signal, or start such work with run_in_background"
                ),
                None => "stop them with process_signal".to_string(),
            };
            notes.push(format!(
                "The command exited but {} process(es) it started are still running, tracked as {id}; {fate}.",
                r.leftover_processes
            ));
        }
        None
    };
    if r.output_incomplete {
        notes.push(
            "Output may be incomplete: a process kept the output open after the command exited."
                .into(),
        );
    }
    if r.process_limit_hit {
        notes.push(
            "The command reached its limit of processes (a fork bomb, or too much parallelism): starting more \
             failed, so its result is not to be trusted. Run fewer processes at once (e.g. make -j4)."
                .into(),
        );
    }
    if r.output.omitted_bytes > 0 {
        notes.push(omitted_note(
            r.output.omitted_bytes,
            &id,
            r.log_path.as_deref(),
        ));
    }
    let success = if r.running {
        !r.process_limit_hit
    } else {
        !r.timed_out && !r.process_limit_hit && r.exit == ExitState::Code(0)
    };
    ExecuteResult {
        success,
        denied: false,
        deny_reason: None,
        command,
        exit_code,
        signal,
        timed_out: r.timed_out,
        running: r.running,
        wall_duration_ms: r.wall_ms,
        output: r.output.text,
        output_omitted_bytes: r.output.omitted_bytes,
        stderr: r.stderr.map(|v| v.text),
        output_total_bytes: r.output.total_bytes,
        output_incomplete: r.output_incomplete,
        process_limit_hit: r.process_limit_hit,
        log_path: r.log_path.map(|p| p.display().to_string()),
        cursor: r.cursor,
        process_id: Some(id),
        background_process_id: background_id,
        listening: r.listening,
        notes,
        attached: false,
        confinement: None,
    }
}
