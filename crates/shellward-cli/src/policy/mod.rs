//! `shellward policy …`: evaluate policies without running commands.

pub(crate) mod args;
pub(crate) mod coverage;
pub(crate) mod kit;
pub(crate) mod new;
pub(crate) mod replay;

use crate::policy::args::PolicyArgs;
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use shellward::Decider;
use shellward::tools::ExecuteArgs;
use shellward_policy::duration::format_millis;
use shellward_policy::{Decision, Network, OnTimeout, Outcome};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code of `policy check` when the chain denies the command (a check's answer, not a failure: distinct from
/// `run`'s 126, which shells use for "found but could not run", and from 1/2, an error or bad usage of the check).
pub const EXIT_CHECK_DENIED: u8 = 3;
/// Exit code of `policy check` when the chain asks a person first (it would run once approved).
pub const EXIT_CHECK_ASKS: u8 = 4;

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Show what the policy chain decides for a command (nothing is run).
    #[command(after_help = "\
Examples:
  shellward policy check -- 'npm run dev &'
  shellward policy check --timeout 2h -- make test
  shellward policy check --settings '{\"default_timeout\":\"30s\"}' -- cargo build
  shellward policy check --policy guard.wasm --policy default.wasm --json -- 'rm -rf /'

Exit status: 0 when the command would run, 3 when it is denied, 2 on a usage or load error.")]
    Check(CheckArgs),
    /// Run case files against a policy or chain and report each case (nothing is run).
    #[command(after_help = "\
Examples:
  shellward policy test default                       # the embedded policy against policies/default/cases.toml
  shellward policy test guard.wasm cases.toml more.toml
  shellward policy test --policy guard.wasm --policy default chain-cases.toml
  shellward policy test guard.wasm --filter sudo --json

Exit status: 0 when every case passed, 1 when one failed (a diff is shown for each), 2 on an error (unreadable
policy or case file).")]
    Test(crate::policy::kit::TestArgs),
    /// Measure a policy: per-evaluation latency (reused and fresh instance) and load time (cold and warm cache).
    #[command(after_help = "\
Examples:
  shellward policy bench default
  shellward policy bench guard.wasm --cases policies/guard/cases.toml --iterations 50000 --json")]
    Bench(crate::policy::kit::BenchArgs),
    /// Show what a policy component declares and whether this host can run it.
    #[command(after_help = "\
Examples:
  shellward policy inspect guard.wasm
  shellward policy inspect default --json

Exit status: 0 when compatible, 1 when not (the reason is printed), 2 when the file is not a component.")]
    Inspect(crate::policy::kit::InspectArgs),
    /// Create a new policy project that builds and passes its own case file.
    #[command(after_help = "\
Examples:
  shellward policy new no-telnet
  shellward policy new no-telnet --lang python --dir policies/no-telnet")]
    New(crate::policy::new::NewArgs),
    /// List the policy chain a configuration loads: name, source, digests, WIT version (a running server answers
    /// the same on GET /v1/policies).
    #[command(after_help = "\
Examples:
  shellward policy list                               # the built-in chain
  shellward policy list --config /etc/shellward.toml  # [[policy]] entries and the [policies] dir
  shellward policy list --config shellward.toml --json
  shellward policy list --server http://127.0.0.1:7878   # the chain a running server uses now

Exit status: 0 when every policy loaded, 2 when one did not (each problem is printed with its file).")]
    List(ListArgs),
    /// Fetch a policy component from an OCI registry into the local cache, verified against its digests.
    #[command(after_help = "\
Examples:
  shellward policy pull ghcr.io/acme/no-telnet:1.0
  shellward policy pull ghcr.io/acme/no-telnet@sha256:4f0c…   # pinned: served from the cache once pulled

Prints the cached file and the pinned reference to use in a config: [[policy]] oci = \"REF@sha256:…\".
Exit status: 0 pulled, 1 refused or unreachable (the reason is printed).")]
    Pull(PullArgs),
    /// Publish a policy component to an OCI registry as a Wasm OCI artifact.
    #[command(after_help = "\
Examples:
  shellward policy push target/wasm32-wasip2/release/no_telnet.wasm ghcr.io/acme/no-telnet:1.0

Prints the pinned reference (REPOSITORY@sha256:…). Registries on loopback are reached over HTTP, others over HTTPS;
access is anonymous.")]
    Push(PushArgs),
    /// Decide every recorded decision of an audit log again with another chain, and show what would change.
    #[command(after_help = "\
Examples:
  shellward policy replay --audit /var/log/shellward/audit.jsonl --policy default --policy guard --policy new.wasm
  shellward policy replay --audit audit.jsonl --config /etc/shellward/candidate.toml --json

Prints each decision that would change (the command asked, the recorded outcome, the new one) and counts per kind
(run -> deny, deny -> run, plan changed, denied differently). Nothing is run.
Exit status: 0 nothing would change, 1 something would, 2 on a usage or load error.")]
    Replay(crate::policy::replay::ReplayArgs),
}

