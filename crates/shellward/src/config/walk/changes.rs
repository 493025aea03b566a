//! `[changes]`: what undo keeps per session (see `shellward_exec::undo`).

use super::Walker;
use shellward_exec::ChangesConfig;

impl Walker {
    pub(super) fn changes(&mut self, t: &mut toml::Table, c: &mut ChangesConfig) {
        if let Some(b) = self.boolean(t, "enabled", "changes") {
            c.enabled = b;
        }
        if let Some(n) = self.integer(t, "keep", "changes", 1, 10_000) {
            c.keep = n as usize;
        }
        if let Some(n) = self.integer(t, "max_bytes", "changes", 1 << 20, u64::MAX >> 1) {
            c.max_bytes = n;
        }
        if let Some(n) = self.integer(t, "max_file_bytes", "changes", 1, u64::MAX >> 1) {
            c.max_file_bytes = n;
        }
        if let Some(n) = self.integer(t, "max_files", "changes", 1, 100_000_000) {
            c.max_files = n as usize;
        }
        if let Some(d) = self.duration(
            t,
            "baseline_wait",
            "changes",
            true,
            std::time::Duration::from_secs(600),
        ) {
            c.baseline_wait = d;
        }
        if let Some(list) = self.strings(t, "ignore", "changes") {
            c.ignore = list.into_iter().map(|(_, s)| s).collect();
        }
    }
}
