//! `shellward config …`: validate configuration files.

use anyhow::Result;
use clap::{Args, Subcommand};
use shellward::{Config, ConfigError, PolicyEngine};
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
    /// Write a commented starter configuration (the built-in chain, the default confinement, every other setting
    /// shown commented at its default) to FILE, or to stdout without one.
    #[command(after_help = "\
Examples:
  shellward config init shellward.toml && shellward config check shellward.toml
  shellward config init > /etc/shellward/shellward.toml

Exit status: 0 when written, 1 when FILE exists (give --force to replace it) or cannot be written, 2 on a usage error.")]
    Init(InitArgs),
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Where to write it (default, or `-`: standard output).
    pub file: Option<PathBuf>,
    /// Replace FILE when it exists.
    #[arg(long)]
    pub force: bool,
}

/// The starter configuration `config init` writes (also the README's reference block).
pub const STARTER: &str = include_str!("starter.toml");

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The configuration file.
    pub file: PathBuf,
}

pub fn run(cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Check(args) => check(&args.file),
        ConfigCommand::Init(args) => init(&args),
    }
}

fn init(args: &InitArgs) -> Result<ExitCode> {
    // No file, or `-` (as most tools read it): standard output.
    let Some(file) = args.file.as_ref().filter(|f| f.as_os_str() != "-") else {
        print!("{STARTER}");
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.exists()
        && let Err(e) = crate::sys::create_config_dirs(parent)
    {
        eprintln!(
            "shellward: cannot create the directory {} for {}: {e}; create it (mkdir -p {0}) or choose a file in a \
             directory you can write",
            parent.display(),
            file.display()
        );
        return Ok(ExitCode::from(1));
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    crate::sys::owner_only(&mut options);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    use std::io::Write;
    match options
        .open(file)
        .and_then(|mut f| f.write_all(STARTER.as_bytes()))
    {
        Ok(()) => {
            println!(
                "wrote {}; check it with: shellward config check {0}",
                file.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "shellward: {} exists; give --force to replace it, or another file name",
                file.display()
            );
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!("shellward: cannot write {}: {e}", file.display());
            Ok(ExitCode::from(1))
        }
    }
}

fn report(e: &ConfigError) -> ExitCode {
    eprintln!("shellward: {e}");
    ExitCode::from(1)
}

fn check(file: &Path) -> Result<ExitCode> {
    // One pass: the file's own problems and those of every policy it names (loaded with the settings that could be
    // read), reported together.
    let (config, mut problems) = match Config::load_partial(file) {
        Ok(c) => c,
        Err(e) => return Ok(report(&e)),
    };
    match PolicyEngine::new(config.sandbox.clone()) {
        Ok(engine) => {
            if let Err(e) = config.load_chain(&engine) {
                problems.extend(e.problems);
            }
        }
        Err(e) => problems.push(shellward::Problem::new(
            "sandbox",
            format!("the policy engine cannot be created: {e}"),
        )),
    }
    if !problems.is_empty() {
        return Ok(report(&ConfigError::new(
            Some(file.to_path_buf()),
            problems,
        )));
    }
    let chain: Vec<String> = config
        .policies
        .iter()
        .map(|p| p.source.to_string())
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
fn print_withheld(env: &shellward::exec::EnvPolicy) {
    use shellward::exec::env::{DEFAULT_SECRET_PATTERNS, SECRET_LOOKALIKES};
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
