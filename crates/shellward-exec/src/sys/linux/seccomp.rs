//! The system-call filter of a command (`Confinement::deny_syscalls`): a seccomp BPF program per distinct deny list,
//! built once (with `seccompiler`) and installed by the command's process on itself after `no_new_privs`, before its
//! Landlock ruleset and exec. A denied call fails with `EPERM`; everything else is allowed (the filter covers what
//! Landlock and the namespaces do not: tracing other processes' memory, kernel interfaces that bypass or widen the
//! kernel's attack surface).
//!
//! A command whose network is not the host's (`none`, `loopback`, `allow`) also may not create a Unix socket
//! (`socket(AF_UNIX, …)` fails with `EPERM`; `socketpair`, a connected pair of its own, still works): a network
//! namespace cuts IP and abstract Unix sockets, but a socket at a path (`/var/run/docker.sock`, a database's, an
//! agent's) is reached through the filesystem, which the namespace does not cover. Seccomp cannot read the address a
//! `connect` names, so the socket itself is refused; `io_uring`, which could make one without the call, is refused
//! with it. On the fast spawn path the socket is not refused here: `sys::linux::unix_broker`'s filter lets a command
//! make stream sockets and answers its connects (a session's own sockets connect, the host's are refused).

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex};

/// The system calls a filter may name, by name (the operator's spelling) and number on this architecture.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const KNOWN: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("bpf", libc::SYS_bpf),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("add_key", libc::SYS_add_key),
    ("keyctl", libc::SYS_keyctl),
    ("request_key", libc::SYS_request_key),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("acct", libc::SYS_acct),
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const KNOWN: &[(&str, libc::c_long)] = &[];

/// The names [`number`] knows, for error messages.
pub(crate) fn known_names() -> Vec<&'static str> {
    KNOWN.iter().map(|(n, _)| *n).collect()
}

/// A system call's number on this architecture.
pub(crate) fn number(name: &str) -> Option<libc::c_long> {
    KNOWN.iter().find(|(n, _)| *n == name).map(|(_, nr)| *nr)
}

/// What a filter refuses: the sorted numbers of its deny list, whether Unix sockets are cut, and whether a broker
/// filter does that.
type FilterKey = (Vec<libc::c_long>, bool, bool);

/// Compiled filters by deny list (sorted numbers).
#[derive(Default)]
pub(crate) struct Filters {
    built: Mutex<HashMap<FilterKey, Arc<BpfProgram>>>,
}

impl Filters {
    /// The filter refusing `names` with `EPERM`, and with `no_unix_sockets` Unix sockets too (see the module) —
    /// except when `brokered`: then `sys::linux::unix_broker`'s filter, installed beside this one, decides them, and
    /// this one refuses only `io_uring` with them. `None` when it would refuse nothing. An unknown name is an error
    /// naming the known ones.
    pub(crate) fn get(
        &self,
        names: &[String],
        no_unix_sockets: bool,
        brokered: bool,
    ) -> io::Result<Option<Arc<BpfProgram>>> {
        if names.is_empty() && !no_unix_sockets {
            return Ok(None);
        }
        let mut numbers = Vec::with_capacity(names.len());
        for name in names {
            numbers.push(number(name).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the system call {name:?} cannot be filtered here; known: {}",
                        known_names().join(", ")
                    ),
                )
            })?);
        }
        if no_unix_sockets {
            numbers.extend(IO_URING);
        }
        numbers.sort_unstable();
        numbers.dedup();
        let key = (numbers, no_unix_sockets, brokered);
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = built.get(&key) {
            return Ok(Some(p.clone()));
        }
        let numbers = &key.0;
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
            io::Error::other(format!("no seccomp filter on this architecture: {e}"))
        })?;
        // An empty rule list matches the call whatever its arguments. (`c_long` is `i64` here, `i32` on 32-bit
        // targets: the conversion is needed there.)
        #[allow(clippy::useless_conversion)]
        let mut rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = numbers
            .iter()
            .map(|&n| (i64::from(n), Vec::new()))
            .collect();
        if no_unix_sockets && !brokered {
            #[allow(clippy::useless_conversion)]
            rules.insert(i64::from(libc::SYS_socket), vec![unix_domain_rule()?]);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(|e| io::Error::other(format!("cannot build the seccomp filter: {e}")))?;
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e| io::Error::other(format!("cannot compile the seccomp filter: {e}")))?;
        let program = Arc::new(program);
        if built.len() >= 64 {
            built.clear();
        }
        built.insert(key, program.clone());
        Ok(Some(program))
    }
}

/// The `io_uring` calls, refused with Unix sockets (a ring can create a socket without `socket(2)`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const IO_URING: [libc::c_long; 3] = [
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const IO_URING: [libc::c_long; 0] = [];

/// `socket(2)`'s first argument (the domain, a 32-bit int) is `AF_UNIX`.
fn unix_domain_rule() -> io::Result<seccompiler::SeccompRule> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let cannot = |e: seccompiler::BackendError| {
        io::Error::other(format!("cannot build the seccomp filter: {e}"))
    };
    let domain = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(cannot)?;
    SeccompRule::new(vec![domain]).map_err(cannot)
}
