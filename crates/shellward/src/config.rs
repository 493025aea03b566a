//! The configuration file (TOML): the policy chain, sandbox limits, executor limits, the shell, default environment
//! and tool limits.
//!
//! Parsing walks the TOML table by hand instead of deriving `Deserialize`, so that one pass reports **every** problem
//! with its key path (`executor.grace`, `policy[2].settings`), not just the first.
//!
//! ```toml
//! [[policy]]                      # the chain, in order; no [[policy]] at all = the built-in default, then guard
//! builtin = "default"             # or "guard", or: path = "my-policy.wasm" (relative to this file)
//! fail_open = false               # on a policy fault: deny (false, default) or skip this policy (true)
//! [policy.settings]               # passed to the policy's configure() as JSON
//! default_timeout = "30s"
//!
//! [sandbox]
//! deadline = "100ms"
//! memory_mib = 64
//! instance_mode = "reuse"         # or "fresh"
//! cache_dir = "/var/cache/shellward"   # or cache = false
//!
//! [policies]
//! dir = "policies.d"              # drop-in components (*.wasm, with optional NAME.toml: fail_open, [settings])
//!
//! [audit]                         # one JSON line per decision and per process end
//! path = "/var/log/shellward/audit.jsonl"   # or "-" for standard output (serve only)
//! max_bytes = 104857600           # rotate past this size (0: never); PATH.1 … PATH.keep
//! keep = 5
//! include_output = false          # output is never logged unless true (byte counts always are)
//!
//! [executor]
//! shell = ["sh", "-c"]
//! workdir = "/srv/project"
//! grace = "2s"
//! drain = "2s"
//! max_running = 256
//! retention = "30m"
//! output_head_bytes = 16384
//! output_tail_bytes = 16384
//! max_line_bytes = 2048
//! log_cap_bytes = 67108864
//! separate_stderr = false
//! containment = "auto"            # or "process-group"
//! log_dir = "/tmp"
//!
//! max_running_per_session = 64
//! max_retained_per_session = 100
//! max_log_bytes = 536870912
//! pid_namespace = true            # each session's commands in a PID namespace of its own when the host allows it
//! session_idle = "60s"            # a session's namespace ends this long after its last start once it is empty
//! max_processes = 4096            # processes per command tree (cgroup pids); 0 = unlimited
//! max_address_space_bytes = 0     # RLIMIT_AS per process; 0 = unlimited (the default)
//! max_file_size_bytes = 0         # RLIMIT_FSIZE; 0 = unlimited
//! max_cpu_seconds = 0             # RLIMIT_CPU; 0 = unlimited
//! keep_capabilities = []          # root commands keep these beyond the default set (e.g. "CAP_SYS_PTRACE")
//! read_only_paths = []            # more paths commands see read-only (the config, policies, caches always are)
//! hidden_paths = []               # more paths commands cannot read (token file, cache key, audit log always are)
//!
//! [env]                           # what commands inherit from shellward's environment, and what is set
//! inherit = "all"                 # or "core" (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TMPDIR, TZ) or "none"
//! allow = ["MY_API_KEY"]          # secret-looking names to pass anyway (SHELLWARD_* never are)
//! exclude = ["AWS_*"]             # never passed
//! include_only = []               # when not empty: only these are passed
//! ignore_default_excludes = false # true passes secret-looking names (*TOKEN*, *KEY*, ...) too
//! [env.set]                       # set for every command (also: plain NAME = "value" keys under [env])
//! CI = "1"
//!
//! [[auth]]                        # `serve`: a bearer token bound to the sessions it may use
//! token_env = "AGENT_A_TOKEN"     # read from this variable (or token = "…")
//! sessions = ["agent-a"]          # a request naming no session uses the first
//!
//! [tools]
//! max_command_bytes = 131071
//! default_wait = "10s"
//! max_wait = "10m"
//! max_read_bytes = 65536
//! list_limit = 100
//!
//! [confinement]                   # what each command may touch (manual: docs/src/confinement.md)
//! network = "host"                # or "loopback" (its session's loopback only) or "none"
//! writable = ["$WORKDIR", "$TMPDIR", "/tmp", "/var/tmp", "~/.cache"]   # writes only beneath these; or "any"
//! deny_read = ["~/.ssh", "~/.aws"]   # hidden in every session's sandbox
//! deny_syscalls = ["ptrace", "bpf"]  # refused (EPERM) by a seccomp filter; [] for none
//!
//! [oci]                           # what pulling an `oci = "REF"` policy accepts from the registry
//! max_manifest_bytes = 1048576
//! max_component_bytes = 67108864
//! connect_timeout = "10s"
//! read_timeout = "30s"            # longest wait for the next bytes
//! deadline = "5m"                 # the whole pull
//! min_rate = 1024                 # bytes/s each answer must average over 15 s (0: no minimum)
//!
//! [approvals]                     # commands a policy asks about (manual: docs/src/approvals.md)
//! expiry = "5m"                   # unanswered this long: denied, and it never starts late
//! client = true                   # ask the person at the client (MCP elicitation, HTTP pending approvals)
//! preview = true                  # preview an asked command first and show what it would change with the question
//! allow_file = "approved.txt"     # commands approved for every session, one per line (read, never written)
//! [approvals.reviewer]            # then a command: one JSON request on stdin, one JSON answer on stdout
//! command = ["/usr/local/bin/review", "--strict"]
//! timeout = "30s"
//! ```

