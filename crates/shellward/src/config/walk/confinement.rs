//! The walk over `[confinement]`: defaults, the ceiling, allow-lists and fixed proxy addresses, each problem named
//! with its key.

use super::Walker;

const P: &str = "confinement";

impl Walker {
    /// `[confinement]`: `network`, `writable` (a list, or `"any"`), `deny_read`, `deny_syscalls`, the ceiling
    /// `max_network`, `max_writable`, and `unenforceable`.
    pub(super) fn confinement(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        self.networks(t, c);
        self.writables(t, c);
        self.proxy_hosts(t, c);
        self.ceiling_holds_the_defaults(c);
        self.denials(t, c);
        self.unenforceable(t, c);
    }

    /// `unenforceable`: `"refuse"` (the default) or `"run"`.
    fn unenforceable(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        if let Some(v) = self.string(t, "unenforceable", P) {
            match v.as_str() {
                "refuse" => c.unenforceable = shellward_exec::Unenforceable::Refuse,
                "run" => c.unenforceable = shellward_exec::Unenforceable::Run,
                other => self.problem(
                    "confinement.unenforceable",
                    format!(
                        "{other:?} is not a choice; give \"refuse\" (a command whose confinement this platform \
                         cannot give is not run, the default) or \"run\" (it runs without it, and its result says so)"
                    ),
                ),
            }
        }
    }

    /// `network` and `max_network`: a name, or `{ allow = [...] }`.
    fn networks(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        for key in ["network", "max_network"] {
            if let Some(toml::Value::Table(table)) = t.get(key).cloned() {
                t.remove(key);
                // `{ allow = ["pypi.org", "*.npmjs.org:443"] }`: only these, through the executor's proxy.
                let list: Option<Vec<String>> = match (table.get("allow"), table.len()) {
                    (Some(toml::Value::Array(items)), 1) => items
                        .iter()
                        .map(|i| i.as_str().map(str::to_string))
                        .collect(),
                    _ => None,
                };
                let checked = list.ok_or_else(|| {
                    "give { allow = [\"host\", \"*.domain:443\", ...] } (a list of host names, each with an \
                     optional :port)"
                        .to_string()
                });
                match checked.and_then(|list| {
                    shellward_exec::ProxyRules::new(&list, &Default::default()).map(|_| list)
                }) {
                    Ok(list) if key == "network" => {
                        c.network = shellward_exec::Network::Allow;
                        c.allow = list;
                    }
                    Ok(list) => {
                        c.max_network = Some(shellward_exec::Network::Allow);
                        c.max_allow = list;
                    }
                    Err(e) => self.problem(format!("confinement.{key}"), e),
                }
                continue;
            }
            if let Some(n) = self.string(t, key, P) {
                let network = match n.as_str() {
                    "none" => shellward_exec::Network::None,
                    "loopback" => shellward_exec::Network::Loopback,
                    "host" => shellward_exec::Network::Host,
                    other => {
                        self.problem(
                            format!("confinement.{key}"),
                            format!(
                                "{other:?} is not a network; give \"none\" (no network), \"loopback\" (the \
                                 session's own loopback only) or \"host\""
                            ),
                        );
                        continue;
                    }
                };
                if key == "network" {
                    c.network = network;
                } else {
                    c.max_network = Some(network);
                }
            }
        }
    }

