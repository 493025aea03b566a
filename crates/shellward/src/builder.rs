//! Building a [`Shellward`]: the configuration, optional overrides (a chain, limits, the surface's name), the
//! executor's settings with the host's own files protected, and the concurrent load of policies and executor.

use crate::config::{Config, ToolLimits};
use crate::runner::Runner;
use crate::{
    BuildError, Decider, Inner, PolicyChain, Shellward, active, audit, idempotency, metrics, oci,
    run::MAX_CLIENT_TOKENS,
};
use shellward_exec::{Executor, ExecutorConfig};
use shellward_policy::PolicyEngine;
use std::sync::Arc;

/// Builds a [`Shellward`]: start from a [`Config`] (or the defaults) and override parts.
#[derive(Debug, Default)]
pub struct ShellwardBuilder {
    config: Config,
    chain: Option<PolicyChain>,
    surface: Option<String>,
    approvers: Vec<Arc<dyn crate::Approver>>,
}

impl std::fmt::Debug for dyn crate::Approver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Approver({})", self.name())
    }
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

    /// Adds an approver every call may use when a policy asks (a host's own UI), after the caller's surface's and
    /// before the operator's reviewer. Approvers are tried in order until one answers.
    pub fn approver(mut self, approver: Arc<dyn crate::Approver>) -> Self {
        self.approvers.push(approver);
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
            let _ = crate::sys::create_private_dir_all(&dir);
        }
        executor.read_only_paths.extend(self.config.host_files());
        executor.hidden_paths.extend(self.config.host_secrets());
        executor
            .proxy_hosts
            .extend(self.config.confinement.proxy_hosts.clone());
        executor.unenforceable = self.config.confinement.unenforceable;
        // A cancelled call's foreground command: stopped (the default), or kept in the background.
        executor.keep_abandoned =
            self.config.tools.on_cancel == crate::config::OnCancel::Background;
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
    pub fn build(mut self) -> Result<Shellward, BuildError> {
        let executor_config = self.executor_config_for_build();
        let (active, executor) = match self.chain.take() {
            Some(chain) => (active::Active::given(chain), Executor::new(executor_config)),
            None => {
                let (loaded, executor) = self.load_beside_executor(executor_config);
                (loaded?, executor)
            }
        };
        let executor = executor?;
        let audit = match &self.config.audit {
            Some(a) => Some(audit::AuditLog::open(a).map_err(BuildError::Audit)?),
            None => None,
        };
        let approvals = self.approvals()?;
        // In the log directories' parent (outside the log root commands cannot see), made and swept as a log directory
        // is: the next executor started there removes it if this instance is killed before its shutdown.
        let cwd_dir = shellward_exec::PrivateDir::create_in(executor.private_dir_parent()).ok();
        let metrics = Arc::new(metrics::Metrics::new());
        let decider = Decider::assemble(
            &self.config,
            active,
            metrics.clone(),
            cwd_dir.as_ref().map(|d| d.path()),
        );
        let runner = Runner::new(
            executor,
            &self.config,
            crate::runner::RunnerParts {
                audit,
                surface: self.surface.unwrap_or_else(|| "library".into()),
                metrics: metrics.clone(),
                shell_name: decider.shell_name(),
                cwd_dir,
            },
        );
        Ok(Shellward {
            inner: Arc::new(Inner {
                decider,
                runner: Arc::new(runner),
                approvals,
                metrics,
                limits: self.config.tools.clone(),
                execute_tokens: idempotency::TokenIndex::new(MAX_CLIENT_TOKENS),
            }),
        })
    }

    /// The approvers (the host's, then the operator's reviewer), the time to answer, the operator's allow-list.
    fn approvals(&mut self) -> Result<crate::approval::Approvals, BuildError> {
        let config = &self.config.approvals;
        let mut approvers = std::mem::take(&mut self.approvers);
        if let Some(r) = &config.reviewer {
            approvers.push(Arc::new(crate::Reviewer::new(r.command.clone(), r.timeout)));
        }
        let allowed = match &config.allow_file {
            Some(path) => crate::approval::read_allow_file(path).map_err(|e| {
                BuildError::Config(crate::ConfigError::plain(format!(
                    "[approvals] allow_file {}: {e}; create it (one approved command per line) or remove the key",
                    path.display()
                )))
            })?,
            None => Default::default(),
        };
        Ok(crate::approval::Approvals::new(
            approvers,
            config.expiry,
            config.client,
            config.preview,
            allowed,
            self.config
                .executor
                .default_workdir
                .clone()
                .or_else(|| std::env::current_dir().ok())
                .map(|w| std::path::absolute(&w).unwrap_or(w))
                .unwrap_or_else(|| "/".into()),
        ))
    }

    /// Loads the configuration's policies on a helper thread while this one starts the executor: a one-shot `run`
    /// starts milliseconds sooner on two cores.
    fn load_beside_executor(
        &self,
        executor_config: ExecutorConfig,
    ) -> (
        Result<active::Active, BuildError>,
        Result<Executor, shellward_exec::ExecError>,
    ) {
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
        let active = loaded
            .map(|(loaded, engine)| active::Active::new(loaded, Some((config.clone(), engine))));
        (active, executor)
    }
}
