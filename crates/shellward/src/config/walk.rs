//! The walk over a configuration file's TOML table: every section and key checked, each problem recorded with its key
//! path, so one pass reports them all.

use super::{
    AuthEntry, Config, HOUR, MINUTE, OnCancel, PolicyEntry, PolicySource, Problem, ToolLimits,
    type_name, valid_session,
};
use shellward_exec::{ContainmentPreference, EnvPolicy, ExecutorConfig, Inherit, OutputLimits};
use shellward_policy::duration::parse_millis;
use shellward_policy::{InstanceMode, SandboxConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Table;

mod approvals;
mod changes;
mod confinement;

/// Collects problems while reading a table.
#[derive(Default)]
pub(super) struct Walker {
    pub(super) problems: Vec<Problem>,
}

impl Walker {
    /// Records a problem with `key` under `path` and gives no value for it.
    fn refuse<T>(&mut self, path: &str, key: &str, message: impl Into<String>) -> Option<T> {
        self.problem(join(path, key), message);
        None
    }

    /// Records that `key` under `path` holds `found` where `expected` belongs, and gives no value for it.
    fn wrong_type<T>(
        &mut self,
        path: &str,
        key: &str,
        expected: &str,
        found: &toml::Value,
    ) -> Option<T> {
        self.refuse(
            path,
            key,
            format!("expected {expected}, found {}", type_name(found)),
        )
    }

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

    fn table(&mut self, t: &mut Table, key: &str, path: &str) -> Option<toml::Table> {
        match t.remove(key)? {
            toml::Value::Table(t) => Some(t),
            other => self.wrong_type(path, key, "a table", &other),
        }
    }

    fn string(&mut self, t: &mut Table, key: &str, path: &str) -> Option<String> {
        match t.remove(key)? {
            toml::Value::String(s) if s.contains('\0') => {
                self.refuse(path, key, "contains a NUL byte")
            }
            toml::Value::String(s) => Some(s),
            other => self.wrong_type(path, key, "a string", &other),
        }
    }

    fn boolean(&mut self, t: &mut Table, key: &str, path: &str) -> Option<bool> {
        match t.remove(key)? {
            toml::Value::Boolean(b) => Some(b),
            other => self.wrong_type(path, key, "true or false", &other),
        }
    }

    /// A positive integer within `min..=max`.
    fn integer(&mut self, t: &mut Table, key: &str, path: &str, min: u64, max: u64) -> Option<u64> {
        match t.remove(key)? {
            toml::Value::Integer(i) if i >= 0 && (i as u64) >= min && (i as u64) <= max => {
                Some(i as u64)
            }
            toml::Value::Integer(i) => self.refuse(
                path,
                key,
                format!("{i} is out of range; use a value from {min} to {max}"),
            ),
            other => self.wrong_type(path, key, "an integer", &other),
        }
    }

    /// A duration string, greater than zero unless `allow_zero`.
    fn duration(
        &mut self,
        t: &mut Table,
        key: &str,
        path: &str,
        allow_zero: bool,
        max: Duration,
    ) -> Option<Duration> {
        let text = self.string(t, key, path)?;
        match parse_millis(&text) {
            Ok(0) if !allow_zero => self.refuse(path, key, "must be greater than zero"),
            Ok(ms) if u128::from(ms) > max.as_millis() => {
                let limit = shellward_policy::duration::format_millis(max.as_millis() as u64);
                self.refuse(path, key, format!("{text:?} is longer than this setting's limit of {limit}; give at most {limit}"))
            }
            Ok(ms) => Some(Duration::from_millis(ms)),
            Err(e) => self.refuse(path, key, e.to_string()),
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

    pub(super) fn config(&mut self, mut root: toml::Table, base: &Path) -> Config {
        let mut config = Config::default();
        self.policies(&mut root, base, &mut config);
        if let Some(t) = self.table(&mut root, "audit", "") {
            config.audit = Some(self.audit(t, base));
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
            // The executor's: whether refused writes are seen as they happen (`ExecutorConfig::watch_writes`).
            if let Some(b) = self.boolean(&mut t, "watch_writes", "confinement") {
                config.executor.watch_writes = b;
            }
            self.unknown_keys(
                t,
                "confinement",
                &[
                    "network",
                    "writable",
                    "deny_read",
                    "deny_syscalls",
                    "unix_sockets",
                    "max_network",
                    "max_writable",
                    "proxy_hosts",
                    "unenforceable",
                    "watch_writes",
                ],
            );
        }
        if let Some(t) = self.table(&mut root, "oci", "") {
            self.oci(t, &mut config.oci);
        }
        if let Some(mut t) = self.table(&mut root, "approvals", "") {
            self.approvals(&mut t, base, &mut config.approvals);
            self.unknown_keys(
                t,
                "approvals",
                &["expiry", "client", "preview", "allow_file", "reviewer"],
            );
        }
        if let Some(mut t) = self.table(&mut root, "changes", "") {
            self.changes(&mut t, &mut config.executor.changes);
            self.unknown_keys(
                t,
                "changes",
                &[
                    "enabled",
                    "keep",
                    "max_bytes",
                    "max_file_bytes",
                    "max_files",
                    "baseline_wait",
                    "ignore",
                ],
            );
        }
        self.auth_entries(&mut root, &mut config);
        self.unknown_keys(
            root,
            "",
            &[
                "changes",
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
                "approvals",
            ],
        );
        // A policy may not rewrite a command past what the agent may send.
        config.sandbox.outcome_limits.max_command_bytes = config.tools.max_command_bytes;
        config
    }

    /// `[[policy]]` entries and `[policies] dir`.
    fn policies(&mut self, root: &mut Table, base: &Path, config: &mut Config) {
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
        if let Some(mut t) = self.table(root, "policies", "") {
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
    }

    /// `[audit]`.
    fn audit(&mut self, mut t: toml::Table, base: &Path) -> crate::AuditConfig {
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
        audit
    }

    /// `[oci]`: what a pull accepts from a registry.
    fn oci(&mut self, mut t: toml::Table, oci: &mut crate::oci::PullLimits) {
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
        if let Some(n) = self.integer(&mut t, "min_rate", "oci", 0, 1 << 30) {
            oci.min_rate = n;
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
                "min_rate",
            ],
        );
    }

    /// `[[auth]]` entries: tokens and the sessions they may use, each token given once.
    fn auth_entries(&mut self, root: &mut Table, config: &mut Config) {
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
        self.executor_shell(&mut t, e);
        self.executor_runs(&mut t, e, base);
        self.executor_output(&mut t, &mut e.output);
        self.executor_containment(&mut t, e, base);
        self.executor_rlimits(&mut t, &mut e.limits);
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

    /// `[executor] shell`: the program and arguments that run a command line.
    fn executor_shell(&mut self, t: &mut Table, e: &mut ExecutorConfig) {
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
    }

    /// `[executor]`: the working directory, times and counts of runs and logs.
    fn executor_runs(&mut self, t: &mut Table, e: &mut ExecutorConfig, base: &Path) {
        let p = "executor";
        if let Some(dir) = self.string(t, "workdir", p) {
            e.default_workdir = Some(self.directory(dir, base, "executor.workdir", ""));
        }
        if let Some(d) = self.duration(t, "grace", p, true, 10 * MINUTE) {
            e.grace = d;
        }
        if let Some(d) = self.duration(t, "drain", p, true, 10 * MINUTE) {
            e.drain = d;
        }
        if let Some(d) = self.duration(t, "session_idle", p, false, 24 * HOUR) {
            e.session_idle = d;
        }
        if let Some(n) = self.integer(t, "max_running", p, 1, 100_000) {
            e.max_running = n as usize;
        }
        if let Some(n) = self.integer(t, "max_running_per_session", p, 1, 100_000) {
            e.max_running_per_session = n as usize;
        }
        if let Some(n) = self.integer(t, "max_retained_per_session", p, 1, 1_000_000) {
            e.max_retained_per_session = n as usize;
        }
        if let Some(n) = self.integer(t, "max_log_bytes", p, 0, 1 << 50) {
            e.max_log_bytes = n;
        }
        if let Some(d) = self.duration(t, "retention", p, true, 30 * 24 * HOUR) {
            e.retention = d;
        }
    }

    /// `[executor]`: how output is kept (head, tail, lines, the log's cap).
    fn executor_output(&mut self, t: &mut Table, limits: &mut OutputLimits) {
        let p = "executor";
        if let Some(n) = self.integer(t, "output_head_bytes", p, 0, 64 << 20) {
            limits.head = n as usize;
        }
        if let Some(n) = self.integer(t, "output_tail_bytes", p, 0, 64 << 20) {
            limits.tail = n as usize;
        }
        if let Some(n) = self.integer(t, "max_line_bytes", p, 16, 64 << 20) {
            limits.max_line = n as usize;
        }
        if let Some(n) = self.integer(t, "log_cap_bytes", p, 0, 1 << 40) {
            limits.log_cap = n;
        }
    }

    /// `[executor]`: stderr, containment, the log directory, namespaces, capabilities, and the paths commands see
    /// read-only or not at all.
    fn executor_containment(&mut self, t: &mut Table, e: &mut ExecutorConfig, base: &Path) {
        let p = "executor";
        if let Some(b) = self.boolean(t, "separate_stderr", p) {
            e.separate_stderr = b;
        }
        if let Some(c) = self.string(t, "containment", p) {
            match c.as_str() {
                "auto" => e.containment = ContainmentPreference::Auto,
                "process-group" => e.containment = ContainmentPreference::ProcessGroup,
                _ => self.problem(
                    "executor.containment",
                    format!("unknown containment {c:?}; use \"auto\" or \"process-group\""),
                ),
            }
        }
        if let Some(dir) = self.string(t, "log_dir", p) {
            e.log_parent = Some(PathBuf::from(dir));
        }
        if let Some(b) = self.boolean(t, "pid_namespace", p) {
            e.pid_namespace = b;
        }
        if let Some(names) = self.strings(t, "keep_capabilities", p) {
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
        if let Some(paths) = self.strings(t, "read_only_paths", p) {
            e.read_only_paths = absolute(paths);
        }
        if let Some(paths) = self.strings(t, "hidden_paths", p) {
            e.hidden_paths = absolute(paths);
        }
    }

    /// `[executor]`: the resource limits of each command (0: unlimited).
    fn executor_rlimits(&mut self, t: &mut Table, limits: &mut shellward_exec::ResourceLimits) {
        let p = "executor";
        let some = |n: u64| (n > 0).then_some(n);
        if let Some(n) = self.integer(t, "max_processes", p, 0, 4_194_304) {
            limits.max_processes = some(n);
        }
        if let Some(n) = self.integer(t, "max_address_space_bytes", p, 0, 1 << 50) {
            limits.address_space_bytes = some(n);
        }
        if let Some(n) = self.integer(t, "max_file_size_bytes", p, 0, 1 << 50) {
            limits.file_size_bytes = some(n);
        }
        if let Some(n) = self.integer(t, "max_cpu_seconds", p, 0, 1 << 32) {
            limits.cpu_seconds = some(n);
        }
    }

    /// A list of non-empty strings without NUL at `path.key`, each with its index; each bad item is a problem of its
    /// own.
    fn strings(&mut self, t: &mut Table, key: &str, path: &str) -> Option<Vec<(usize, String)>> {
        let key_path = join(path, key);
        match t.remove(key)? {
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
    fn patterns(&mut self, t: &mut Table, key: &str, path: &str) -> Option<Vec<String>> {
        let key_path = join(path, key);
        match t.remove(key)? {
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
        match self.string(&mut t, "on_cancel", p).as_deref() {
            None => {}
            Some("stop") => l.on_cancel = OnCancel::Stop,
            Some("background") => l.on_cancel = OnCancel::Background,
            Some(other) => self.problem(
                join(p, "on_cancel"),
                format!(
                    "{other:?} is not a choice; write \"stop\" (the default) or \"background\""
                ),
            ),
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
                "on_cancel",
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
