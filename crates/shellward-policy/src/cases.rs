//! Case files: requests and the outcomes a policy (or chain) must produce, checked without running any command.
//!
//! A case file is TOML:
//!
//! ```toml
//! settings = { default_timeout = "10s" }   # optional: settings for the policy (an array: one per chain policy;
//!                                           # a string: passed as is)
//!
//! [[case]]
//! name = "trailing ampersand becomes background"
//! command = "npm run dev &"
//! timeout = "30s"            # optional request fields: timeout, background, workdir, env, context
//! settings = { max_timeout = "1m" }   # optional: overrides the file's settings for this case
//! expect = { decision = "run", command = "npm run dev", background = true, notes_contain = "trailing" }
//!
//! [[case]]
//! name = "rm -rf / is refused"
//! command = "rm -rf /"
//! expect = { decision = "deny", reason_contains = "root" }
//! ```
//!
//! Request keys besides `command`: `timeout`, `background`, `workdir`, `env`, `context`, `interactive`, `tty`, and the
//! confinement the operator gives: `network` (`none` | `loopback` | `host`, default `host`), `writable` (paths; default
//! unconfined), `max_network` and `max_writable` (the ceiling; default: the same as `network` and `writable`),
//! `startup_wait` (`"5s"`), and the platform: `shell` (`sh` | `bash` | `cmd` | `powershell` | …, default `sh`) and `os`
//! (`linux` | `windows` | …, default: the one the test runs on).
//!
//! `expect` keys: `decision` (`run` | `deny` | `ask`, required), `command`, `background`, `timeout` (`"10s"` or `"none"`),
//! `on_timeout` (`kill` | `background`), `workdir`, `env` (exact table), `notes_contain` (string or array: each must
//! appear in some note), `no_notes` (true: no note at all), `network` (`none` | `loopback` | `host` | `allow`),
//! `writable` (exact list, or `"any"`), `startup_wait` (`"10s"` or `"none"`), `rules` (string or array: each must be
//! among the rules the plan names), `reason_contains` (string or array, for deny), `question_contains` (string or
//! array, for ask), `rule` (the rule a deny or an ask names). An ask's plan (what runs once approved) is checked with
//! the same keys as a run's. Keys left out are not checked.

use crate::chain::PolicyChain;
use crate::engine::{FaultMode, PolicyEngine};
use crate::error::PolicyError;
use crate::types::{Confinement, Network, OnTimeout, Outcome, Plan, Request};
use serde::Deserialize;
use shellward_kit::duration::{format_millis, parse_millis};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A policy to test: its display name and component bytes.
#[derive(Debug, Clone)]
pub struct PolicyUnderTest {
    /// Name used in errors (file path or `default`).
    pub name: String,
    /// The component.
    pub bytes: Vec<u8>,
}

/// Settings in a case file: one for a single policy, or one per policy of a chain.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SettingsSpec {
    /// Passed as is (for policies whose settings are not JSON).
    Text(String),
    /// One policy's settings, as a table (sent as JSON).
    Table(toml::Table),
    /// One entry per chain policy, in order.
    PerPolicy(Vec<SettingsSpec>),
}

impl SettingsSpec {
    /// The settings text for policy `i` of a chain.
    pub fn for_policy(&self, i: usize) -> Result<String, String> {
        match self {
            SettingsSpec::Text(s) if i == 0 => Ok(s.clone()),
            SettingsSpec::Table(t) if i == 0 => serde_json::to_string(t)
                .map_err(|e| format!("settings cannot be sent as JSON: {e}")),
            SettingsSpec::Text(_) | SettingsSpec::Table(_) => Ok(String::new()),
            SettingsSpec::PerPolicy(list) => match list.get(i) {
                Some(SettingsSpec::PerPolicy(_)) => {
                    Err("settings arrays cannot be nested; give one table per chain policy".into())
                }
                Some(s) => s.for_policy(0),
                None => Ok(String::new()),
            },
        }
    }
}

/// One string or several.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(untagged)]
pub enum OneOrMany {
    /// No value.
    #[default]
    None,
    /// One string.
    One(String),
    /// Several strings.
    Many(Vec<String>),
}

