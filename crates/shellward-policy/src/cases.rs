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
//! `expect` keys: `decision` (`run` | `deny`, required), `command`, `background`, `timeout` (`"10s"` or `"none"`),
//! `on_timeout` (`kill` | `background`), `workdir`, `env` (exact table), `notes_contain` (string or array: each must
//! appear in some note), `no_notes` (true: no note at all), `reason_contains` (string or array, for deny). Keys left
//! out are not checked.

use crate::bindings::types::{OnTimeout, Outcome, Request};
use crate::chain::PolicyChain;
use crate::engine::{FaultMode, PolicyEngine};
use crate::error::PolicyError;
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
    fn for_policy(&self, i: usize) -> Result<String, String> {
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
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Run or deny.
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
    /// Texts the deny reason must contain.
    #[serde(default)]
    pub reason_contains: OneOrMany,
}

/// One case.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// Settings for this case (instead of the file's).
    #[serde(default)]
    pub settings: Option<SettingsSpec>,
    /// The expected outcome.
    pub expect: Expect,
}

/// A parsed case file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
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
                || !case.expect.notes_contain.items().is_empty();
            match case.expect.decision {
                ExpectedDecision::Deny if run_only => {
                    return Err(format!(
                        "{at}: a deny expectation can only check reason_contains"
                    ));
                }
                ExpectedDecision::Run if !case.expect.reason_contains.items().is_empty() => {
                    return Err(format!(
                        "{at}: reason_contains only applies to decision = \"deny\""
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
        Request {
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            timeout_ms: self.timeout.as_deref().and_then(|t| parse_millis(t).ok()),
            background: self.background,
            on_timeout: None,
            env: self.env.clone().into_iter().collect(),
            context: self.context.clone().into_iter().collect(),
            interactive: self.interactive || self.tty,
            tty: self.tty,
        }
    }
}

/// One difference between expected and actual.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        (ExpectedDecision::Deny, Outcome::Deny(reason)) => {
            for want in expect.reason_contains.items() {
                if !reason.contains(want) {
                    miss(
                        "reason",
                        format!("contains {}", quoted(want)),
                        quoted(reason),
                    );
                }
            }
        }
        (ExpectedDecision::Deny, Outcome::Run(plan)) => miss(
            "decision",
            "deny".into(),
            format!("run {}", quoted(&plan.command)),
        ),
        (ExpectedDecision::Run, Outcome::Deny(reason)) => miss(
            "decision",
            "run".into(),
            format!("deny: {}", quoted(reason)),
        ),
        (ExpectedDecision::Run, Outcome::Run(plan)) => {
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
                    let show =
                        |v: Option<u64>| v.map(format_millis).unwrap_or_else(|| "none".into());
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
        }
    }
    out
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
        let decision = chains[index].1.evaluate(&case.request());
        results.push(CaseResult {
            file: path.to_path_buf(),
            name: case.name.clone(),
            mismatches: compare(&case.expect, &decision.outcome),
        });
    }
    Ok(results)
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
mod tests {
    use super::*;
    use crate::bindings::types::Plan;

    fn plan(command: &str) -> Plan {
        Plan {
            command: command.into(),
            workdir: None,
            background: true,
            timeout_ms: None,
            on_timeout: OnTimeout::Background,
            env: vec![],
            notes: vec!["Removed the trailing `&`".into()],
            interactive: false,
            tty: false,
        }
    }

    #[test]
    fn parse_and_compare() {
        let file = CaseFile::parse(
            r#"
            [[case]]
            name = "amp"
            command = "x &"
            expect = { decision = "run", command = "x", background = true, timeout = "none", notes_contain = "trailing" }
            "#,
        )
        .unwrap();
        let case = &file.cases[0];
        assert!(compare(&case.expect, &Outcome::Run(plan("x"))).is_empty());
        let m = compare(&case.expect, &Outcome::Run(plan("x &")));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].field, "command");
        assert_eq!(m[0].expected, "\"x\"");
        assert_eq!(m[0].actual, "\"x &\"");
        let m = compare(&case.expect, &Outcome::Deny("no".into()));
        assert_eq!(m[0].field, "decision");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, needle) in [
            ("", "no [[case]]"),
            ("[[case]]\nname = \"a\"\ncommand = \"x\"\n", "expect"),
            (
                "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"maybe\" }\n",
                "maybe",
            ),
            (
                "[[case]]\nname = \"a\"\ncommand = \"x\"\ntimeout = \"soon\"\nexpect = { decision = \"run\" }\n",
                "timeout",
            ),
            (
                "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"deny\", command = \"y\" }\n",
                "reason_contains",
            ),
            (
                "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"run\" }\n[[case]]\nname = \"a\"\ncommand = \"y\"\nexpect = { decision = \"run\" }\n",
                "twice",
            ),
            (
                "[[case]]\nname = \"a\"\ncommand = \"x\"\ncolour = 1\nexpect = { decision = \"run\" }\n",
                "colour",
            ),
        ] {
            let e = CaseFile::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn settings_per_policy() {
        let file = CaseFile::parse(
            r#"
            settings = [{ a = 1 }, "raw"]
            [[case]]
            name = "a"
            command = "x"
            expect = { decision = "run" }
            "#,
        )
        .unwrap();
        let s = file.settings.unwrap();
        assert_eq!(s.for_policy(0).unwrap(), r#"{"a":1}"#);
        assert_eq!(s.for_policy(1).unwrap(), "raw");
        assert_eq!(s.for_policy(2).unwrap(), "");
    }
}
