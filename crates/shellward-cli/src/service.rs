//! Options shared by the commands that run things (`run`, `mcp`, `serve`): the config file and policy overrides.

use anyhow::{Context, Result};
use clap::Args;
use shellward::{Config, PolicyEntry, PolicySource, Shellward};
use std::path::PathBuf;

/// Where the configuration and policies come from.
#[derive(Args, Debug, Clone)]
pub struct ServiceArgs {
    /// Configuration file (TOML). Default: $SHELLWARD_CONFIG when set, otherwise built-in defaults with the embedded
    /// default policy. Check one with `shellward config check FILE`.
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
                .map(|p| PolicyEntry {
                    source: if p.as_os_str() == "default" && !p.exists() {
                        PolicySource::Default
                    } else if p.as_os_str() == "guard" && !p.exists() {
                        PolicySource::Guard
                    } else {
                        PolicySource::File(p.clone())
                    },
                    ..PolicyEntry::default_policy()
                })
                .collect();
        }
        Ok(config)
    }

    /// Builds the service (loads policies, starts the executor). Needs a Tokio runtime.
    pub fn build(&self) -> Result<Shellward> {
        let config = self.config()?;
        Shellward::builder()
            .config(config)
            .build()
            .context("cannot start shellward")
    }
}

/// A multi-threaded Tokio runtime for the serving commands.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
