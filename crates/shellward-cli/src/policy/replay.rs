//! `shellward policy replay`: decides every recorded decision of an audit log again with another chain and reports the
//! ones that would change — what an operator asks before rolling a new policy out ("what would it have changed in last
//! week's traffic?"). Nothing is run.

use crate::policy::args::PolicyArgs;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};
use shellward_policy::{Decision, OnTimeout, Outcome, Plan, PolicyChain};
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

/// What a run (or an approved ask) would run, as a replay compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RunPlan {
    command: String,
    background: bool,
    timeout_ms: Option<u64>,
    on_timeout: String,
}

impl RunPlan {
    /// From a recorded decision's `plan`.
    fn recorded(plan: &Value) -> Option<RunPlan> {
        Some(RunPlan {
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

    /// From a plan decided now, shaped as the facade shapes it (an interactive start runs in the background, and a
    /// background plan has no foreground timeout).
    fn decided(p: &Plan, interactive: bool) -> RunPlan {
        let background = p.background || (interactive && (p.interactive || p.tty));
        RunPlan {
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

    fn text(&self) -> String {
        format!(
            "{:?} ({}{})",
            self.command,
            if self.background {
                "background"
            } else {
                "foreground"
            },
            match (self.background, self.timeout_ms) {
                (false, Some(ms)) => format!(
                    ", timeout {}, then {}",
                    shellward_policy::duration::format_millis(ms),
                    self.on_timeout
                ),
                _ => String::new(),
            }
        )
    }

    fn json(&self) -> Value {
        json!({"command": self.command, "background": self.background, "timeout_ms": self.timeout_ms,
               "on_timeout": self.on_timeout})
    }
}

/// A decision reduced to what a replay compares: run with its plan, ask with (plan, rule, question), or deny with
/// (rule, reason); the policy that denied or asked is reported but not compared: the same component loaded under
/// another name (a file path instead of its built-in name) decides the same.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Run(RunPlan),
    Ask {
        plan: RunPlan,
        by: String,
        rule: Option<String>,
        question: String,
    },
    Deny {
        by: String,
        rule: Option<String>,
        reason: String,
    },
}

impl Verdict {
    /// From a recorded decision.
    fn recorded(record: &Value) -> Option<Verdict> {
        let text = |key: &str| {
            record
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let rule = record
            .get("rule")
            .and_then(Value::as_str)
            .map(str::to_string);
        match record.get("outcome")?.as_str()? {
            "run" => Some(Verdict::Run(RunPlan::recorded(record.get("plan")?)?)),
            "ask" => Some(Verdict::Ask {
                plan: RunPlan::recorded(record.get("plan")?)?,
                by: text("asked_by"),
                rule,
                question: text("question"),
            }),
            _ => Some(Verdict::Deny {
                by: text("denied_by"),
                rule,
                reason: text("reason"),
            }),
        }
    }

    /// From a decision made now.
    fn decided(d: &Decision, interactive: bool) -> Verdict {
        match &d.outcome {
            Outcome::Run(p) => Verdict::Run(RunPlan::decided(p, interactive)),
            Outcome::Ask(ask) => Verdict::Ask {
                plan: RunPlan::decided(&ask.plan, interactive),
                by: d.asked_by.clone().unwrap_or_default(),
                rule: ask.rule.clone(),
                question: ask.question.clone(),
            },
            Outcome::Deny(denial) => Verdict::Deny {
                by: d.denied_by.clone().unwrap_or_default(),
                rule: denial.rule.clone(),
                reason: denial.reason.clone(),
            },
        }
    }

    fn text(&self) -> String {
        match self {
            Verdict::Run(plan) => format!("run {}", plan.text()),
            Verdict::Ask {
                plan,
                by,
                rule,
                question,
            } => match rule {
                Some(rule) => format!(
                    "ask by {by} (rule {rule}): {question:?}, then run {}",
                    plan.text()
                ),
                None => format!("ask by {by}: {question:?}, then run {}", plan.text()),
            },
            Verdict::Deny { by, rule, reason } => match rule {
                Some(rule) => format!("deny by {by} (rule {rule}): {reason}"),
                None => format!("deny by {by}: {reason}"),
            },
        }
    }

    fn json(&self) -> Value {
        match self {
            Verdict::Run(plan) => {
                let mut v = plan.json();
                v["outcome"] = json!("run");
                v
            }
            Verdict::Ask {
                plan,
                by,
                rule,
                question,
            } => {
                let mut v = plan.json();
                v["outcome"] = json!("ask");
                v["asked_by"] = json!(by);
                v["rule"] = json!(rule);
                v["question"] = json!(question);
                v
            }
            Verdict::Deny { by, rule, reason } => {
                json!({"outcome": "deny", "denied_by": by, "rule": rule, "reason": reason})
            }
        }
    }

    /// The same decision: equal but for the name of the policy that denied or asked.
    fn same_decision(&self, other: &Verdict) -> bool {
        match (self, other) {
            (
                Verdict::Deny { rule, reason, .. },
                Verdict::Deny {
                    rule: rule2,
                    reason: reason2,
                    ..
                },
            ) => rule == rule2 && reason == reason2,
            (
                Verdict::Ask {
                    plan,
                    rule,
                    question,
                    ..
                },
                Verdict::Ask {
                    plan: plan2,
                    rule: rule2,
                    question: question2,
                    ..
                },
            ) => plan == plan2 && rule == rule2 && question == question2,
            _ => self == other,
        }
    }

    /// The policy that denied or asked.
    fn decided_by(&self) -> Option<&str> {
        match self {
            Verdict::Deny { by, .. } | Verdict::Ask { by, .. } => Some(by),
            Verdict::Run(_) => None,
        }
    }

    /// The kind, as the counts name it.
    fn kind(&self) -> &'static str {
        match self {
            Verdict::Run(_) => "run",
            Verdict::Ask { .. } => "ask",
            Verdict::Deny { .. } => "deny",
        }
    }
}

/// The kind of a change, for the counts: `run -> ask`, `ask -> deny`, …, or within a kind `plan changed`, `asked
/// differently`, `denied differently`.
fn kind(was: &Verdict, now: &Verdict) -> String {
    match (was, now) {
        (Verdict::Run(_), Verdict::Run(_)) => "plan changed".into(),
        (Verdict::Ask { .. }, Verdict::Ask { .. }) => "asked differently".into(),
        (Verdict::Deny { .. }, Verdict::Deny { .. }) => "denied differently".into(),
        (a, b) => format!("{} -> {}", a.kind(), b.kind()),
    }
}

/// What a replay found: the decisions that would change, and those decided the same by a policy of another name.
#[derive(Default)]
struct Report {
    replayed: usize,
    too_old: usize,
    unreadable: usize,
    /// (line, command, was, now) of each changed decision.
    changes: Vec<(usize, String, Verdict, Verdict)>,
    /// (line, command, was denied by, now denied by) of each decision only the policy's name changed in.
    renamed: Vec<(usize, String, String, String)>,
}

/// Replays an audit log against a chain (see the module doc); exits 1 when a decision would change.
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
    let report = Report::of(reader, &chain, &args.audit)?;
    if args.json || args.format.as_deref() == Some("json") {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        report.print_text();
    }
    Ok(if report.changes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

impl Report {
    /// Decides every decision record of `reader` again with `chain`.
    fn of(reader: Box<dyn BufRead>, chain: &PolicyChain, path: &std::path::Path) -> Result<Report> {
        let mut report = Report::default();
        for (i, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("cannot read {}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(record) = serde_json::from_str::<Value>(&line) else {
                report.unreadable += 1;
                continue;
            };
            if record.get("type").and_then(Value::as_str) != Some("decision") {
                continue;
            }
            let Some(request) = shellward::request_from_record(&record) else {
                report.too_old += 1;
                continue;
            };
            let Some(was) = Verdict::recorded(&record) else {
                report.unreadable += 1;
                continue;
            };
            report.replayed += 1;
            let now = Verdict::decided(&chain.evaluate(&request), request.interactive);
            if now == was {
                continue;
            }
            let command = request.command.clone();
            match (was.same_decision(&now), was.decided_by(), now.decided_by()) {
                (true, Some(old), Some(new)) => {
                    report
                        .renamed
                        .push((i + 1, command, old.to_string(), new.to_string()))
                }
                _ => report.changes.push((i + 1, command, was, now)),
            }
        }
        Ok(report)
    }

    /// How many changes of each kind, in the order first seen.
    fn counts(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for (_, _, was, now) in &self.changes {
            let k = kind(was, now);
            match counts.iter_mut().find(|(name, _)| *name == k) {
                Some((_, n)) => *n += 1,
                None => counts.push((k, 1)),
            }
        }
        counts
    }

    fn json(&self) -> Value {
        json!({
            "replayed": self.replayed,
            "changed": self.changes.len(),
            "kinds": self.counts().iter().map(|(k, n)| (k.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "renamed": self.renamed.len(),
            "skipped_without_request": self.too_old,
            "unreadable": self.unreadable,
            "changes": self.changes.iter().map(|(line, asked, was, now)| json!({
                "line": line, "asked": asked, "kind": kind(was, now), "was": was.json(), "now": now.json(),
            })).collect::<Vec<_>>(),
            "renames": self.renamed.iter().map(|(line, asked, was, now)| json!({
                "line": line, "asked": asked, "was_denied_by": was, "now_denied_by": now,
            })).collect::<Vec<_>>(),
        })
    }

    fn print_text(&self) {
        for (line, asked, was, now) in &self.changes {
            println!("line {line}: {asked:?}  [{}]", kind(was, now));
            println!("  was: {}", was.text());
            println!("  now: {}", now.text());
        }
        let mut pairs: Vec<(&str, &str, usize)> = Vec::new();
        for (_, _, was, now) in &self.renamed {
            match pairs.iter_mut().find(|(w, n, _)| w == was && n == now) {
                Some((_, _, count)) => *count += 1,
                None => pairs.push((was, now, 1)),
            }
        }
        for (was, now, count) in &pairs {
            println!(
                "{count} decisions are the same (same rule and reason) but the denying policy is named {now:?} now, \
                 {was:?} in the log: a renamed policy, not a changed decision"
            );
        }
        let kinds: Vec<String> = self
            .counts()
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        println!(
            "{} decisions replayed, {} would change{}",
            self.replayed,
            self.changes.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        if self.too_old > 0 {
            println!(
                "{} decision records carry no request (written before audit records version {}) and were skipped",
                self.too_old,
                shellward::RECORD_VERSION
            );
        }
        if self.unreadable > 0 {
            println!(
                "{} lines are not audit records and were skipped",
                self.unreadable
            );
        }
    }
}
