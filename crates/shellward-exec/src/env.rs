//! The environment a command gets: [`EnvPolicy`] decides what it inherits from the executor's own environment, and
//! what is set on top.
//!
//! The executor's environment holds the host's credentials (the HTTP bearer token, cloud keys); a model that can run
//! `env` must not see them. So, by default:
//!
//! - `SHELLWARD_*` variables (the host's own configuration and credentials) are **never** inherited;
//! - variables whose names look like secrets ([`DEFAULT_SECRET_PATTERNS`]: `*TOKEN*`, `*SECRET*`, `*KEY*`,
//!   `*PASS*`, `*PWD*`, `*CREDENTIAL*`, `*JWT*`, `*AUTH*`, `*COOKIE*`, `*DSN*`, `*PAT`, `*PRIVATE*`,
//!   case-insensitive; `PWD`, `OLDPWD` and `GIT_AUTHOR_*` excepted), and variables whose *values*
//!   carry a credential whatever the name ([`secret_value`]: a URL with a password, `Bearer …`, a PEM block), are
//!   not inherited unless the operator names them in [`EnvPolicy::allow`] (or turns the default off with
//!   [`EnvPolicy::ignore_default_excludes`]);
//! - everything else is inherited ([`Inherit::All`]); [`Inherit::Core`] keeps only `PATH`, `HOME`, `USER`,
//!   `LOGNAME`, `SHELL`, `LANG`, `LC_*`, `TMPDIR`, `TZ`, and [`Inherit::None`] nothing;
//! - then [`EnvPolicy::exclude`] drops names, [`EnvPolicy::include_only`] (when not empty) keeps only the names it
//!   matches, and [`EnvPolicy::set`] (the non-interactive defaults, plus the operator's) is added; a plan's own
//!   variables win over all of it.
//!
//! Patterns are matched against variable names, case-insensitively, with `*` (any run of characters) and `?` (one
//! character). The inherited part is read once, when the executor is created.

use std::ffi::{OsStr, OsString};

/// Environment defaults that keep tools from waiting for a person (no pager, no editor, no prompts, no colours) and
/// output from sitting in a buffer (Python buffers a pipe: a server's banner would never reach the agent).
pub const NON_INTERACTIVE_ENV: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_EDITOR", "true"),
    // `git rebase -i` opens this one (Coder's chat sets it too).
    ("GIT_SEQUENCE_EDITOR", "true"),
    ("EDITOR", "true"),
    ("VISUAL", "true"),
    ("PYTHONUNBUFFERED", "1"),
    ("PIP_NO_INPUT", "1"),
    ("DEBIAN_FRONTEND", "noninteractive"),
];

/// Names that look like secrets; not inherited unless allowed ([`SECRET_LOOKALIKES`] excepted).
pub const DEFAULT_SECRET_PATTERNS: &[&str] = &[
    "*TOKEN*",
    "*SECRET*",
    "*KEY*",
    "*PASS*",
    "*PWD*",
    "*CREDENTIAL*",
    "*JWT*",
    "*AUTH*",
    "*COOKIE*",
    "*DSN*",
    "*PAT",
    "*PRIVATE*",
];

/// Ordinary variables the secret patterns would otherwise catch: the shell's working directories and git's author.
pub const SECRET_LOOKALIKES: &[&str] = &["PWD", "OLDPWD", "GIT_AUTHOR_*"];

/// The host's own variables: never inherited (an operator who wants one in commands puts it in
/// [`EnvPolicy::set`]).
pub const HOST_PATTERN: &str = "SHELLWARD_*";

/// Whether a value carries a credential whatever its variable's name: a URL with a password in its user part
/// (`postgres://user:pass@host`), an HTTP authorization (`Bearer …`, `Basic …`), a PEM block (`-----BEGIN …`).
pub fn secret_value(value: &str) -> bool {
    let v = value.trim_start();
    if v.contains("-----BEGIN ") {
        return true;
    }
    let lower = v.get(..7).unwrap_or(v).to_ascii_lowercase();
    if lower.starts_with("bearer ") || lower.starts_with("basic ") {
        return true;
    }
    // scheme://user:password@host — anywhere in the value (lists of URLs, `--url=…`).
    v.match_indices("://").any(|(i, _)| {
        let rest = &v[i + 3..];
        let authority = rest
            .split(['/', '?', '#', ' ', ',', ';'])
            .next()
            .unwrap_or("");
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
            userinfo
                .split_once(':')
                .is_some_and(|(_, pw)| !pw.is_empty())
        })
    })
}

