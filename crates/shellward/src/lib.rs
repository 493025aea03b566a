//! shellward for hosts that embed it: a policy chain and a process executor behind the five agent tools.
//!
//! This crate owns the agent-facing surface and nothing below it: argument validation, the tool schemas and
//! descriptions ([`tools`]), the configuration file ([`config`]), mapping a request through the policy chain
//! (`shellward-policy`) to a plan the executor (`shellward-exec`) runs, and shaping results a model can act on.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use shellward::{ExecuteOptions, Shellward, tools::ExecuteArgs};
//! let sw = Shellward::builder().build()?; // embedded default policy, default limits
//! let session = sw.session("session-1"); // one caller's tools, processes and approvals
//! let result = session
//!     .execute(ExecuteArgs::new("npm run dev &"), ExecuteOptions::new())
//!     .await?;
//! assert!(result.running); // the trailing `&` was turned into a tracked background process
//! sw.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! A [`SessionHandle`] is the only way to act in a session (or outside any: [`Shellward::without_session`]): it
//! decides, runs and starts commands, calls the tools, finds processes and answers approvals. A process is visible
//! only to the session that started it. [`Shellward`] itself holds what is the instance's: its policies
//! ([`Shellward::policies`]), limits, metrics and shutdown. Errors are [`ToolError`]s whose text tells the caller what to do; a tool never panics on bad input.

mod active;
pub mod approval;
mod audit;
mod builder;
mod call;
pub mod config;
mod confinement;
mod decide;
mod decided;
mod error;
mod handle;
pub mod idempotency;
#[cfg(feature = "metrics")]
mod metrics;
// Without the feature: the same methods as no-ops.
#[cfg(not(feature = "metrics"))]
mod metrics_off;
#[cfg(not(feature = "metrics"))]
use metrics_off as metrics;
mod note;
pub mod oci;
pub mod preview;
mod probe;
mod process;
mod records;
mod run;
mod runner;
mod session;
mod shape;
pub mod shown;
mod sys;
pub mod tools;
mod undo;
mod watch;

pub use active::{PolicyFailure, PolicyStatus, PolicySummary};
pub use approval::{ApprovalAnswer, ApprovalId, ApprovalRequest, Approver, Reviewer};
pub use audit::{AuditConfig, RECORD_VERSION, request_from_record, request_json};
pub use builder::ShellwardBuilder;
pub use confinement::{ConfinementConfig, DEFAULT_DENY_READ, DEFAULT_WRITABLE};
pub use decide::Decider;
pub use decided::{Decided, Verdict};
pub use error::{BuildError, ToolError, ToolErrorKind};
pub use handle::Process;
pub use note::{Note, NoteKind, Refusal};
pub use probe::SandboxProbe;
pub use run::{ExecuteOptions, OnStart, StartOptions};
pub use session::SessionHandle;
pub use watch::PolicyWatcher;

/// Loads the policy chain a configuration describes (every policy compiled, checked and configured, nothing run) and
/// returns what it is made of, as `shellward policy list` shows it.
pub fn load_policy_summaries(config: &Config) -> Result<Vec<PolicySummary>, BuildError> {
    let engine = PolicyEngine::new(config.sandbox.clone())?;
    Ok(active::load(config, &engine)?.summaries.get().to_vec())
}

pub use config::{
    AuthEntry, Config, ConfigError, OnCancel, PolicyEntry, PolicySource, Problem, ToolLimits,
    valid_session,
};
/// The executor (`shellward-exec`) for those who want it: its settings (`exec::ExecutorConfig`, the type of
/// [`Config::executor`]), the environment policy, confinement and network types, and the policy-free
/// `exec::Executor` itself. The facade's own API names only the few re-exported below.
pub use shellward_exec as exec;
/// What a [`Process`] handle answers with: its details, its output, a signal's outcome.
pub use shellward_exec::{
    ContainmentKind, ExitState, OutputChunk, OutputRead, OutputView, ProcessId, ProcessInfo,
    ProcessList, ReadOptions, Session, SignalKind, SignalOutcome,
};
/// A decided plan (inside a [`Verdict`]), and the call a host's `main` makes first (PID-namespace init).
pub use shellward_exec::{ExecPlan, init_main_if_requested};

/// The Rust examples of the manual's chapters that have some, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/tools.md")]
struct ManualToolsExamples;
/// (See [`ManualToolsExamples`].)
#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/executor.md")]
struct ManualExecutorExamples;
pub use shellward_policy::{Decision, Fault, PolicyChain, PolicyEngine, SandboxConfig};

use std::sync::Arc;
use std::time::Duration;
use tools::ExecuteResult;

/// One instance's state, its deciding and running halves and what they share.
struct Inner {
    /// The deciding half: arguments → request → chain → plan.
    decider: Decider,
    /// The running half's state: the executor, sessions' directories and pending notes.
    runner: Arc<runner::Runner>,
    /// Commands the policies ask about: who answers, how long they may take, those waiting and remembered.
    approvals: approval::Approvals,
    /// Counters both halves add to (shared with the decider).
    metrics: Arc<metrics::Metrics>,
    limits: ToolLimits,
    /// `execute` results by client token (idempotent starts).
    execute_tokens: idempotency::TokenIndex<ExecuteResult>,
}

