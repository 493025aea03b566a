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
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if !self.policies.is_empty() {
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
        let mut config = self.config()?;
        if surface == "run" {
            // One command, one or two evaluations: the pooling allocator's set-up and teardown (milliseconds) would
            // cost more than it saves.
            config.sandbox.pooling = false;
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
pub fn session_handle(sw: &Shellward, session: Option<&str>) -> shellward::SessionHandle {
    match session {
        Some(s) => sw.session(s),
        None => sw.without_session(),
    }
}