use shellward_exec::ExecutorConfig;

/// A minute and an hour, for the upper bounds of duration settings.
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
use shellward_policy::{FaultMode, Policy, PolicyChain, PolicyEngine, SandboxConfig};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The policy a chain entry loads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicySource {
    /// The default policy embedded in the binary.
    Default,
    /// The guard policy embedded in the binary (catastrophic commands denied).
    Guard,
    /// A component file.
    File(PathBuf),
    /// A component in an OCI registry (`REGISTRY/REPOSITORY:TAG` or `…@sha256:DIGEST`), pulled, verified and cached
    /// when the chain is loaded (a pinned reference already cached needs no network).
    Oci(String),
}

/// As `config check` names it: `default (embedded)`, `guard (embedded)`, the file's path, `oci:REFERENCE`.
impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySource::Default => f.write_str("default (embedded)"),
            PolicySource::Guard => f.write_str("guard (embedded)"),
            PolicySource::File(path) => write!(f, "{}", path.display()),
            PolicySource::Oci(reference) => write!(f, "oci:{reference}"),
        }
    }
}

/// One entry of the policy chain.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyEntry {
    /// Where the component comes from.
    pub source: PolicySource,
    /// Settings as JSON text, passed to the policy's `configure`.
    pub settings: String,
    /// Skip this policy when it faults (fail open) instead of denying the command (fail closed, the default).
    pub fail_open: bool,
}

impl PolicyEntry {
    /// The embedded default policy with its default settings, fail closed.
    pub fn default_policy() -> PolicyEntry {
        PolicyEntry {
            source: PolicySource::Default,
            settings: "{}".into(),
            fail_open: false,
        }
    }

    /// The policy from `source` with its default settings, fail closed.
    pub fn from_source(source: PolicySource) -> PolicyEntry {
        PolicyEntry {
            source,
            ..PolicyEntry::default_policy()
        }
    }

    /// The embedded guard policy with its default settings, fail closed.
    pub fn guard_policy() -> PolicyEntry {
        PolicyEntry {
            source: PolicySource::Guard,
            ..PolicyEntry::default_policy()
        }
    }
}

/// Limits of the agent tools themselves. Start from `Default` and change fields (they can grow).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolLimits {
    /// Longest accepted command, in bytes. Default 131071: Linux refuses a longer single argument.
    pub max_command_bytes: usize,
    /// `process_output` waits this long when the call gives no `wait`.
    pub default_wait: Duration,
    /// Longest `wait` honoured; longer ones are shortened, with a note.
    pub max_wait: Duration,
    /// Most bytes one cursor read returns.
    pub max_read_bytes: usize,
    /// Most entries `process_list` returns.
    pub list_limit: usize,
    /// How long `execute` waits on a background start before returning it as running: it returns sooner when the
    /// command exits (a start-up failure, with its exit code and output) or its processes listen on a port or
    /// socket (ready, saying on what).
    pub startup_wait: Duration,
    /// `process_output` without `wait` or `idle` returns once output has been quiet this long.
    pub default_idle: Duration,
    /// What a cancelled call does to its foreground command (`[tools] on_cancel`).
    pub on_cancel: OnCancel,
}