impl OneOrMany {
    fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::None => Vec::new(),
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// The expected decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpectedDecision {
    /// The chain runs the command.
    Run,
    /// The chain denies it.
    Deny,
    /// The chain asks a person first.
    Ask,
}

impl ExpectedDecision {
    /// As a case file writes it: `run`, `deny`, `ask`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExpectedDecision::Run => "run",
            ExpectedDecision::Deny => "deny",
            ExpectedDecision::Ask => "ask",
        }
    }
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Expect {
    /// Run, deny or ask.
    pub decision: ExpectedDecision,
    /// The final command.
    #[serde(default)]
    pub command: Option<String>,
    /// Background or foreground.
    #[serde(default)]
    pub background: Option<bool>,
    /// The foreground timeout (`"10s"`, or `"none"`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// `kill` or `background`.
    #[serde(default)]
    pub on_timeout: Option<String>,
    /// The working directory.
    #[serde(default)]
    pub workdir: Option<String>,
    /// The exact extra environment.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Texts that must each appear in some note.
    #[serde(default)]
    pub notes_contain: OneOrMany,
    /// No notes at all.
    #[serde(default)]
    pub no_notes: bool,
    /// The network the plan gives (`none`, `loopback`, `allow`, `host`).
    #[serde(default)]
    pub network: Option<String>,
    /// The exact writable paths of the plan, or `"any"` for unconfined writes.
    #[serde(default)]
    pub writable: Option<Writable>,
    /// The start-up wait the plan asks for (`"10s"`, or `"none"` for the host's default).
    #[serde(default)]
    pub startup_wait: Option<String>,
    /// Rule ids that must each be among the plan's rules.
    #[serde(default)]
    pub rules: OneOrMany,
    /// Texts the deny reason must contain.
    #[serde(default)]
    pub reason_contains: OneOrMany,
    /// The rule id the deny (or the ask) names.
    #[serde(default)]
    pub rule: Option<String>,
    /// Texts the ask's question must contain.
    #[serde(default)]
    pub question_contains: OneOrMany,
}

/// Writable paths in a case: a list, or `"any"` for unconfined writes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Writable {
    /// `"any"`.
    Any(String),
    /// These paths.
    Paths(Vec<String>),
}

impl Writable {
    /// As a confinement's `writable`; the error names a word other than `"any"`.
    fn paths(&self) -> Result<Option<Vec<String>>, String> {
        match self {
            Writable::Any(w) if w == "any" => Ok(None),
            Writable::Any(w) => Err(format!(
                "{w:?} is not a list of paths; give an array of paths or \"any\""
            )),
            Writable::Paths(p) => Ok(Some(p.clone())),
        }
    }
}

/// A network name of a case as a confinement's network (`allow` cannot be given: it needs its list).
fn network_named(name: &str) -> Result<Network, String> {
    match name {
        "none" => Ok(Network::None),
        "loopback" => Ok(Network::Loopback),
        "host" => Ok(Network::Host),
        other => Err(format!(
            "{other:?} is not a network; use \"none\", \"loopback\" or \"host\""
        )),
    }
}

/// One case.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Case {
    /// Its name (unique within the file).
    pub name: String,
    /// The command.
    pub command: String,
    /// The timeout the caller asks for (`"30s"`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// The caller's background flag.
    #[serde(default)]
    pub background: Option<bool>,
    /// The caller's working directory.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Caller context.
    #[serde(default)]
    pub context: BTreeMap<String, String>,
    /// The caller asks for an open stdin (`interactive` in the request).
    #[serde(default)]
    pub interactive: bool,
    /// The caller asks for a terminal (`tty` in the request).
    #[serde(default)]
    pub tty: bool,
    /// The operator's network for commands (`none`, `loopback`, `host`; default `host`).
    #[serde(default)]
    pub network: Option<String>,
    /// The operator's writable paths (default: unconfined).
    #[serde(default)]
    pub writable: Option<Writable>,
    /// The ceiling's network (default: `network`).
    #[serde(default)]
    pub max_network: Option<String>,
    /// The ceiling's writable paths (default: `writable`).
    #[serde(default)]
    pub max_writable: Option<Writable>,
    /// The start-up wait in the request (`"5s"`).
    #[serde(default)]
    pub startup_wait: Option<String>,
    /// The shell the request says runs the command (`sh`, `cmd`, `powershell`, …; default `sh`).
    #[serde(default)]
    pub shell: Option<String>,
    /// The operating system the request says the command runs on (`linux`, `windows`, …; default: this one).
    #[serde(default)]
    pub os: Option<String>,
    /// Settings for this case (instead of the file's).
    #[serde(default)]
    pub settings: Option<SettingsSpec>,
    /// The expected outcome.
    pub expect: Expect,
}