/// Why a variable is not passed to commands (see [`EnvPolicy::withheld`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Withheld {
    /// The host's own (`SHELLWARD_*`).
    Host,
    /// Its name looks like a secret ([`DEFAULT_SECRET_PATTERNS`]).
    SecretName,
    /// Its value carries a credential ([`secret_value`]).
    SecretValue,
    /// The operator's `inherit`, `exclude` or `include_only`.
    Excluded,
}

impl Withheld {
    /// A few words for an operator.
    pub fn describe(self) -> &'static str {
        match self {
            Withheld::Host => "shellward's own",
            Withheld::SecretName => "secret-looking name",
            Withheld::SecretValue => "value carries a credential",
            Withheld::Excluded => "excluded by [env]",
        }
    }
}

/// The variables [`Inherit::Core`] keeps.
#[cfg(not(windows))]
pub const CORE_PATTERNS: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_*", "TMPDIR", "TZ",
];

/// The variables [`Inherit::Core`] keeps: on Windows also what its programs need to start and find the user's
/// directories (`SystemRoot`, `ComSpec`, `PATHEXT`, `TEMP`, `USERPROFILE`, …; names compare case-insensitively).
#[cfg(windows)]
pub const CORE_PATTERNS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_*",
    "TMPDIR",
    "TZ",
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "PATHEXT",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "USERNAME",
    "USERDOMAIN",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "ProgramW6432",
    "CommonProgramFiles",
    "CommonProgramFiles(x86)",
    "PUBLIC",
    "OS",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_*",
];

/// Which of the executor's variables a command starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Inherit {
    /// All of them (minus host variables and secrets, see the module docs).
    #[default]
    All,
    /// Only [`CORE_PATTERNS`].
    Core,
    /// None.
    None,
}

impl std::str::FromStr for Inherit {
    type Err = String;

    fn from_str(s: &str) -> Result<Inherit, String> {
        match s {
            "all" => Ok(Inherit::All),
            "core" => Ok(Inherit::Core),
            "none" => Ok(Inherit::None),
            other => Err(format!(
                "unknown inherit mode {other:?}; use \"all\", \"core\" or \"none\""
            )),
        }
    }
}

