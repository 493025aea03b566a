//! What each command may touch (`[confinement]`): the operator's defaults for where commands may write, what they may
//! not read, and what network they reach; turned into the executor's per-command [`Confinement`] for each plan, and
//! into the line and notes that tell the model what held.
//!
//! - **Writes** (`writable`): only beneath these paths, everything else read-only (Landlock). Entries may start with
//!   `~/` (the home directory of the user shellward runs as) or be `$WORKDIR` (the configured working directory,
//!   `[executor] workdir`, else where shellward started — never a call's `workdir` or a session's `cd`, which the
//!   model chooses) or `$TMPDIR` (the temporary directory). `writable = "any"` leaves writes to the user's own permissions.
//! - **Reads** (`deny_read`): hidden in every session's sandbox (an empty directory or an empty file in their place),
//!   added to the executor's hidden paths; paths that do not exist when a session's sandbox is made are not hidden.
//! - **Network** (`network`): `"host"` (default), `"loopback"` (the session's own loopback only), `"none"`, or an
//!   allow-list `{ allow = ["pypi.org", "*.npmjs.org:443"] }` reached through the executor's filtering proxy
//!   ([`shellward_exec::proxy`]); `proxy_hosts` gives fixed addresses for names.
//! - **System calls** (`deny_syscalls`): refused with `EPERM` by a seccomp filter (default:
//!   [`shellward_exec::DEFAULT_DENIED_SYSCALLS`]: `ptrace`, `process_vm_readv`/`writev`, `bpf`, `io_uring_*`, …).
//! - **The ceiling** (`max_network`, `max_writable`): how far a policy may widen a command's confinement (contract
//!   0.3 plans carry one). By default the defaults themselves: policies may narrow, not widen. A plan beyond it is
//!   the policy's fault and the command is not run.
//!
//! Policies see the confinement in the host's policy types ([`shellward_policy::Confinement`], paths as absolute
//! strings); [`ConfinementConfig::policy_view`] and [`to_exec`] map between the two.

use crate::note::{Note, NoteKind, Refusal};
use shellward_exec::{Confinement, Enforced, Network};
use shellward_policy::{Confinement as PolicyConfinement, Network as PolicyNetwork};
use std::path::{Path, PathBuf};

/// The default writable paths: the working directory, the temporary directories, and the package managers' caches and
/// the directories they install a user's tools into (`cargo install`, `go install`, `pip install --user`, `uv tool`),
/// so ordinary work runs unchanged. Shells' startup files, keys, rustup's toolchains and the rest of the home stay
/// read-only.
pub const DEFAULT_WRITABLE: &[&str] = &[
    "$WORKDIR",
    "$TMPDIR",
    "/tmp",
    "/var/tmp",
    "~/.cache",
    "~/.npm",
    "~/.yarn",
    "~/.pnpm-store",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.cargo/bin",
    "~/go/pkg",
    "~/go/bin",
    "~/.local/bin",
    "~/.local/lib",
    "~/.local/share/uv",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.gradle/wrapper",
    "~/.ccache",
];

/// The default paths commands may not read: credentials and keys of the usual tools.
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.kube",
    "~/.netrc",
    "~/.docker/config.json",
    "~/.git-credentials",
    "~/.config/gh/hosts.yml",
];