/// A parsed case file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CaseFile {
    /// Settings for every case that has none of its own.
    #[serde(default)]
    pub settings: Option<SettingsSpec>,
    /// The cases, in order.
    #[serde(default, rename = "case")]
    pub cases: Vec<Case>,
}

/// Why a case file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    /// The file could not be read.
    #[error("cannot read case file {path}: {io}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        io: std::io::Error,
    },
    /// The file is not a valid case file.
    #[error("invalid case file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (with line and column for TOML errors).
        message: String,
    },
    /// A policy could not be loaded with a case's settings.
    #[error("{path}: case {case:?}: {error}")]
    Load {
        /// The case file.
        path: PathBuf,
        /// The case.
        case: String,
        /// The load error.
        error: String,
    },
}

impl CaseFile {
    /// Reads and checks a case file.
    pub fn load(path: &Path) -> Result<CaseFile, CaseError> {
        let text = std::fs::read_to_string(path).map_err(|io| CaseError::Read {
            path: path.to_path_buf(),
            io,
        })?;
        CaseFile::parse(&text).map_err(|message| CaseError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses case-file text; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<CaseFile, String> {
        let file: CaseFile =
            toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
        if file.cases.is_empty() {
            return Err("it has no [[case]] entries".into());
        }
        let mut seen = std::collections::HashSet::new();
        for (i, case) in file.cases.iter().enumerate() {
            let at = format!("case[{i}] ({:?})", case.name);
            if case.name.trim().is_empty() {
                return Err(format!("case[{i}] has an empty name"));
            }
            if !seen.insert(case.name.as_str()) {
                return Err(format!(
                    "{at}: the name is used twice; names must be unique"
                ));
            }
            if let Some(t) = &case.timeout {
                parse_millis(t).map_err(|e| format!("{at}: timeout: {e}"))?;
            }
            if let Some(t) = &case.startup_wait {
                parse_millis(t).map_err(|e| format!("{at}: startup_wait: {e}"))?;
            }
            if let Some(t) = &case.expect.startup_wait
                && t != "none"
            {
                parse_millis(t)
                    .map_err(|e| format!("{at}: expect.startup_wait: {e} (or \"none\")"))?;
            }
            for (key, n) in [
                ("network", &case.network),
                ("max_network", &case.max_network),
            ] {
                if let Some(n) = n {
                    network_named(n).map_err(|e| format!("{at}: {key}: {e}"))?;
                }
            }
            if let Some(n) = &case.expect.network
                && n != "allow"
            {
                network_named(n)
                    .map_err(|e| format!("{at}: expect.network: {e} (or \"allow\")"))?;
            }
            for (key, w) in [
                ("writable", &case.writable),
                ("max_writable", &case.max_writable),
                ("expect.writable", &case.expect.writable),
            ] {
                if let Some(w) = w {
                    w.paths().map_err(|e| format!("{at}: {key}: {e}"))?;
                }
            }
            if let Some(t) = &case.expect.timeout
                && t != "none"
            {
                parse_millis(t).map_err(|e| format!("{at}: expect.timeout: {e} (or \"none\")"))?;
            }
            if let Some(o) = &case.expect.on_timeout
                && o != "kill"
                && o != "background"
            {
                return Err(format!(
                    "{at}: expect.on_timeout is {o:?}; use \"kill\" or \"background\""
                ));
            }
            let run_only = case.expect.command.is_some()
                || case.expect.background.is_some()
                || case.expect.timeout.is_some()
                || case.expect.on_timeout.is_some()
                || case.expect.env.is_some()
                || case.expect.workdir.is_some()
                || case.expect.no_notes
                || case.expect.network.is_some()
                || case.expect.writable.is_some()
                || case.expect.startup_wait.is_some()
                || !case.expect.rules.items().is_empty()
                || !case.expect.notes_contain.items().is_empty();
            let reason = !case.expect.reason_contains.items().is_empty();
            let question = !case.expect.question_contains.items().is_empty();
            match case.expect.decision {
                ExpectedDecision::Deny if run_only || question => {
                    return Err(format!(
                        "{at}: a deny expectation can only check reason_contains and rule"
                    ));
                }
                ExpectedDecision::Run if reason || question || case.expect.rule.is_some() => {
                    return Err(format!(
                        "{at}: reason_contains and rule apply to decision = \"deny\" or \"ask\", question_contains \
                         to \"ask\" (a run's rules are checked with rules)"
                    ));
                }
                ExpectedDecision::Ask if reason => {
                    return Err(format!(
                        "{at}: an ask has a question, not a reason: use question_contains"
                    ));
                }
                _ => {}
            }
        }
        Ok(file)
    }
}

impl Case {
    /// The request this case sends.
    pub fn request(&self) -> Request {
        let network = |n: &Option<String>| n.as_deref().and_then(|n| network_named(n).ok());
        let writable = |w: &Option<Writable>| w.as_ref().and_then(|w| w.paths().ok());
        let confinement = Confinement::new(
            network(&self.network).unwrap_or(Network::Host),
            writable(&self.writable).flatten(),
        );
        let ceiling = Confinement::new(
            network(&self.max_network).unwrap_or_else(|| confinement.network.clone()),
            match writable(&self.max_writable) {
                Some(w) => w,
                None => confinement.writable.clone(),
            },
        );
        let mut request = Request::new(self.command.clone());
        request.workdir = self.workdir.clone();
        request.timeout_ms = self.timeout.as_deref().and_then(|t| parse_millis(t).ok());
        request.background = self.background;
        request.env = self.env.clone().into_iter().collect();
        request.context = self.context.clone().into_iter().collect();
        request.interactive = self.interactive || self.tty;
        request.tty = self.tty;
        request.confinement = confinement;
        request.ceiling = ceiling;
        request.startup_wait_ms = self
            .startup_wait
            .as_deref()
            .and_then(|t| parse_millis(t).ok());
        if let Some(shell) = &self.shell {
            request.shell.clone_from(shell);
        }
        if let Some(os) = &self.os {
            request.os.clone_from(os);
        }
        request
    }
}

/// One difference between expected and actual.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mismatch {
    /// The field (`decision`, `command`, `notes`, ...).
    pub field: String,
    /// What the case expects.
    pub expected: String,
    /// What the policy produced.
    pub actual: String,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case file.
    pub file: PathBuf,
    /// The case name.
    pub name: String,
    /// Every mismatch (empty: passed).
    pub mismatches: Vec<Mismatch>,
    /// The rules the decision named (a plan's rules, or the rule of a deny), for coverage.
    pub rules: Vec<String>,
    /// The kinds of outcome the case produced, for coverage of policies that do not name rules: `deny`, `run`,
    /// `rewrite`, `background`, `note`, `confinement`.
    pub outcomes: Vec<&'static str>,
}

impl CaseResult {
    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:\n    expected: {}\n    actual:   {}",
            self.field, self.expected, self.actual
        )
    }
}

