//! The system-call filter of a command (`Confinement::deny_syscalls`): a seccomp BPF program per distinct deny list,
//! built once (with `seccompiler`) and installed by the command's process on itself after `no_new_privs`, before its
//! Landlock ruleset and exec. A denied call fails with `EPERM`; everything else is allowed (the filter covers what
//! Landlock and the namespaces do not: tracing other processes' memory, kernel interfaces that bypass or widen the
//! kernel's attack surface).

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

/// Compiled filters by deny list (sorted numbers).
#[derive(Default)]
pub(crate) struct Filters {
    built: Mutex<HashMap<Vec<libc::c_long>, Arc<BpfProgram>>>,
}

impl Filters {
    /// The filter refusing `names` with `EPERM` (`None` for an empty list). An unknown name is an error naming the
    /// known ones.
    pub(crate) fn get(&self, names: &[String]) -> io::Result<Option<Arc<BpfProgram>>> {
        if names.is_empty() {
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
        numbers.sort_unstable();
        numbers.dedup();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = built.get(&numbers) {
            return Ok(Some(p.clone()));
        }
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
            io::Error::other(format!("no seccomp filter on this architecture: {e}"))
        })?;
        // An empty rule list matches the call whatever its arguments. (`c_long` is `i64` here, `i32` on 32-bit
        // targets: the conversion is needed there.)
        #[allow(clippy::useless_conversion)]
        let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = numbers
            .iter()
            .map(|&n| (i64::from(n), Vec::new()))
            .collect();
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
        built.insert(numbers, program.clone());
        Ok(Some(program))
    }
}