    /// A path of `key` at index `i`: absolute, `~/…`, or (with `placeholders`) `$WORKDIR` / `$TMPDIR`; a problem
    /// otherwise.
    fn confinement_path(&mut self, key: &str, i: usize, entry: &str, placeholders: bool) -> bool {
        let ok = entry.starts_with('/')
            || entry.starts_with("~/")
            || (placeholders && matches!(entry, "$WORKDIR" | "$TMPDIR"));
        if !ok {
            self.problem(
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
    }

    /// `writable` and `max_writable`: a list of paths, or `"any"`.
    fn writables(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        for key in ["writable", "max_writable"] {
            let parsed: Option<Option<Vec<String>>> = match t.get(key) {
                Some(toml::Value::String(s)) if s == "any" => {
                    t.remove(key);
                    Some(None)
                }
                Some(toml::Value::String(s)) => {
                    let s = s.clone();
                    t.remove(key);
                    self.problem(
                        format!("confinement.{key}"),
                        format!(
                            "{s:?} is not a list; give a list of paths (e.g. [\"$WORKDIR\", \"/tmp\"]) or \"any\" \
                             to leave writes unconfined"
                        ),
                    );
                    None
                }
                _ => self.strings(t, key, P).map(|list| {
                    let mut out = Vec::new();
                    for (i, entry) in list {
                        if self.confinement_path(key, i, &entry, true) {
                            out.push(entry);
                        }
                    }
                    Some(out)
                }),
            };
            if let Some(w) = parsed {
                if key == "writable" {
                    c.writable = w;
                } else {
                    c.max_writable = Some(w);
                }
            }
        }
    }

    /// `proxy_hosts`: fixed addresses for allow-listed names.
    fn proxy_hosts(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
        if let Some(toml::Value::Table(hosts)) = t.get("proxy_hosts").cloned() {
            t.remove("proxy_hosts");
            for (name, value) in hosts {
                let addrs: Option<Vec<std::net::IpAddr>> = match &value {
                    toml::Value::String(s) => s.parse().ok().map(|a| vec![a]),
                    toml::Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().and_then(|s| s.parse().ok()))
                        .collect(),
                    _ => None,
                };
                match addrs {
                    Some(a) if !a.is_empty() => {
                        c.proxy_hosts.insert(name.to_ascii_lowercase(), a);
                    }
                    _ => self.problem(
                        format!("confinement.proxy_hosts.{name}"),
                        "give an IP address or a list of them (e.g. \"10.0.0.5\")".to_string(),
                    ),
                }
            }
        } else if t.contains_key("proxy_hosts") {
            t.remove("proxy_hosts");
            self.problem(
                "confinement.proxy_hosts",
                "give a table of names and addresses, e.g. { \"registry.internal\" = \"10.0.0.5\" }".to_string(),
            );
        }
    }

    /// The ceiling holds the defaults, or every command a policy passes through unchanged would be beyond it.
    fn ceiling_holds_the_defaults(&mut self, c: &crate::ConfinementConfig) {
        let rank = |n: shellward_exec::Network| match n {
            shellward_exec::Network::None => 0,
            shellward_exec::Network::Loopback => 1,
            shellward_exec::Network::Allow => 2,
            _ => 3,
        };
        let allow_outside = c.max_network == Some(shellward_exec::Network::Allow)
            && c.network == shellward_exec::Network::Allow
            && c.allow.iter().any(|a| !c.max_allow.contains(a));
        if let Some(max) = c.max_network
            && (rank(max) < rank(c.network) || allow_outside)
        {
            self.problem(
                "confinement.max_network",
                format!(
                    "{:?} is narrower than network = {:?}: the ceiling must allow at least the default; raise \
                     max_network or lower network",
                    max.as_str(),
                    c.network.as_str()
                ),
            );
        }
        if let (Some(Some(max)), Some(defaults)) = (&c.max_writable, &c.writable)
            && let Some(outside) = defaults.iter().find(|w| {
                !max.iter()
                    .any(|m| std::path::Path::new(w.as_str()).starts_with(m.as_str()))
            })
        {
            self.problem(
                "confinement.max_writable",
                format!(
                    "it does not include {outside:?} from writable: the ceiling must allow at least the default; add \
                     it to max_writable"
                ),
            );
        }
        if let (Some(Some(_)), None) = (&c.max_writable, &c.writable) {
            self.problem(
                "confinement.max_writable",
                "writable is \"any\", so a narrower ceiling would refuse every command; set writable to a list \
                 within max_writable, or remove max_writable"
                    .to_string(),
            );
        }
    }

    /// `deny_syscalls`, `unix_sockets` and `deny_read`.
    fn denials(&mut self, t: &mut toml::Table, c: &mut crate::ConfinementConfig) {
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
        if let Some(list) = self.strings(t, "unix_sockets", P) {
            let mut out = Vec::new();
            for (i, entry) in list {
                let variable = entry.strip_prefix('$').is_some_and(|n| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                if variable || self.confinement_path("unix_sockets", i, &entry, false) {
                    out.push(entry);
                }
            }
            c.unix_sockets = out;
        }
        if let Some(list) = self.strings(t, "deny_read", P) {
            let mut out = Vec::new();
            for (i, entry) in list {
                if self.confinement_path("deny_read", i, &entry, false)
                    && let Some(p) = crate::confinement::expand_home(&entry)
                {
                    out.push(p);
                }
            }
            c.deny_read = out;
        }
    }
}
