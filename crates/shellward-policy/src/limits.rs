//! Bounds on what a policy may hand back. A policy's output goes to the agent (notes, deny reasons) and to the
//! executor (the plan), so a policy that returns a 10 MB note, a command the kernel will refuse, or a variable name
//! no shell accepts is at fault: its outcome is refused as a fault naming the policy and the field, before the next
//! policy or the executor sees it.

use crate::types::{Network, Outcome, Plan};

/// Bounds on one policy's outcome. Start from `OutcomeLimits::default()` and change fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutcomeLimits {
    /// Longest command a plan may carry, in bytes (Linux refuses a longer single argument: 131071).
    pub max_command_bytes: usize,
    /// Longest deny reason or note, in bytes.
    pub max_text_bytes: usize,
    /// Most notes in one outcome.
    pub max_notes: usize,
    /// Most environment variables in a plan.
    pub max_env: usize,
    /// Longest environment variable (name and value), in bytes.
    pub max_env_bytes: usize,
    /// Longest working directory, in bytes (also the longest writable path).
    pub max_workdir_bytes: usize,
    /// Most writable paths, network allow-list entries or rule ids in one plan (each).
    pub max_list: usize,
    /// Longest start-up wait a plan may ask for, in milliseconds.
    pub max_startup_wait_ms: u64,
}

impl Default for OutcomeLimits {
    fn default() -> Self {
        OutcomeLimits {
            max_command_bytes: 131_071,
            max_text_bytes: 4096,
            max_notes: 32,
            max_env: 256,
            max_env_bytes: 32 * 1024,
            max_workdir_bytes: 4096,
            max_list: 64,
            max_startup_wait_ms: 600_000,
        }
    }
}

impl OutcomeLimits {
    /// Most bytes the host copies out of a policy's memory for one outcome: the sum of every limit. It is enforced
    /// while the outcome is read (wasmtime's hostcall fuel), so strings that alias one buffer cannot make the host
    /// copy it again and again.
    pub fn lift_budget(&self) -> usize {
        self.max_command_bytes
            + self.max_text_bytes * (self.max_notes + 1)
            + self.max_env * self.max_env_bytes
            + self.max_workdir_bytes * (self.max_list + 1)
            + self.max_list * 512
            + 64 * 1024
    }

    /// Checks an outcome; the error says which field is wrong and by how much.
    pub fn check(&self, outcome: &Outcome) -> Result<(), String> {
        match outcome {
            Outcome::Deny(denial) => {
                self.text("deny reason", &denial.reason)?;
                denial.rule.as_deref().map_or(Ok(()), rule_id)
            }
            Outcome::Run(plan) => self.check_plan(plan),
            Outcome::Ask(ask) => {
                if ask.question.trim().is_empty() {
                    return Err("it asks with an empty question; say what will happen and why it needs a yes".into());
                }
                self.text("question", &ask.question)?;
                ask.rule.as_deref().map_or(Ok(()), rule_id)?;
                self.check_plan(&ask.plan)
            }
        }
    }

    /// A reason, note or question: at most `max_text_bytes`.
    fn text(&self, what: &str, t: &str) -> Result<(), String> {
        if t.len() > self.max_text_bytes {
            return Err(format!(
                "its {what} is {} bytes; the host accepts at most {}",
                t.len(),
                self.max_text_bytes
            ));
        }
        Ok(())
    }

    /// A plan (run now, or once approved): its rules and confinement, then what runs.
    fn check_plan(&self, plan: &Plan) -> Result<(), String> {
        self.check_rules_and_confinement(plan)?;
        self.check_command(plan)
    }