/// Options of `policy pull`.
#[derive(Args, Debug)]
pub struct PullArgs {
    /// `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:DIGEST`.
    reference: String,
    /// The cache (default: $SHELLWARD_CACHE_DIR/oci, else the user cache dir's shellward/oci).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// Options of `policy push`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// The component (.wasm).
    file: PathBuf,
    /// `REGISTRY/REPOSITORY:TAG`.
    reference: String,
}

fn pull(args: PullArgs) -> Result<ExitCode> {
    let Some(dir) = args.cache_dir.or_else(shellward::oci::default_cache_dir) else {
        anyhow::bail!("no cache directory: pass --cache-dir DIR or set SHELLWARD_CACHE_DIR");
    };
    match shellward::oci::pull(&args.reference, &dir) {
        Ok(p) => {
            println!("{}", p.path.display());
            println!("{}", p.pinned);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("shellward: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn push(args: PushArgs) -> Result<ExitCode> {
    match shellward::oci::push(&args.file, &args.reference) {
        Ok(pinned) => {
            println!("{pinned}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("shellward: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Options of `policy list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    service: crate::service::ServiceArgs,
    /// Ask a running `shellward serve` (its HTTP address, e.g. http://127.0.0.1:7878) instead of loading a
    /// configuration.
    #[arg(long, value_name = "URL", conflicts_with_all = ["config", "policies"])]
    server: Option<String>,
    /// The server's bearer token (default: $SHELLWARD_TOKEN).
    #[arg(
        long,
        env = "SHELLWARD_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    token: Option<String>,
    /// Print JSON (the same shape as GET /v1/policies).
    #[arg(long)]
    json: bool,
}

/// `GET /v1/policies` of a running server: the chain in force with each policy's state, and what its last load
/// attempt could not load.
fn server_status(url: &str, token: Option<&str>) -> Result<serde_json::Value> {
    let server = crate::remote::ServerArgs {
        server: url.to_string(),
        token: token.map(str::to_string),
        json: false,
    };
    let (status, value) = crate::remote::request(&server, "GET", "/v1/policies", None, None)?;
    if status != 200 {
        anyhow::bail!(
            "{url}/v1/policies answered {status}: {value} (a 401 wants --token or SHELLWARD_TOKEN)"
        );
    }
    if !value["policies"].is_array() {
        anyhow::bail!("{url} did not answer with a policy list");
    }
    Ok(value)
}

fn list(args: ListArgs) -> Result<ExitCode> {
    let status = match &args.server {
        Some(url) => server_status(url, args.token.as_deref())?,
        None => {
            let policies = shellward::load_policy_summaries(&args.service.config()?)?;
            let mut v = serde_json::json!({ "policies": policies, "failed": [] });
            for p in v["policies"].as_array_mut().into_iter().flatten() {
                p["state"] = "loaded".into();
            }
            v
        }
    };
    if args.json {
        println!("{status}");
        return Ok(ExitCode::SUCCESS);
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
    for (i, p) in status["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        println!(
            "{}. {}  {}  [{}]\n   wit {}  component {}  settings {}{}",
            i + 1,
            text(&p["name"]),
            text(&p["source"]),
            text(&p["state"]),
            p["wit_version"].as_str().unwrap_or("?"),
            text(&p["digest"]),
            text(&p["settings_digest"]),
            if p["fail_open"].as_bool().unwrap_or(false) {
                "  fail_open"
            } else {
                ""
            }
        );
    }
    let failed = status["failed"].as_array().cloned().unwrap_or_default();
    for f in &failed {
        println!("FAILED {}: {}", text(&f["source"]), text(&f["error"]));
    }
    if !failed.is_empty() {
        println!(
            "(the last load attempt failed; the policies above keep serving until a reload succeeds)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Check with the chain a configuration file loads (its `[[policy]]` entries, drop-in directory and sandbox
    /// settings), as `run`, `mcp` and `serve` would with it. Instead of --policy.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["policies", "settings"])]
    pub config: Option<PathBuf>,
    /// Foreground timeout the caller asks for, e.g. 500ms, 30s, 5m, 1m30s, 2h.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// The caller asks to run the command in the background.
    #[arg(long, conflicts_with = "foreground")]
    pub background: bool,
    /// The caller explicitly asks for the foreground.
    #[arg(long)]
    pub foreground: bool,
    /// Working directory the caller asks for.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<String>,
    /// Extra environment variable for the command (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Caller context passed to policies (repeatable), e.g. session-id=abc.
    #[arg(long = "context", value_name = "KEY=VALUE")]
    pub context: Vec<String>,
    /// The caller asks to keep stdin open (`interactive` in the request).
    #[arg(long)]
    pub interactive: bool,
    /// The caller asks for a terminal (`tty` in the request; implies --interactive).
    #[arg(long)]
    pub tty: bool,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
    /// The command, after the options (or after `--`): one argument or several, joined with spaces. Quote it to
    /// keep `&`, `|`, `;` from your shell.
    ///
    /// A word starting with `-` before the command is an option: an unknown one (`--timout`) is a usage error, not
    /// the first word of the command. A command that itself starts with `-` goes after `--`.
    #[arg(trailing_var_arg = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(cmd: PolicyCommand) -> Result<ExitCode> {
    match cmd {
        PolicyCommand::Check(args) => check(args),
        PolicyCommand::Test(args) => crate::policy::kit::test(args),
        PolicyCommand::Bench(args) => crate::policy::kit::bench(args),
        PolicyCommand::Inspect(args) => crate::policy::kit::inspect(args),
        PolicyCommand::New(args) => crate::policy::new::new(args),
        PolicyCommand::List(args) => list(args),
        PolicyCommand::Pull(args) => pull(args),
        PolicyCommand::Push(args) => push(args),
        PolicyCommand::Replay(args) => crate::policy::replay::replay(args),
    }
}

/// Splits `NAME=VALUE`; `what` names the option in the error.
pub(crate) fn pair(text: &str, what: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => bail!("{what} {text:?} must look like NAME=VALUE"),
    }
}

fn check(args: CheckArgs) -> Result<ExitCode> {
    // Decided as a run would decide it (the facade's one mapping of a call to a plan), with the configuration's
    // confinement (the built-in defaults without one); nothing is run.
    let (chain, config) = match &args.config {
        Some(file) => {
            let config = shellward::Config::load(file).map_err(|e| anyhow::anyhow!("{e}"))?;
            (None, config)
        }
        None => (Some(args.policy.chain()?), shellward::Config::default()),
    };
    let call = {
        let mut built =
            ExecuteArgs::new(args.command.join(" ")).interactive(args.interactive || args.tty);
        built.timeout = args.timeout.clone();
        built.run_in_background = if args.background {
            Some(true)
        } else if args.foreground {
            Some(false)
        } else {
            None
        };
        built.workdir = args.workdir.clone();
        built.tty = Some(args.tty);
        built
    };
    let env: Vec<(String, String)> = args
        .env
        .iter()
        .map(|e| pair(e, "--env"))
        .collect::<Result<_>>()?;
    let context: Vec<(String, String)> = args
        .context
        .iter()
        .map(|c| pair(c, "--context"))
        .collect::<Result<_>>()?;
    let deny_read = config.confinement.deny_read.clone();
    // Nothing runs: a decider alone (no executor, no runtime) decides exactly as a server would.
    let decider = match chain {
        Some(chain) => Decider::with_chain(&config, chain),
        None => Decider::from_config(&config).map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    let decided = decider
        .decide_with_context(None, &call, &env, &context)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let decision = &decided.decision;
    let deny_syscalls = decided
        .plan()
        .map(|p| p.confinement.deny_syscalls.clone())
        .unwrap_or_default();
    if args.json {
        let mut value = decision_json(decision);
        if let Some(p) = decision.outcome.planned() {
            value["confinement"] = json!({
                "writable": p.confinement.writable,
                "network": network_json(&p.confinement.network),
                "deny_read": deny_read,
                "deny_syscalls": deny_syscalls,
            });
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", decision_text(decision));
        if let Some(p) = decision.outcome.planned() {
            print!(
                "{}",
                confinement_text(&p.confinement, &deny_syscalls, &deny_read)
            );
        }
    }
    Ok(match decision.outcome {
        Outcome::Run(_) => ExitCode::SUCCESS,
        Outcome::Deny(_) => ExitCode::from(EXIT_CHECK_DENIED),
        Outcome::Ask(_) => ExitCode::from(EXIT_CHECK_ASKS),
    })
}

fn on_timeout_name(o: OnTimeout) -> &'static str {
    match o {
        OnTimeout::Kill => "kill",
        OnTimeout::Background => "background",
    }
}

/// The decision as JSON, for machines.
pub fn decision_json(d: &Decision) -> serde_json::Value {
    let faults: Vec<_> = d
        .faults
        .iter()
        .map(|f| json!({"policy": f.policy, "kind": f.kind_name(), "error": f.message}))
        .collect();
    let mut value = match &d.outcome {
        Outcome::Run(p) => plan_json(p),
        Outcome::Ask(ask) => {
            let mut v = plan_json(&ask.plan);
            v["question"] = json!(ask.question);
            v["rule"] = json!(ask.rule);
            v["asked_by"] = json!(d.asked_by);
            v
        }
        Outcome::Deny(denial) => json!({
            "reason": denial.reason,
            "rule": denial.rule,
            "denied_by": d.denied_by,
        }),
    };
    value["decision"] = json!(d.outcome.kind());
    value["faults"] = json!(faults);
    value
}

/// A plan (a run's, or what an ask would run) as JSON.
fn plan_json(p: &shellward_policy::Plan) -> serde_json::Value {
    json!({
        "command": p.command,
        "workdir": p.workdir,
        "background": p.background,
        "timeout_ms": p.timeout_ms,
        "on_timeout": on_timeout_name(p.on_timeout),
        "env": p.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "notes": p.notes,
        "interactive": p.interactive || p.tty,
        "tty": p.tty,
        "startup_wait_ms": p.startup_wait_ms,
        "rules": p.rules,
    })
}

/// A policy network as JSON: its name, or `{"allow": [...]}`.
fn network_json(n: &Network) -> serde_json::Value {
    match n {
        Network::Allow(list) => json!({ "allow": list }),
        other => json!(other.as_str()),
    }
}

/// The confinement a run gets, as text: where it may write, its network, what it cannot read, which system calls
/// are refused.
fn confinement_text(
    c: &shellward_policy::Confinement,
    deny_syscalls: &[String],
    deny_read: &[std::path::PathBuf],
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "writable:   {}\n",
        match &c.writable {
            Some(paths) => paths.join(", "),
            None => "anywhere its user may (not confined)".into(),
        }
    ));
    out.push_str(&format!(
        "network:    {}\n",
        match &c.network {
            Network::Allow(list) => format!(
                "only {} (through shellward's filtering proxy)",
                list.join(", ")
            ),
            other => other.as_str().to_string(),
        }
    ));
    if !deny_read.is_empty() {
        let hidden: Vec<String> = deny_read.iter().map(|p| p.display().to_string()).collect();
        out.push_str(&format!("hidden:     {}\n", hidden.join(", ")));
    }
    if !deny_syscalls.is_empty() {
        out.push_str(&format!("refused:    {}\n", deny_syscalls.join(", ")));
    }
    out
}

/// The decision as text, for people.
pub fn decision_text(d: &Decision) -> String {
    let mut out = String::new();
    match &d.outcome {
        Outcome::Run(p) => {
            out.push_str("decision:   run\n");
            out.push_str(&plan_text(p));
        }
        Outcome::Ask(ask) => {
            out.push_str("decision:   ask (runs only once a person approves)\n");
            if let Some(by) = &d.asked_by {
                out.push_str(&format!("asked by:   {by}\n"));
            }
            if let Some(rule) = &ask.rule {
                out.push_str(&format!("rule:       {rule}\n"));
            }
            out.push_str(&format!(
                "question:   {}\n",
                ask.question.replace('\n', "\n            ")
            ));
            out.push_str(&plan_text(&ask.plan));
        }
        Outcome::Deny(denial) => {
            out.push_str("decision:   deny\n");
            if let Some(by) = &d.denied_by {
                out.push_str(&format!("denied by:  {by}\n"));
            }
            if let Some(rule) = &denial.rule {
                out.push_str(&format!("rule:       {rule}\n"));
            }
            out.push_str(&format!("reason:     {}\n", denial.reason));
        }
    }
    for f in &d.faults {
        out.push_str(&format!(
            "fault:      {} ({}): {}\n",
            f.policy,
            f.kind_name(),
            f.message
        ));
    }
    // For a person at a terminal: what a policy or the command carried is shown, never interpreted.
    shellward::shown::text(&out)
}

/// A plan (a run's, or what an ask would run) as text lines.
fn plan_text(p: &shellward_policy::Plan) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "command:    {}\n",
        p.command.replace('\n', "\n            ")
    ));
    out.push_str(&format!(
        "mode:       {}\n",
        if p.background {
            "background"
        } else {
            "foreground"
        }
    ));
    if p.interactive || p.tty {
        out.push_str(if p.tty {
            "input:      a terminal (interactive)\n"
        } else {
            "input:      an open stdin (interactive)\n"
        });
    }
    let timeout = match (p.background, p.timeout_ms) {
        (true, _) => "none (background)".to_string(),
        (false, Some(ms)) => format_millis(ms),
        (false, None) => "none".to_string(),
    };
    out.push_str(&format!("timeout:    {timeout}\n"));
    if !p.background {
        out.push_str(&format!("on-timeout: {}\n", on_timeout_name(p.on_timeout)));
    }
    if let Some(w) = &p.workdir {
        out.push_str(&format!("workdir:    {w}\n"));
    }
    for (k, v) in &p.env {
        out.push_str(&format!("env:        {k}={v}\n"));
    }
    if let (true, Some(ms)) = (p.background, p.startup_wait_ms) {
        out.push_str(&format!("start wait: {}\n", format_millis(ms)));
    }
    if !p.notes.is_empty() {
        out.push_str("notes:\n");
        for n in &p.notes {
            out.push_str(&format!("  - {n}\n"));
        }
    }
    if !p.rules.is_empty() {
        out.push_str(&format!("rules:      {}\n", p.rules.join(", ")));
    }
    out
}
