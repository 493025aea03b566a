//! What executors that died left in the cgroup hierarchies, and its removal.
//!
//! An executor names its directories in a hierarchy `shellward-<PID namespace>-<pid>-…` (the v2 parent of its
//! command cgroups, the v1 `pids` root of its process-count groups). Its watchdog removes them if the executor is
//! killed — but only once the watchdog runs: an executor killed while it starts, after making a directory and before
//! its watchdog exists, leaves it behind. So each new executor first removes, from the hierarchy it is about to use,
//! the directories of executors of its own PID namespace whose process is gone. Nothing is ever signalled: a group
//! that still holds a process cannot be removed, and stays.

use std::path::Path;

/// Removes an executor's directory and its (empty) command groups; a group still holding a process stays.
pub(crate) fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// This process's PID namespace (the inode of `/proc/self/ns/pid`): a pid means something only within it.
pub(crate) fn pid_namespace_id() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("pid:[")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "0".into())
}

/// Removes what executors that died left in the hierarchy: `shellward-NS-PID-…` directories of this PID namespace
/// whose process is gone. Directories of other namespaces (whose pids mean nothing here), of live executors, or of a
/// pid reused meanwhile are left alone; a group still holding a process cannot be removed anyway.
pub(crate) fn sweep(base: &Path, ns: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("shellward-")) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(dir_ns), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<i32>() else {
            continue;
        };
        if dir_ns != ns {
            continue;
        }
        // SAFETY: signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            remove_tree(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_removes_only_dead_executors_of_this_pid_namespace() {
        let base = tempfile::tempdir().unwrap();
        let ns = pid_namespace_id();
        // A pid above any pid_max: no such process.
        let dead = i32::MAX - 1;
        let ours = std::process::id();
        let names = [
            format!("shellward-{ns}-{dead}-1"),
            format!("shellward-{ns}-{ours}-2"),
            // Another namespace's pid means nothing here, dead-looking or not.
            format!("shellward-4026531999-{dead}-3"),
            // The old format carries no namespace: left alone.
            format!("shellward-{dead}-4"),
        ];
        for n in &names {
            std::fs::create_dir_all(base.path().join(n).join("p1")).unwrap();
        }
        sweep(base.path(), &ns);
        let left: Vec<bool> = names.iter().map(|n| base.path().join(n).exists()).collect();
        assert_eq!(left, [false, true, true, true]);
    }
}