/// How a command's environment is built (see the module docs for the order of the steps).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnvPolicy {
    /// What is inherited from the executor's environment.
    pub inherit: Inherit,
    /// Inherit secret-looking names too (default false: [`DEFAULT_SECRET_PATTERNS`] are excluded).
    pub ignore_default_excludes: bool,
    /// Secret-looking names to inherit anyway (patterns), e.g. `MY_API_KEY`.
    pub allow: Vec<String>,
    /// Names never inherited (patterns), on top of the defaults.
    pub exclude: Vec<String>,
    /// When not empty, only names matching one of these patterns are inherited.
    pub include_only: Vec<String>,
    /// Variables set for every command (after inheritance): [`NON_INTERACTIVE_ENV`] by default, plus the
    /// operator's. Later entries win.
    pub set: Vec<(String, String)>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy {
            inherit: Inherit::All,
            ignore_default_excludes: false,
            allow: Vec::new(),
            exclude: Vec::new(),
            include_only: Vec::new(),
            set: NON_INTERACTIVE_ENV
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

impl EnvPolicy {
    /// Sets `name` for every command (replacing an earlier value).
    pub fn set_var(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        self.set.retain(|(k, _)| *k != name);
        self.set.push((name, value.into()));
    }

    /// Whether a variable named `name` of the executor's environment is inherited.
    pub fn inherits(&self, name: &str) -> bool {
        fn any<S: AsRef<str>>(patterns: &[S], name: &str) -> bool {
            patterns.iter().any(|p| name_matches(p.as_ref(), name))
        }
        if name_matches(HOST_PATTERN, name) {
            return false;
        }
        let admitted = match self.inherit {
            Inherit::All => true,
            Inherit::Core => any(CORE_PATTERNS, name),
            Inherit::None => false,
        };
        if !admitted {
            return false;
        }
        if !self.ignore_default_excludes
            && any(DEFAULT_SECRET_PATTERNS, name)
            && !any(SECRET_LOOKALIKES, name)
            && !any(&self.allow, name)
        {
            return false;
        }
        if any(&self.exclude, name) {
            return false;
        }
        self.include_only.is_empty() || any(&self.include_only, name)
    }

    /// The environment every command starts from: the inherited part of `vars` (the executor's environment), then
    /// [`EnvPolicy::set`]. Names that are not UTF-8 are judged by their lossy form.
    pub fn base_env(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = vars
            .into_iter()
            .filter(|(k, v)| self.why_withheld(&k.to_string_lossy(), v).is_none())
            .collect();
        for (k, v) in &self.set {
            env.retain(|(name, _)| name.as_os_str() != OsStr::new(k));
            env.push((k.into(), v.into()));
        }
        env
    }

    /// The variables of `vars` (the executor's environment) a command does not get, each with why — names only:
    /// what `shellward config check` shows an operator, so nothing secret is printed. Sorted by name.
    pub fn withheld(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(String, Withheld)> {
        let mut out: Vec<(String, Withheld)> = vars
            .into_iter()
            .filter_map(|(k, v)| {
                let name = k.to_string_lossy().into_owned();
                self.why_withheld(&name, &v).map(|why| (name, why))
            })
            .collect();
        out.sort();
        out
    }

    /// Why the variable `name` (with `value`) of the executor's environment is not a command's; `None`: it is.
    fn why_withheld(&self, name: &str, value: &OsStr) -> Option<Withheld> {
        let allowed = self.allow.iter().any(|p| name_matches(p, name));
        if name_matches(HOST_PATTERN, name) {
            Some(Withheld::Host)
        } else if !self.inherits(name) {
            let secret_name = !self.ignore_default_excludes
                && DEFAULT_SECRET_PATTERNS
                    .iter()
                    .any(|p| name_matches(p, name))
                && !SECRET_LOOKALIKES.iter().any(|p| name_matches(p, name))
                && !allowed;
            Some(if secret_name {
                Withheld::SecretName
            } else {
                Withheld::Excluded
            })
        } else if !self.ignore_default_excludes
            && !allowed
            && secret_value(&value.to_string_lossy())
        {
            Some(Withheld::SecretValue)
        } else {
            None
        }
    }

    /// Checks the patterns and variables, naming the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        for p in self
            .allow
            .iter()
            .chain(&self.exclude)
            .chain(&self.include_only)
        {
            if p.is_empty() || p.contains(['=', '\0']) {
                return Err(format!(
                    "pattern {p:?} cannot match a variable name (empty, or contains `=` or NUL)"
                ));
            }
        }
        for (k, v) in &self.set {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(format!(
                    "variable {k:?} is invalid (empty name, `=` or NUL in the name, or NUL in the value)"
                ));
            }
        }
        Ok(())
    }
}

/// Case-insensitive match of a variable name against a pattern with `*` and `?`.
///
/// Hand-written (a few dozen lines) rather than a glob crate: names are short ASCII-ish strings, there are no paths,
/// classes or escapes to handle, and the executor keeps no dependency it does not need. ASCII names and patterns
/// (nearly all of them) are matched byte by byte without allocating: building an executor's environment matches
/// every inherited variable against every pattern, and the allocating Unicode path for all of them was a tenth of
/// `shellward run`'s main-thread time.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    if pattern.is_ascii() && name.is_ascii() {
        wildcard(pattern.as_bytes(), name.as_bytes(), b'*', b'?', |p, n| {
            p.eq_ignore_ascii_case(&n)
        })
    } else {
        let p: Vec<char> = pattern.chars().flat_map(char::to_uppercase).collect();
        let n: Vec<char> = name.chars().flat_map(char::to_uppercase).collect();
        wildcard(&p, &n, '*', '?', |p, n| p == n)
    }
}