    /// The rules a plan names and the confinement it asks for.
    fn check_rules_and_confinement(&self, plan: &Plan) -> Result<(), String> {
        if plan.rules.len() > self.max_list {
            return Err(format!(
                "its plan names {} rules; the host accepts at most {}",
                plan.rules.len(),
                self.max_list
            ));
        }
        plan.rules.iter().try_for_each(|r| rule_id(r))?;
        if let Some(paths) = &plan.confinement.writable {
            if paths.len() > self.max_list {
                return Err(format!(
                    "its plan lists {} writable paths; the host accepts at most {}",
                    paths.len(),
                    self.max_list
                ));
            }
            for p in paths {
                let clean = is_rooted(p)
                    && !p.contains('\0')
                    && p.len() <= self.max_workdir_bytes
                    && !p.split(SEPARATORS).any(|seg| seg == "." || seg == "..");
                if !clean {
                    return Err(format!(
                        "its plan makes {:?} writable; a writable path must be absolute, without `.` or `..`, \
                         NUL bytes, and at most {} bytes",
                        p.chars().take(128).collect::<String>(),
                        self.max_workdir_bytes
                    ));
                }
            }
        }
        if let Network::Allow(list) = &plan.confinement.network {
            if list.is_empty() || list.len() > self.max_list {
                return Err(format!(
                    "its plan's network allow-list has {} entries; give 1 to {} (for no network at all, ask \
                     for \"none\")",
                    list.len(),
                    self.max_list
                ));
            }
            if let Some(bad) = list.iter().find(|e| !valid_destination(e)) {
                return Err(format!(
                    "its plan's network allow-list has {:?}; an entry is a host name or `*.domain`, with an \
                     optional `:port`",
                    bad.chars().take(128).collect::<String>()
                ));
            }
        }
        if let Some(ms) = plan.startup_wait_ms
            && ms > self.max_startup_wait_ms
        {
            return Err(format!(
                "its plan asks a background start to wait {ms} ms; the host accepts at most {}",
                self.max_startup_wait_ms
            ));
        }
        Ok(())
    }

    /// What a plan runs: command, working directory, environment, notes.
    fn check_command(&self, plan: &Plan) -> Result<(), String> {
        if plan.command.trim().is_empty() {
            return Err("its plan has an empty command".into());
        }
        if plan.command.len() > self.max_command_bytes {
            return Err(format!(
                "its plan's command is {} bytes; the host accepts at most {}",
                plan.command.len(),
                self.max_command_bytes
            ));
        }
        if plan.command.contains('\0') {
            return Err("its plan's command contains a NUL byte".into());
        }
        if let Some(w) = &plan.workdir
            && (w.is_empty() || w.contains('\0') || w.len() > self.max_workdir_bytes)
        {
            return Err(format!(
                "its plan's workdir is not a usable path (empty, NUL byte, or over {} bytes)",
                self.max_workdir_bytes
            ));
        }
        if plan.env.len() > self.max_env {
            return Err(format!(
                "its plan sets {} environment variables; the host accepts at most {}",
                plan.env.len(),
                self.max_env
            ));
        }
        for (k, v) in &plan.env {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(format!(
                    "its plan sets an invalid environment variable {:?} (empty name, `=` or NUL)",
                    k.chars().take(64).collect::<String>()
                ));
            }
            if k.len() + v.len() > self.max_env_bytes {
                return Err(format!(
                    "its plan's environment variable {:?} is {} bytes; the host accepts at most {}",
                    k.chars().take(64).collect::<String>(),
                    k.len() + v.len(),
                    self.max_env_bytes
                ));
            }
        }
        if plan.notes.len() > self.max_notes {
            return Err(format!(
                "it returned {} notes; the host accepts at most {}",
                plan.notes.len(),
                self.max_notes
            ));
        }
        plan.notes.iter().try_for_each(|n| self.text("note", n))
    }
}

/// A rule id: short, printable, no spaces (it is a key in reports).
fn rule_id(r: &str) -> Result<(), String> {
    if r.is_empty()
        || r.len() > 128
        || !r
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
    {
        return Err(format!(
            "it names a rule {:?}; a rule id is 1 to 128 letters, digits or `-_.:/`",
            r.chars().take(64).collect::<String>()
        ));
    }
    Ok(())
}

/// Whether `entry` is a destination an allow-list may name: `host.name`, `*.domain`, each optionally with `:port`.
fn valid_destination(entry: &str) -> bool {
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (entry, None),
    };
    let host = host.strip_prefix("*.").unwrap_or(host);
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    port_ok
        && !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// What separates a path's parts: `/`, and on Windows `\` too.
#[cfg(not(windows))]
const SEPARATORS: &[char] = &['/'];
/// What separates a path's parts: `/`, and on Windows `\` too.
#[cfg(windows)]
const SEPARATORS: &[char] = &['/', '\\'];