/// `[confinement]`: the operator's defaults for every command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfinementConfig {
    /// Where commands may write (`None`: anywhere their user may). Entries as written (`~/`, `$WORKDIR`,
    /// `$TMPDIR` expanded per command).
    pub writable: Option<Vec<String>>,
    /// Paths commands may not read, absolute (`~/` expanded when the configuration is read).
    pub deny_read: Vec<PathBuf>,
    /// The network commands reach.
    pub network: Network,
    /// With `network` [`Network::Allow`]: the destinations commands may reach.
    pub allow: Vec<String>,
    /// Fixed addresses for names a proxied command asks for (`[confinement] proxy_hosts`), instead of DNS.
    pub proxy_hosts: std::collections::HashMap<String, Vec<std::net::IpAddr>>,
    /// System calls commands may not make (they fail with `EPERM`).
    pub deny_syscalls: Vec<String>,
    /// Host Unix sockets commands may still connect to when their network is not the host's (`[confinement]
    /// unix_sockets`): entries as written — `/path`, `~/path`, or `$NAME`, a variable of shellward's own environment
    /// naming one (`$SSH_AUTH_SOCK`), expanded per command and skipped when unset. A session's own sockets need no
    /// entry; every other host socket stays cut.
    pub unix_sockets: Vec<String>,
    /// The widest network a policy may give a command (`None`: `network`, so policies may only narrow).
    pub max_network: Option<Network>,
    /// With `max_network` [`Network::Allow`]: the destinations a policy may allow.
    pub max_allow: Vec<String>,
    /// Where a policy may let a command write: `None` is `writable` (policies may only narrow), `Some(None)` is
    /// anywhere (`"any"`), `Some(Some(paths))` beneath these (entries as in `writable`).
    pub max_writable: Option<Option<Vec<String>>>,
    /// What to do with a plan whose confinement the platform cannot enforce (`[confinement] unenforceable`): refuse
    /// it (the default) or run it without what cannot be held, its result saying so.
    pub unenforceable: shellward_exec::Unenforceable,
}

impl Default for ConfinementConfig {
    fn default() -> Self {
        ConfinementConfig {
            writable: Some(DEFAULT_WRITABLE.iter().map(|s| s.to_string()).collect()),
            deny_read: DEFAULT_DENY_READ
                .iter()
                .filter_map(|p| expand_home(p))
                .collect(),
            network: Network::Host,
            deny_syscalls: shellward_exec::DEFAULT_DENIED_SYSCALLS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            unix_sockets: Vec::new(),
            max_network: None,
            max_writable: None,
            allow: Vec::new(),
            max_allow: Vec::new(),
            proxy_hosts: Default::default(),
            unenforceable: Default::default(),
        }
    }
}

impl ConfinementConfig {
    /// Nothing confined: writes wherever the user may, nothing hidden, the host's network.
    pub fn unconfined() -> ConfinementConfig {
        ConfinementConfig {
            writable: None,
            deny_read: Vec::new(),
            network: Network::Host,
            deny_syscalls: Vec::new(),
            ..ConfinementConfig::default()
        }
    }

    /// The executor's confinement for a command, with `$WORKDIR` standing for `workdir` (absolute; the operator's
    /// working directory, not one the model chose).
    pub fn for_command(&self, workdir: &Path) -> Confinement {
        let writable = self.writable.as_ref().map(|list| expand(list, workdir));
        let c = Confinement::new(writable, self.network);
        let c = if self.network == Network::Allow {
            c.allow_only(self.allow.iter().cloned())
        } else {
            c
        };
        let mut c = c.deny_syscalls(self.deny_syscalls.iter().cloned());
        c.unix_sockets = self
            .unix_sockets
            .iter()
            .filter_map(|e| expand_socket(e))
            .collect();
        c
    }

    /// What policies see of `plan` (a command's confinement from [`for_command`](Self::for_command)) and the
    /// ceiling they may widen it to, with `$WORKDIR` standing for `workdir`. `hidden` is host machinery a command
    /// must always be able to write (left out of the view, added back by [`to_exec`]).
    pub fn policy_view(
        &self,
        plan: &Confinement,
        workdir: &Path,
        hidden: Option<&Path>,
    ) -> (PolicyConfinement, PolicyConfinement) {
        let strings = |paths: &[PathBuf]| -> Vec<String> {
            paths
                .iter()
                .filter(|p| Some(p.as_path()) != hidden)
                .map(|p| p.display().to_string())
                .collect()
        };
        let view = PolicyConfinement::new(
            network_access(plan.network, &plan.allow),
            plan.writable.as_deref().map(strings),
        );
        let ceiling = PolicyConfinement::new(
            match self.max_network {
                Some(n) => network_access(n, &self.max_allow),
                None => network_access(self.network, &self.allow),
            },
            match &self.max_writable {
                None => view.writable.clone(),
                Some(None) => None,
                Some(Some(list)) => Some(strings(&expand(list, workdir))),
            },
        );
        (view, ceiling)
    }
}

