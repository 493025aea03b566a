//! The deciding half: an `execute` call's arguments checked, the policy chain's request built, the chain run, and
//! its outcome turned into what the executor would run ([`Decided`]). A [`Decider`] owns no executor and starts
//! nothing: `shellward policy check` decides with one alone, and a [`crate::Shellward`] composes one with its runner.

use crate::active::{self, Active};
use crate::config::{Config, ToolLimits};
use crate::metrics::Metrics;
use crate::tools::{self, ExecuteArgs};
use crate::{BuildError, Decided, ToolError, confinement};
use shellward_exec::{ExecPlan, Session, StdinMode};
use shellward_policy::duration::{ACCEPTED_FORMS, parse_millis};
use shellward_policy::{Decision, OnTimeout, Outcome, PolicyChain, PolicyEngine, Request};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Decides `execute` calls: arguments → the policies' request → the chain → a plan, an ask or a denial. Built from a
/// configuration ([`Decider::from_config`]) or around a chain a host loaded itself ([`Decider::with_chain`]); no
/// executor, no runtime, nothing started.
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use shellward::{Config, Decider, Verdict, tools::ExecuteArgs};
/// let decider = Decider::from_config(&Config::default())?; // the built-in policies
/// let decided = decider.decide(None, &ExecuteArgs::new("npm run dev &"), &[])?;
/// assert!(matches!(decided.verdict(), Verdict::Run { plan, .. } if plan.background));
/// # Ok(()) }
/// ```
pub struct Decider {
    /// The policy chain in force (reloaded in place by a [`crate::Shellward`] built from a file).
    active: Active,
    metrics: Arc<Metrics>,
    limits: ToolLimits,
    /// `[executor] workdir`: a relative working directory is taken from there.
    default_workdir: Option<PathBuf>,
    /// Every plan's confinement: `[confinement]` with `$WORKDIR` the configured working directory (else where this
    /// process started — never a call's `workdir` or a session's `cd`: the model would widen its own sandbox), and
    /// the directory of the `cd` trap's files writable. The same for every command, so computed once.
    plan_confinement: shellward_exec::Confinement,
    /// `plan_confinement` as policies see it (without the `cd` trap's directory), and the ceiling they may widen it
    /// to; also computed once.
    policy_confinement: (shellward_policy::Confinement, shellward_policy::Confinement),
    /// The paths no command can read (`[confinement] deny_read`), as policies are told.
    hidden_for_policies: Vec<String>,
    /// The shell's program name (`sh`, `bash`), for the policies' requests.
    shell_name: String,
    /// Where a runner's commands report their last working directory: writable to commands, never shown to policies.
    cwd_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("policies", &self.active.chain().policies().len())
            .field("shell", &self.shell_name)
            .finish_non_exhaustive()
    }
}

impl Decider {
    /// Loads the policy chain `config` names (every policy compiled, checked and configured) and decides with it
    /// under `config`'s confinement, limits and shell. Errors name the policy file that failed and why.
    pub fn from_config(config: &Config) -> Result<Decider, BuildError> {
        let engine = PolicyEngine::new(config.sandbox.clone())?;
        let loaded = active::load(config, &engine)?;
        Ok(Decider::assemble(
            config,
            Active::new(loaded, None),
            Arc::new(Metrics::new()),
            None,
        ))
    }

    /// Decides with `chain` (a chain the host loaded itself; never reloaded) under `config`'s confinement, limits
    /// and shell; `config`'s own policy entries are not loaded.
    pub fn with_chain(config: &Config, chain: PolicyChain) -> Decider {
        Decider::assemble(config, Active::given(chain), Arc::new(Metrics::new()), None)
    }

    /// A decider over `active`, counting into `metrics`; `cwd_dir` is where a runner's commands report their last
    /// working directory (made writable in every plan, never shown to policies).
    pub(crate) fn assemble(
        config: &Config,
        active: Active,
        metrics: Arc<Metrics>,
        cwd_dir: Option<&Path>,
    ) -> Decider {
        let base_workdir = base_workdir(config);
        let mut plan_confinement = config.confinement.for_command(&base_workdir);
        if let (Some(paths), Some(dir)) = (plan_confinement.writable.as_mut(), cwd_dir) {
            // Where a command reports its last directory (see `ExecPlan::report_cwd`).
            paths.push(dir.to_path_buf());
        }
        let policy_confinement =
            config
                .confinement
                .policy_view(&plan_confinement, &base_workdir, cwd_dir);
        Decider {
            active,
            metrics,
            limits: config.tools.clone(),
            default_workdir: config.executor.default_workdir.clone(),
            plan_confinement,
            policy_confinement,
            hidden_for_policies: config
                .confinement
                .deny_read
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            shell_name: shell_name(config),
            cwd_dir: cwd_dir.map(Path::to_path_buf),
        }
    }