/// Whether `p` names a path from a root: absolute on Unix; on Windows also rooted on the current drive (`/tmp`,
/// `\tmp`), which is how a policy written for every platform names one.
fn is_rooted(p: &str) -> bool {
    let path = std::path::Path::new(p);
    path.is_absolute() || (cfg!(windows) && path.has_root())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Confinement, Denial, Plan, Request};

    fn plan(command: &str) -> Plan {
        Plan::from_request(&Request::new(command))
    }

    #[test]
    fn oversized_or_invalid_output_is_named() {
        let l = OutcomeLimits::default();
        assert!(l.check(&Outcome::Run(plan("ls"))).is_ok());
        let ask = |q: &str, p: Plan| Outcome::Ask(crate::types::Ask::new(p, q));
        assert!(
            l.check(&ask("Reset the branch?", plan("git reset --hard")))
                .is_ok()
        );
        assert!(
            l.check(&ask(" ", plan("ls")))
                .unwrap_err()
                .contains("empty question")
        );
        assert!(
            l.check(&ask(&"q".repeat(5000), plan("ls")))
                .unwrap_err()
                .contains("question")
        );
        assert!(
            l.check(&ask("Sure?", plan("a\0b")))
                .unwrap_err()
                .contains("NUL")
        );
        assert!(l.check(&Outcome::deny("no")).is_ok());
        assert!(
            l.check(&Outcome::Deny(Denial::new("no").with_rule("sudo")))
                .is_ok()
        );
        let e = l
            .check(&Outcome::Deny(Denial::new("no").with_rule("has space")))
            .unwrap_err();
        assert!(e.contains("rule"), "{e}");
        let e = l.check(&Outcome::deny("x".repeat(10 << 20))).unwrap_err();
        assert!(e.contains("deny reason") && e.contains("4096"), "{e}");
        let e = l
            .check(&Outcome::Run(plan(&"y".repeat(10 << 20))))
            .unwrap_err();
        assert!(e.contains("command") && e.contains("131071"), "{e}");
        assert!(
            l.check(&Outcome::Run(plan("a\0b")))
                .unwrap_err()
                .contains("NUL")
        );
        assert!(
            l.check(&Outcome::Run(plan("  ")))
                .unwrap_err()
                .contains("empty")
        );
        let mut p = plan("ls");
        p.env.push(("A=B".into(), "1".into()));
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("A=B"));
        let mut p = plan("ls");
        p.notes = vec!["n".into(); 33];
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("33 notes"));
        let mut p = plan("ls");
        p.notes = vec!["z".repeat(5000)];
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("note"));
        let mut p = plan("ls");
        p.workdir = Some(String::new());
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("workdir"));
    }

    #[test]
    fn confinement_in_a_plan_is_checked() {
        let l = OutcomeLimits::default();
        let with = |writable: Vec<&str>, network: Network| {
            let mut p = plan("ls");
            p.confinement = Confinement::new(
                network,
                Some(writable.into_iter().map(String::from).collect()),
            );
            l.check(&Outcome::Run(p))
        };
        assert!(with(vec!["/srv/app", "/tmp"], Network::None).is_ok());
        for bad in ["relative/dir", "/srv/../etc", "/srv/./x", "/a\0b"] {
            let e = with(vec![bad], Network::Host).unwrap_err();
            assert!(e.contains("writable"), "{bad}: {e}");
        }
        let allow = |list: &[&str]| {
            with(
                vec!["/tmp"],
                Network::Allow(list.iter().map(|s| s.to_string()).collect()),
            )
        };
        assert!(allow(&["pypi.org", "*.npmjs.org:443", "localhost:8080"]).is_ok());
        for bad in [
            &[][..],
            &["evil.org/path"],
            &["a..b"],
            &["x.org:0"],
            &["x.org:99999"],
        ] {
            assert!(allow(bad).is_err(), "{bad:?}");
        }
        let mut p = plan("ls");
        p.startup_wait_ms = Some(3_600_000);
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("wait"));
        let mut p = plan("ls");
        p.rules = vec!["trailing-ampersand".into(), "bad rule".into()];
        assert!(l.check(&Outcome::Run(p)).unwrap_err().contains("rule"));
    }
}
