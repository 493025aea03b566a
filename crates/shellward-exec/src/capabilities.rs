//! Linux capability names: the ones a root command keeps by default, and the name-to-number table an operator's
//! configuration is checked against (on every platform, so a configuration reads the same everywhere; only Linux
//! enforces them).

/// Capabilities a root command keeps by default: what ordinary root work needs (files of any owner, users and
/// groups, signals within its own namespace, low ports, `ping`, `chroot`), close to a container runtime's default
/// set without `CAP_MKNOD` (there is no device cgroup here). Everything else is dropped: among them `CAP_SYS_ADMIN`
/// (mounts, namespaces), `CAP_SYS_PTRACE`, `CAP_SYS_MODULE`, `CAP_SYS_BOOT`, `CAP_SYS_RAWIO`, `CAP_DAC_READ_SEARCH`
/// (`open_by_handle_at` escapes), `CAP_NET_ADMIN`, `CAP_SYS_TIME`, `CAP_BPF`, `CAP_PERFMON`, `CAP_SYS_RESOURCE`,
/// `CAP_MAC_ADMIN`, `CAP_SYSLOG`, `CAP_MKNOD`.
#[rustfmt::skip]
pub const KEPT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID",
    "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
];

/// Linux capability names in number order (`capabilities(7)`).
#[rustfmt::skip]
pub(crate) const CAPABILITY_NAMES: &[&str] = &[
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", // 0-4
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", // 5-9
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", // 10-14
    "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", // 15-19
    "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", // 20-24
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", // 25-29
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", // 30-34
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", // 35-39
    "CAP_CHECKPOINT_RESTORE", // 40-40
];

/// The number of a capability named `CAP_SYS_ADMIN`, `cap_sys_admin` or `sys_admin`; `None` for an unknown name.
pub fn capability_number(name: &str) -> Option<u32> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    CAPABILITY_NAMES
        .iter()
        .position(|n| *n == full)
        .map(|i| i as u32)
}