    /// The policy chain in force now (a reload replaces it; a holder of this `Arc` keeps the one it has).
    pub fn chain(&self) -> Arc<PolicyChain> {
        self.active.chain()
    }

    /// The loaded chain and its reload state.
    pub(crate) fn active(&self) -> &Active {
        &self.active
    }

    /// The shell's program name (`sh`, `bash`, …) as policies are told it.
    pub(crate) fn shell_name(&self) -> &str {
        &self.shell_name
    }

    /// Validates `execute` arguments and runs the policy chain on them, without running anything. `env` is extra
    /// environment for the command (the policy sees it and may change it).
    pub fn decide(
        &self,
        session: Option<&Session>,
        args: &ExecuteArgs,
        env: &[(String, String)],
    ) -> Result<Decided, ToolError> {
        self.decide_with_context(session, args, env, &[])
    }

    /// [`Decider::decide`] with more request context for the policies: `context`'s pairs follow the facade's own
    /// (`tool`, `session-id`), as `shellward policy check --context KEY=VALUE` gives them.
    pub fn decide_with_context(
        &self,
        session: Option<&Session>,
        args: &ExecuteArgs,
        env: &[(String, String)],
        extra_context: &[(String, String)],
    ) -> Result<Decided, ToolError> {
        let session = session.map(Session::as_str);
        let (request, stdin) = self.request(session, args, env, extra_context)?;
        let chain_started = std::time::Instant::now();
        let mut decision = self.active.chain().evaluate(&request);
        let chain_seconds = chain_started.elapsed().as_secs_f64();
        for fault in &decision.faults {
            self.metrics.fault(&fault.policy, fault.kind_name());
            tracing::warn!(policy = %fault.policy, error = %fault.message, "policy fault");
        }
        self.refuse_a_missing_policy_workdir(&mut decision);
        let confinement = self.enforceable_confinement(&mut decision, &request);
        // An ask's plan is made ready too: it runs as it is, once approved.
        let plan = decision
            .outcome
            .planned()
            .map(|p| self.exec_plan(p, confinement, session, stdin));
        self.metrics.decision(
            decision.outcome.kind(),
            decision
                .denied_by
                .as_deref()
                .or(decision.asked_by.as_deref()),
            chain_seconds,
        );
        Ok(Decided::new(
            args.command.clone(),
            session.map(str::to_string),
            decision,
            plan,
            request,
        ))
    }

    /// The call's arguments checked and turned into the policies' request, with the call's standard input.
    fn request(
        &self,
        session: Option<&str>,
        args: &ExecuteArgs,
        env: &[(String, String)],
        extra_context: &[(String, String)],
    ) -> Result<(Request, StdinMode), ToolError> {
        let limits = &self.limits;
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
        let env = call_env(args, env)?;
        let mut context = vec![("tool".to_string(), "execute".to_string())];
        if let Some(s) = session {
            context.push(("session-id".to_string(), s.to_string()));
        }
        context.extend(extra_context.iter().cloned());
        let mut request = Request::new(args.command.clone());
        request.workdir = args.workdir.clone();
        request.timeout_ms = timeout_ms;
        request.background = args.run_in_background;
        request.on_timeout = args.on_timeout.map(|c| match c {
            tools::OnTimeout::Kill => OnTimeout::Kill,
            tools::OnTimeout::Background => OnTimeout::Background,
        });
        request.env = env;
        request.context = context;
        request.interactive = stdin.interactive();
        request.tty = matches!(stdin, StdinMode::Terminal { .. });
        (request.confinement, request.ceiling) = self.policy_confinement.clone();
        request.hidden = self.hidden_for_policies.clone();
        request.shell.clone_from(&self.shell_name);
        Ok((request, stdin))
    }

    /// A working directory a policy chose must exist: if it does not, that is the policy's fault, reported as a deny
    /// naming it (the caller's own workdir is checked by the executor and reported as the caller's).
    fn refuse_a_missing_policy_workdir(&self, decision: &mut Decision) {
        let (Some(p), Some(by)) = (decision.outcome.planned(), &decision.workdir_by) else {
            return;
        };
        let Some(w) = &p.workdir else {
            return;
        };
        let path = match &self.default_workdir {
            Some(base) if Path::new(w).is_relative() => base.join(w),
            _ => PathBuf::from(w),
        };
        if path.is_dir() {
            return;
        }
        let problem = if path.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        tracing::warn!(policy = %by, workdir = %path.display(), "policy chose a working directory that {problem}");
        let by = by.clone();
        decision.outcome = Outcome::deny(format!(
            "The command was not run: policy {by} set the working directory to {}, which {problem}. This is \
             the policy's fault, not the command's; tell the operator.",
            path.display()
        ));
        decision.denied_by = Some(by);
        decision.asked_by = None;
    }

