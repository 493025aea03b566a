//! Write confinement by Landlock: a ruleset per distinct set of writable paths, built once (on the spawner thread)
//! and kept open, which each command's process applies to itself last before exec (`child_setup::restrict_writes`).
//!
//! The same ruleset closes the executor's closed TCP ports ([`crate::ExecutorConfig::closed_tcp_ports`]: the
//! server's own listener) to every command, whatever its writes and network: it handles TCP connect and allows it to
//! every other port (Landlock rules name allowed ports only, so that is one rule per port, built once per ruleset).
//!
//! The ruleset handles every write-type access the running kernel knows (writing, truncating, creating, removing,
//! renaming or linking files, making directories, sockets, FIFOs and device nodes) and allows them beneath the
//! writable paths only. Reading and executing are not handled: what a command may read is the executor's mounts'
//! business (hidden paths). The device files every program expects to write — `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/tty`, `/dev/ptmx`, `/dev/pts`, `/dev/shm` — are always writable. Pipes, sockets and descriptors the command
//! inherits are not paths, and stay usable.

use landlock::{
    ABI, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};
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

/// The first Landlock ABI that handles TCP connect (Linux 6.7).
const NET_ABI: i32 = 4;

/// Rulesets by writable paths (sorted; `None`: writes anywhere), built on first use.
#[derive(Default)]
pub(crate) struct Rulesets {
    built: Mutex<HashMap<Option<Vec<PathBuf>>, Arc<OwnedFd>>>,
    /// TCP ports no command may connect to (none where the kernel cannot close them).
    closed_ports: Vec<u16>,
}

impl Rulesets {
    /// Rulesets that also close `closed_ports` to TCP connect where the kernel's Landlock can (ABI 4); on an older
    /// kernel a warning says the ports stay open, and none is kept (the kernel is asked once, here).
    pub(crate) fn closing(mut closed_ports: Vec<u16>) -> Rulesets {
        if !closed_ports.is_empty() && kernel_abi() < NET_ABI {
            tracing::warn!(
                target: "shellward::notice",
                "this kernel's Landlock cannot restrict TCP connections (it needs ABI {NET_ABI}, Linux 6.7; it has \
                 {}): commands can reach this server's own port {closed_ports:?}; listen on a unix socket instead",
                kernel_abi()
            );
            closed_ports.clear();
        }
        Rulesets {
            built: Mutex::default(),
            closed_ports,
        }
    }

    /// The ruleset allowing writes beneath `writable` only (`None`: anywhere) and closing the closed ports, or
    /// `None` when there is nothing to restrict or this kernel has no Landlock (writes then cannot be confined: the
    /// caller reports it).
    pub(crate) fn get(&self, writable: Option<&[PathBuf]>) -> io::Result<Option<Arc<OwnedFd>>> {
        let key = writable.map(|w| {
            let mut key = w.to_vec();
            key.sort();
            key.dedup();
            key
        });
        if key.is_none() && self.closed_ports.is_empty() {
            return Ok(None);
        }
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fd) = built.get(&key) {
            return Ok(Some(fd.clone()));
        }
        let Some(fd) = build(key.as_deref(), &self.closed_ports, ALWAYS_WRITABLE)? else {
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

impl Rulesets {
    /// The ruleset of one preview (never cached: its paths name one sandbox's overlays): writes allowed beneath
    /// `overlays` and the always-writable devices but `/dev/shm` (a preview lays its own copy over it). No TCP rule:
    /// a preview has no network. An error where this kernel has no Landlock, since without it a preview's writes
    /// outside its overlays would reach the real files.
    ///
    /// The overlays are mounted by the preview's command itself, so their rules are added in its child
    /// (`PreviewLayers::allow_writes`, with [`write_mask`]): `overlays` is empty here.
    pub(crate) fn for_preview(&self, overlays: &[PathBuf]) -> io::Result<OwnedFd> {
        let always: Vec<&str> = ALWAYS_WRITABLE
            .iter()
            .copied()
            .filter(|p| *p != "/dev/shm")
            .collect();
        build(Some(overlays), &[], &always)?.ok_or_else(|| {
            io::Error::other(
                "cannot preview: this kernel has no Landlock, so writes outside the copy-on-write view could not be \
                 refused (Landlock needs Linux 5.13 with it enabled: see `shellward sandbox check`)",
            )
        })
    }
}

/// Builds a ruleset: write accesses handled (with `writable`), allowed beneath `writable` and `always`; TCP connect
/// handled (with `closed` ports), allowed to every other port.
fn build(
    writable: Option<&[PathBuf]>,
    closed: &[u16],
    always: &[&str],
) -> io::Result<Option<OwnedFd>> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        io::Error::other(format!(
            "cannot prepare the write confinement (Landlock) {what}: {e}"
        ))
    };
    let access = AccessFs::from_write(KNOWN_ABI);
    let mut attr = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
    if writable.is_some() {
        attr = attr
            .handle_access(access)
            .map_err(|e| fail("ruleset", &e))?;
    }
    if !closed.is_empty() {
        attr = attr
            .handle_access(AccessNet::ConnectTcp)
            .map_err(|e| fail("ruleset", &e))?;
    }
    let mut ruleset = attr.create().map_err(|e| fail("ruleset", &e))?;
    if !closed.is_empty() {
        for port in (0..=u16::MAX).filter(|p| !closed.contains(p)) {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|e| fail(&format!("rule for port {port}"), &e))?;
        }
    }
    let Some(writable) = writable else {
        return Ok(Option::<OwnedFd>::from(ruleset));
    };
    let paths = writable
        .iter()
        .cloned()
        .chain(always.iter().map(PathBuf::from))
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

/// The write accesses a ruleset built here handles on this kernel (Landlock bits): what a rule added later (a
/// preview's overlays) may allow.
pub(crate) fn write_mask() -> u64 {
    let abi = ABI::from(kernel_abi().min(6));
    (AccessFs::from_write(KNOWN_ABI) & AccessFs::from_write(abi)).bits()
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
        let a = r
            .get(Some(&["/tmp".into(), "/var/tmp".into()]))
            .unwrap()
            .unwrap();
        let b = r
            .get(Some(&["/var/tmp".into(), "/tmp".into()]))
            .unwrap()
            .unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the same paths in another order share one"
        );
        let c = r.get(Some(&["/tmp".into()])).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        // A missing path is skipped, not an error.
        assert!(r.get(Some(&["/no/such/path".into()])).unwrap().is_some());
        // Writes anywhere and no closed port: nothing to restrict.
        assert!(r.get(None).unwrap().is_none());
        // A closed port: a ruleset even for writes anywhere.
        if kernel_abi() >= NET_ABI {
            let closing = Rulesets::closing(vec![9]);
            assert!(closing.get(None).unwrap().is_some());
        }
    }
}