fn on_timeout_name(o: OnTimeout) -> &'static str {
    match o {
        OnTimeout::Kill => "kill",
        OnTimeout::Background => "background",
    }
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// Compares an outcome with a case's expectation.
pub fn compare(expect: &Expect, outcome: &Outcome) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut miss = |field: &str, expected: String, actual: String| {
        out.push(Mismatch {
            field: field.to_string(),
            expected,
            actual,
        })
    };
    match (expect.decision, outcome) {
        (ExpectedDecision::Deny, Outcome::Deny(denial)) => {
            contains_each(&mut miss, "reason", &expect.reason_contains, &denial.reason);
            same_rule(&mut miss, expect, denial.rule.as_deref());
        }
        (ExpectedDecision::Ask, Outcome::Ask(ask)) => {
            contains_each(
                &mut miss,
                "question",
                &expect.question_contains,
                &ask.question,
            );
            same_rule(&mut miss, expect, ask.rule.as_deref());
            compare_plan(&mut miss, expect, &ask.plan);
        }
        (ExpectedDecision::Run, Outcome::Run(plan)) => compare_plan(&mut miss, expect, plan),
        (want, got) => miss("decision", want.as_str().into(), actual_decision(got)),
    }
    out
}

/// An outcome as a mismatch shows it: `run "cmd"`, `deny: "reason"`, `ask: "question"`.
fn actual_decision(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Run(plan) => format!("run {}", quoted(&plan.command)),
        Outcome::Deny(denial) => format!("deny: {}", quoted(&denial.reason)),
        Outcome::Ask(ask) => format!("ask: {}", quoted(&ask.question)),
    }
}