/// What a cancelled call (an MCP `notifications/cancelled`, a cancelled task, a client gone) does to the foreground
/// command it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnCancel {
    /// Stop its whole tree: terminate, the grace period, kill (the default).
    #[default]
    Stop,
    /// Keep it running as a tracked background process; the session's next answer says so, and `process_list`
    /// lists it.
    Background,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            max_command_bytes: 131_071,
            default_wait: Duration::from_secs(10),
            max_wait: Duration::from_secs(600),
            max_read_bytes: 64 * 1024,
            list_limit: 100,
            startup_wait: Duration::from_secs(3),
            default_idle: Duration::from_secs(1),
            on_cancel: OnCancel::Stop,
        }
    }
}

/// A whole configuration: what a config file describes, with defaults for what it leaves out. Load one
/// ([`Config::load`]) or start from `Default` and change fields (they can grow).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The policy chain in order.
    pub policies: Vec<PolicyEntry>,
    /// Policy sandbox limits (the per-policy fault mode comes from [`PolicyEntry::fail_open`]).
    pub sandbox: SandboxConfig,
    /// Executor settings, including the shell and default environment.
    pub executor: ExecutorConfig,
    /// Tool limits.
    pub tools: ToolLimits,
    /// Bearer tokens bound to sessions (`[[auth]]`), for HTTP hosts serving several tenants.
    pub auth: Vec<AuthEntry>,
    /// A drop-in directory of policies (`[policies] dir`): every `*.wasm` in it joins the chain after the
    /// `[[policy]]` entries (or after the built-in chain when there are none), in file-name order, each with an
    /// optional `NAME.toml` beside it (`fail_open`, `[settings]`). Read each time the chain is loaded or reloaded.
    pub policy_dir: Option<PathBuf>,
    /// The file this configuration was loaded from, re-read by [`crate::Policies::reload`].
    pub source_file: Option<PathBuf>,
    /// The audit log (`[audit]`): one JSON line per decision and per process end. `None`: no audit log.
    pub audit: Option<crate::AuditConfig>,
    /// What a pull of an `oci = "REF"` policy accepts from the registry (`[oci]`).
    pub oci: crate::oci::PullLimits,
    /// What each command may touch (`[confinement]`): where it may write, what it may not read, its network.
    pub confinement: crate::ConfinementConfig,
    /// Who answers when a policy asks, and how long an answer may take (`[approvals]`).
    pub approvals: crate::approval::ApprovalsConfig,
}

impl Config {
    /// The host's own files that commands must not write: this configuration file, its policy components and
    /// drop-in directory, the compiled-policy and OCI caches, the audit log. Absolute (symbolic links resolved where
    /// the path exists); the executor makes them read-only in every command's mount namespace.
    pub fn host_files(&self) -> Vec<PathBuf> {
        let mut paths = self.host_file_paths();
        paths.extend(self.host_secrets());
        paths
    }

    /// The host's secrets, which commands must not even read: the compiled-policy cache's key (whoever reads it can
    /// make cache entries the host runs as policy code), the audit log (every session's commands) and, when it has
    /// `[[auth]]` entries, the configuration file (it may hold `serve`'s tokens). Absolute; the
    /// executor covers them in every command's mount namespace. `serve` adds its token file.
    pub fn host_secrets(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = Vec::new();
        // A configuration with `[[auth]]` entries may hold the tokens themselves (`token = "…"`).
        if !self.auth.is_empty() {
            paths.extend(self.source_file.clone());
        }
        paths.extend(
            self.sandbox
                .cache_dir
                .as_ref()
                .map(|d| d.join(shellward_policy::cache::KEY_FILE)),
        );
        paths.extend(
            self.audit
                .as_ref()
                .map(|a| a.path.clone())
                .filter(|p| p.as_os_str() != "-"),
        );
        absolute_all(paths)
    }

