//! `[approvals]`: how long an ask waits, whether the client is asked, whether an ask is previewed first, the
//! operator's allow-list file and reviewer.

use super::Walker;
use crate::approval::{ApprovalsConfig, ReviewerConfig};
use std::path::Path;
use std::time::Duration;

/// The longest `expiry` or reviewer `timeout` accepted: a day (an approval nobody answers for longer is forgotten).
const LONGEST: Duration = Duration::from_secs(24 * 3600);

impl Walker {
    pub(super) fn approvals(&mut self, t: &mut toml::Table, base: &Path, a: &mut ApprovalsConfig) {
        if let Some(d) = self.at_least_a_second(t, "expiry", "approvals") {
            a.expiry = d;
        }
        if let Some(b) = self.boolean(t, "client", "approvals") {
            a.client = b;
        }
        if let Some(b) = self.boolean(t, "preview", "approvals") {
            a.preview = b;
        }
        if let Some(file) = self.string(t, "allow_file", "approvals") {
            let path = base.join(file);
            if !path.is_file() {
                self.problem(
                    "approvals.allow_file",
                    format!(
                        "{} is not a readable file; create it (one approved command per line) or remove the key",
                        path.display()
                    ),
                );
            }
            a.allow_file = Some(path);
        }
        if let Some(mut r) = self.table(t, "reviewer", "approvals") {
            a.reviewer = self.reviewer(&mut r, base);
            self.unknown_keys(r, "approvals.reviewer", &["command", "timeout"]);
        }
    }

    fn reviewer(&mut self, r: &mut toml::Table, base: &Path) -> Option<ReviewerConfig> {
        let key = "approvals.reviewer.command";
        let command: Option<Vec<String>> = match r.remove("command") {
            Some(toml::Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) if !s.is_empty() && !s.contains('\0') => Some(s),
                    _ => None,
                })
                .collect(),
            Some(_) => None,
            None => {
                self.problem(
                    key,
                    "missing: give the reviewer as an array, program first (command = [\"/path/reviewer\", \"arg\"])",
                );
                return None;
            }
        };
        let Some(mut command) = command.filter(|c| !c.is_empty()) else {
            self.problem(
                key,
                "expected a non-empty array of non-empty strings, program first (command = [\"/path/reviewer\"])",
            );
            return None;
        };
        // A program named by a relative path is relative to the configuration file; a bare name is looked up on
        // PATH when it runs.
        if command[0].contains('/') {
            let program = base.join(&command[0]);
            if !program.is_file() {
                self.problem(
                    key,
                    format!(
                        "{} does not exist; give the reviewer program's path",
                        program.display()
                    ),
                );
            }
            command[0] = program.display().to_string();
        }
        let mut reviewer = ReviewerConfig::new(command);
        if let Some(d) = self.at_least_a_second(r, "timeout", "approvals.reviewer") {
            reviewer.timeout = d;
        }
        Some(reviewer)
    }

    /// A duration of one second or more (at most a day).
    fn at_least_a_second(
        &mut self,
        t: &mut toml::Table,
        key: &str,
        path: &str,
    ) -> Option<Duration> {
        let d = self.duration(t, key, path, false, LONGEST)?;
        if d < Duration::from_secs(1) {
            self.problem(
                format!("{path}.{key}"),
                "is shorter than a second; give 1s or more (a person needs time to answer)",
            );
            return None;
        }
        Some(d)
    }
}
