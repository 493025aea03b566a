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
//! - **Network** (`network`): `"host"` (default), `"loopback"` (the command's own loopback only) or `"none"`.
//! - **System calls** (`deny_syscalls`): refused with `EPERM` by a seccomp filter (default:
//!   [`shellward_exec::DEFAULT_DENIED_SYSCALLS`]: `ptrace`, `process_vm_readv`/`writev`, `bpf`, `io_uring_*`, …).

use shellward_exec::{Confinement, Enforced, Network};
use std::path::{Path, PathBuf};

/// The default writable paths: the working directory, the temporary directories and the package managers' caches.
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
    "~/go/pkg",
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
    /// System calls commands may not make (they fail with `EPERM`).
    pub deny_syscalls: Vec<String>,
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
        }
    }

    /// The executor's confinement for a command, with `$WORKDIR` standing for `workdir` (absolute; the operator's
    /// working directory, not one the model chose).
    pub fn for_command(&self, workdir: &Path) -> Confinement {
        let writable = self.writable.as_ref().map(|list| {
            let mut paths: Vec<PathBuf> = list
                .iter()
                .filter_map(|entry| match entry.as_str() {
                    // `/` as the working directory (a client started from `/`) would make every path writable: left
                    // out, so writes stay confined to the rest of the list (fail closed).
                    "$WORKDIR" if workdir == Path::new("/") => None,
                    "$WORKDIR" => Some(workdir.to_path_buf()),
                    "$TMPDIR" => Some(std::env::temp_dir()),
                    other => expand_home(other),
                })
                .collect();
            paths.sort();
            paths.dedup();
            paths
        });
        Confinement::new(writable, self.network).deny_syscalls(self.deny_syscalls.iter().cloned())
    }
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
            parts.push("writes not confined (this kernel has no Landlock)".into());
        }
        (None, _) => {}
    }
    if held.network != Network::Host {
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

/// A note for a failed command whose output shows the sandbox refused it something: what is allowed and what to do.
pub(crate) fn refusal_note(asked: &Confinement, held: &Enforced, output: &str) -> Option<String> {
    if held.writes
        && let Some(paths) = &asked.writable
        && WRITE_REFUSED.iter().any(|m| output.contains(m))
    {
        let existing: Vec<PathBuf> = paths.iter().filter(|p| p.exists()).cloned().collect();
        return Some(format!(
            "If that was a write outside the sandbox: writes are allowed only under {}. Write there instead (the \
             working directory or a temporary directory), or ask the operator to add the path to [confinement] \
             writable.",
            some_paths(&existing, 8)
        ));
    }
    if held.syscalls
        && output.contains("Operation not permitted")
        && asked
            .deny_syscalls
            .iter()
            .any(|s| output.contains(s.as_str()) || s == "ptrace")
    {
        return Some(format!(
            "If that was a refused system call: the sandbox refuses {} (they fail with \"Operation not permitted\"); \
             tracing and debugging other processes is not allowed here. Ask the operator ([confinement] deny_syscalls) \
             if the task needs it.",
            asked.deny_syscalls.join(", ")
        ));
    }
    if held.network != Network::Host && NETWORK_REFUSED.iter().any(|m| output.contains(m)) {
        return Some(format!(
            "This command ran with network \"{}\" ({}): nothing outside is reachable. Work offline, or ask the \
             operator for network access ([confinement] network).",
            held.network.as_str(),
            match held.network {
                Network::None => "no network at all",
                _ => "only its own loopback",
            }
        ));
    }
    None
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
    fn refusals_are_explained_only_when_the_sandbox_could_be_why() {
        let asked = Confinement::new(Some(vec![std::env::temp_dir()]), Network::None);
        let held = Enforced::default();
        // Nothing confined: no note whatever the output.
        assert!(refusal_note(&asked, &held, "Permission denied").is_none());
        let mut held = Enforced::default();
        held.writes = true;
        held.network = Network::None;
        let note = refusal_note(
            &asked,
            &held,
            "sh: 1: cannot create /etc/x: Permission denied",
        )
        .unwrap();
        assert!(note.contains("writable"), "{note}");
        let note = refusal_note(
            &asked,
            &held,
            "curl: (6) Could not resolve host: example.com",
        )
        .unwrap();
        assert!(note.contains("network"), "{note}");
        assert!(refusal_note(&asked, &held, "error: tests failed").is_none());
    }
}