/// A `[confinement] unix_sockets` entry as a path: `$NAME` from shellward's environment (absolute values only), `~/`
/// expanded; `None` when it names nothing.
fn expand_socket(entry: &str) -> Option<PathBuf> {
    match entry.strip_prefix('$') {
        Some(name) => std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
        None => expand_home(entry),
    }
}

/// `list` with `$WORKDIR` (as `workdir`), `$TMPDIR` and `~/` expanded, sorted, without duplicates.
fn expand(list: &[String], workdir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = list
        .iter()
        .filter_map(|entry| match entry.as_str() {
            // `/` as the working directory (a client started from `/`) would make every path writable: left out, so
            // writes stay confined to the rest of the list (fail closed).
            "$WORKDIR" if workdir == Path::new("/") => None,
            "$WORKDIR" => Some(workdir.to_path_buf()),
            "$TMPDIR" => Some(std::env::temp_dir()),
            other => expand_home(other),
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The executor's network (and allow-list) as policies see it.
fn network_access(n: Network, allow: &[String]) -> PolicyNetwork {
    match n {
        Network::None => PolicyNetwork::None,
        Network::Loopback => PolicyNetwork::Loopback,
        Network::Allow => PolicyNetwork::Allow(allow.to_vec()),
        _ => PolicyNetwork::Host,
    }
}

/// The executor's confinement for a policy's `decided` one: its network (an allow-list through the executor's
/// filtering proxy) and writable paths, with `base`'s system-call filter and `hidden` (host machinery) kept writable.
/// The error says why the host cannot enforce it (an allow-list the proxy cannot use), for a deny naming the policy.
pub(crate) fn to_exec(
    decided: &PolicyConfinement,
    base: &Confinement,
    hidden: Option<&Path>,
) -> Result<Confinement, String> {
    let mut allow = Vec::new();
    let network = match &decided.network {
        PolicyNetwork::None => Network::None,
        PolicyNetwork::Loopback => Network::Loopback,
        PolicyNetwork::Host => Network::Host,
        PolicyNetwork::Allow(list) => {
            shellward_exec::ProxyRules::new(list, &Default::default()).map_err(|e| {
                format!("asked for a network allow-list the proxy cannot use ({e}), so the command was not run")
            })?;
            allow.clone_from(list);
            Network::Allow
        }
    };
    let writable = decided.writable.as_ref().map(|paths| {
        let mut out: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
        out.extend(hidden.map(Path::to_path_buf));
        out
    });
    let c = Confinement::new(writable, network);
    let c = if network == Network::Allow {
        c.allow_only(allow)
    } else {
        c
    };
    // The operator's: a policy neither widens nor drops them.
    let mut c = c.deny_syscalls(base.deny_syscalls.iter().cloned());
    c.unix_sockets.clone_from(&base.unix_sockets);
    Ok(c)
}

/// `~/rest` under the home directory; other paths as they are. `None` for `~/…` without a home directory.
pub(crate) fn expand_home(path: &str) -> Option<PathBuf> {
    match path.strip_prefix("~/") {
        Some(rest) => dirs::home_dir().map(|h| h.join(rest)),
        None if path == "~" => dirs::home_dir(),
        None => Some(PathBuf::from(path)),
    }
}

/// `path` with the home directory written as `~`, for lines the model reads.
fn short(path: &Path) -> String {
    if let Some(home) = dirs::home_dir()
        && let Ok(rest) = path.strip_prefix(&home)
    {
        return if rest.as_os_str().is_empty() {
            "~".into()
        } else {
            format!("~/{}", rest.display())
        };
    }
    path.display().to_string()
}

/// At most `n` paths, then "+k more".
fn some_paths(paths: &[PathBuf], n: usize) -> String {
    let mut shown: Vec<String> = paths.iter().take(n).map(|p| short(p)).collect();
    if paths.len() > n {
        shown.push(format!("+{} more", paths.len() - n));
    }
    shown.join(", ")
}

/// What the model is told held for a command (one line), or `None` when nothing was confined. `hidden` is whether
/// the command ran in a session sandbox, where the denied paths are hidden.
pub(crate) fn line(
    asked: &Confinement,
    held: &Enforced,
    deny_read: &[PathBuf],
    hidden: bool,
) -> Option<String> {
    let mut parts = Vec::new();
    match (&asked.writable, held.writes) {
        (Some(paths), true) => {
            // The existing ones: a missing path in the list could not be named in the ruleset.
            let existing: Vec<PathBuf> = paths.iter().filter(|p| p.exists()).cloned().collect();
            parts.push(format!("writes only under {}", some_paths(&existing, 3)));
        }
        (Some(_), false) => {
            parts.push(if cfg!(windows) {
                "writes not confined (Windows has no per-command write confinement)".into()
            } else {
                "writes not confined (this kernel has no Landlock)".into()
            });
        }
        (None, _) => {}
    }
    if held.network == Network::Allow {
        parts.push(format!(
            "network only to {} (through a proxy)",
            asked.allow.join(", ")
        ));
    } else if held.network != Network::Host {
        parts.push(format!("network {}", held.network.as_str()));
    }
    if held.syscalls {
        let names = &asked.deny_syscalls;
        let shown: Vec<&str> = names.iter().take(2).map(String::as_str).collect();
        parts.push(if names.len() > shown.len() {
            format!(
                "{} and {} more system calls refused",
                shown.join(", "),
                names.len() - shown.len()
            )
        } else {
            format!("{} refused", shown.join(", "))
        });
    }
    let denied: Vec<&PathBuf> = deny_read.iter().filter(|p| p.exists()).collect();
    if !denied.is_empty() {
        parts.push(if hidden {
            format!(
                "{} hidden",
                some_paths(&denied.into_iter().cloned().collect::<Vec<_>>(), 2)
            )
        } else {
            "secrets not hidden (no session sandbox here)".into()
        });
    }
    (!parts.is_empty()).then(|| format!("Sandbox: {}.", parts.join("; ")))
}

/// Messages a refused write prints (Landlock's `EACCES`; a read-only mount's `EROFS`).
const WRITE_REFUSED: &[&str] = &["Permission denied", "Read-only file system"];
/// Words beside "Operation not permitted" of a program refused a Unix socket (`socket(AF_UNIX)` under a network
/// other than the host's).
const SOCKET_REFUSED: &[&str] = &[
    "socket",
    "unix_listener",
    "AF_UNIX",
    "error connecting to",
    "agent",
];

/// The paths the lines of `output` that report a refused write name (`bash: line 1: /etc/x: Permission denied`,
/// `touch: cannot touch '/x': …`, `PermissionError: [Errno 13] Permission denied: '/x'`), relative ones resolved
/// against `workdir`; at most a few.
fn refused_paths(output: &str, workdir: Option<&Path>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for line in output
        .lines()
        .filter(|l| WRITE_REFUSED.iter().any(|m| l.contains(m)))
    {
        for word in line.split_whitespace() {
            let word = word.trim_matches(|c: char| {
                matches!(
                    c,
                    '\'' | '"' | ':' | ',' | '(' | ')' | '‘' | '’' | '`' | '[' | ']'
                )
            });
            let path = if word.starts_with('/') {
                PathBuf::from(word)
            } else if (word.starts_with("./") || word.starts_with("../")) && workdir.is_some() {
                workdir.map(|w| w.join(word)).unwrap_or_default()
            } else {
                continue;
            };
            if !found.contains(&path) && found.len() < 8 {
                found.push(path);
            }
        }
    }
    found
}

/// Whether `path` (or, when it does not exist, its nearest existing ancestor) is beneath one of `roots`.
fn beneath_any(path: &Path, roots: &[PathBuf]) -> bool {
    let resolved = path
        .ancestors()
        .find_map(|a| {
            a.canonicalize()
                .ok()
                .map(|c| c.join(path.strip_prefix(a).unwrap_or(Path::new(""))))
        })
        .unwrap_or_else(|| path.to_path_buf());
    roots.iter().any(|r| {
        let r = r.canonicalize().unwrap_or_else(|_| r.clone());
        resolved.starts_with(&r)
    })
}
/// Messages of a command without the network it wanted.
const NETWORK_REFUSED: &[&str] = &[
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "getaddrinfo",
    "Cannot assign requested address",
    "Connection refused",
    "ENETUNREACH",
    "EAI_AGAIN",
];

/// The refusals the sandbox itself saw during `r` (writes, Unix sockets, network destinations, datagram sockets),
/// one note per kind, whatever the command made of them; empty when it saw none.
pub(crate) fn seen_refusal_notes(asked: &Confinement, r: &shellward_exec::ExecResult) -> Vec<Note> {
    let network = r.confinement.network;
    [
        write_refusal_note(asked, &r.refused_writes),
        socket_refusal_note(network, &r.refused_sockets),
        network_refusal_note(network, &asked.allow, &r.refused_network),
        r.refused_unix_datagram
            .then(|| datagram_refusal_note(network)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The note for Unix sockets the sandbox saw refused (`ExecResult::refused_sockets`: not the session's own) under
/// `network`; `None` when there were none.
pub(crate) fn socket_refusal_note(network: Network, refused: &[PathBuf]) -> Option<Note> {
    if refused.is_empty() {
        return None;
    }
    refused_note(
        Refusal::UnixSocket,
        format!(
            "Refused by the sandbox ([confinement] network = \"{}\"): connecting to the Unix socket {}, which is not \
         this session's (a socket of the host, or of another session, is out of reach with this network). Sockets \
         the session's own commands create — in the working directory, the writable paths or /tmp — connect as \
         usual, also from one command to the next. If the task needs that socket, ask the user to allow it: \
         network = \"host\" in [confinement] (or for this command), or run it outside the sandbox.",
            network.as_str(),
            some_paths(refused, 4)
        ),
    )
}

/// The note for writes the sandbox refused (`ExecResult::refused_writes`, seen by the sandbox itself; or paths a
/// failed command's output names, checked against the rules): which paths, the rule (`[confinement] writable`, with
/// the paths it allows), and what to do. `None` when there were none.
pub(crate) fn write_refusal_note(asked: &Confinement, refused: &[PathBuf]) -> Option<Note> {
    if refused.is_empty() {
        return None;
    }
    let allowed: Vec<PathBuf> = asked
        .writable
        .iter()
        .flatten()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    refused_note(
        Refusal::Write,
        format!(
            "Refused by the sandbox ([confinement] writable): writing {}, which is outside the paths commands may write \
         ({}). Write in the working directory or a temporary directory instead; if the task needs that place, ask \
         the user to have it added to [confinement] writable.",
            some_paths(refused, 4),
            some_paths(&allowed, 8)
        ),
    )
}

/// The note for network destinations the sandbox saw refused (`ExecResult::refused_network`: a connect with no route
/// under `network`, or a destination the allow-list `allow` does not name); `None` when there were none.
pub(crate) fn network_refusal_note(
    network: Network,
    allow: &[String],
    refused: &[String],
) -> Option<Note> {
    if refused.is_empty() {
        return None;
    }
    // A name server's port: the command was looking a name up.
    let shown: Vec<String> = refused
        .iter()
        .take(4)
        .map(|to| {
            if to.ends_with(":53") {
                format!("{to} (a name server: names cannot be looked up)")
            } else {
                to.clone()
            }
        })
        .collect();
    let more = refused.len().saturating_sub(shown.len());
    let what = format!(
        "{}{}",
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    );
    let (reach, instead) = match network {
        Network::Allow => (
            format!(
                "it may reach only {} (through shellward's proxy)",
                allow.join(", ")
            ),
            "Use one of those",
        ),
        Network::Loopback => (
            "it has only its session's loopback".to_string(),
            "Work offline or against a server of the session's own on 127.0.0.1",
        ),
        _ => ("it has no network at all".to_string(), "Work offline"),
    };
    refused_note(
        Refusal::Network,
        format!(
            "Refused by the sandbox ([confinement] network = \"{}\"): connecting to {what}; {reach}. {instead}, or, if \
         the task needs that destination, ask the user to allow it (network = \"host\", or the destination in an \
         allow-list, in [confinement] or for this command).",
            network.as_str()
        ),
    )
}

/// The note for a datagram Unix socket the sandbox saw refused (`ExecResult::refused_unix_datagram`) under `network`.
pub(crate) fn datagram_refusal_note(network: Network) -> Note {
    Note::new(
        NoteKind::Refused(Refusal::UnixSocket),
        format!(
            "Refused by the sandbox ([confinement] network = \"{}\"): making a datagram Unix socket \
         (socket(AF_UNIX, SOCK_DGRAM) or such a pair fails with \"Operation not permitted\"), as one could send to any \
         socket path, the host's included. Use a stream socket (SOCK_STREAM) of its own, which works here, or ask the \
         user for network = \"host\".",
            network.as_str()
        ),
    )
}

/// A note for a failed command whose output shows the sandbox refused it something: what was refused (the paths the
/// refusals name, checked against the rules — a path inside the writable ones was refused by something else, and is
/// not blamed on the sandbox), which rule refused it, and what to do. `workdir` resolves relative paths.
pub(crate) fn refusal_note(
    asked: &Confinement,
    held: &Enforced,
    output: &str,
    workdir: Option<&Path>,
) -> Option<Note> {
    // Where the sandbox watched the writes, what it saw refused is said already (`write_refusal_note`), and a
    // "Permission denied" it did not see is the file system's.
    if held.writes
        && !held.writes_watched
        && let Some(paths) = &asked.writable
        && WRITE_REFUSED.iter().any(|m| output.contains(m))
    {
        let existing: Vec<PathBuf> = paths.iter().filter(|p| p.exists()).cloned().collect();
        let named = refused_paths(output, workdir);
        let outside: Vec<PathBuf> = named
            .iter()
            .filter(|p| !beneath_any(p, &existing))
            .cloned()
            .collect();
        if !named.is_empty() && outside.is_empty() {
            // Every refused path is one the sandbox lets it write: a permission of the file system, not ours.
            return None;
        }
        if !outside.is_empty() {
            return write_refusal_note(asked, &outside);
        }
        return refused_note(
            Refusal::Write,
            format!(
                "If that was a write outside the sandbox: writes are allowed only under {}. Write there instead (the \
             working directory or a temporary directory), or ask the operator to add the path to [confinement] \
             writable.",
                some_paths(&existing, 8)
            ),
        );
    }
    if held.network != Network::Host
        && output.contains("Operation not permitted")
        && SOCKET_REFUSED.iter().any(|m| output.contains(m))
    {
        return refused_note(
            Refusal::UnixSocket,
            format!(
                "Refused by the sandbox ([confinement] network = \"{}\"): with this network a command cannot create a \
             datagram Unix socket (socket(AF_UNIX, SOCK_DGRAM) fails with \"Operation not permitted\"; stream \
             sockets of its own work), and where the sandbox cannot check connects (another architecture, an old \
             kernel, a sandbox inside a sandbox) no Unix socket at all. Use a stream socket, or ask the user for \
             network = \"host\".",
                held.network.as_str()
            ),
        );
    }
    if held.syscalls
        && output.contains("Operation not permitted")
        && asked
            .deny_syscalls
            .iter()
            .any(|s| output.contains(s.as_str()) || s == "ptrace")
    {
        return refused_note(
            Refusal::Syscall,
            format!(
                "If that was a refused system call: the sandbox refuses {} (they fail with \"Operation not permitted\"); \
             tracing and debugging other processes is not allowed here. Ask the operator ([confinement] deny_syscalls) \
             if the task needs it.",
                asked.deny_syscalls.join(", ")
            ),
        );
    }
    if held.network == Network::Allow
        && (output.contains("403") || NETWORK_REFUSED.iter().any(|m| output.contains(m)))
    {
        return refused_note(
            Refusal::Network,
            format!(
                "If that was a refused destination: this command may reach only {} (through shellward's proxy; \
             HTTP_PROXY and HTTPS_PROXY point at it, and nothing else is reachable). Use one of those, or ask the \
             operator for access to another destination ([confinement] network, or the policy that set it).",
                asked.allow.join(", ")
            ),
        );
    }
    if held.network != Network::Host && NETWORK_REFUSED.iter().any(|m| output.contains(m)) {
        return refused_note(
            Refusal::Network,
            format!(
                "This command ran with network \"{}\" ({}): nothing outside is reachable. Work offline, or ask the \
             operator for network access ([confinement] network).",
                held.network.as_str(),
                match held.network {
                    Network::None => "no network at all",
                    _ => "only its session's loopback",
                }
            ),
        );
    }
    None
}

/// A note of what the sandbox refused, of kind `what`.
fn refused_note(what: Refusal, text: String) -> Option<Note> {
    Some(Note::new(NoteKind::Refused(what), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_expanded_per_command() {
        let c = ConfinementConfig {
            writable: Some(vec![
                "$WORKDIR".into(),
                "$TMPDIR".into(),
                "/srv".into(),
                "$WORKDIR".into(),
            ]),
            deny_read: vec![],
            network: Network::None,
            deny_syscalls: vec!["ptrace".into()],
            ..ConfinementConfig::default()
        };
        let got = c.for_command(Path::new("/w/app"));
        let paths = got.writable.clone().unwrap();
        assert!(paths.contains(&PathBuf::from("/w/app")) && paths.contains(&PathBuf::from("/srv")));
        assert!(paths.contains(&std::env::temp_dir()));
        assert_eq!(paths.len(), 3, "duplicates removed: {paths:?}");
        assert_eq!(got.network, Network::None);
        assert_eq!(got.deny_syscalls, vec!["ptrace".to_string()]);
        assert_eq!(
            ConfinementConfig::unconfined().for_command(Path::new("/")),
            Confinement::none()
        );
        // A working directory of `/` does not make everything writable.
        let from_root = c.for_command(Path::new("/")).writable.unwrap();
        assert!(!from_root.contains(&PathBuf::from("/")), "{from_root:?}");
        assert!(from_root.contains(&PathBuf::from("/srv")));
    }

    #[test]
    fn policies_see_the_confinement_and_a_ceiling_and_their_answer_maps_back() {
        let mut c = ConfinementConfig::unconfined();
        c.writable = Some(vec!["$WORKDIR".into(), "/srv".into()]);
        c.network = Network::Loopback;
        c.deny_syscalls = vec!["ptrace".into()];
        let workdir = Path::new("/w/app");
        let hidden = PathBuf::from("/tmp/.shellward-cwd-x");
        let mut plan = c.for_command(workdir);
        plan.writable.as_mut().unwrap().push(hidden.clone());
        let (view, ceiling) = c.policy_view(&plan, workdir, Some(&hidden));
        assert_eq!(view.network, PolicyNetwork::Loopback);
        assert_eq!(
            view.writable,
            Some(vec!["/srv".to_string(), "/w/app".to_string()])
        );
        assert_eq!(ceiling, view, "by default the ceiling is the defaults");
        c.max_network = Some(Network::Host);
        c.max_writable = Some(Some(vec!["$WORKDIR".into(), "/data".into()]));
        let (_, ceiling) = c.policy_view(&plan, workdir, Some(&hidden));
        assert_eq!(ceiling.network, PolicyNetwork::Host);
        assert_eq!(
            ceiling.writable,
            Some(vec!["/data".to_string(), "/w/app".to_string()])
        );
        c.max_writable = Some(None);
        assert_eq!(c.policy_view(&plan, workdir, None).1.writable, None);
        // Back to the executor: the host's hidden directory stays writable, the system-call filter stays.
        let narrowed = PolicyConfinement::new(PolicyNetwork::None, Some(vec!["/w/app".into()]));
        let exec = to_exec(&narrowed, &plan, Some(&hidden)).unwrap();
        assert_eq!(exec.network, Network::None);
        assert_eq!(
            exec.writable,
            Some(vec![PathBuf::from("/w/app"), hidden.clone()])
        );
        assert_eq!(exec.deny_syscalls, vec!["ptrace".to_string()]);
        let allow = PolicyConfinement::new(PolicyNetwork::Allow(vec!["pypi.org".into()]), None);
        let exec = to_exec(&allow, &plan, None).unwrap();
        assert_eq!(
            (exec.network, exec.allow.clone()),
            (Network::Allow, vec!["pypi.org".to_string()])
        );
        let bad = PolicyConfinement::new(PolicyNetwork::Allow(vec!["no such host!".into()]), None);
        assert!(
            to_exec(&bad, &plan, None)
                .unwrap_err()
                .contains("allow-list")
        );
    }

    #[test]
    fn refusals_are_explained_only_when_the_sandbox_could_be_why() {
        let asked = Confinement::new(Some(vec![std::env::temp_dir()]), Network::None);
        let held = Enforced::default();
        // Nothing confined: no note whatever the output.
        assert!(refusal_note(&asked, &held, "Permission denied", None).is_none());
        let mut held = Enforced::default();
        held.writes = true;
        held.network = Network::None;
        let note_for = |output: &str| refusal_note(&asked, &held, output, None);
        let note = note_for("sh: 1: cannot create /etc/x: Permission denied").unwrap();
        assert!(
            note.contains("writable") && note.contains("/etc/x"),
            "{note}"
        );
        // A refused path inside the writable ones was not refused by the sandbox: nothing blamed on it.
        let inside = std::env::temp_dir().join("locked-file");
        assert!(
            note_for(&format!(
                "touch: cannot touch '{}': Permission denied",
                inside.display()
            ))
            .is_none()
        );
        // Python's and mkdir's forms; the path is named.
        let note =
            note_for("PermissionError: [Errno 13] Permission denied: '/usr/lib/x.py'").unwrap();
        assert!(note.contains("/usr/lib/x.py"), "{note}");
        let note =
            note_for("mkdir: cannot create directory ‘/opt/app’: Permission denied").unwrap();
        assert!(note.contains("/opt/app") && !note.contains('‘'), "{note}");
        // Where the sandbox watched the writes, a "Permission denied" it did not see is not blamed on it.
        let mut watched = held.clone();
        watched.writes_watched = true;
        assert!(
            refusal_note(
                &asked,
                &watched,
                "sh: 1: cannot create /etc/x: Permission denied",
                None
            )
            .is_none()
        );
        let net = network_refusal_note(
            Network::Allow,
            &["pypi.org".into()],
            &["example.com:443".into()],
        )
        .unwrap();
        assert!(
            net.contains("example.com:443")
                && net.contains("pypi.org")
                && net.contains("\"allow\""),
            "{net}"
        );
        assert!(network_refusal_note(Network::None, &[], &[]).is_none());
        let dns = network_refusal_note(Network::None, &[], &["10.0.0.2:53".into()]).unwrap();
        assert!(dns.contains("10.0.0.2:53 (a name server"), "{dns}");
        let seen = write_refusal_note(&asked, &[PathBuf::from("/etc/x")]).unwrap();
        assert!(
            seen.contains("/etc/x") && seen.contains("[confinement] writable"),
            "{seen}"
        );
        assert!(write_refusal_note(&asked, &[]).is_none());
        // A Unix socket refused under a network other than the host's.
        let note = note_for("unix_listener: socket: Operation not permitted").unwrap();
        assert!(
            note.contains("Unix socket") && note.contains("network = \"host\""),
            "{note}"
        );
        // Refused connects the sandbox saw are named, whatever the output said.
        assert!(socket_refusal_note(Network::None, &[]).is_none());
        let note =
            socket_refusal_note(Network::Loopback, &[PathBuf::from("/run/docker.sock")]).unwrap();
        assert!(
            note.contains("/run/docker.sock")
                && note.contains("network = \"loopback\"")
                && note.contains("network = \"host\""),
            "{note}"
        );
        let note = note_for("curl: (6) Could not resolve host: example.com").unwrap();
        assert!(note.contains("network"), "{note}");
        assert!(note_for("error: tests failed").is_none());
    }
}