    /// [`Config::host_files`] but the secrets (which it adds).
    fn host_file_paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = Vec::new();
        paths.extend(self.source_file.clone());
        paths.extend(self.policy_dir.clone());
        paths.extend(self.policies.iter().filter_map(|e| match &e.source {
            PolicySource::File(p) => Some(p.clone()),
            _ => None,
        }));
        paths.extend(self.sandbox.cache_dir.clone());
        paths.extend(crate::oci::default_cache_dir());
        absolute_all(paths)
    }
}

/// The paths made absolute: symbolic links resolved where the path exists, else joined to the current directory.
fn absolute_all(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths
        .into_iter()
        .filter_map(|p| p.canonicalize().or_else(|_| std::path::absolute(&p)).ok())
        .collect()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policies: vec![PolicyEntry::default_policy(), PolicyEntry::guard_policy()],
            sandbox: SandboxConfig::default(),
            executor: ExecutorConfig::default(),
            tools: ToolLimits::default(),
            auth: Vec::new(),
            policy_dir: None,
            source_file: None,
            audit: None,
            oci: crate::oci::PullLimits::default(),
            confinement: crate::ConfinementConfig::default(),
            approvals: crate::approval::ApprovalsConfig::default(),
        }
    }
}

/// A bearer token and the sessions it may use (`[[auth]]`). A request with this token may name only these sessions;
/// one that names none uses the first.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthEntry {
    /// The token (from `token`, or read from the variable named by `token_env` when the file is loaded).
    pub token: String,
    /// The sessions it may use, at least one.
    pub sessions: Vec<String>,
}

impl fmt::Debug for AuthEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthEntry")
            .field("token", &"<redacted>")
            .field("sessions", &self.sessions)
            .finish()
    }
}

