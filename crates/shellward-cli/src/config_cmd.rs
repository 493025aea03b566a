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
    print_withheld(&config.executor.env);
    Ok(ExitCode::SUCCESS)
}

/// What commands will not get of this environment, and the rules that decide it (names only, never values).
fn print_withheld(env: &shellward_exec::EnvPolicy) {
    use shellward_exec::env::{DEFAULT_SECRET_PATTERNS, SECRET_LOOKALIKES};
    if env.ignore_default_excludes {
        println!(
            "environment: ignore_default_excludes = true: secret-looking names and credential values ARE passed to \
             commands"
        );
    } else {
        println!(
            "environment: withheld from commands: SHELLWARD_*; names matching {} (except {}); values that carry \
             a credential (a URL with a password, a Bearer or Basic authorization, a PEM block). [env] allow = \
             [\"NAME\"] passes one anyway.",
            DEFAULT_SECRET_PATTERNS.join(" "),
            SECRET_LOOKALIKES.join(" ")
        );
    }
    let withheld = env.withheld(std::env::vars_os());
    if withheld.is_empty() {
        println!("withheld from this environment: nothing");
    } else {
        println!("withheld from this environment:");
        for (name, why) in withheld {
            println!("  {name} ({})", why.describe());
        }
    }
}
