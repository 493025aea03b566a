//! `shellward policy replay`: decides every recorded decision of an audit log again with another chain and reports the
//! ones that would change — what an operator asks before rolling a new policy out ("what would it have changed in last
//! week's traffic?"). Nothing is run.

use crate::policy_args::PolicyArgs;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};
use shellward_policy::{Decision, OnTimeout, Outcome, PolicyChain};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `policy replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The audit log to replay (JSON lines, `[audit] path`); `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub audit: PathBuf,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Replay with the chain a configuration file loads, instead of --policy.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["policies", "settings"])]
    pub config: Option<PathBuf>,
    /// Print the report as JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: text (default) or json.
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json"])]
    pub format: Option<String>,
}

/// A decision reduced to what a replay compares: run with (command, background, timeout, on-timeout), or deny with
/// (policy, reason).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Run {
        command: String,
        background: bool,
        timeout_ms: Option<u64>,
        on_timeout: String,
    },
    Deny {
        by: String,
        reason: String,
    },
}

impl Verdict {
    /// From a recorded decision.
    fn recorded(record: &Value) -> Option<Verdict> {
        match record.get("outcome")?.as_str()? {
            "run" => {
                let plan = record.get("plan")?;
                Some(Verdict::Run {
                    command: plan.get("command")?.as_str()?.to_string(),
                    background: plan.get("mode").and_then(Value::as_str) == Some("background"),
                    timeout_ms: plan.get("timeout_ms").and_then(Value::as_u64),
                    on_timeout: plan
                        .get("on_timeout")
                        .and_then(Value::as_str)
                        .unwrap_or("background")
                        .to_string(),
                })
            }
            _ => Some(Verdict::Deny {
                by: record
                    .get("denied_by")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                reason: record
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            }),
        }
    }

    /// From a decision made now, shaped as the facade shapes it (an interactive start runs in the background, and a
    /// background plan has no foreground timeout).
    fn decided(d: &Decision, interactive: bool) -> Verdict {
        match &d.outcome {
            Outcome::Run(p) => {
                let background = p.background || (interactive && (p.interactive || p.tty));
                Verdict::Run {
                    command: p.command.clone(),
                    background,
                    timeout_ms: if background { None } else { p.timeout_ms },
                    on_timeout: match p.on_timeout {
                        OnTimeout::Kill => "kill",
                        OnTimeout::Background => "background",
                    }
                    .to_string(),
                }
            }
            Outcome::Deny(denial) => Verdict::Deny {
                by: d.denied_by.clone().unwrap_or_default(),
                reason: denial.reason.clone(),
            },
        }
    }

    fn text(&self) -> String {
        match self {
            Verdict::Run {
                command,
                background,
                timeout_ms,
                on_timeout,
            } => format!(
                "run {command:?} ({}{})",
                if *background {
                    "background"
                } else {
                    "foreground"
                },
                match (background, timeout_ms) {
                    (false, Some(ms)) => format!(
                        ", timeout {}, then {on_timeout}",
                        shellward_policy::duration::format_millis(*ms)
                    ),
                    _ => String::new(),
                }
            ),
            Verdict::Deny { by, reason } => format!("deny by {by}: {reason}"),
        }
    }

    fn json(&self) -> Value {
        match self {
            Verdict::Run {
                command,
                background,
                timeout_ms,
                on_timeout,
            } => json!({"outcome": "run", "command": command, "background": background,
                        "timeout_ms": timeout_ms, "on_timeout": on_timeout}),
            Verdict::Deny { by, reason } => {
                json!({"outcome": "deny", "denied_by": by, "reason": reason})
            }
        }
    }
}

/// The kind of a change, for the counts.
fn kind(was: &Verdict, now: &Verdict) -> &'static str {
    match (was, now) {
        (Verdict::Run { .. }, Verdict::Deny { .. }) => "run -> deny",
        (Verdict::Deny { .. }, Verdict::Run { .. }) => "deny -> run",
        (Verdict::Run { .. }, Verdict::Run { .. }) => "plan changed",
        (Verdict::Deny { .. }, Verdict::Deny { .. }) => "denied differently",
    }
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let chain: PolicyChain = match &args.config {
        Some(file) => {
            let config = shellward::Config::load(file).map_err(|e| anyhow::anyhow!("{e}"))?;
            let engine = shellward::PolicyEngine::new(config.sandbox.clone())?;
            config
                .load_chain(&engine)
                .map_err(|e| anyhow::anyhow!("{e}"))?
        }
        None => args.policy.chain()?,
    };
    let reader: Box<dyn BufRead> = if args.audit.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&args.audit).with_context(|| {
                format!(
                    "cannot read the audit log {} (give the file of [audit] path, or - for stdin)",
                    args.audit.display()
                )
            })?,
        ))
    };
    let (mut replayed, mut too_old, mut unreadable) = (0usize, 0usize, 0usize);
    let mut changes: Vec<(usize, String, Verdict, Verdict)> = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", args.audit.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(record) = serde_json::from_str::<Value>(&line) else {
            unreadable += 1;
            continue;
        };
        if record.get("type").and_then(Value::as_str) != Some("decision") {
            continue;
        }
        let Some(request) = shellward::request_from_record(&record) else {
            too_old += 1;
            continue;
        };
        let Some(was) = Verdict::recorded(&record) else {
            unreadable += 1;
            continue;
        };
        replayed += 1;
        let now = Verdict::decided(&chain.evaluate(&request), request.interactive);
        if now != was {
            changes.push((i + 1, request.command.clone(), was, now));
        }
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, _, was, now) in &changes {
        let k = kind(was, now);
        match counts.iter_mut().find(|(name, _)| *name == k) {
            Some((_, n)) => *n += 1,
            None => counts.push((k, 1)),
        }
    }
    if args.json || args.format.as_deref() == Some("json") {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "replayed": replayed,
                "changed": changes.len(),
                "kinds": counts.iter().map(|(k, n)| (k.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
                "skipped_without_request": too_old,
                "unreadable": unreadable,
                "changes": changes.iter().map(|(line, asked, was, now)| json!({
                    "line": line, "asked": asked, "kind": kind(was, now), "was": was.json(), "now": now.json(),
                })).collect::<Vec<_>>(),
            }))?
        );
    } else {
        for (line, asked, was, now) in &changes {
            println!("line {line}: {asked:?}  [{}]", kind(was, now));
            println!("  was: {}", was.text());
            println!("  now: {}", now.text());
        }
        let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        println!(
            "{replayed} decisions replayed, {} would change{}",
            changes.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        if too_old > 0 {
            println!(
                "{too_old} decision records carry no request (written before audit records version {}) and were \
                 skipped",
                shellward::RECORD_VERSION
            );
        }
        if unreadable > 0 {
            println!("{unreadable} lines are not audit records and were skipped");
        }
    }
    Ok(if changes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