/// Whether a session id is well formed: 1 to 128 visible ASCII characters.
pub fn valid_session(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// One problem in a configuration, with the key it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// Key path, e.g. `executor.grace` or `policy[1].settings` (empty for the file as a whole).
    pub key: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl Problem {
    /// A problem with `key` (a key path such as `executor.grace`; empty for the file as a whole).
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// Every problem found in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct ConfigError {
    /// The file (when the configuration came from one).
    pub file: Option<PathBuf>,
    /// The problems, in file order.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// The problems found in `file` (or in a configuration that came from no file).
    pub fn new(file: Option<PathBuf>, problems: Vec<Problem>) -> ConfigError {
        ConfigError { file, problems }
    }

    /// An error with one problem that belongs to no key.
    pub fn plain(message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            problems: vec![Problem {
                key: String::new(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "invalid configuration {}", file.display())?,
            None => write!(f, "invalid configuration")?,
        }
        let n = self.problems.len();
        write!(f, " ({n} problem{}):", if n == 1 { "" } else { "s" })?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

/// Reads a drop-in policy's `NAME.toml`: `fail_open = BOOL` and a `[settings]` table (the keys of a `[[policy]]`
/// entry other than its source). Returns the settings as JSON and the fault mode.
fn drop_in_settings(path: &Path) -> Result<(String, bool), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut table: toml::Table = text
        .parse()
        .map_err(|e| format!("is not valid TOML: {e}"))?;
    let fail_open = match table.remove("fail_open") {
        None => false,
        Some(toml::Value::Boolean(b)) => b,
        Some(other) => {
            return Err(format!(
                "fail_open must be true or false, found {}",
                type_name(&other)
            ));
        }
    };
    let settings = match table.remove("settings") {
        None => "{}".to_string(),
        Some(v @ toml::Value::Table(_)) => serde_json::to_string(&v)
            .map_err(|e| format!("settings cannot be passed as JSON: {e}"))?,
        Some(other) => {
            return Err(format!(
                "settings must be a table ([settings]), found {}",
                type_name(&other)
            ));
        }
    };
    if let Some(key) = table.keys().next() {
        return Err(format!(
            "unknown key `{key}`; a drop-in policy's file takes fail_open and [settings] (its source is the .wasm \
             beside it)"
        ));
    }
    Ok((settings, fail_open))
}

impl Config {
    /// Reads and validates a configuration file. Relative policy paths are resolved against the file's directory.
    ///
    /// ```
    /// let err = shellward::Config::load(std::path::Path::new("/nonexistent/shellward.toml")).unwrap_err();
    /// let text = err.to_string();
    /// assert!(text.contains("/nonexistent/shellward.toml") && text.contains("existing, readable"), "{text}");
    /// assert!(!text.contains("--config"), "the library knows nothing of the CLI's flags: {text}");
    /// ```
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (config, problems) = Config::load_partial(path)?;
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError {
                file: Some(path.to_path_buf()),
                problems,
            })
        }
    }

    /// Reads a configuration file as far as it is valid: the configuration with what could be read (defaults where a
    /// setting has a problem) and every problem found, so a checker can go on to load the policies it names and
    /// report their problems in the same pass. Only an unreadable file or invalid TOML is an error.
    pub fn load_partial(path: &Path) -> Result<(Config, Vec<Problem>), ConfigError> {
        let fail = |message: String| ConfigError {
            file: Some(path.to_path_buf()),
            problems: vec![Problem {
                key: String::new(),
                message,
            }],
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            fail(format!(
                "cannot read the file: {e}; check that the path names an existing, readable configuration file"
            ))
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| fail(format!("not valid TOML: {}", e.to_string().trim_end())))?;
        let mut w = Walker::default();
        let mut config = w.config(table, base);
        config.source_file = Some(path.to_path_buf());
        Ok((config, w.problems))
    }

    /// Parses configuration text; relative policy paths are resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError {
            file: None,
            problems: vec![Problem {
                key: String::new(),
                message: format!("not valid TOML: {}", e.to_string().trim_end()),
            }],
        })?;
        let mut w = Walker::default();
        let config = w.config(table, base);
        if w.problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError {
                file: None,
                problems: w.problems,
            })
        }
    }

    /// Every policy of the chain, in order, each with the key path its problems are reported under: the `[[policy]]`
    /// entries (`policy[N]`), then the drop-in directory's components in file-name order (`policies.dir/NAME.wasm`,
    /// settings from `NAME.toml` beside it). Problems of the directory (unreadable, a bad `NAME.toml`) are all
    /// reported.
    pub fn policy_entries(&self) -> Result<Vec<(String, PolicyEntry)>, ConfigError> {
        let mut out: Vec<(String, PolicyEntry)> = self
            .policies
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("policy[{i}]"), e.clone()))
            .collect();
        let Some(dir) = &self.policy_dir else {
            return Ok(out);
        };
        let mut problems = Vec::new();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect(),
            Err(e) => {
                return Err(ConfigError {
                    file: self.source_file.clone(),
                    problems: vec![Problem {
                        key: "policies.dir".into(),
                        message: format!(
                            "cannot read {}: {e}; give an existing directory of policy components",
                            dir.display()
                        ),
                    }],
                });
            }
        };
        files.sort();
        for file in files {
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let key = format!("policies.dir/{name}");
            let sidecar = file.with_extension("toml");
            let mut entry = PolicyEntry {
                source: PolicySource::File(file.clone()),
                settings: "{}".into(),
                fail_open: false,
            };
            if sidecar.is_file() {
                match drop_in_settings(&sidecar) {
                    Ok((settings, fail_open)) => {
                        entry.settings = settings;
                        entry.fail_open = fail_open;
                    }
                    Err(message) => {
                        problems.push(Problem {
                            key: format!(
                                "policies.dir/{}",
                                sidecar.file_name().unwrap_or_default().to_string_lossy()
                            ),
                            message,
                        });
                        continue;
                    }
                }
            }
            out.push((key, entry));
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(ConfigError {
                file: self.source_file.clone(),
                problems,
            })
        }
    }

    /// Loads the policy chain this configuration describes (compiling, checking and configuring every policy).
    /// Problems are reported per entry (`policy[N]`, `policies.dir/NAME.wasm`), all of them.
    pub fn load_chain(&self, engine: &PolicyEngine) -> Result<PolicyChain, ConfigError> {
        self.load_entries(&self.policy_entries()?, engine)
    }

    /// Loads a chain from entries already read with [`Config::policy_entries`] (so a caller that also describes
    /// them reads the drop-in directory once, and describes exactly what was loaded).
    pub fn load_entries(
        &self,
        entries: &[(String, PolicyEntry)],
        engine: &PolicyEngine,
    ) -> Result<PolicyChain, ConfigError> {
        let mut loaded_policies = Vec::new();
        let mut problems = Vec::new();
        for ((_, entry), loaded) in entries
            .iter()
            .zip(Self::load_each(entries, engine, &self.oci))
        {
            match loaded {
                Ok(policy) => loaded_policies.push((
                    policy,
                    if entry.fail_open {
                        FaultMode::Skip
                    } else {
                        FaultMode::Deny
                    },
                )),
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() {
            Ok(PolicyChain::with_fault_modes(loaded_policies))
        } else {
            Err(ConfigError {
                file: None,
                problems,
            })
        }
    }

    /// [`Config::load_entry`] for every entry, in order. Entries load concurrently, up to one per core: loading is
    /// mostly mapping compiled code and running each policy's `configure`, independent per policy (the built-in chain
    /// of two loaded one after the other on the critical path of `shellward run`).
    fn load_each(
        entries: &[(String, PolicyEntry)],
        engine: &PolicyEngine,
        oci: &crate::oci::PullLimits,
    ) -> Vec<Result<Policy, Problem>> {
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(entries.len());
        if workers <= 1 {
            return entries
                .iter()
                .map(|(key, entry)| Self::load_entry(key, entry, engine, oci))
                .collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<Result<Policy, Problem>>>> = entries
            .iter()
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        let work = || {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((key, entry)) = entries.get(i) else {
                    return;
                };
                let loaded = Self::load_entry(key, entry, engine, oci);
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(loaded);
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..workers {
                // No thread to be had: the ones that started (at least this one) take its share.
                let _ = std::thread::Builder::new()
                    .name("shellward-policy-load".into())
                    .spawn_scoped(scope, work);
            }
            work();
        });
        results
            .into_iter()
            .zip(entries)
            .map(|(slot, (key, entry))| {
                slot.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    // Not reached: every index was taken and filled, or its loader panicked and the scope re-raised
                    // the panic before this. Loading it here keeps the function total without a panic path.
                    .unwrap_or_else(|| Self::load_entry(key, entry, engine, oci))
            })
            .collect()
    }

    /// Loads, checks and configures one entry; a failure is the entry's problem.
    fn load_entry(
        key: &str,
        entry: &PolicyEntry,
        engine: &PolicyEngine,
        oci: &crate::oci::PullLimits,
    ) -> Result<Policy, Problem> {
        let problem = |message: String| Problem {
            key: key.to_string(),
            message,
        };
        let loaded = match &entry.source {
            PolicySource::Default => engine.load_default(&entry.settings),
            PolicySource::Guard => engine
                .load_builtin(
                    shellward_policy::embedded::GUARD_POLICY_NAME,
                    &entry.settings,
                )
                .expect("the guard is built in"),
            PolicySource::File(path) => engine.load_file(path, &entry.settings),
            PolicySource::Oci(reference) => {
                let pulled = crate::oci::default_cache_dir()
                    .ok_or_else(|| {
                        crate::oci::OciError::new(
                            "no cache directory for pulled policies: set SHELLWARD_CACHE_DIR",
                        )
                    })
                    .and_then(|dir| crate::oci::pull_with(reference, &dir, oci));
                match pulled {
                    // The bytes that were verified, not the file read again.
                    Ok(p) => engine.load_bytes(
                        &p.path.display().to_string(),
                        &p.component,
                        &entry.settings,
                    ),
                    Err(e) => return Err(problem(e.to_string())),
                }
            }
        };
        loaded.map_err(|e| problem(e.to_string()))
    }
}

mod walk;
use walk::Walker;

/// How a TOML value's type reads in a problem (`a string`, `an array`, …).
fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

#[cfg(test)]
mod tests;
