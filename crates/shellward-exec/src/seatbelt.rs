//! The macOS confinement of a command, as a Seatbelt profile (the SBPL text `sandbox-exec -p` and `sandbox_init`
//! take): what a plan's [`Confinement`] and the executor's own protected files become on a Mac.
//!
//! A pure function of its input, so it is built and tested on every platform (golden profiles, hostile paths); only
//! macOS applies it. Written here from the profile language's documented behaviour — nothing in this crate has run
//! it on a Mac.
//!
//! The profile starts from `(allow default)` and takes away what the plan confines, in this order (the profile
//! language lets the *last* matching rule decide, so what protects the host comes last and no earlier allow can
//! undo it):
//!
//! 1. signals reach only processes of the same sandbox (the command's own tree), never the supervisor or the user's
//!    other programs;
//! 2. writes: with [`Confinement::writable`] every write is denied, then allowed beneath each writable path and to
//!    the terminal and null devices;
//! 3. network: [`Network::Host`] is left alone; every other mode denies all network use (Unix sockets included, as on
//!    Linux), then [`Network::Loopback`] allows loopback addresses and [`Network::Allow`] allows only the filtering
//!    proxy's loopback port;
//! 4. the executor's read-only paths lose writes, and its hidden paths lose reads and writes, whatever came before.
//!
//! What Seatbelt cannot give is returned as [`Gap`]s beside the text, for the caller to refuse the plan (never run it
//! wider than decided) or, when the operator allowed it, to run it and say so.

use crate::plan::{Confinement, Network};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

/// What a profile must protect beyond the plan: the executor's own files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Protected {
    /// Paths no command may write (the configuration, the policy cache and its key, …).
    pub read_only: Vec<PathBuf>,
    /// Paths no command may read or write (secrets, other sessions' logs).
    pub hidden: Vec<PathBuf>,
    /// The loopback port of the filtering proxy that serves [`Network::Allow`] commands.
    pub proxy_port: Option<u16>,
}

impl Protected {
    /// Nothing protected beyond the plan, no proxy.
    pub fn new() -> Protected {
        Protected::default()
    }

    /// These paths are read-only to commands.
    pub fn read_only(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Protected {
        self.read_only.extend(paths);
        self
    }

    /// These paths are neither readable nor writable by commands.
    pub fn hidden(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Protected {
        self.hidden.extend(paths);
        self
    }

    /// The filtering proxy listens on this loopback port.
    pub fn proxy_port(mut self, port: u16) -> Protected {
        self.proxy_port = Some(port);
        self
    }
}

/// Something a plan asks for that a Seatbelt profile does not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Gap {
    /// [`Confinement::deny_syscalls`]: Seatbelt filters operations, not system calls.
    SystemCallFilter,
    /// [`Network::Loopback`] reaches the host's loopback (its other servers too), not a loopback of the session's
    /// own as a Linux network namespace gives.
    SharedLoopback,
}

impl Gap {
    /// What is missing, for a refusal or a note.
    pub fn describe(self) -> &'static str {
        match self {
            Gap::SystemCallFilter => {
                "the system-call deny list (Seatbelt filters operations, not system calls)"
            }
            Gap::SharedLoopback => {
                "a loopback of the session's own (on macOS a loopback command reaches every server on the host's \
                 loopback)"
            }
        }
    }
}

/// A profile and what it does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
    /// The SBPL text.
    pub text: String,
    /// What the plan asked for that the profile does not enforce (empty: everything).
    pub gaps: Vec<Gap>,
}

/// Why no profile could be made: the plan is refused, never run wider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeatbeltError {
    /// A path is relative: profiles match absolute paths only.
    #[error(
        "{what} {path:?} is not absolute; give absolute paths in [confinement] and the executor's settings"
    )]
    Relative {
        /// Which list it came from.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// A path is not UTF-8 text or holds a control character (a newline, a NUL): it cannot be written into a profile
    /// safely.
    #[error(
        "{what} {path:?} holds a control character or is not UTF-8, which a Seatbelt profile cannot name safely; \
         rename the directory or leave it out"
    )]
    Unprintable {
        /// Which list it came from.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// [`Network::Allow`] without a proxy to send it through.
    #[error(
        "the plan reaches only an allow-list, but no filtering proxy serves it here; the command is refused rather \
         than given the network"
    )]
    NoProxy,
}

