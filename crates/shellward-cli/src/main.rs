//! The `shellward` command-line tool.
//!
//! This crate owns argument parsing, output formatting and exit codes; the work is done by the library crates.

mod approve_tty;
mod audit_cmd;
mod coder;
mod config_cmd;
mod http;
mod man;
mod mcp;
mod policy;
mod remote;
mod run_cmd;
mod sandbox;
mod service;
mod sys;

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
    /// Run a command through the policy chain, streaming its output live; exits with its status.
    #[command(after_help = "\
Examples:
  shellward run -- cargo test
  shellward run --explain -- 'npm run dev &'
  shellward run --timeout 5m --config shellward.toml -- make -j4
  shellward run --json -- 'ls -la'

Exit status: the command's exit code; 128+N when signal N ended it (130 after Ctrl-C, which terminates the whole
process tree); 124 when the foreground timeout expired and the tree was killed; 126 when a policy denied the command;
125 when shellward itself failed (configuration, policy load, start); 2 on a usage error.
A background plan (asked for, promoted by the policy, or a timeout that keeps it running) is announced on stderr with
its id and log path and is streamed until it ends; nothing outlives `run`.")]
    Run(run_cmd::RunArgs),
    /// Serve the five agent tools over MCP on stdin/stdout (one connection = one session).
    #[command(after_help = "\
Examples:
  shellward mcp
  shellward mcp --config /etc/shellward.toml

Add it to a client (prints the snippet with this binary's absolute path, which GUI clients need):
  shellward mcp --client-config claude-code     # or claude-desktop, cursor, codex, vscode, zed, windsurf, json
  shellward mcp --workdir ~/project             # where commands run (default: the client's first MCP root)

When the client disconnects, every process the session started is terminated.")]
    Mcp(mcp::McpArgs),
    /// Serve the tools and a process API over HTTP (JSON).
    #[command(after_help = "\
Examples:
  shellward serve                                  # http://127.0.0.1:7878
  shellward serve --listen 127.0.0.1:0             # any free port (printed on stdout)
  shellward serve --listen 0.0.0.0:7878 --token-file /etc/shellward/token
  shellward serve --listen unix:/run/shellward.sock
  curl -s localhost:7878/v1/tools/execute -d '{\"command\": \"ls\"}'

Routes: GET /v1/tools, POST /v1/tools/{name}, POST /api/v0/processes/start, GET /api/v0/processes/list,
GET /api/v0/processes/{id}/output?wait=true, POST /api/v0/processes/{id}/signal.
Sessions: header X-Shellward-Session. Auth: header Authorization: Bearer TOKEN (required off loopback).")]
    Serve(http::ServeArgs),
    /// Work with policies: `check` what they decide (nothing runs), `test` them against case files, `bench` them,
    /// `inspect` what a component declares, scaffold a `new` one, `list` the chain a configuration loads, `pull`/`push` components from/to an OCI registry.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Work with configuration files.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Check what confinement commands get on this host (`sandbox check`).
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Read an audit log as a person does: `show` the records that match, `tail` the last ones (and `--follow`).
    #[command(subcommand)]
    Audit(audit_cmd::AuditCommand),
    /// List every session's processes of a running `shellward serve` (its address and token).
    #[command(after_help = "\
Examples:
  shellward ps                                        # http://127.0.0.1:7878
  SHELLWARD_TOKEN=$(cat /etc/shellward/token) shellward ps --server http://10.0.0.5:7878")]
    Ps(remote::PsArgs),
    /// Answer the approvals a running `shellward serve` holds: `list` a session's, `approve ID`, `deny ID`.
    #[command(subcommand)]
    Approvals(remote::ApprovalsCommand),
    /// Print a completion script for a shell.
    #[command(after_help = "\
Examples:
  shellward completions bash > /etc/bash_completion.d/shellward
  shellward completions zsh > \"${fpath[1]}/_shellward\"
  shellward completions fish > ~/.config/fish/completions/shellward.fish")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): every command with its options and examples, exit status, files, environment.
    #[command(after_help = "\
Examples:
  shellward man > /usr/local/share/man/man1/shellward.1
  shellward man | man -l -")]
    Man,
}

/// Exit code for a usage or load error.
pub const EXIT_ERROR: u8 = 2;

/// A command-line parse error (or `--help`/`--version`, which clap reports the same way): printed as clap does, with
/// the closest subcommand suggested for a mistyped one when clap found none (`shellward rn` → `run`).
fn usage(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let _ = e.print();
    if e.kind() == ErrorKind::InvalidSubcommand
        && e.get(ContextKind::SuggestedSubcommand).is_none()
        && let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand)
    {
        let cmd = <Cli as clap::CommandFactory>::command();
        let best = cmd
            .get_subcommands()
            .map(|s| s.get_name())
            .map(|name| (edit_distance(typed, name), name))
            .min();
        if let Some((distance, name)) = best
            && distance <= 2
        {
            eprintln!("\n  tip: did you mean '{name}'?");
        }
    }
    ExitCode::from(if e.use_stderr() { EXIT_ERROR } else { 0 })
}

/// Levenshtein distance (insertions, deletions, substitutions) between two short words.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

fn main() -> ExitCode {
    // First, before any thread: this binary is also the init of each command's PID namespace.
    shellward::init_main_if_requested();
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHELLWARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,shellward::notice=info"));
    // Colour only on a terminal, and never with NO_COLOR set (https://no-color.org): a log file gets plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            sys::closed_stdout_ends_quietly();
            return usage(e);
        }
    };
    if !matches!(
        cli.command,
        Command::Run(_) | Command::Mcp(_) | Command::Serve(_)
    ) {
        sys::closed_stdout_ends_quietly();
    }
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Serve(args) => http::run(args),
        Command::Policy(cmd) => policy::run(cmd),
        Command::Config(cmd) => config_cmd::run(cmd),
        Command::Sandbox(cmd) => sandbox::run(cmd),
        Command::Audit(cmd) => audit_cmd::run(cmd),
        Command::Ps(args) => remote::ps(args),
        Command::Approvals(cmd) => remote::approvals(cmd),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "shellward", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            man::render(cmd, &mut std::io::stdout())
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(code) => code,
        // A reader that went away (`| head -1`): quiet, with the status a shell shows for a process SIGPIPE ended.
        Err(e) if closed_pipe(&e) => ExitCode::from(128 + 13),
        Err(e) => {
            eprintln!("shellward: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Whether `e` is (or was caused by) a write to a closed pipe.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints `text` and a newline on stdout, returning the error `println!` would panic on (a reader that went away), for
/// the commands that keep SIGPIPE ignored.
pub fn print_line(text: impl std::fmt::Display) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|()| out.flush())
}