impl Inner {
    /// Reloads the policy chain, counting the result.
    fn reload(&self) -> Result<usize, ConfigError> {
        let r = self.decider.active().reload();
        self.metrics.reload(r.is_ok());
        self.metrics
            .failed_policies(&self.decider.active().status().failed);
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

/// The policy chain of an instance ([`Shellward::policies`]): what it is made of, its load status, and reloading it.
#[derive(Clone, Copy)]
pub struct Policies<'a> {
    inner: &'a Arc<Inner>,
}

impl std::fmt::Debug for Policies<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("loaded", &self.summaries().len())
            .finish()
    }
}

impl Policies<'_> {
    /// The chain in force now (a reload replaces it; a holder of this `Arc` keeps the one it has).
    pub fn chain(&self) -> Arc<PolicyChain> {
        self.inner.decider.chain()
    }

    /// What the chain is made of: name, source, digests, WIT version, load time per policy.
    pub fn summaries(&self) -> Arc<Vec<PolicySummary>> {
        self.inner.decider.active().summaries()
    }

    /// The chain's load status: the policies in force, and what the last load attempt (a reload after a change in
    /// the drop-in directory or the configuration file, or SIGHUP) could not load while they kept serving.
    pub fn status(&self) -> PolicyStatus {
        self.inner.decider.active().status()
    }

    /// Loads the chain again — the configuration file's `[[policy]]` entries (when built from a file) and the
    /// drop-in directory — and swaps it in atomically once every policy loaded and configured. On failure the chain
    /// in force stays and the error names the file and why. Calls in flight finish on the chain they started with.
    /// Returns the number of policies in the new chain.
    pub fn reload(&self) -> Result<usize, ConfigError> {
        self.inner.reload()
    }

    /// [`Policies::reload`], logging the outcome as one line (`info` on success, `error` naming the file on
    /// failure); returns whether the new chain is in force. For signal handlers (`SIGHUP`).
    pub fn reload_logged(&self, why: &str) -> bool {
        self.inner.reload_logged(why)
    }

    /// Watches the drop-in directory and the configuration file, reloading (debounced) on every change until the
    /// returned watcher is dropped. `None` when there is nothing to watch.
    pub fn watch(&self) -> Result<Option<PolicyWatcher>, ConfigError> {
        watch::watch(
            Arc::downgrade(self.inner),
            self.inner.decider.active().watched(),
        )
        .map_err(|e| ConfigError::plain(format!("cannot watch the policy files: {e}")))
    }
}

/// How long a shutdown waits for the end records of the processes it stopped.
const END_RECORDS_LIMIT: Duration = Duration::from_secs(2);

/// How long a `process_input` write may wait for the process to read.
const INPUT_LIMIT: Duration = Duration::from_secs(5);

impl Shellward {
    /// A builder starting from the defaults (embedded default policy, default limits).
    pub fn builder() -> ShellwardBuilder {
        ShellwardBuilder::default()
    }

    /// The operations of session `session` (its processes, approvals and working directory are its own).
    pub fn session(&self, session: impl Into<Session>) -> SessionHandle {
        SessionHandle {
            sw: self.clone(),
            session: Some(session.into()),
        }
    }

    /// The operations outside any session (a one-shot run, a host without sessions).
    pub fn without_session(&self) -> SessionHandle {
        SessionHandle {
            sw: self.clone(),
            session: None,
        }
    }

    /// Every process kept, of every session, running first, then newest first (at most `limit`): the operator's view
    /// (`shellward ps`, `GET /v1/processes`), never a session's — a session sees its own through its handle.
    pub fn every_process(&self, limit: usize) -> ProcessList {
        self.inner.runner.executor.list_every_session(limit)
    }

    /// How process trees are contained here (cgroup, PID namespace, process group).
    pub fn containment(&self) -> ContainmentKind {
        self.inner.runner.executor.containment()
    }

    /// The per-session process limit in force, when the host has a writable `pids` cgroup.
    pub fn process_limit(&self) -> Option<u64> {
        self.inner.runner.executor.process_limit()
    }

    /// The deciding half of this instance (what `policy check` uses alone): decide a call without running it.
    pub fn decider(&self) -> &Decider {
        &self.inner.decider
    }

    /// The policy chain of this instance: what it is made of, its load status, reloads and the watcher.
    pub fn policies(&self) -> Policies<'_> {
        Policies { inner: &self.inner }
    }

    /// The metrics in the Prometheus text format (what `GET /metrics` serves); the series are listed in the manual (docs/src/operations.md).
    pub fn metrics_text(&self) -> String {
        self.inner
            .metrics
            .encode(self.inner.runner.executor.running_count())
    }

    /// The tool limits in force.
    pub fn limits(&self) -> &ToolLimits {
        &self.inner.limits
    }

    /// How long output is drained after a command's leader exits (`[executor] drain`).
    pub fn drain(&self) -> Duration {
        self.inner.runner.drain
    }

    /// Terminates every process tree this instance started and waits for them; removes its logs, its cgroups and
    /// the directory its commands report their last working directory into (a command started afterwards runs
    /// without that report). Hosts that exit without dropping the instance (as the CLI does, to exit fast) leave
    /// nothing behind beside the log directory; an instance killed before this leaves both directories to the next
    /// executor started there.
    pub async fn shutdown(&self) {
        self.inner.runner.executor.shutdown().await;
        // Nothing runs any more that could write there.
        self.inner.runner.remove_cwd_dir();
        // Ends of processes stopped by the shutdown are recorded by their waiters: wait for them (bounded), then flush.
        if let Some(audit) = &self.inner.runner.audit {
            let left = audit.ends_written(END_RECORDS_LIMIT).await;
            if left > 0 {
                tracing::warn!(
                    left,
                    "shutdown: end records still unwritten; the audit log closes without them"
                );
            }
            audit.close();
        }
    }
}
