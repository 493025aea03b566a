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

/// Runs the sandbox probes (see [`shellward::SandboxProbe`]) with `config` on a runtime of their own.
pub(crate) fn probe(config: &shellward::exec::ExecutorConfig) -> Result<shellward::SandboxProbe> {
    use anyhow::Context;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(shellward::SandboxProbe::run(config))
        .context("the probe could not run")
}

/// The report's lines for what needs Linux (previews and undo), on `os`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn linux_only(os: &str) {
    line(
        false,
        "preview (copy-on-write view)",
        &format!(
            "previews need Linux (an overlay file system in a mount namespace of the command's own); on {os} execute \
             with preview: true is refused"
        ),
    );
    line(
        false,
        "undo (changes_list, changes_undo)",
        &format!(
            "undo needs Linux (the kernel's change notifications, inotify); on {os} changes_undo is refused"
        ),
    );
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
    let full = match &args.config {
        Some(file) => shellward::Config::load(file).map_err(|e| anyhow::anyhow!("{e}"))?,
        None => shellward::Config::default(),
    };
    let config = &full.executor;
    #[cfg(windows)]
    let code = windows::check(config)?;
    #[cfg(all(unix, not(target_os = "linux")))]
    let code = bsd::check(config)?;
    #[cfg(target_os = "linux")]
    let code = linux::check(config)?;
    ordinary_work(&full.confinement);
    Ok(code)
}

/// Where everyday tools write or connect, each with whether this configuration's `[confinement]` lets a command do
/// it and, where not, what to change.
fn ordinary_work(c: &shellward::ConfinementConfig) {
    let workdir = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    let plan = c.for_command(&workdir);
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let expand = |p: &str| match (p.strip_prefix("~/"), &home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => std::path::PathBuf::from(p),
    };
    let writable = |p: &std::path::Path| {
        plan.writable
            .as_ref()
            .is_none_or(|w| w.iter().any(|root| p.starts_with(root)))
    };
    let tools: &[(&str, &[&str])] = &[
        (
            "cargo build, cargo install",
            &["~/.cargo/registry", "~/.cargo/git", "~/.cargo/bin"],
        ),
        (
            "pip install --user, uv, pipx",
            &[
                "~/.cache",
                "~/.local/lib",
                "~/.local/bin",
                "~/.local/share/uv",
            ],
        ),
        (
            "npm, yarn, pnpm caches",
            &["~/.npm", "~/.yarn", "~/.pnpm-store"],
        ),
        (
            "go build, go install",
            &["~/.cache", "~/go/pkg", "~/go/bin"],
        ),
        (
            "maven, gradle",
            &["~/.m2/repository", "~/.gradle/caches", "~/.gradle/wrapper"],
        ),
        ("ccache", &["~/.ccache"]),
        ("temporary files", &["/tmp", "/var/tmp"]),
    ];
    for (tool, paths) in tools {
        let missing: Vec<String> = paths
            .iter()
            .map(|p| expand(p))
            .filter(|p| !writable(p))
            .map(|p| p.display().to_string())
            .collect();
        line(
            missing.is_empty(),
            &format!("{tool} (ordinary work)"),
            &if missing.is_empty() {
                format!("writable ({})", paths.join(", "))
            } else {
                format!(
                    "not writable: {}; add {} to [confinement] writable",
                    missing.join(", "),
                    if missing.len() == 1 { "it" } else { "them" }
                )
            },
        );
    }
    socket_lines(c, &plan);
}

/// The `(ordinary work)` lines of devices and sockets under `c` (`plan` is its confinement for a command).
fn socket_lines(c: &shellward::ConfinementConfig, plan: &shellward::exec::Confinement) {
    use shellward::exec::Network;
    line(
        true,
        "/dev, /dev/shm, pipes, ptys (ordinary work)",
        "/dev/null, /dev/zero, /dev/tty, /dev/ptmx, /dev/pts and /dev/shm are always writable",
    );
    let cut = c.network != Network::Host;
    line(
        true,
        "tmux, ssh-agent, gpg-agent, a test's own socket (ordinary work)",
        if cut {
            "a command's own Unix sockets connect (network is not the host's: host sockets are cut)"
        } else {
            "Unix sockets connect (network = \"host\")"
        },
    );
    let docker = std::path::Path::new("/var/run/docker.sock");
    let named = |p: &std::path::Path| plan.unix_sockets.iter().any(|s| s == p);
    line(
        !cut || named(docker),
        "docker, your ssh-agent: host sockets (ordinary work)",
        &if !cut {
            "reached (network = \"host\")".to_string()
        } else {
            format!(
                "cut with network = \"{}\": name them in [confinement] unix_sockets (e.g. [\"/var/run/docker.sock\", \
                 \"$SSH_AUTH_SOCK\"]){}",
                c.network.as_str(),
                if plan.unix_sockets.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; named now: {}",
                        plan.unix_sockets
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )
        },
    );
}

#[cfg(target_os = "linux")]
mod linux;

#[cfg(all(unix, not(target_os = "linux")))]
mod bsd;

#[cfg(windows)]
mod windows;
