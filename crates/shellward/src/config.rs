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
//! [confinement]                   # what each command may touch (see README "Confinement")
//! network = "host"                # or "loopback" (its own loopback only) or "none"
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
//! ```

use shellward_exec::{ContainmentPreference, EnvPolicy, ExecutorConfig, Inherit, OutputLimits};
use shellward_policy::duration::parse_millis;

/// A minute and an hour, for the upper bounds of duration settings.
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
use shellward_policy::{FaultMode, InstanceMode, Policy, PolicyChain, PolicyEngine, SandboxConfig};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The policy a chain entry loads.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// One entry of the policy chain.
#[derive(Debug, Clone, PartialEq, Eq)]
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

    /// The embedded guard policy with its default settings, fail closed.
    pub fn guard_policy() -> PolicyEntry {
        PolicyEntry {
            source: PolicySource::Guard,
            ..PolicyEntry::default_policy()
        }
    }
}

/// Limits of the agent tools themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}

/// A whole configuration: what a config file describes, with defaults for what it leaves out.
#[derive(Debug, Clone)]
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
    /// The file this configuration was loaded from, re-read by [`crate::Shellward::reload_policies`].
    pub source_file: Option<PathBuf>,
    /// The audit log (`[audit]`): one JSON line per decision and per process end. `None`: no audit log.
    pub audit: Option<crate::AuditConfig>,
    /// What a pull of an `oci = "REF"` policy accepts from the registry (`[oci]`).
    pub oci: crate::oci::PullLimits,
    /// What each command may touch (`[confinement]`): where it may write, what it may not read, its network.
    pub confinement: crate::ConfinementConfig,
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
        }
    }
}

/// A bearer token and the sessions it may use (`[[auth]]`). A request with this token may name only these sessions;
/// one that names none uses the first.
#[derive(Clone, PartialEq, Eq)]
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
pub struct Problem {
    /// Key path, e.g. `executor.grace` or `policy[1].settings` (empty for the file as a whole).
    pub key: String,
    /// What is wrong and what to write instead.
    pub message: String,
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
pub struct ConfigError {
    /// The file (when the configuration came from one).
    pub file: Option<PathBuf>,
    /// The problems, in file order.
    pub problems: Vec<Problem>,
}

impl ConfigError {
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

/// Collects problems while reading a table.
#[derive(Default)]
struct Walker {
    problems: Vec<Problem>,
}

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

impl Walker {
    fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    fn unknown_keys(&mut self, table: toml::Table, path: &str, known: &[&str]) {
        for key in table.keys() {
            let full = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            self.problem(
                full,
                format!("unknown key; known keys here: {}", known.join(", ")),
            );
        }
    }

