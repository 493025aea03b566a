//! `shellward run`: evaluate a command with the policy chain, run it, stream its output live, exit with its status.

use crate::policy::{decision_json, decision_text, pair};
use crate::service::{ServiceArgs, runtime};
use crate::sys::{EchoOff, Interrupts};
use anyhow::Result;
use clap::Args;
use shellward::exec::OnTimeout;
use shellward::tools::{ExecuteArgs, ProcessOutputArgs, ToolCall, ToolOutput};
use shellward::{
    ExecuteOptions, Process, ReadOptions, Shellward, StartOptions, ToolError, ToolErrorKind,
};
use shellward::{ExitState, SignalKind};
use shellward_policy::duration::format_millis;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::Instant;

/// Exit code when the foreground timeout expired and the tree was killed (as `timeout(1)`).
pub const EXIT_TIMED_OUT: u8 = 124;
/// Exit code when shellward itself failed (configuration, policy load, spawn).
pub const EXIT_FAILED: u8 = 125;
/// Exit code of `run` when the policy chain denied the command (the shell's "could not run"; `policy check` answers
/// a deny with its own code, `policy_cmd::EXIT_CHECK_DENIED`).
pub const EXIT_DENIED: u8 = 126;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Foreground timeout, e.g. 500ms, 30s, 5m, 1m30s, 2h (default: the policy's, usually 10s).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// What the timeout does: `kill` terminates the whole process tree and exits 124 (as timeout(1) does);
    /// `background` keeps it running and streams it to its end (Ctrl-C terminates it). Default: the policy's choice,
    /// usually `background`. A policy may still override it, with a note saying so.
    #[arg(long, value_name = "ACTION", value_parser = ["kill", "background"])]
    pub on_timeout: Option<String>,
    /// Ask for the command to run in the background (it is still streamed until it ends or Ctrl-C).
    #[arg(long)]
    pub background: bool,
    /// Working directory.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<String>,
    /// Extra environment variable (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Print the policy decision (to stderr) before running.
    #[arg(long)]
    pub explain: bool,
    /// Approve in advance a command a policy asks about (as the operator). Without it, `run` asks on the terminal,
    /// and without a terminal it refuses the command (exit 126).
    #[arg(long)]
    pub approve: bool,
    /// Do not stream: print the execute tool's JSON result on stdout when the command ends.
    #[arg(long, conflicts_with_all = ["interactive", "tty"])]
    pub json: bool,
    /// Relay this process's stdin to the command (kept open until this stdin ends), e.g. `printf '…' | shellward
    /// run --interactive -- python3 -q`.
    #[arg(long)]
    pub interactive: bool,
    /// Run the command on a terminal (implies --interactive): stdin relayed to it, its output streamed cleaned of
    /// escape codes. When this stdin is a terminal its local echo is off while the command runs (the command's terminal
    /// echoes instead).
    #[arg(long)]
    pub tty: bool,
    /// Preview only: run the command in a throwaway copy-on-write view of the writable paths (no network, at most
    /// 10 s), print what it would change, and exit 0 without applying anything. A denied command is not previewed
    /// (exit 126); one a policy would ask about is previewed without asking.
    #[arg(long, conflicts_with_all = ["interactive", "tty", "background"])]
    pub preview: bool,
    /// The command, after the options (or after `--`): one argument or several, joined with spaces. Quote it to
    /// keep `&`, `|`, `;` from your shell.
    ///
    /// A word starting with `-` before the command is an option: an unknown one (`--timout`) is a usage error, not
    /// the first word of the command. A command that itself starts with `-` goes after `--`.
    #[arg(trailing_var_arg = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `run`'s approver: the terminal, or the operator's `--approve`.
fn approver(args: &RunArgs) -> std::sync::Arc<dyn shellward::Approver> {
    std::sync::Arc::new(crate::approve_tty::TerminalApprover {
        pre_approved: args.approve,
    })
}

/// A command a policy asked about that was not approved: exit 126 with the refusal; when nobody could be asked (no
/// terminal), how to approve it.
fn not_approved(e: &ToolError, person_asked: bool) -> ExitCode {
    eprintln!("shellward: {}", shellward::shown::text(&e.to_string()));
    if !person_asked {
        eprintln!(
            "shellward: this command needs approval: run it on a terminal to answer the question, or pass \
             --approve to approve it as the operator"
        );
    }
    ExitCode::from(EXIT_DENIED)
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!(
        "shellward: error: {}",
        shellward::shown::text(&message.to_string())
    );
    ExitCode::from(EXIT_FAILED)
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    // A usage error is found before anything starts (exit 2, as for every usage error).
    if args.command.iter().all(|a| a.trim().is_empty()) {
        return Ok(usage_error(
            "the command is empty; give it after the options, e.g. shellward run -- ls -la",
        ));
    }
    if let Some(Err(e)) = args
        .env
        .iter()
        .map(|e| pair(e, "--env"))
        .find(Result::is_err)
    {
        return Ok(usage_error(&format!("{e}")));
    }
    let rt = runtime()?;
    let code = rt.block_on(async move {
        let mut interrupts = match Interrupts::new() {
            Ok(i) => i,
            Err(e) => return fail(format!("{e:#}")),
        };
        let sw = match args.service.build("run") {
            Ok(sw) => sw,
            Err(e) => return fail(format!("{e:#}")),
        };
        let code = match run_in(&sw, &args, &mut interrupts).await {
            Ok(code) => code,
            // The reader went away (`| head -1`): quiet, as for a stream cut short.
            Err(e) if crate::closed_pipe(&e) => ExitCode::from(128 + 13),
            Err(e) => fail(format!("{e:#}")),
        };
        sw.shutdown().await;
        // Every process is gone, the cgroups and the log directory are removed and the audit log is flushed: what
        // is left is memory the exit returns anyway. Dropping it (the compiled policies, their instances, the
        // executor's tables) took about a millisecond of a one-command run.
        std::mem::forget(sw);
        code
    });
    // Its threads are idle; the exit ends them (waiting for them here cost a tenth of a millisecond more).
    std::mem::forget(rt);
    Ok(code)
}

/// Why the streaming loop stopped waiting for the command.
enum Stop {
    Exited,
    TimedOut,
    Signalled(i32),
    BrokenPipe,
}

/// `run`'s usage error: the message on stderr, exit status 2.
fn usage_error(message: &str) -> ExitCode {
    eprintln!(
        "shellward: error: {message}\n\nUsage: shellward run [OPTIONS] -- COMMAND...\n\nFor more information, try 'shellward run --help'."
    );
    ExitCode::from(crate::EXIT_ERROR)
}

async fn run_in(sw: &Shellward, args: &RunArgs, interrupts: &mut Interrupts) -> Result<ExitCode> {
    let env = args
        .env
        .iter()
        .map(|e| pair(e, "--env"))
        .collect::<Result<Vec<_>>>()?;
    let exec = execute_args(args);
    if args.preview {
        return preview_run(sw, args, exec, env).await;
    }
    if args.json {
        return json_run(sw, args, exec, env, interrupts).await;
    }
    let at = sw.without_session();
    let decided = match decide(&at, args, &exec, &env) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let (plan, notes) = match decided.verdict().clone() {
        shellward::Verdict::Run { plan, notes } => (plan, notes),
        shellward::Verdict::Ask { plan, notes, .. } => (plan, notes),
        shellward::Verdict::Deny { reason, by } => {
            // Recorded (audit, metrics) like any other surface's deny.
            at.record_denied(&decided);
            eprintln!(
                "shellward: denied by {}: {}",
                shellward::shown::line(&by),
                shellward::shown::text(&reason)
            );
            return Ok(ExitCode::from(EXIT_DENIED));
        }
    };
    if !args.explain {
        for n in &notes {
            eprintln!("shellward: note: {}", shellward::shown::text(n));
        }
    }
    // The facade starts the process tracked and returns at once (from the first byte: no start-up wait); `stream`
    // follows it and enforces the timeout.
    let timing = Timing {
        timeout: plan.timeout,
        on_timeout: plan.on_timeout,
    };
    let interactive = plan.stdin.interactive();
    if let Some(sig) = interrupts.pending().await {
        eprintln!("shellward: interrupted before the command started; nothing was run");
        return Ok(ExitCode::from(128 + sig as u8));
    }
    let process = match at
        .start(decided, StartOptions::new().approver(approver(args)))
        .await
    {
        Ok(p) => p,
        Err(e) if e.kind == ToolErrorKind::NotApproved => {
            // On a terminal the person was asked and said no: no advice on how to be asked.
            let asked = !args.approve && std::io::stdin().is_terminal();
            return Ok(not_approved(&e, asked));
        }
        Err(e) => return Ok(fail(e)),
    };
    // No log path is announced: every byte is streamed here, and the log goes with `run` when it exits.
    // Local echo off while a terminal command echoes what is typed (restored when this guard drops).
    let _echo = (interactive && args.tty).then(EchoOff::new).flatten();
    if interactive {
        tokio::spawn(relay_stdin(process.clone(), args.tty));
    } else if plan.background {
        eprintln!(
            "shellward: running in the background as {}; streaming until it ends, Ctrl-C terminates it",
            process.id()
        );
    }
    let (stop, cursor) = stream(sw, &process, &timing, interrupts).await?;
    finish(stop, &process, cursor, &timing).await
}

/// The `execute` arguments `run`'s options ask for.
fn execute_args(args: &RunArgs) -> ExecuteArgs {
    let mut built = ExecuteArgs::new(args.command.join(" "));
    built.timeout = args.timeout.clone();
    built.on_timeout = args.on_timeout.as_deref().map(|a| match a {
        "kill" => shellward::tools::OnTimeout::Kill,
        _ => shellward::tools::OnTimeout::Background,
    });
    built.workdir = args.workdir.clone();
    built.run_in_background = args.background.then_some(true);
    built.interactive = args.interactive.then_some(true);
    built.tty = args.tty.then_some(true);
    built
}

/// The policy chain's decision on `exec` (printed to stderr with `--explain`), or the exit code of why there is none:
/// a bad option value is a usage error (2), as clap's own; anything else is shellward's failure (125).
fn decide(
    at: &shellward::SessionHandle,
    args: &RunArgs,
    exec: &ExecuteArgs,
    env: &[(String, String)],
) -> std::result::Result<shellward::Decided, ExitCode> {
    let decided = match at.decide(exec, env, &[]) {
        Ok(d) => d,
        Err(e) if e.kind == ToolErrorKind::InvalidArguments => {
            return Err(usage_error(&shellward::shown::text(&e.message)));
        }
        Err(e) => return Err(fail(e)),
    };
    if args.explain {
        eprint!("{}", decision_text(&decided.decision));
        eprintln!("---");
    }
    Ok(decided)
}

/// `run --preview`: the command's output, then its change set (or, with `--json`, the execute tool's JSON result);
/// exit 0 whatever the command's status, 126 for a deny.
async fn preview_run(
    sw: &Shellward,
    args: &RunArgs,
    exec: ExecuteArgs,
    env: Vec<(String, String)>,
) -> Result<ExitCode> {
    let at = sw.without_session();
    let decided = match decide(&at, args, &exec, &env) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let result = match at.run(decided, ExecuteOptions::new().preview(true)).await {
        Ok(r) => r,
        Err(e) => return Ok(fail(e)),
    };
    if args.json {
        crate::print_line(serde_json::to_string_pretty(&result)?)?;
        return Ok(ExitCode::from(if result.denied { EXIT_DENIED } else { 0 }));
    }
    if result.denied {
        eprintln!(
            "shellward: denied: {}",
            shellward::shown::text(result.deny_reason.as_deref().unwrap_or(""))
        );
        return Ok(ExitCode::from(EXIT_DENIED));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(shellward::shown::text(&result.output).as_bytes())?;
    if !result.output.is_empty() && !result.output.ends_with('\n') {
        writeln!(out)?;
    }
    let status = match (&result.exit_code, &result.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by {signal}"),
        _ => "no exit status".into(),
    };
    writeln!(
        out,
        "--- preview ({status}{}): nothing was applied",
        if result.timed_out {
            ", stopped at its time limit"
        } else {
            ""
        }
    )?;
    if let Some(report) = result.preview.as_deref() {
        write!(out, "{}", preview_text(report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A change set for a terminal: the summary, one line per change (diffs indented), the totals left out, what a
/// preview cannot show; every path and diff line made safe to show.
pub(crate) fn preview_text(report: &shellward::preview::PreviewReport) -> String {
    use std::fmt::Write as _;
    let shown = shellward::shown::line;
    let mut text = format!("{}\n", shown(&report.summary));
    for c in &report.changes {
        let from = c
            .renamed_from
            .as_deref()
            .map(|f| format!(" (from {})", shown(f)))
            .unwrap_or_default();
        let mode = match (&c.mode_before, &c.mode_after) {
            (Some(b), Some(a)) if b != a => format!(" mode {b} -> {a}"),
            _ => String::new(),
        };
        let _ = writeln!(text, "  {:<12} {}{from}{mode}", c.kind, shown(&c.path));
        if let Some(diff) = &c.diff {
            for line in diff.lines() {
                let _ = writeln!(text, "      {}", shown(line));
            }
        }
    }
    if report.omitted > 0 {
        let _ = writeln!(text, "  … and {} more", report.omitted);
    }
    for r in &report.read_only {
        let _ = writeln!(
            text,
            "  read-only in the preview: {} ({})",
            shown(&r.path),
            r.why
        );
    }
    let _ = writeln!(text, "{}", report.cannot_show);
    text
}

/// The plan's timeout and what it does.
struct Timing {
    timeout: Option<Duration>,
    on_timeout: OnTimeout,
}

/// Streams `process`'s output to stdout until it ends, times out (when the plan kills), a signal arrives, or the
/// reader goes away; returns why it stopped and the cursor reached.
async fn stream(
    sw: &Shellward,
    process: &Process,
    timing: &Timing,
    interrupts: &mut Interrupts,
) -> Result<(Stop, u64)> {
    let id = process.id().to_string();
    let mut deadline = timing.timeout.map(|t| Instant::now() + t);
    let drain = sw.drain();
    let mut cursor = 0u64;
    let mut exited_at: Option<Instant> = None;
    let mut stdout = std::io::stdout();
    let stop = loop {
        let wait = match exited_at {
            Some(at) => drain
                .saturating_sub(at.elapsed())
                .min(Duration::from_millis(250)),
            None => Duration::from_millis(250),
        };
        let options = ReadOptions::after(cursor).wait(wait);
        let read = process.read(&options);
        let read = tokio::select! {
            r = read => r?,
            sig = interrupts.recv() => break Stop::Signalled(sig),
            _ = sleep_until(deadline) => {
                match timing.on_timeout {
                    OnTimeout::Kill => break Stop::TimedOut,
                    OnTimeout::Background => {
                        let t = format_millis(timing.timeout.unwrap_or_default().as_millis() as u64);
                        eprintln!(
                            "shellward: still running as {id} after the {t} timeout; the policy keeps it running. \
                             Streaming until it ends; Ctrl-C terminates it"
                        );
                        deadline = None;
                        continue;
                    }
                }
            }
        };
        if let Some(chunk) = &read.chunk {
            if !chunk.text.is_empty()
                && (stdout.write_all(chunk.text.as_bytes()).is_err() || stdout.flush().is_err())
            {
                break Stop::BrokenPipe;
            }
            cursor = chunk.next_cursor;
            if chunk.next_cursor < chunk.total_bytes {
                continue;
            }
        }
        if read.exit != ExitState::Running {
            if read.output_closed {
                break Stop::Exited;
            }
            let at = *exited_at.get_or_insert_with(Instant::now);
            if at.elapsed() >= drain {
                eprintln!(
                    "shellward: the command exited but a process it started kept the output open; it is \
                     terminated now"
                );
                break Stop::Exited;
            }
        }
    };
    Ok((stop, cursor))
}

/// `run`'s exit status for how streaming stopped, stopping the tree where it still runs.
async fn finish(stop: Stop, process: &Process, cursor: u64, timing: &Timing) -> Result<ExitCode> {
    Ok(match stop {
        Stop::Exited => {
            let info = process.view()?;
            match info.exit.shell_status() {
                Some(c) => ExitCode::from((c & 0xff) as u8),
                None => ExitCode::from(EXIT_FAILED),
            }
        }
        Stop::TimedOut => {
            let t = format_millis(timing.timeout.unwrap_or_default().as_millis() as u64);
            let _ = process.signal(SignalKind::Terminate).await;
            flush_rest(process, cursor).await;
            eprintln!("shellward: timed out after {t}; the process tree was terminated");
            ExitCode::from(EXIT_TIMED_OUT)
        }
        Stop::Signalled(sig) => {
            eprintln!("shellward: interrupted; terminating the process tree");
            let _ = process.signal(SignalKind::Terminate).await;
            flush_rest(process, cursor).await;
            ExitCode::from(128 + sig as u8)
        }
        Stop::BrokenPipe => {
            let _ = process.signal(SignalKind::Terminate).await;
            ExitCode::from(128 + 13)
        }
    })
}

/// Copies this process's stdin to the command's input until stdin ends, then closes the command's input.
async fn relay_stdin(process: Process, terminal: bool) {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; 16 * 1024];
    // A person may take their time; the limit only keeps a command that never reads from holding this forever.
    let limit = Duration::from_secs(24 * 3600);
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Err(e) = process.write(&buf[..n], limit).await {
                    tracing::debug!(id = process.id().as_str(), "input relay stopped: {e}");
                    return;
                }
            }
        }
    }
    let _ = process.close_input(b"", limit).await;
    if terminal {
        // On a terminal the end of input is a ^D the program must read at the start of a line. One sent while the
        // program was still setting its terminal up (a REPL switching to raw mode after the input arrived) is lost,
        // and the program would wait for more input forever: repeat it, a few times, while the command runs.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if !process.view().is_ok_and(|i| i.running) {
                return;
            }
            if process
                .write(b"\x04", Duration::from_secs(1))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Writes whatever output arrived after `cursor` (after the tree was stopped).
async fn flush_rest(process: &Process, mut cursor: u64) {
    let mut stdout = std::io::stdout();
    for _ in 0..64 {
        let options = ReadOptions::after(cursor).wait(Duration::from_millis(200));
        let Ok(read) = process.read(&options).await else {
            return;
        };
        let Some(chunk) = read.chunk else { return };
        let _ = stdout.write_all(chunk.text.as_bytes());
        cursor = chunk.next_cursor;
        if chunk.text.is_empty() || chunk.next_cursor >= chunk.total_bytes {
            break;
        }
    }
    let _ = stdout.flush();
}

async fn json_run(
    sw: &Shellward,
    args: &RunArgs,
    exec: ExecuteArgs,
    env: Vec<(String, String)>,
    interrupts: &mut Interrupts,
) -> Result<ExitCode> {
    let print_error = |e: &ToolError| -> Result<ExitCode> {
        crate::print_line(serde_json::to_string_pretty(&e.to_json())?)?;
        // A bad option value is a usage error (exit 2), as clap's own.
        Ok(ExitCode::from(
            if e.kind == ToolErrorKind::InvalidArguments {
                crate::EXIT_ERROR
            } else {
                EXIT_FAILED
            },
        ))
    };
    let at = sw.without_session();
    let decided = match at.decide(&exec, &env, &[]) {
        Ok(d) => d,
        Err(e) => return print_error(&e),
    };
    let decision = decision_json(&decided.decision);
    // A signal during a foreground run stops waiting; `run` then shuts the instance down, which terminates the tree.
    let result = tokio::select! {
        r = at.run(decided, ExecuteOptions::new().approver(approver(args))) => match r {
            Ok(r) => r,
            Err(e) => return print_error(&e),
        },
        sig = interrupts.recv() => {
            crate::print_line(serde_json::to_string_pretty(&serde_json::json!({"interrupted": true}))?)?;
            return Ok(ExitCode::from(128 + sig as u8));
        }
    };
    let mut value = serde_json::to_value(&result)?;
    value["decision"] = decision;
    let mut exit = (result.exit_code, result.signal.clone());
    // Nothing outlives `run`: a process left running is waited for (Ctrl-C terminates it), and its final state is
    // reported under "final".
    if let Some(id) = &result.background_process_id {
        let args = ProcessOutputArgs::new(id.clone()).wait("10s");
        let fin = loop {
            let out = tokio::select! {
                r = at.call_tool(ToolCall::ProcessOutput(args.clone()), ExecuteOptions::new()) => r,
                _ = interrupts.recv() => break None,
            };
            match out {
                Ok(ToolOutput::ProcessOutput(o)) if o.running => continue,
                Ok(ToolOutput::ProcessOutput(o)) => break Some(o),
                Ok(_) => {
                    return print_error(&shellward::ToolError::new(
                        ToolErrorKind::Internal,
                        "process_output answered with another tool's result",
                    ));
                }
                Err(e) => return print_error(&e),
            }
        };
        match fin {
            Some(o) => {
                exit = (o.exit_code, o.signal.clone());
                value["final"] = serde_json::to_value(&o)?;
            }
            None => {
                let _ = at.process(id).signal(SignalKind::Terminate).await;
                value["final"] = serde_json::json!({"interrupted": true});
                crate::print_line(serde_json::to_string_pretty(&value)?)?;
                return Ok(ExitCode::from(130));
            }
        }
    }
    crate::print_line(serde_json::to_string_pretty(&value)?)?;
    let code = if result.denied {
        EXIT_DENIED
    } else if result.timed_out && !result.running {
        EXIT_TIMED_OUT
    } else if let Some(c) = exit.0 {
        (c & 0xff) as u8
    } else if let Some(sig) = &exit.1 {
        128u8.saturating_add(signal_number(sig))
    } else {
        0
    };
    Ok(ExitCode::from(code))
}

fn signal_number(name: &str) -> u8 {
    ExitState::from_signal_name(name)
        .and_then(|s| s.signal_number())
        .map(|n| n as u8)
        .unwrap_or(0)
}