/// Iterative wildcard matching with one backtrack point (the last `star`); `any` matches one symbol.
fn wildcard<S: Copy + PartialEq>(
    p: &[S],
    n: &[S],
    star: S,
    any: S,
    same: impl Fn(S, S) -> bool,
) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] != star && (p[pi] == any || same(p[pi], n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == star {
            back = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = back {
            pi = sp + 1;
            ni = sn + 1;
            back = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
        names.iter().map(|n| (n.into(), "v".into())).collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    /// Credentials under other names, and credentials in values whatever the name, are withheld by default; look-alikes
    /// and ordinary values pass; `allow` still opts in.
    #[test]
    fn secrets_by_other_names_and_by_shape_are_withheld() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
        };
        let p = EnvPolicy::default();
        let given = env(&[
            ("DATABASE_URL", "postgres://u:pass@db.internal:5432/app"),
            ("MYSQL_PWD", "x"),
            ("PGPASS", "x"),
            ("DB_PASS", "x"),
            ("GH_PAT", "x"),
            ("JWT", "x"),
            ("CI_JOB_JWT", "x"),
            ("REDIS_AUTH", "x"),
            ("NPM_CONFIG__AUTH", "x"),
            ("DOCKER_AUTH_CONFIG", "x"),
            ("SESSION_COOKIE", "x"),
            ("PASSPHRASE", "x"),
            ("SENTRY_DSN", "https://k@o1.ingest.example/1"),
            ("SSH_AUTH_SOCK", "/run/ssh.sock"),
            ("UPSTREAM", "https://bot:hunter2@git.example/repo.git"),
            ("HEADER", "Bearer abc.def"),
            ("CERT", "-----BEGIN OPENSSH PRIVATE KEY-----\nxyz"),
            ("PWD", "/work"),
            ("OLDPWD", "/"),
            ("GIT_AUTHOR_NAME", "Ada"),
            ("PATH", "/usr/bin"),
            ("HTTP_PROXY", "http://proxy.internal:3128"),
            ("HOMEPAGE", "https://user@example.com/"),
        ]);
        let mut got = names(&p.base_env(given.clone()));
        got.truncate(6);
        assert_eq!(
            got,
            [
                "PWD",
                "OLDPWD",
                "GIT_AUTHOR_NAME",
                "PATH",
                "HTTP_PROXY",
                "HOMEPAGE"
            ],
            "{got:?}"
        );
        let p = EnvPolicy {
            allow: vec!["DATABASE_URL".into(), "GH_PAT".into()],
            ..EnvPolicy::default()
        };
        let got = names(&p.base_env(given));
        assert!(
            got.contains(&"DATABASE_URL".to_string()) && got.contains(&"GH_PAT".to_string()),
            "{got:?}"
        );
        assert!(!got.contains(&"UPSTREAM".to_string()), "{got:?}");
    }

    #[test]
    fn patterns_match_case_insensitively_with_wildcards() {
        assert!(name_matches("*TOKEN*", "github_token"));
        assert!(name_matches("*TOKEN*", "TOKEN"));
        assert!(name_matches("LC_*", "LC_ALL"));
        assert!(name_matches("A?C", "abc"));
        assert!(name_matches("*a*b*", "xxaxxbxx"));
        assert!(!name_matches("LC_*", "XLC_ALL"));
        // A `*` in the name is an ordinary character, and a `*` in the pattern still spans it.
        assert!(name_matches("A*C", "a*xc"));
        assert!(name_matches("*KEY*", "*key*"));
        assert!(!name_matches("A?C", "ac"));
        assert!(name_matches("", "") && !name_matches("", "A"));
        assert!(!name_matches("PATH", "PATHS"));
        assert!(!name_matches("*KEY", "KEYS"));
    }

    #[test]
    fn non_ascii_names_are_matched_by_their_unicode_upper_case() {
        // `ſ` (long s) upper-cases to `S`, `ﬀ` to `FF`: a name spelled with them still looks like a secret.
        assert!(name_matches("*SECRET*", "my_ſecret"));
        assert!(name_matches("*STUFF", "stuﬀ"));
        assert!(name_matches("ÄB?", "äbc"));
        assert!(!name_matches("*TOKEN*", "tökén"));
        assert!(!EnvPolicy::default().inherits("app_ſecret"));
    }

    #[test]
    fn host_credentials_and_secrets_are_not_inherited_by_default() {
        const SECRETS: &[&str] = &[
            "SHELLWARD_TOKEN",
            "SHELLWARD_CONFIG",
            "MY_API_KEY",
            "GITHUB_TOKEN",
            "db_password",
            "AWS_SECRET_ACCESS_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ];
        let p = EnvPolicy::default();
        let host: Vec<&str> = ["PATH", "HOME", "CARGO_HOME"]
            .into_iter()
            .chain(SECRETS.iter().copied())
            .collect();
        let env = p.base_env(vars(&host));
        let got = names(&env);
        for kept in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "TERM",
            "PAGER",
            "PYTHONUNBUFFERED",
        ] {
            assert!(
                got.contains(&kept.to_string()),
                "{kept} missing from {got:?}"
            );
        }
        for gone in SECRETS {
            assert!(!got.contains(&gone.to_string()), "{gone} leaked: {got:?}");
        }
    }

    #[test]
    fn the_operator_can_allow_a_secret_but_never_the_host_token() {
        let mut p = EnvPolicy {
            allow: vec!["MY_API_KEY".into(), "SHELLWARD_TOKEN".into()],
            ..EnvPolicy::default()
        };
        let got = names(&p.base_env(vars(&["MY_API_KEY", "OTHER_KEY", "SHELLWARD_TOKEN"])));
        assert!(got.contains(&"MY_API_KEY".to_string()));
        assert!(!got.contains(&"OTHER_KEY".to_string()));
        assert!(!got.contains(&"SHELLWARD_TOKEN".to_string()));
        p.ignore_default_excludes = true;
        let got = names(&p.base_env(vars(&["OTHER_KEY", "SHELLWARD_TOKEN"])));
        assert_eq!(got.iter().filter(|n| *n == "OTHER_KEY").count(), 1);
        assert!(!got.contains(&"SHELLWARD_TOKEN".to_string()));
        // `set` is explicit: it may carry anything.
        p.set_var("SHELLWARD_TOKEN", "given");
        assert!(names(&p.base_env(vars(&[]))).contains(&"SHELLWARD_TOKEN".to_string()));
    }

    #[test]
    fn inherit_modes_exclude_and_include_only() {
        let all = vars(&["PATH", "HOME", "LC_ALL", "EDITOR_X", "FOO", "BAR"]);
        let core = EnvPolicy {
            inherit: Inherit::Core,
            set: vec![],
            ..EnvPolicy::default()
        };
        assert_eq!(
            names(&core.base_env(all.clone())),
            ["PATH", "HOME", "LC_ALL"]
        );
        let none = EnvPolicy {
            inherit: Inherit::None,
            set: vec![("X".into(), "1".into())],
            ..EnvPolicy::default()
        };
        assert_eq!(names(&none.base_env(all.clone())), ["X"]);
        let filtered = EnvPolicy {
            exclude: vec!["f*".into()],
            include_only: vec!["PATH".into(), "FOO".into(), "BAR".into()],
            set: vec![],
            ..EnvPolicy::default()
        };
        assert_eq!(names(&filtered.base_env(all)), ["PATH", "BAR"]);
    }

    #[test]
    fn set_replaces_inherited_values() {
        let mut p = EnvPolicy::default();
        p.set_var("PAGER", "less");
        let env = p.base_env(vec![("PAGER".into(), "more".into())]);
        let pagers: Vec<_> = env.iter().filter(|(k, _)| k == "PAGER").collect();
        assert_eq!(pagers.len(), 1);
        assert_eq!(pagers[0].1, "less");
    }

    #[test]
    fn validation_names_the_bad_entry() {
        let p = EnvPolicy {
            exclude: vec!["A=B".into()],
            ..EnvPolicy::default()
        };
        assert!(p.validate().unwrap_err().contains("A=B"));
        let mut p = EnvPolicy::default();
        p.set_var("", "x");
        assert!(p.validate().is_err());
        assert!(EnvPolicy::default().validate().is_ok());
    }
}