    fn table(&mut self, table: &mut toml::Table, key: &str, path: &str) -> Option<toml::Table> {
        match table.remove(key)? {
            toml::Value::Table(t) => Some(t),
            other => {
                self.problem(
                    join(path, key),
                    format!("expected a table, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    fn string(&mut self, table: &mut toml::Table, key: &str, path: &str) -> Option<String> {
        match table.remove(key)? {
            toml::Value::String(s) if s.contains('\0') => {
                self.problem(join(path, key), "contains a NUL byte");
                None
            }
            toml::Value::String(s) => Some(s),
            other => {
                self.problem(
                    join(path, key),
                    format!("expected a string, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    fn boolean(&mut self, table: &mut toml::Table, key: &str, path: &str) -> Option<bool> {
        match table.remove(key)? {
            toml::Value::Boolean(b) => Some(b),
            other => {
                self.problem(
                    join(path, key),
                    format!("expected true or false, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    /// A positive integer within `min..=max`.
    fn integer(
        &mut self,
        table: &mut toml::Table,
        key: &str,
        path: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        match table.remove(key)? {
            toml::Value::Integer(i) if i >= 0 && (i as u64) >= min && (i as u64) <= max => {
                Some(i as u64)
            }
            toml::Value::Integer(i) => {
                self.problem(
                    join(path, key),
                    format!("{i} is out of range; use a value from {min} to {max}"),
                );
                None
            }
            other => {
                self.problem(
                    join(path, key),
                    format!("expected an integer, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    /// A duration string, greater than zero unless `allow_zero`.
    fn duration(
        &mut self,
        table: &mut toml::Table,
        key: &str,
        path: &str,
        allow_zero: bool,
        max: Duration,
    ) -> Option<Duration> {
        let text = self.string(table, key, path)?;
        match parse_millis(&text) {
            Ok(0) if !allow_zero => {
                self.problem(join(path, key), "must be greater than zero");
                None
            }
            Ok(ms) if u128::from(ms) > max.as_millis() => {
                let limit = shellward_policy::duration::format_millis(max.as_millis() as u64);
                self.problem(
                    join(path, key),
                    format!("{text:?} is longer than this setting's limit of {limit}; give at most {limit}"),
                );
                None
            }
            Ok(ms) => Some(Duration::from_millis(ms)),
            Err(e) => {
                self.problem(join(path, key), e.to_string());
                None
            }
        }
    }

    /// A directory named in the file (relative to it); a problem at `key` when it does not exist (`hint` is appended).
    fn directory(&mut self, dir: String, base: &Path, key: &str, hint: &str) -> PathBuf {
        let dir = PathBuf::from(dir);
        let dir = if dir.is_relative() {
            base.join(dir)
        } else {
            dir
        };
        if !dir.is_dir() {
            self.problem(
                key,
                format!("{} is not an existing directory{hint}", dir.display()),
            );
        }
        dir
    }

    fn config(&mut self, mut root: toml::Table, base: &Path) -> Config {
        let mut config = Config::default();
        match root.remove("policy") {
            None => {}
            Some(toml::Value::Array(entries)) => {
                config.policies = entries
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, v)| self.policy(i, v, base))
                    .collect();
            }
            Some(other) => self.problem(
                "policy",
                format!(
                    "expected an array of tables ([[policy]]), found {}",
                    type_name(&other)
                ),
            ),
        }
        if let Some(mut t) = self.table(&mut root, "policies", "") {
            if let Some(dir) = self.string(&mut t, "dir", "policies") {
                config.policy_dir = Some(self.directory(
                    dir,
                    base,
                    "policies.dir",
                    "; create it or give the directory of your drop-in policies (relative to the config file)",
                ));
            }
            self.unknown_keys(t, "policies", &["dir"]);
        }
        if let Some(mut t) = self.table(&mut root, "audit", "") {
            let mut audit = crate::AuditConfig::default();
            match self.string(&mut t, "path", "audit") {
                Some(p) if p == "-" => audit.path = PathBuf::from("-"),
                Some(p) if !p.is_empty() => {
                    let p = PathBuf::from(p);
                    audit.path = if p.is_relative() { base.join(p) } else { p };
                }
                _ => self.problem(
                    "audit.path",
                    "is required: give the log file (JSON lines; relative to this file) or \"-\" for standard output",
                ),
            }
            if let Some(n) = self.integer(&mut t, "max_bytes", "audit", 0, 1 << 50) {
                audit.max_bytes = n;
            }
            if let Some(n) = self.integer(&mut t, "keep", "audit", 0, 1000) {
                audit.keep = n as u32;
            }
            if let Some(b) = self.boolean(&mut t, "include_output", "audit") {
                audit.include_output = b;
            }
            self.unknown_keys(t, "audit", &["path", "max_bytes", "keep", "include_output"]);
            config.audit = Some(audit);
        }
        if let Some(t) = self.table(&mut root, "sandbox", "") {
            self.sandbox(t, &mut config.sandbox, base);
        }
        if let Some(t) = self.table(&mut root, "executor", "") {
            self.executor(t, &mut config.executor, base);
        }
        if let Some(t) = self.table(&mut root, "env", "") {
            self.env(t, &mut config.executor.env);
        }
        if let Some(t) = self.table(&mut root, "tools", "") {
            self.tools(t, &mut config.tools);
        }
        if let Some(mut t) = self.table(&mut root, "confinement", "") {
            self.confinement(&mut t, &mut config.confinement);
            self.unknown_keys(
                t,
                "confinement",
                &["network", "writable", "deny_read", "deny_syscalls"],
            );
        }
        if let Some(mut t) = self.table(&mut root, "oci", "") {
            let oci = &mut config.oci;
            if let Some(n) = self.integer(&mut t, "max_manifest_bytes", "oci", 1024, 64 << 20) {
                oci.max_manifest_bytes = n;
            }
            if let Some(n) = self.integer(&mut t, "max_component_bytes", "oci", 1024, 1 << 30) {
                oci.max_component_bytes = n;
            }
            if let Some(d) = self.duration(&mut t, "connect_timeout", "oci", false, 5 * MINUTE) {
                oci.connect_timeout = d;
            }
            if let Some(d) = self.duration(&mut t, "read_timeout", "oci", false, HOUR) {
                oci.read_timeout = d;
            }
            if let Some(d) = self.duration(&mut t, "deadline", "oci", false, HOUR) {
                oci.deadline = d;
            }
            self.unknown_keys(
                t,
                "oci",
                &[
                    "max_manifest_bytes",
                    "max_component_bytes",
                    "connect_timeout",
                    "read_timeout",
                    "deadline",
                ],
            );
        }
        match root.remove("auth") {
            None => {}
            Some(toml::Value::Array(entries)) => {
                config.auth = entries
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, v)| self.auth(i, v))
                    .collect();
                for (i, a) in config.auth.iter().enumerate() {
                    if config.auth[..i].iter().any(|b| b.token == a.token) {
                        self.problem(
                            format!("auth[{i}]"),
                            "the same token is given twice; give each its own",
                        );
                    }
                }
            }
            Some(other) => self.problem(
                "auth",
                format!(
                    "expected an array of tables ([[auth]]), found {}",
                    type_name(&other)
                ),
            ),
        }
        self.unknown_keys(
            root,
            "",
            &[
                "policy",
                "policies",
                "sandbox",
                "executor",
                "env",
                "tools",
                "auth",
                "audit",
                "oci",
                "confinement",
            ],
        );
        // A policy may not rewrite a command past what the agent may send.
        config.sandbox.output_limits.max_command_bytes = config.tools.max_command_bytes;
        config
    }

    /// One entry of an array of tables (`[[policy]]`, `[[auth]]`): the table, or a problem at `path`.
    fn entry_table(&mut self, path: &str, value: toml::Value) -> Option<toml::Table> {
        match value {
            toml::Value::Table(t) => Some(t),
            other => {
                self.problem(
                    path,
                    format!("expected a table, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    fn auth(&mut self, i: usize, value: toml::Value) -> Option<AuthEntry> {
        let path = format!("auth[{i}]");
        let mut t = self.entry_table(&path, value)?;
        let inline = self.string(&mut t, "token", &path);
        let from_env = self.string(&mut t, "token_env", &path);
        let token = match (inline, from_env) {
            (Some(_), Some(_)) => {
                self.problem(&path, "give either token or token_env, not both");
                None
            }
            (Some(tok), None) => Some(tok),
            (None, Some(var)) => match std::env::var(&var) {
                Ok(tok) => Some(tok),
                Err(_) => {
                    self.problem(
                        format!("{path}.token_env"),
                        format!("the environment variable {var} is not set; set it to the token"),
                    );
                    None
                }
            },
            (None, None) => {
                self.problem(
                    &path,
                    "needs token_env = \"VARIABLE\" (the token is read from it) or token = \"…\"",
                );
                None
            }
        };
        if let Some(tok) = &token
            && (tok.trim().is_empty()
                || tok.trim() != tok
                || !tok.bytes().all(|b| b.is_ascii_graphic()))
        {
            self.problem(
                format!("{path}.token"),
                "must be visible ASCII characters, not empty, with no whitespace around it",
            );
        }
        let sessions = match t.remove("sessions") {
            Some(toml::Value::Array(items)) => {
                let sessions: Vec<String> = items
                    .into_iter()
                    .filter_map(|v| match v {
                        toml::Value::String(s) if valid_session(&s) => Some(s),
                        other => {
                            self.problem(
                                format!("{path}.sessions"),
                                format!(
                                    "{} is not a session id (1 to 128 visible ASCII characters)",
                                    other
                                ),
                            );
                            None
                        }
                    })
                    .collect();
                if sessions.is_empty() {
                    self.problem(format!("{path}.sessions"), "give at least one session");
                }
                sessions
            }
            Some(other) => {
                self.problem(
                    format!("{path}.sessions"),
                    format!(
                        "expected an array of session ids, found {}",
                        type_name(&other)
                    ),
                );
                Vec::new()
            }
            None => {
                self.problem(
                    &path,
                    "needs sessions = [\"…\"], the sessions this token may use",
                );
                Vec::new()
            }
        };
        self.unknown_keys(t, &path, &["token", "token_env", "sessions"]);
        Some(AuthEntry {
            token: token?,
            sessions,
        })
    }

    fn policy(&mut self, i: usize, value: toml::Value, base: &Path) -> Option<PolicyEntry> {
        let path = format!("policy[{i}]");
        let mut t = self.entry_table(&path, value)?;
        let file = self.string(&mut t, "path", &path);
        let builtin = self.string(&mut t, "builtin", &path);
        let oci = self.string(&mut t, "oci", &path);
        let source = match (file, builtin) {
            (Some(_), _) | (_, Some(_)) if oci.is_some() => {
                self.problem(&path, "give one of path, builtin or oci, not several");
                None
            }
            (None, None) if oci.is_some() => {
                let reference = oci.unwrap_or_default();
                if reference.trim().is_empty() || reference.contains(char::is_whitespace) {
                    self.problem(
                        format!("{path}.oci"),
                        "give a reference such as \"ghcr.io/org/policy@sha256:…\" (pin it by digest)",
                    );
                }
                Some(PolicySource::Oci(reference))
            }
            (Some(_), Some(_)) => {
                self.problem(&path, "give either path or builtin, not both");
                None
            }
            (Some(f), None) if f.is_empty() => {
                self.problem(format!("{path}.path"), "is empty; give a .wasm file");
                None
            }
            (Some(f), None) => {
                let p = PathBuf::from(f);
                let p = if p.is_relative() { base.join(p) } else { p };
                if !p.is_file() {
                    self.problem(
                        format!("{path}.path"),
                        format!(
                            "{} is not a file; give the path of a policy component (.wasm), relative to the \
                             config file",
                            p.display()
                        ),
                    );
                }
                Some(PolicySource::File(p))
            }
            (None, Some(b)) if b == "default" => Some(PolicySource::Default),
            (None, Some(b)) if b == "guard" => Some(PolicySource::Guard),
            (None, Some(b)) => {
                self.problem(
                    format!("{path}.builtin"),
                    format!(
                        "unknown built-in policy {b:?}; the built-ins are \"default\" and \"guard\""
                    ),
                );
                None
            }
            (None, None) => {
                self.problem(
                    &path,
                    "needs path = \"FILE.wasm\", builtin = \"default\" (or \"guard\"), or oci = \"REF\"",
                );
                None
            }
        };
        let fail_open = self.boolean(&mut t, "fail_open", &path).unwrap_or(false);
        let settings = match t.remove("settings") {
            None => "{}".to_string(),
            Some(v @ toml::Value::Table(_)) => match serde_json::to_string(&v) {
                Ok(s) => s,
                Err(e) => {
                    self.problem(
                        format!("{path}.settings"),
                        format!("cannot be passed as JSON: {e}"),
                    );
                    "{}".to_string()
                }
            },
            Some(other) => {
                self.problem(
                    format!("{path}.settings"),
                    format!(
                        "expected a table ([policy.settings]), found {}",
                        type_name(&other)
                    ),
                );
                "{}".to_string()
            }
        };
        self.unknown_keys(
            t,
            &path,
            &["path", "builtin", "oci", "fail_open", "settings"],
        );
        Some(PolicyEntry {
            source: source?,
            settings,
            fail_open,
        })
    }

    fn sandbox(&mut self, mut t: toml::Table, s: &mut SandboxConfig, base: &Path) {
        let p = "sandbox";
        if let Some(d) = self.duration(&mut t, "deadline", p, false, MINUTE) {
            s.deadline = d;
        }
        if let Some(m) = self.integer(&mut t, "memory_mib", p, 1, 4096) {
            s.memory_limit = (m as usize) << 20;
        }
        if let Some(mode) = self.string(&mut t, "instance_mode", p) {
            match mode.as_str() {
                "reuse" => s.instance_mode = InstanceMode::Reuse,
                "fresh" => s.instance_mode = InstanceMode::Fresh,
                _ => self.problem(
                    "sandbox.instance_mode",
                    format!("unknown mode {mode:?}; use \"reuse\" or \"fresh\""),
                ),
            }
        }
        let cache = self.boolean(&mut t, "cache", p);
        if let Some(dir) = self.string(&mut t, "cache_dir", p) {
            let dir = PathBuf::from(dir);
            s.cache_dir = Some(if dir.is_relative() {
                base.join(dir)
            } else {
                dir
            });
        }
        if cache == Some(false) {
            s.cache_dir = None;
        }
        self.unknown_keys(
            t,
            p,
            &[
                "deadline",
                "memory_mib",
                "instance_mode",
                "cache",
                "cache_dir",
            ],
        );
    }

    fn executor(&mut self, mut t: toml::Table, e: &mut ExecutorConfig, base: &Path) {
        let p = "executor";
        match t.remove("shell") {
            None => {}
            Some(toml::Value::Array(items)) => {
                let words: Vec<String> = items
                    .into_iter()
                    .filter_map(|v| match v {
                        toml::Value::String(s) if !s.is_empty() && !s.contains('\0') => Some(s),
                        _ => None,
                    })
                    .collect();
                if words.is_empty() {
                    self.problem(
                        "executor.shell",
                        "must be a non-empty array of non-empty strings, e.g. [\"bash\", \"-c\"]",
                    );
                } else {
                    e.shell = words;
                }
            }
            Some(other) => self.problem(
                "executor.shell",
                format!(
                    "expected an array of strings such as [\"bash\", \"-c\"], found {}",
                    type_name(&other)
                ),
            ),
        }
        if let Some(dir) = self.string(&mut t, "workdir", p) {
            e.default_workdir = Some(self.directory(dir, base, "executor.workdir", ""));
        }
        if let Some(d) = self.duration(&mut t, "grace", p, true, 10 * MINUTE) {
            e.grace = d;
        }
        if let Some(d) = self.duration(&mut t, "drain", p, true, 10 * MINUTE) {
            e.drain = d;
        }
        if let Some(d) = self.duration(&mut t, "session_idle", p, false, 24 * HOUR) {
            e.session_idle = d;
        }
        if let Some(n) = self.integer(&mut t, "max_running", p, 1, 100_000) {
            e.max_running = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "max_running_per_session", p, 1, 100_000) {
            e.max_running_per_session = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "max_retained_per_session", p, 1, 1_000_000) {
            e.max_retained_per_session = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "max_log_bytes", p, 0, 1 << 50) {
            e.max_log_bytes = n;
        }
        if let Some(d) = self.duration(&mut t, "retention", p, true, 30 * 24 * HOUR) {
            e.retention = d;
        }
        let limits: &mut OutputLimits = &mut e.output;
        if let Some(n) = self.integer(&mut t, "output_head_bytes", p, 0, 64 << 20) {
            limits.head = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "output_tail_bytes", p, 0, 64 << 20) {
            limits.tail = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "max_line_bytes", p, 16, 64 << 20) {
            limits.max_line = n as usize;
        }
        if let Some(n) = self.integer(&mut t, "log_cap_bytes", p, 0, 1 << 40) {
            limits.log_cap = n;
        }
        if let Some(b) = self.boolean(&mut t, "separate_stderr", p) {
            e.separate_stderr = b;
        }
        if let Some(c) = self.string(&mut t, "containment", p) {
            match c.as_str() {
                "auto" => e.containment = ContainmentPreference::Auto,
                "process-group" => e.containment = ContainmentPreference::ProcessGroup,
                _ => self.problem(
                    "executor.containment",
                    format!("unknown containment {c:?}; use \"auto\" or \"process-group\""),
                ),
            }
        }
        if let Some(dir) = self.string(&mut t, "log_dir", p) {
            e.log_parent = Some(PathBuf::from(dir));
        }
        if let Some(b) = self.boolean(&mut t, "pid_namespace", p) {
            e.pid_namespace = b;
        }
        if let Some(names) = self.strings(&mut t, "keep_capabilities", p) {
            for (i, name) in &names {
                if shellward_exec::capability_number(name).is_none() {
                    self.problem(
                        format!("executor.keep_capabilities[{i}]"),
                        format!(
                            "{name:?} is not a Linux capability; write it as \"CAP_SYS_ADMIN\" or \"sys_admin\" \
                             (see capabilities(7))"
                        ),
                    );
                }
            }
            e.keep_capabilities = names.into_iter().map(|(_, n)| n).collect();
        }
        let absolute = |paths: Vec<(usize, String)>| -> Vec<PathBuf> {
            paths
                .into_iter()
                .map(|(_, s)| {
                    let path = PathBuf::from(s);
                    if path.is_relative() {
                        base.join(path)
                    } else {
                        path
                    }
                })
                .collect()
        };
        if let Some(paths) = self.strings(&mut t, "read_only_paths", p) {
            e.read_only_paths = absolute(paths);
        }
        if let Some(paths) = self.strings(&mut t, "hidden_paths", p) {
            e.hidden_paths = absolute(paths);
        }
        let some = |n: u64| (n > 0).then_some(n);
        if let Some(n) = self.integer(&mut t, "max_processes", p, 0, 4_194_304) {
            e.limits.max_processes = some(n);
        }
        if let Some(n) = self.integer(&mut t, "max_address_space_bytes", p, 0, 1 << 50) {
            e.limits.address_space_bytes = some(n);
        }
        if let Some(n) = self.integer(&mut t, "max_file_size_bytes", p, 0, 1 << 50) {
            e.limits.file_size_bytes = some(n);
        }
        if let Some(n) = self.integer(&mut t, "max_cpu_seconds", p, 0, 1 << 32) {
            e.limits.cpu_seconds = some(n);
        }
        self.unknown_keys(
            t,
            p,
            &[
                "shell",
                "workdir",
                "grace",
                "drain",
                "max_running",
                "max_running_per_session",
                "max_retained_per_session",
                "max_log_bytes",
                "retention",
                "output_head_bytes",
                "output_tail_bytes",
                "max_line_bytes",
                "log_cap_bytes",
                "separate_stderr",
                "containment",
                "log_dir",
                "pid_namespace",
                "max_processes",
                "max_address_space_bytes",
                "max_file_size_bytes",
                "max_cpu_seconds",
                "keep_capabilities",
                "read_only_paths",
                "hidden_paths",
                "session_idle",
            ],
        );
    }

    /// `[confinement]`: `network`, `writable` (a list, or `"any"`), `deny_read`.
    fn confinement(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        const P: &str = "confinement";
        if let Some(n) = self.string(t, "network", P) {
            match n.as_str() {
                "none" => c.network = shellward_exec::Network::None,
                "loopback" => c.network = shellward_exec::Network::Loopback,
                "host" => c.network = shellward_exec::Network::Host,
                other => self.problem(
                    "confinement.network",
                    format!(
                        "{other:?} is not a network; give \"none\" (no network), \"loopback\" (the command's own \
                         loopback only) or \"host\""
                    ),
                ),
            }
        }
        // Absolute, `~/…`, or (writable only) `$WORKDIR` / `$TMPDIR`.
        let check =
            |this: &mut Self, key: &str, i: usize, entry: &str, placeholders: bool| -> bool {
                let ok = entry.starts_with('/')
                    || entry.starts_with("~/")
                    || (placeholders && matches!(entry, "$WORKDIR" | "$TMPDIR"));
                if !ok {
                    this.problem(
                        format!("confinement.{key}[{i}]"),
                        format!(
                            "{entry:?} is not an absolute path; give \"/path\", \"~/path\"{}",
                            if placeholders {
                                ", \"$WORKDIR\" (the command's working directory) or \"$TMPDIR\""
                            } else {
                                ""
                            }
                        ),
                    );
                }
                ok
            };
        match t.get("writable") {
            Some(toml::Value::String(s)) if s == "any" => {
                t.remove("writable");
                c.writable = None;
            }
            Some(toml::Value::String(s)) => {
                let s = s.clone();
                t.remove("writable");
                self.problem(
                    "confinement.writable",
                    format!(
                        "{s:?} is not a list; give a list of paths (e.g. [\"$WORKDIR\", \"/tmp\"]) or \"any\" to \
                         leave writes unconfined"
                    ),
                );
            }
            _ => {
                if let Some(list) = self.strings(t, "writable", P) {
                    let mut out = Vec::new();
                    for (i, entry) in list {
                        if check(self, "writable", i, &entry, true) {
                            out.push(entry);
                        }
                    }
                    c.writable = Some(out);
                }
            }
        }
        if let Some(list) = self.strings(t, "deny_syscalls", P) {
            let known = shellward_exec::DEFAULT_DENIED_SYSCALLS;
            let mut out = Vec::new();
            for (i, name) in list {
                if known.contains(&name.as_str()) {
                    out.push(name);
                } else {
                    self.problem(
                        format!("confinement.deny_syscalls[{i}]"),
                        format!(
                            "{name:?} cannot be filtered; give names from: {}",
                            known.join(", ")
                        ),
                    );
                }
            }
            c.deny_syscalls = out;
        }
        if let Some(list) = self.strings(t, "deny_read", P) {
            let mut out = Vec::new();
            for (i, entry) in list {
                if check(self, "deny_read", i, &entry, false)
                    && let Some(p) = crate::confinement::expand_home(&entry)
                {
                    out.push(p);
                }
            }
            c.deny_read = out;
        }
    }

    /// A list of non-empty strings without NUL at `path.key`, each with its index; each bad item is a problem of its
    /// own.
    fn strings(
        &mut self,
        table: &mut toml::Table,
        key: &str,
        path: &str,
    ) -> Option<Vec<(usize, String)>> {
        let key_path = join(path, key);
        match table.remove(key)? {
            toml::Value::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        toml::Value::String(s) if !s.is_empty() && !s.contains('\0') => {
                            out.push((i, s))
                        }
                        other => self.problem(
                            format!("{key_path}[{i}]"),
                            format!("expected a non-empty string, found {}", type_name(&other)),
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.problem(
                    key_path,
                    format!("expected an array of strings, found {}", type_name(&other)),
                );
                None
            }
        }
    }

    /// A list of strings (patterns), each non-empty and free of `=` and NUL.
    fn patterns(&mut self, table: &mut toml::Table, key: &str, path: &str) -> Option<Vec<String>> {
        let key_path = join(path, key);
        match table.remove(key)? {
            toml::Value::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        toml::Value::String(s) if !s.is_empty() && !s.contains(['=', '\0']) => {
                            out.push(s)
                        }
                        toml::Value::String(s) => self.problem(
                            format!("{key_path}[{i}]"),
                            format!(
                                "{s:?} cannot match a variable name (empty, or contains '=' or NUL); give a name \
                                 or a pattern such as \"AWS_*\""
                            ),
                        ),
                        other => self.problem(
                            format!("{key_path}[{i}]"),
                            format!("expected a string, found {}", type_name(&other)),
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.problem(
                    key_path,
                    format!(
                        "expected an array of name patterns such as [\"AWS_*\", \"MY_API_KEY\"], found {}",
                        type_name(&other)
                    ),
                );
                None
            }
        }
    }

    /// `[env]`: the environment policy. Keys other than the policy's own are variables to set (shorthand for
    /// `[env.set]`).
    fn env(&mut self, mut t: toml::Table, env: &mut EnvPolicy) {
        let p = "env";
        if let Some(mode) = self.string(&mut t, "inherit", p) {
            match mode.parse::<Inherit>() {
                Ok(m) => env.inherit = m,
                Err(e) => self.problem("env.inherit", e),
            }
        }
        if let Some(b) = self.boolean(&mut t, "ignore_default_excludes", p) {
            env.ignore_default_excludes = b;
        }
        for (key, list) in [
            ("allow", &mut env.allow),
            ("exclude", &mut env.exclude),
            ("include_only", &mut env.include_only),
        ] {
            if let Some(v) = self.patterns(&mut t, key, p) {
                *list = v;
            }
        }
        let set = self.table(&mut t, "set", p);
        for (k, v, key) in set
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                let key = format!("env.set.{k}");
                (k, v, key)
            })
            .chain(t.into_iter().map(|(k, v)| {
                let key = format!("env.{k}");
                (k, v, key)
            }))
        {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                self.problem(
                    key,
                    "not a valid variable name (empty, or contains '=' or NUL)",
                );
                continue;
            }
            match v {
                toml::Value::String(s) if !s.contains('\0') => env.set_var(k, s),
                toml::Value::String(_) => self.problem(key, "contains a NUL byte"),
                other => self.problem(
                    key,
                    format!(
                        "expected a string, found {}; quote the value (the policy keys are inherit, \
                         ignore_default_excludes, allow, exclude, include_only and set)",
                        type_name(&other)
                    ),
                ),
            }
        }
    }

    fn tools(&mut self, mut t: toml::Table, l: &mut ToolLimits) {
        let p = "tools";
        if let Some(n) = self.integer(&mut t, "max_command_bytes", p, 1, 131_071) {
            l.max_command_bytes = n as usize;
        }
        if let Some(d) = self.duration(&mut t, "default_wait", p, true, HOUR) {
            l.default_wait = d;
        }
        if let Some(d) = self.duration(&mut t, "max_wait", p, true, HOUR) {
            l.max_wait = d;
        }
        if let Some(n) = self.integer(&mut t, "max_read_bytes", p, 1, 64 << 20) {
            l.max_read_bytes = n as usize;
        }
        if let Some(d) = self.duration(&mut t, "startup_wait", p, true, 10 * MINUTE) {
            l.startup_wait = d;
        }
        if let Some(d) = self.duration(&mut t, "default_idle", p, true, 10 * MINUTE) {
            l.default_idle = d;
        }
        if let Some(n) = self.integer(&mut t, "list_limit", p, 1, 100_000) {
            l.list_limit = n as usize;
        }
        self.unknown_keys(
            t,
            p,
            &[
                "max_command_bytes",
                "default_wait",
                "max_wait",
                "max_read_bytes",
                "list_limit",
                "startup_wait",
                "default_idle",
            ],
        );
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        match Config::parse(text, Path::new("/nonexistent-base")) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn empty_file_is_the_defaults() {
        let c = Config::parse("", Path::new(".")).unwrap();
        // The built-in chain: default, then guard.
        assert_eq!(
            c.policies,
            vec![PolicyEntry::default_policy(), PolicyEntry::guard_policy()]
        );
        let g = Config::parse("[[policy]]\nbuiltin = \"guard\"\n", Path::new(".")).unwrap();
        assert_eq!(g.policies, vec![PolicyEntry::guard_policy()]);
        assert_eq!(c.tools, ToolLimits::default());
        assert_eq!(c.executor.shell, vec!["sh", "-c"]);
    }

    #[test]
    fn a_chain_loads_in_its_configured_order_with_every_failure_reported_in_order() {
        let engine = PolicyEngine::new(SandboxConfig {
            pooling: false,
            ..Default::default()
        })
        .unwrap();
        // More entries than cores: loaded concurrently, each must still land in its own place.
        let chain = Config::parse(
            "[[policy]]\nbuiltin = \"guard\"\n[[policy]]\nbuiltin = \"default\"\n[[policy]]\nbuiltin = \"guard\"\n\
             [[policy]]\nbuiltin = \"default\"\nsettings = { default_timeout = \"7s\" }\n[[policy]]\nbuiltin = \"guard\"\n",
            Path::new("."),
        )
        .unwrap()
        .load_chain(&engine)
        .unwrap();
        let names: Vec<&str> = chain.policies().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["guard", "default", "guard", "default", "guard"]);
        assert!(
            chain.policies()[3].settings().contains("7s"),
            "{:?}",
            chain.policies()[3].settings()
        );
        let dir = tempfile::tempdir().unwrap();
        for broken in ["first-broken.wasm", "last-broken.wasm"] {
            std::fs::write(dir.path().join(broken), b"not a component").unwrap();
        }
        let err = Config::parse(
            "[[policy]]\npath = \"first-broken.wasm\"\n[[policy]]\nbuiltin = \"default\"\n\
             [[policy]]\nbuiltin = \"default\"\nsettings = { default_timeout = \"soon\" }\n\
             [[policy]]\npath = \"last-broken.wasm\"\n",
            dir.path(),
        )
        .unwrap()
        .load_chain(&engine)
        .unwrap_err();
        let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["policy[0]", "policy[2]", "policy[3]"], "{err}");
        assert!(
            err.problems[0].message.contains("first-broken.wasm"),
            "{err}"
        );
        assert!(
            err.problems[2].message.contains("last-broken.wasm"),
            "{err}"
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let p = problems(
            r#"
            colour = "blue"
            [[policy]]
            path = "missing.wasm"
            [[policy]]
            builtin = "nope"
            [[policy]]
            fail_open = "yes"
            [sandbox]
            deadline = "fast"
            memory_mib = 0
            [executor]
            grace = "-1s"
            max_running = 0
            shell = []
            bogus = 1
            [env]
            GOOD = "x"
            BAD = 3
            [tools]
            max_command_bytes = 1048576
            "#,
        );
        let keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
        for want in [
            "policy[0].path",
            "policy[1].builtin",
            "policy[2].fail_open",
            "policy[2]",
            "sandbox.deadline",
            "sandbox.memory_mib",
            "executor.shell",
            "executor.grace",
            "executor.max_running",
            "executor.bogus",
            "env.BAD",
            "tools.max_command_bytes",
            "colour",
        ] {
            assert!(keys.contains(&want), "no problem for {want} in {p:#?}");
        }
        assert_eq!(p.len(), 13, "{p:#?}");
    }

    /// A duration past its setting's bound (a grace or drain that would hold a shutdown for years) is refused with
    /// its key path and the bound; one at the bound is taken.
    #[test]
    fn durations_past_their_bound_are_refused_with_the_key_and_the_limit() {
        let p = problems(
            r#"
            [sandbox]
            deadline = "2m"
            [executor]
            grace = "999999999999h"
            drain = "11m"
            retention = "800h"
            session_idle = "25h"
            [tools]
            max_wait = "2h"
            [oci]
            deadline = "2h"
            connect_timeout = "6m"
            max_component_bytes = 2147483648
            "#,
        );
        let mut keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "executor.drain",
                "executor.grace",
                "executor.retention",
                "executor.session_idle",
                "oci.connect_timeout",
                "oci.deadline",
                "oci.max_component_bytes",
                "sandbox.deadline",
                "tools.max_wait"
            ],
            "{p:#?}"
        );
        let grace = p.iter().find(|s| s.starts_with("executor.grace")).unwrap();
        assert!(
            grace.contains("limit of 10m") && grace.contains("give at most 10m"),
            "{grace}"
        );
        let c = Config::parse(
            "[executor]\ngrace = \"10m\"\nretention = \"720h\"\n",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.executor.grace, Duration::from_secs(600));
        let c = Config::parse(
            "[oci]\ndeadline = \"30s\"\nmax_manifest_bytes = 4096\n",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.oci.deadline, Duration::from_secs(30));
        assert_eq!(c.oci.max_manifest_bytes, 4096);
        assert_eq!(c.oci.max_component_bytes, 64 << 20);
    }

    #[test]
    fn confinement_keys_name_each_bad_item_and_host_files_include_the_config() {
        let p = problems(
            r#"
            [executor]
            keep_capabilities = ["sys_ptrace", "CAP_NOPE", 3]
            read_only_paths = "secrets"
            "#,
        );
        let mut keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "executor.keep_capabilities[1]",
                "executor.keep_capabilities[2]",
                "executor.read_only_paths"
            ],
            "{p:#?}"
        );
        assert!(
            p[1].contains("\"CAP_SYS_ADMIN\" or \"sys_admin\""),
            "{p:#?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shellward.toml");
        std::fs::write(
            &file,
            "[executor]\nkeep_capabilities = [\"sys_ptrace\"]\nread_only_paths = [\"secrets\"]\n",
        )
        .unwrap();
        let c = Config::load(&file).unwrap();
        assert_eq!(c.executor.keep_capabilities, ["sys_ptrace"]);
        assert_eq!(c.executor.read_only_paths, [dir.path().join("secrets")]);
        let files = c.host_files();
        assert!(files.contains(&file.canonicalize().unwrap()), "{files:?}");
        assert!(files.iter().all(|f| f.is_absolute()), "{files:?}");
        assert!(
            !c.host_secrets().contains(&file.canonicalize().unwrap()),
            "a config without tokens stays readable"
        );
        std::fs::write(
            &file,
            "[[auth]]\ntoken = \"a-long-enough-token-0123456789\"\nsessions = [\"a\"]\n",
        )
        .unwrap();
        let c = Config::load(&file).unwrap();
        assert!(
            c.host_secrets().contains(&file.canonicalize().unwrap()),
            "a config holding tokens is hidden: {:?}",
            c.host_secrets()
        );
    }

    #[test]
    fn values_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), b"").unwrap();
        let c = Config::parse(
            r#"
            [[policy]]
            path = "p.wasm"
            fail_open = true
            [policy.settings]
            default_timeout = "30s"
            promote_patterns = ["a b"]
            [[policy]]
            builtin = "default"
            [sandbox]
            deadline = "250ms"
            memory_mib = 32
            instance_mode = "fresh"
            cache = false
            [executor]
            shell = ["bash", "-c"]
            grace = "500ms"
            max_running = 3
            output_head_bytes = 100
            containment = "process-group"
            max_running_per_session = 2
            pid_namespace = false
            max_processes = 0
            max_file_size_bytes = 1073741824
            max_retained_per_session = 7
            max_log_bytes = 1048576
            [env]
            PAGER = "less"
            inherit = "core"
            allow = ["MY_API_KEY"]
            exclude = ["LC_*"]
            [env.set]
            CI = "1"
            [tools]
            default_wait = "0s"
            list_limit = 5
            "#,
            dir.path(),
        )
        .unwrap();
        assert_eq!(c.policies.len(), 2);
        assert_eq!(
            c.policies[0].source,
            PolicySource::File(dir.path().join("p.wasm"))
        );
        assert!(c.policies[0].fail_open);
        let settings: serde_json::Value = serde_json::from_str(&c.policies[0].settings).unwrap();
        assert_eq!(settings["default_timeout"], "30s");
        assert_eq!(settings["promote_patterns"][0], "a b");
        assert_eq!(c.policies[1].source, PolicySource::Default);
        assert_eq!(c.sandbox.deadline, Duration::from_millis(250));
        assert_eq!(c.sandbox.memory_limit, 32 << 20);
        assert_eq!(c.sandbox.instance_mode, InstanceMode::Fresh);
        assert_eq!(c.sandbox.cache_dir, None);
        assert_eq!(c.executor.shell, vec!["bash", "-c"]);
        assert_eq!(c.executor.grace, Duration::from_millis(500));
        assert_eq!(c.executor.max_running, 3);
        assert_eq!(c.executor.output.head, 100);
        assert_eq!(c.executor.containment, ContainmentPreference::ProcessGroup);
        assert_eq!(c.executor.max_running_per_session, 2);
        assert!(!c.executor.pid_namespace);
        assert_eq!(c.executor.limits.max_processes, None);
        assert_eq!(c.executor.limits.file_size_bytes, Some(1 << 30));
        assert_eq!(c.executor.max_retained_per_session, 7);
        assert_eq!(c.executor.max_log_bytes, 1 << 20);
        assert_eq!(c.executor.env.inherit, shellward_exec::Inherit::Core);
        assert_eq!(c.executor.env.allow, ["MY_API_KEY"]);
        assert_eq!(c.executor.env.exclude, ["LC_*"]);
        let env: std::collections::HashMap<_, _> = c.executor.env.set.iter().cloned().collect();
        assert_eq!(env["PAGER"], "less");
        assert_eq!(env["CI"], "1");
        assert_eq!(env["TERM"], "dumb");
        assert_eq!(c.tools.default_wait, Duration::ZERO);
        assert_eq!(c.tools.list_limit, 5);
    }

    #[test]
    fn env_policy_problems_name_their_keys() {
        let p = problems(
            r#"
            [env]
            inherit = "some"
            allow = "MY_KEY"
            exclude = ["", "A=B", 3]
            NUMBER = 1
            [env.set]
            "BAD=NAME" = "x"
            "#,
        );
        for key in [
            "env.inherit",
            "env.allow",
            "env.exclude[0]",
            "env.exclude[1]",
            "env.exclude[2]",
            "env.NUMBER",
            "env.set.BAD=NAME",
        ] {
            assert!(p.iter().any(|m| m.contains(key)), "{key} not in {p:?}");
        }
    }

    #[test]
    fn auth_entries_are_parsed_and_checked() {
        let c = Config::parse(
            "[[auth]]\ntoken = \"tok-a\"\nsessions = [\"a\", \"a2\"]\n",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(c.auth[0].token, "tok-a");
        assert_eq!(c.auth[0].sessions, ["a", "a2"]);
        assert!(
            !format!("{:?}", c.auth[0]).contains("tok-a"),
            "the token is not printed"
        );
        let p = problems(
            r#"
            [[auth]]
            token = " padded"
            sessions = ["ok", "two words"]
            [[auth]]
            token_env = "SHELLWARD_TEST_SURELY_UNSET_VAR"
            sessions = []
            [[auth]]
            sessions = ["x"]
            "#,
        );
        for key in [
            "auth[0].token",
            "auth[0].sessions",
            "auth[1].token_env",
            "auth[1].sessions",
            "auth[2]",
        ] {
            assert!(p.iter().any(|m| m.contains(key)), "{key} not in {p:?}");
        }
    }

    #[test]
    fn an_empty_chain_is_allowed() {
        let c = Config::parse("policy = []", Path::new(".")).unwrap();
        assert!(c.policies.is_empty());
    }

    #[test]
    fn invalid_toml_is_one_clear_problem() {
        let p = problems("[executor\n");
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("not valid TOML"), "{p:?}");
    }

    #[test]
    fn drop_in_policies_follow_the_entries_in_file_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("policies.d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("50-b.wasm"), b"").unwrap();
        std::fs::write(d.join("10-a.wasm"), b"").unwrap();
        std::fs::write(d.join("notes.txt"), b"").unwrap();
        std::fs::write(
            d.join("10-a.toml"),
            "fail_open = true\n[settings]\ndeny = [\"x\"]\n",
        )
        .unwrap();
        let c = Config::parse("[policies]\ndir = \"policies.d\"\n", dir.path()).unwrap();
        let entries = c.policy_entries().unwrap();
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "policy[0]",
                "policy[1]",
                "policies.dir/10-a.wasm",
                "policies.dir/50-b.wasm"
            ]
        );
        assert!(entries[2].1.fail_open);
        assert_eq!(entries[2].1.settings, r#"{"deny":["x"]}"#);
        assert!(!entries[3].1.fail_open);
        // A bad NAME.toml is reported with its file.
        std::fs::write(d.join("50-b.toml"), "path = \"elsewhere.wasm\"\n").unwrap();
        let e = c.policy_entries().unwrap_err();
        assert_eq!(e.problems[0].key, "policies.dir/50-b.toml");
        assert!(e.problems[0].message.contains("unknown key `path`"), "{e}");
        // A missing directory is a problem when the file is read.
        let e = Config::parse("[policies]\ndir = \"nope\"\n", dir.path()).unwrap_err();
        assert_eq!(e.problems[0].key, "policies.dir");
    }
}
