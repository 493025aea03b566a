//! `shellward sandbox check`: what confinement this host gives commands, line by line, each missing piece with its
//! reason and how to enable it. It starts an executor as `mcp`/`serve` would and runs one probe command in a session
//! sandbox, so what it prints is what commands get, not what the host advertises.

use anyhow::Result;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum SandboxCommand {
    /// Print what confinement commands get on this host, line by line: each missing piece with its reason and how to
    /// enable it. Starts an executor and runs one probe command (`true`-like) in a session's sandbox.
    #[command(after_help = "\
Examples:
  shellward sandbox check
  shellward sandbox check --config /etc/shellward.toml

Exit status: 0 when commands run in a session sandbox (PID and mount namespace), 1 when they would run without one,
2 on a usage or start error.")]
    Check(CheckArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The configuration file whose `[executor]` settings to check (default: the built-in defaults).
    #[arg(long, env = "SHELLWARD_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// Print the report as one JSON object (`sandboxed`, `header`, `checks`: each `ok`, `what`, `detail`) for
    /// scripts and monitoring; the exit status is the same.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: SandboxCommand) -> Result<ExitCode> {
    match cmd {
        SandboxCommand::Check(args) => check(&args),
    }
}

/// The report's lines when `--json` collects them instead of printing (`None`: print each as it comes).
static COLLECTED: std::sync::Mutex<Option<Collected>> = std::sync::Mutex::new(None);

/// What `--json` prints: the header line and every check.
#[derive(Default)]
struct Collected {
    header: String,
    checks: Vec<serde_json::Value>,
}

/// The report's first line (who runs it, on what).
pub(crate) fn header(text: &str) {
    match COLLECTED.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        Some(c) => c.header = text.to_string(),
        None => println!("{text}"),
    }
}

/// One line of the report: `yes`/`no`, what, and (when missing) why and what to do.
pub(crate) fn line(ok: bool, what: &str, detail: &str) {
    if let Some(c) = COLLECTED.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        c.checks
            .push(serde_json::json!({"ok": ok, "what": what, "detail": detail}));
        return;
    }
    println!(
        "{:<4} {what}{}",
        if ok { "yes" } else { "no" },
        if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        }
    );
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    if !args.json {
        return check_platform(args);
    }
    *COLLECTED.lock().unwrap_or_else(|p| p.into_inner()) = Some(Collected::default());
    let code = check_platform(args)?;
    let collected = COLLECTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .unwrap_or_default();
    let sandboxed = code == ExitCode::SUCCESS;
    crate::print_line(serde_json::to_string_pretty(&serde_json::json!({
        "sandboxed": sandboxed,
        "header": collected.header,
        "checks": collected.checks,
    }))?)?;
    Ok(code)
}

/// The platform's report (printed, or collected for `--json`); exit 0 when commands get a session sandbox.
fn check_platform(args: &CheckArgs) -> Result<ExitCode> {
    let config = match &args.config {
        Some(file) => {
            shellward::Config::load(file)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .executor
        }
        None => shellward::exec::ExecutorConfig::default(),
    };
    #[cfg(windows)]
    return windows::check(&config);
    #[cfg(all(unix, not(target_os = "linux")))]
    return bsd::check(&config);
    #[cfg(target_os = "linux")]
    linux::check(&config)
}

#[cfg(target_os = "linux")]
mod linux;

#[cfg(all(unix, not(target_os = "linux")))]
mod bsd;

#[cfg(windows)]
mod windows;