/// The devices every command writes to even when its writes are confined (a shell's redirections, its terminal).
const DEVICE_WRITES: &str = "(allow file-write*\n    (literal \"/dev/null\")\n    (literal \"/dev/zero\")\n    \
                             (literal \"/dev/dtracehelper\")\n    (regex #\"^/dev/tty\")\n    (regex #\"^/dev/fd/\"))\n";

/// The Seatbelt profile for `confinement`, protecting `protected`. Paths must be absolute; they are normalised
/// lexically (`.` and `..` resolved), but symbolic links are not followed: give the real paths (on macOS `/tmp` is
/// `/private/tmp`), or a protected path behind a link goes unprotected.
pub fn profile(confinement: &Confinement, protected: &Protected) -> Result<Profile, SeatbeltError> {
    let mut text = String::from("(version 1)\n(allow default)\n");
    let mut gaps = Vec::new();
    text.push_str("; signals only within this command's sandbox\n(deny signal)\n");
    text.push_str("(allow signal (target same-sandbox))\n");
    if let Some(writable) = &confinement.writable {
        text.push_str("; writes only beneath the writable paths\n(deny file-write*)\n");
        if !writable.is_empty() {
            text.push_str("(allow file-write*");
            for path in writable {
                let _ = write!(text, "\n    (subpath {})", quoted("writable path", path)?);
            }
            text.push_str(")\n");
        }
        text.push_str(DEVICE_WRITES);
    }
    network_rules(&mut text, &mut gaps, confinement.network, protected)?;
    if !confinement.deny_syscalls.is_empty() {
        gaps.push(Gap::SystemCallFilter);
    }
    if !protected.read_only.is_empty() {
        text.push_str("; the executor's own files, last: nothing above can make them writable\n(deny file-write*");
        for path in &protected.read_only {
            let _ = write!(text, "\n    (subpath {})", quoted("read-only path", path)?);
        }
        text.push_str(")\n");
    }
    if !protected.hidden.is_empty() {
        text.push_str("; hidden from commands, last\n(deny file-read* file-write*");
        for path in &protected.hidden {
            let _ = write!(text, "\n    (subpath {})", quoted("hidden path", path)?);
        }
        text.push_str(")\n");
    }
    Ok(Profile { text, gaps })
}

/// The network section for `network`.
fn network_rules(
    text: &mut String,
    gaps: &mut Vec<Gap>,
    network: Network,
    protected: &Protected,
) -> Result<(), SeatbeltError> {
    match network {
        Network::Host => {}
        Network::None => text.push_str("; no network, Unix sockets included\n(deny network*)\n"),
        Network::Loopback => {
            text.push_str("; loopback only\n(deny network*)\n");
            text.push_str(
                "(allow network*\n    (local ip \"localhost:*\")\n    (remote ip \"localhost:*\"))\n",
            );
            gaps.push(Gap::SharedLoopback);
        }
        Network::Allow => {
            let port = protected.proxy_port.ok_or(SeatbeltError::NoProxy)?;
            text.push_str(
                "; only the filtering proxy, which enforces the allow-list\n(deny network*)\n",
            );
            let _ = writeln!(
                text,
                "(allow network-outbound (remote ip \"localhost:{port}\"))"
            );
        }
    }
    Ok(())
}

/// `path` normalised and written as an SBPL string literal (`\` and `"` escaped); a relative path, or one that is
/// not printable UTF-8, is refused.
fn quoted(what: &'static str, path: &Path) -> Result<String, SeatbeltError> {
    let normal = normalised(path).ok_or_else(|| SeatbeltError::Relative {
        what,
        path: path.to_path_buf(),
    })?;
    let text = normal
        .to_str()
        .filter(|t| !t.chars().any(char::is_control))
        .ok_or_else(|| SeatbeltError::Unprintable {
            what,
            path: path.to_path_buf(),
        })?;
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

/// `path` with `.` dropped and `..` applied (never above `/`); `None` when it is not absolute.
fn normalised(path: &Path) -> Option<PathBuf> {
    if !path.has_root() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

// Unix paths (what a Mac's profile names): the tests run on Linux and the other Unix systems, not Windows, whose
// paths have no single root.
#[cfg(all(test, unix))]
mod tests;
