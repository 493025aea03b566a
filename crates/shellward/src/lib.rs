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
mod builder;
pub mod config;
mod confinement;
mod decided;
mod error;
pub mod idempotency;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(not(feature = "metrics"))]
#[path = "metrics_off.rs"]
mod metrics;
pub mod oci;
mod process;
mod records;
mod shape;
pub mod tools;
mod watch;

pub use active::{PolicyFailure, PolicyStatus, PolicySummary};
pub use audit::{AuditConfig, RECORD_VERSION, request_from_record, request_json};
pub use builder::ShellwardBuilder;
pub use confinement::{ConfinementConfig, DEFAULT_DENY_READ, DEFAULT_WRITABLE};
pub use decided::{Decided, Verdict};
pub use error::{BuildError, ToolError, ToolErrorKind};
use shape::{cwd_file, cwd_trap, read_cwd_file, reason_text, shape_execute};
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
    /// The shell's program name (`sh`, `bash`), for the policies' requests.
    shell_name: String,
    /// `execute` results by client token (idempotent starts).
    execute_tokens: idempotency::TokenIndex<ExecuteResult>,
    /// How long the executor keeps an exited process (`[executor] retention`): how long a token's deny is kept.
    retention: Duration,
    /// What each command may touch (`[confinement]`).
    confinement: ConfinementConfig,
    /// Every plan's confinement: `[confinement]` with `$WORKDIR` the configured working directory (else where this
    /// process started — never a call's `workdir` or a session's `cd`: the model would widen its own sandbox), and
    /// the directory of the `cd` trap's files writable. The same for every command, so computed once.
    plan_confinement: shellward_exec::Confinement,
    /// `plan_confinement` as policies see it (without the `cd` trap's directory), and the ceiling they may widen it
    /// to; also computed once.
    policy_confinement: (shellward_policy::Confinement, shellward_policy::Confinement),
    /// The paths no command can read (`[confinement] deny_read`), as policies are told.
    hidden_for_policies: Vec<String>,
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
    (
        exit.code(),
        exit.signal()
            .map(str::to_string)
            // A signal this platform has no name for (a real-time one) is still reported, by number.
            .or_else(|| exit.signal_number().map(|n| format!("signal {n}"))),
    )
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
        let mut request = Request::new(args.command.clone());
        request.workdir = args.workdir.clone();
        request.timeout_ms = timeout_ms;
        request.background = args.run_in_background;
        request.on_timeout = args.on_timeout.map(|c| match c {
            tools::OnTimeoutChoice::Kill => OnTimeout::Kill,
            tools::OnTimeoutChoice::Background => OnTimeout::Background,
        });
        request.env = env.to_vec();
        request.context = context;
        request.interactive = stdin.interactive();
        request.tty = matches!(stdin, StdinMode::Terminal { .. });
        (request.confinement, request.ceiling) = self.inner.policy_confinement.clone();
        request.hidden = self.inner.hidden_for_policies.clone();
        request.shell.clone_from(&self.inner.shell_name);
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
                decision.outcome = Outcome::deny(format!(
                    "The command was not run: policy {by} set the working directory to {}, which {problem}. This is \
                     the policy's fault, not the command's; tell the operator.",
                    path.display()
                ));
                decision.denied_by = Some(by.clone());
            }
        }
        // The confinement a policy decided, as the executor enforces it; one the host cannot enforce (a network
        // allow-list) is the policy's fault, reported as a deny naming it (never run with more than was asked).
        let mut confinement = self.inner.plan_confinement.clone();
        if let Outcome::Run(p) = &decision.outcome
            && p.confinement != request.confinement
        {
            let hidden = self.inner.cwd_dir.as_ref().map(|d| d.path());
            match confinement::to_exec(&p.confinement, &self.inner.plan_confinement, hidden) {
                Ok(c) => confinement = c,
                Err(why) => {
                    let by = decision
                        .confinement_by
                        .clone()
                        .unwrap_or_else(|| "a policy".into());
                    tracing::warn!(policy = %by, "policy asked for a confinement the host cannot enforce: {why}");
                    decision.outcome = Outcome::deny(format!(
                        "The command was not run: policy {by} {why}. This is the policy's or the host's limit, not \
                         the command's; tell the operator."
                    ));
                    decision.denied_by = Some(by);
                }
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
                    startup_wait: p.background.then(|| {
                        p.startup_wait_ms
                            .map(Duration::from_millis)
                            .unwrap_or(limits.startup_wait)
                    }),
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
