//! Write confinement by Landlock: a ruleset per distinct set of writable paths, built once (on the spawner thread)
//! and kept open, which each command's process applies to itself last before exec (`child_setup::restrict_writes`).
//!
//! The ruleset handles every write-type access the running kernel knows (writing, truncating, creating, removing,
//! renaming or linking files, making directories, sockets, FIFOs and device nodes) and allows them beneath the
//! writable paths only. Reading and executing are not handled: what a command may read is the executor's mounts'
//! business (hidden paths). The device files every program expects to write — `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/tty`, `/dev/ptmx`, `/dev/pts`, `/dev/shm` — are always writable. Pipes, sockets and descriptors the command
//! inherits are not paths, and stay usable.

use landlock::{ABI, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr};
use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Devices every command may write to, whatever the writable paths.
pub(crate) const ALWAYS_WRITABLE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// The newest Landlock ABI this code knows; older kernels get what they support (best effort, reported).
const KNOWN_ABI: ABI = ABI::V6;

/// How many distinct rulesets are kept open at most (each one descriptor).
const MAX_RULESETS: usize = 64;

/// Rulesets by writable paths (sorted), built on first use.
#[derive(Default)]
pub(crate) struct Rulesets {
    built: Mutex<HashMap<Vec<PathBuf>, Arc<OwnedFd>>>,
}

impl Rulesets {
    /// The ruleset allowing writes beneath `writable` only, or `None` when this kernel has no Landlock (writes then
    /// cannot be confined: the caller reports it).
    pub(crate) fn get(&self, writable: &[PathBuf]) -> io::Result<Option<Arc<OwnedFd>>> {
        let mut key = writable.to_vec();
        key.sort();
        key.dedup();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fd) = built.get(&key) {
            return Ok(Some(fd.clone()));
        }
        let Some(fd) = build(&key)? else {
            return Ok(None);
        };
        if built.len() >= MAX_RULESETS {
            built.clear();
        }
        let fd = Arc::new(fd);
        built.insert(key, fd.clone());
        Ok(Some(fd))
    }
}

/// Builds a ruleset: write accesses handled, allowed beneath `writable` and [`ALWAYS_WRITABLE`].
fn build(writable: &[PathBuf]) -> io::Result<Option<OwnedFd>> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        io::Error::other(format!(
            "cannot prepare the write confinement (Landlock) {what}: {e}"
        ))
    };
    let access = AccessFs::from_write(KNOWN_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(access)
        .map_err(|e| fail("ruleset", &e))?
        .create()
        .map_err(|e| fail("ruleset", &e))?;
    let paths = writable
        .iter()
        .cloned()
        .chain(ALWAYS_WRITABLE.iter().map(PathBuf::from))
        // A path that does not exist (yet) cannot be named in a ruleset: skipped, as documented.
        .filter(|p| p.exists());
    for path in paths {
        let fd = match landlock::PathFd::new(&path) {
            Ok(fd) => fd,
            Err(e) => return Err(fail(&format!("for {}", path.display()), &e)),
        };
        // Directories get every write access beneath them; files the ones that apply to a file.
        let allowed = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(KNOWN_ABI)
        };
        ruleset = ruleset
            .add_rule(landlock::PathBeneath::new(fd, allowed))
            .map_err(|e| fail(&format!("rule for {}", path.display()), &e))?;
    }
    Ok(Option::<OwnedFd>::from(ruleset))
}

/// The Landlock ABI of the running kernel (0: none).
pub(crate) fn kernel_abi() -> i32 {
    // SAFETY: the documented version query: a null attribute, size 0, and the VERSION flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if v < 0 { 0 } else { v as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_are_built_once_per_set_of_paths() {
        if kernel_abi() == 0 {
            return;
        }
        let r = Rulesets::default();
        let a = r.get(&["/tmp".into(), "/var/tmp".into()]).unwrap().unwrap();
        let b = r.get(&["/var/tmp".into(), "/tmp".into()]).unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the same paths in another order share one"
        );
        let c = r.get(&["/tmp".into()]).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        // A missing path is skipped, not an error.
        assert!(r.get(&["/no/such/path".into()]).unwrap().is_some());
    }
}
