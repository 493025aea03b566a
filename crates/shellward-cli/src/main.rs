//! The `shellward` command-line tool.
//!
//! This crate owns argument parsing, output formatting and exit codes; the work is done by the library crates.

mod policy_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// shellward: a safe shell executor for AI coding agents, with policies as WebAssembly components.
#[derive(Parser, Debug)]
#[command(name = "shellward", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Work with policies: see what they decide, without running anything.
    #[command(subcommand)]
    Policy(policy_cmd::PolicyCommand),
}

/// Exit code for a usage or load error.
pub const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHELLWARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Policy(cmd) => policy_cmd::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shellward: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