    /// The confinement a policy decided, as the executor enforces it; one the host cannot enforce (a network
    /// allow-list) is the policy's fault, reported as a deny naming it (never run with more than was asked).
    fn enforceable_confinement(
        &self,
        decision: &mut Decision,
        request: &Request,
    ) -> shellward_exec::Confinement {
        let mut confinement = self.plan_confinement.clone();
        if let Some(p) = decision.outcome.planned()
            && p.confinement != request.confinement
        {
            let hidden = self.cwd_dir.as_deref();
            match confinement::to_exec(&p.confinement, &self.plan_confinement, hidden) {
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
                    decision.asked_by = None;
                }
            }
        }
        confinement
    }

    /// The executor's plan for the chain's `p`.
    fn exec_plan(
        &self,
        p: &shellward_policy::Plan,
        confinement: shellward_exec::Confinement,
        session: Option<&str>,
        stdin: StdinMode,
    ) -> ExecPlan {
        let workdir = p.workdir.as_ref().map(|w| {
            let path = PathBuf::from(w);
            match &self.default_workdir {
                Some(base) if path.is_relative() => base.join(path),
                _ => path,
            }
        });
        let mut plan = ExecPlan::new(p.command.clone());
        plan.workdir = workdir;
        plan.confinement = confinement;
        plan.env = p.env.clone();
        plan.background = p.background;
        plan.timeout = if p.background {
            None
        } else {
            p.timeout_ms.map(Duration::from_millis)
        };
        plan.on_timeout = match p.on_timeout {
            OnTimeout::Kill => shellward_exec::OnTimeout::Kill,
            OnTimeout::Background => shellward_exec::OnTimeout::Background,
        };
        plan.session = session.map(Session::from);
        plan.startup_wait = p.background.then(|| {
            p.startup_wait_ms
                .map(Duration::from_millis)
                .unwrap_or(self.limits.startup_wait)
        });
        // The policies' decision: they may turn a terminal or an open stdin off (never on: a policy cannot make a
        // command wait for input nobody asked to give).
        plan.stdin = match stdin {
            StdinMode::Terminal { .. } if p.tty => stdin,
            StdinMode::Terminal { .. } | StdinMode::Pipe if p.interactive || p.tty => {
                StdinMode::Pipe
            }
            _ => StdinMode::Null,
        };
        if plan.stdin.interactive() {
            // An interactive program waits for its input: it runs in the background, and the call returns once it has
            // gone quiet (its prompt), not at a foreground timeout.
            plan.background = true;
            plan.timeout = None;
            plan.startup_wait = None;
        }
        plan
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

/// The command's extra environment: the call's own variables first, then the host's (e.g. the process API's `env`),
/// which win; every name and value checked.
fn call_env(
    args: &ExecuteArgs,
    env: &[(String, String)],
) -> Result<Vec<(String, String)>, ToolError> {
    let env: Vec<(String, String)> = args
        .env
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(env.iter().cloned())
        .collect();
    for (k, v) in &env {
        check_text("an environment variable", k)?;
        check_text("an environment variable", v)?;
        if k.is_empty() || k.contains('=') {
            return Err(ToolError::invalid(format!(
                "environment variable name {k:?} is invalid (empty or contains '=')"
            )));
        }
    }
    Ok(env)
}

pub(crate) fn check_text(what: &str, text: &str) -> Result<(), ToolError> {
    if text.contains('\0') {
        return Err(ToolError::invalid(format!(
            "{what} contains a NUL byte; remove it (a shell command cannot carry NUL bytes)"
        )));
    }
    Ok(())
}

pub(crate) fn parse_duration(
    what: &str,
    text: &str,
    allow_zero: bool,
) -> Result<Duration, ToolError> {
    match parse_millis(text) {
        Ok(0) if !allow_zero => Err(ToolError::invalid(format!(
            "{what} must be greater than zero; use {ACCEPTED_FORMS}"
        ))),
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(e) => Err(ToolError::invalid(format!("{what}: {e}"))),
    }
}

/// The working directory `$WORKDIR` means: `[executor] workdir`, else where this process started, absolute; `/`
/// with a warning when that makes every path writable.
fn base_workdir(config: &Config) -> PathBuf {
    let base = config
        .executor
        .default_workdir
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .map(|w| std::path::absolute(&w).unwrap_or(w))
        .unwrap_or_else(|| PathBuf::from("/"));
    if base == Path::new("/")
        && config
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
    base
}

/// The shell that runs commands, as policies are told it (`sh`, `bash`, …).
fn shell_name(config: &Config) -> String {
    config
        .executor
        .shell
        .first()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("sh")
        .to_string()
}