/// Each of `wants` must appear in `text` (a reason or question).
fn contains_each(
    miss: &mut impl FnMut(&str, String, String),
    field: &str,
    wants: &OneOrMany,
    text: &str,
) {
    for want in wants.items() {
        if !text.contains(want) {
            miss(field, format!("contains {}", quoted(want)), quoted(text));
        }
    }
}

/// The rule a deny or an ask names, when the case says which.
fn same_rule(miss: &mut impl FnMut(&str, String, String), expect: &Expect, actual: Option<&str>) {
    if let Some(rule) = &expect.rule
        && actual != Some(rule.as_str())
    {
        miss(
            "rule",
            quoted(rule),
            actual.map(quoted).unwrap_or("none".into()),
        );
    }
}

/// The plan's fields a case names (a run's plan, or the plan an ask would run).
fn compare_plan(miss: &mut impl FnMut(&str, String, String), expect: &Expect, plan: &Plan) {
    if let Some(c) = &expect.command
        && c != &plan.command
    {
        miss("command", quoted(c), quoted(&plan.command));
    }
    if let Some(b) = expect.background
        && b != plan.background
    {
        let mode = |b: bool| if b { "background" } else { "foreground" }.to_string();
        miss("mode", mode(b), mode(plan.background));
    }
    if let Some(t) = &expect.timeout {
        let want = if t == "none" {
            None
        } else {
            parse_millis(t).ok()
        };
        if want != plan.timeout_ms {
            let show = |v: Option<u64>| v.map(format_millis).unwrap_or_else(|| "none".into());
            miss("timeout", show(want), show(plan.timeout_ms));
        }
    }
    if let Some(o) = &expect.on_timeout
        && o != on_timeout_name(plan.on_timeout)
    {
        miss(
            "on_timeout",
            o.clone(),
            on_timeout_name(plan.on_timeout).into(),
        );
    }
    if let Some(w) = &expect.workdir
        && Some(w) != plan.workdir.as_ref()
    {
        miss(
            "workdir",
            quoted(w),
            plan.workdir.as_deref().map(quoted).unwrap_or("none".into()),
        );
    }
    if let Some(env) = &expect.env {
        let actual: BTreeMap<String, String> = plan.env.iter().cloned().collect();
        if env != &actual {
            miss("env", format!("{env:?}"), format!("{actual:?}"));
        }
    }
    for want in expect.notes_contain.items() {
        if !plan.notes.iter().any(|n| n.contains(want)) {
            miss(
                "notes",
                format!("a note containing {}", quoted(want)),
                format!("{:?}", plan.notes),
            );
        }
    }
    if expect.no_notes && !plan.notes.is_empty() {
        miss("notes", "none".into(), format!("{:?}", plan.notes));
    }
    if let Some(n) = &expect.network
        && n != plan.confinement.network.as_str()
    {
        miss(
            "network",
            n.clone(),
            plan.confinement.network.as_str().into(),
        );
    }
    if let Some(w) = &expect.writable
        && let Ok(want) = w.paths()
        && want != plan.confinement.writable
    {
        let show = |w: &Option<Vec<String>>| match w {
            None => "any".to_string(),
            Some(p) => format!("{p:?}"),
        };
        miss("writable", show(&want), show(&plan.confinement.writable));
    }
    if let Some(t) = &expect.startup_wait {
        let want = if t == "none" {
            None
        } else {
            parse_millis(t).ok()
        };
        if want != plan.startup_wait_ms {
            let show = |v: Option<u64>| v.map(format_millis).unwrap_or_else(|| "none".into());
            miss("startup_wait", show(want), show(plan.startup_wait_ms));
        }
    }
    for want in expect.rules.items() {
        if !plan.rules.iter().any(|r| r == want) {
            miss(
                "rules",
                format!("includes {}", quoted(want)),
                format!("{:?}", plan.rules),
            );
        }
    }
}

