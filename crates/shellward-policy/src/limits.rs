//! Bounds on what a policy may hand back. A policy's output goes to the agent (notes, deny reasons) and to the
//! executor (the plan), so a policy that returns a 10 MB note, a command the kernel will refuse, or a variable name
//! no shell accepts is at fault: its outcome is refused as a fault naming the policy and the field, before the next
//! policy or the executor sees it.

use crate::bindings::types::Outcome;

/// Bounds on one policy's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
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
    /// Longest working directory, in bytes.
    pub max_workdir_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_command_bytes: 131_071,
            max_text_bytes: 4096,
            max_notes: 32,
            max_env: 256,
            max_env_bytes: 32 * 1024,
            max_workdir_bytes: 4096,
        }
    }
}

impl OutputLimits {
    /// Most bytes the host copies out of a policy's memory for one outcome: the sum of every limit. It is enforced
    /// while the outcome is read (wasmtime's hostcall fuel), so strings that alias one buffer cannot make the host
    /// copy it again and again.
    pub fn lift_budget(&self) -> usize {
        self.max_command_bytes
            + self.max_text_bytes * (self.max_notes + 1)
            + self.max_env * self.max_env_bytes
            + self.max_workdir_bytes
            + 64 * 1024
    }

    /// Checks an outcome; the error says which field is wrong and by how much.
    pub fn check(&self, outcome: &Outcome) -> Result<(), String> {
        let text = |what: &str, t: &str| -> Result<(), String> {
            if t.len() > self.max_text_bytes {
                return Err(format!(
                    "its {what} is {} bytes; the host accepts at most {}",
                    t.len(),
                    self.max_text_bytes
                ));
            }
            Ok(())
        };
        match outcome {
            Outcome::Deny(reason) => text("deny reason", reason),
            Outcome::Run(plan) => {
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
                plan.notes.iter().try_for_each(|n| text("note", n))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::types::{OnTimeout, Plan};

    fn plan(command: &str) -> Plan {
        Plan {
            command: command.into(),
            workdir: None,
            background: false,
            timeout_ms: None,
            on_timeout: OnTimeout::Kill,
            env: Vec::new(),
            notes: Vec::new(),
            interactive: false,
            tty: false,
        }
    }

    #[test]
    fn oversized_or_invalid_output_is_named() {
        let l = OutputLimits::default();
        assert!(l.check(&Outcome::Run(plan("ls"))).is_ok());
        assert!(l.check(&Outcome::Deny("no".into())).is_ok());
        let e = l.check(&Outcome::Deny("x".repeat(10 << 20))).unwrap_err();
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
}
