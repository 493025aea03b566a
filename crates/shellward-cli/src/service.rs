//! Options shared by the commands that run things (`run`, `mcp`, `serve`): the config file and policy overrides.

use anyhow::{Context, Result};
use clap::Args;
use shellward::{Config, PolicyEntry, PolicySource, Shellward};
use std::path::PathBuf;

/// Where the configuration and policies come from.
#[derive(Args, Debug, Clone)]
pub struct ServiceArgs {
    /// Configuration file (TOML). Default: $SHELLWARD_CONFIG when set, otherwise the built-in defaults: the embedded
    /// default policy, then the guard policy. Check one with `shellward config check FILE`.
    #[arg(long, value_name = "FILE", env = "SHELLWARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// A policy component (.wasm), or `default` / `guard` for a built-in, to run instead of the configured chain;
    /// repeat for a chain, run in the order given, each with default settings.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<PathBuf>,
}

impl ServiceArgs {
    /// The configuration these options describe.
    pub fn config(&self) -> Result<Config> {
        let mut config = match &self.config {
            Some(path) => Config::load(path).map_err(|e| {
                let e = anyhow::Error::from(e);
                if from_environment(path) {
                    e.context(format!(
                        "the configuration file {} comes from $SHELLWARD_CONFIG (no --config was given): fix \
                         that file, point the variable at another, or unset it (`unset SHELLWARD_CONFIG`)",
                        path.display()
                    ))
                } else {
                    e
                }
            })?,
            None => Config::default(),
        };
        if !self.policies.is_empty() {
            for p in &self.policies {
                check_policy_arg(p)?;
            }
            config.policies = self
                .policies
                .iter()
                .map(|p| {
                    PolicyEntry::from_source(if p.as_os_str() == "default" && !p.exists() {
                        PolicySource::Default
                    } else if p.as_os_str() == "guard" && !p.exists() {
                        PolicySource::Guard
                    } else {
                        PolicySource::File(p.clone())
                    })
                })
                .collect();
            // The chain given on the command line stays on reload (only the drop-in directory is read again).
            config.source_file = None;
        }
        Ok(config)
    }

    /// Builds the service for a surface (`run`, `mcp`; named in audit records): loads policies, opens the audit log,
    /// starts the executor. Needs a Tokio runtime.
    pub fn build(&self, surface: &str) -> Result<Shellward> {
        self.build_in(surface, None, Vec::new())
    }

    /// [`ServiceArgs::build`] with the commands' default working directory `workdir` (`mcp --workdir`) in place of
    /// the configuration's (`[executor] workdir`) and of this process's own.
    pub fn build_in(
        &self,
        surface: &str,
        workdir: Option<&std::path::Path>,
        hidden: Vec<std::path::PathBuf>,
    ) -> Result<Shellward> {
        let mut config = self.config()?;
        // Host files of this instance (its control socket): never visible to the commands it runs.
        config.executor.hidden_paths.extend(hidden);
        if let Some(dir) = workdir {
            let dir = dir
                .canonicalize()
                .ok()
                .filter(|d| d.is_dir())
                .with_context(|| {
                    format!(
                        "--workdir {}: no such directory; give the directory the agent's commands should run in",
                        dir.display()
                    )
                })?;
            config.executor.default_workdir = Some(dir);
        }
        if surface == "run" {
            // One command, one or two evaluations: the pooling allocator's set-up and teardown (milliseconds) would
            // cost more than it saves.
            config.sandbox.pooling = false;
            // Nothing could undo a one-shot run's changes (the record goes with the process): no baseline copied.
            config.executor.changes.enabled = false;
        }
        if surface == "mcp"
            && config
                .audit
                .as_ref()
                .is_some_and(|a| a.path.as_os_str() == "-")
        {
            anyhow::bail!(
                "[audit] path = \"-\" writes to standard output, which carries the MCP protocol; give a file instead"
            );
        }
        Shellward::builder()
            .config(config)
            .surface(surface)
            .build()
            .context("cannot start shellward")
    }
}

/// For the long-running commands (`serve`, `mcp`): reloads the policy chain when the drop-in directory or the
/// configuration file changes (debounced) and on SIGHUP, each time logging one line. Keep the returned watcher alive.
/// Needs a Tokio runtime.
pub fn watch_and_reload(sw: &Shellward) -> Option<shellward::PolicyWatcher> {
    let watcher = match sw.policies().watch() {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("{e}; policies reload on SIGHUP only");
            None
        }
    };
    crate::sys::reload_on_hangup(sw);
    watcher
}

/// A multi-threaded Tokio runtime for the serving commands.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The handle of the session a surface parsed from the wire (a header, a connection), or the one outside any.
pub(crate) fn session_handle(sw: &Shellward, session: Option<&str>) -> shellward::SessionHandle {
    match session {
        Some(s) => sw.session(s),
        None => sw.without_session(),
    }
}

/// A `--policy` value that is neither a file nor a built-in's name: an error that names the built-ins (and the one
/// meant, for a typo such as `gaurd`), instead of the file system's "no such file".
pub fn check_policy_arg(p: &std::path::Path) -> Result<()> {
    if p.exists() {
        return Ok(());
    }
    let given = p.to_string_lossy();
    let names: Vec<&str> = shellward_policy::embedded::BUILTINS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    if names.contains(&given.as_ref()) {
        return Ok(());
    }
    let meant = names
        .iter()
        .find(|n| crate::edit_distance(n, &given) <= 2)
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default();
    anyhow::bail!(
        "--policy {given}: there is no such file, and no built-in policy has that name{meant}. Give the path of a \
         policy component (.wasm) or a built-in's name: {}",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Whether the configuration file `path` came from `$SHELLWARD_CONFIG` rather than `--config` (clap fills the option
/// from the variable when the command line has none).
fn from_environment(path: &std::path::Path) -> bool {
    let given = std::env::args_os().any(|a| {
        let a = a.to_string_lossy();
        a == "--config" || a.starts_with("--config=")
    });
    !given && std::env::var_os("SHELLWARD_CONFIG").is_some_and(|v| std::path::Path::new(&v) == path)
}