/// Runs a case file against a policy (or a chain of them). Cases whose name does not contain `filter` are skipped.
/// Policies are loaded once per distinct settings.
pub fn run_file(
    engine: &PolicyEngine,
    policies: &[PolicyUnderTest],
    path: &Path,
    file: &CaseFile,
    filter: Option<&str>,
) -> Result<Vec<CaseResult>, CaseError> {
    let mut chains: Vec<(Option<SettingsSpec>, PolicyChain)> = Vec::new();
    let mut results = Vec::new();
    for case in &file.cases {
        if filter.is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        let spec = case.settings.clone().or_else(|| file.settings.clone());
        let load_err = |error: String| CaseError::Load {
            path: path.to_path_buf(),
            case: case.name.clone(),
            error,
        };
        let index = match chains.iter().position(|(s, _)| *s == spec) {
            Some(i) => i,
            None => {
                let mut loaded = Vec::new();
                for (i, p) in policies.iter().enumerate() {
                    let settings = match &spec {
                        Some(s) => s.for_policy(i).map_err(load_err)?,
                        None => String::new(),
                    };
                    let policy = engine
                        .load_bytes(&p.name, &p.bytes, &settings)
                        .map_err(|e: PolicyError| load_err(e.to_string()))?;
                    loaded.push(policy);
                }
                chains.push((spec, PolicyChain::new(loaded, FaultMode::Deny)));
                chains.len() - 1
            }
        };
        let request = case.request();
        let decision = chains[index].1.evaluate(&request);
        results.push(CaseResult {
            file: path.to_path_buf(),
            name: case.name.clone(),
            mismatches: compare(&case.expect, &decision.outcome),
            rules: match &decision.outcome {
                Outcome::Run(p) => p.rules.clone(),
                Outcome::Deny(d) => d.rule.iter().cloned().collect(),
                Outcome::Ask(a) => a.rule.iter().chain(&a.plan.rules).cloned().collect(),
            },
            outcomes: outcome_kinds(&request, &decision.outcome),
        });
    }
    Ok(results)
}

/// The kinds of outcome `outcome` is for `request`, for coverage of policies that do not name rules.
pub fn outcome_kinds(request: &Request, outcome: &Outcome) -> Vec<&'static str> {
    let (plan, mut kinds) = match outcome {
        Outcome::Deny(_) => return vec!["deny"],
        Outcome::Run(p) => (p, vec!["run"]),
        Outcome::Ask(a) => (&a.plan, vec!["ask"]),
    };
    if plan.command != request.command {
        kinds.push("rewrite");
    }
    if plan.background && request.background != Some(true) {
        kinds.push("background");
    }
    if !plan.notes.is_empty() {
        kinds.push("note");
    }
    if plan.confinement != request.confinement {
        kinds.push("confinement");
    }
    kinds
}

/// Finds the case file of a policy component: `cases.toml` in the component's directory or an ancestor, or
/// `policies/<name>/cases.toml` under an ancestor, where `<name>` comes from the file stem (`shellward_guard_policy`
/// → `guard`).
pub fn discover(component: &Path) -> Option<PathBuf> {
    let stem = component.file_stem()?.to_string_lossy().to_string();
    let short = stem
        .trim_start_matches("shellward_")
        .trim_start_matches("shellward-")
        .trim_end_matches("_policy")
        .trim_end_matches("-policy")
        .replace('_', "-");
    let start = component
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .or_else(|| std::env::current_dir().ok())?;
    for dir in start.ancestors() {
        let here = dir.join("cases.toml");
        if here.is_file() {
            return Some(here);
        }
        for name in [&short, &stem] {
            let p = dir.join("policies").join(name).join("cases.toml");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
