//! `shellward config …`: validate configuration files.

use anyhow::Result;
use clap::{Args, Subcommand};
use shellward::{Config, ConfigError, PolicyEngine, PolicySource};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Validate a configuration file: every problem is reported with its key path, and every policy it names is
    /// loaded and configured with its settings (nothing is run).
    #[command(after_help = "\
Examples:
  shellward config check shellward.toml

Exit status: 0 when the file is valid, 1 when it has problems (listed on stderr), 2 on a usage error.")]
    Check(CheckArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The configuration file.
    pub file: PathBuf,
}

pub fn run(cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Check(args) => check(&args.file),
    }
}

fn report(e: &ConfigError) -> ExitCode {
    eprintln!("shellward: {e}");
    ExitCode::from(1)
}

fn check(file: &Path) -> Result<ExitCode> {
    let config = match Config::load(file) {
        Ok(c) => c,
        Err(e) => return Ok(report(&e)),
    };
    let engine = match PolicyEngine::new(config.sandbox.clone()) {
        Ok(e) => e,
        Err(e) => {
            eprintln!(
                "shellward: {}: the policy engine cannot be created: {e}",
                file.display()
            );
            return Ok(ExitCode::from(1));
        }
    };
    if let Err(mut e) = config.load_chain(&engine) {
        e.file = Some(file.to_path_buf());
        return Ok(report(&e));
    }
    let chain: Vec<String> = config
        .policies
        .iter()
        .map(|p| match &p.source {
            PolicySource::Default => "default (embedded)".to_string(),
            PolicySource::Guard => "guard (embedded)".to_string(),
            PolicySource::File(f) => f.display().to_string(),
            PolicySource::Oci(r) => format!("oci:{r}"),
        })
        .collect();
    println!(
        "{}: ok; policy chain: {}",
        file.display(),
        if chain.is_empty() {
            "empty (commands run as asked)".to_string()
        } else {
            chain.join(" -> ")
        }
    );
    Ok(ExitCode::SUCCESS)
}
