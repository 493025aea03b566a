//! `sandbox check` on Linux: runs probe commands through the facade and reports each layer of the session sandbox
//! (namespaces, private `/proc`, read-only host files, privileges, cgroups, Landlock, network namespaces), with what
//! to do where one is missing.

use super::line;
use anyhow::Result;
use shellward::ContainmentKind;
use std::process::ExitCode;

pub(super) fn check(config: &shellward::exec::ExecutorConfig) -> Result<ExitCode> {
    let uid = crate::sys::effective_uid();
    let probe = super::probe(config)?;
    let (abi, text, confined) = (probe.landlock_abi, &probe.output, &probe.confined);
    let own_ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut lines = text.lines();
    let probe_ns = lines.next().unwrap_or_default();
    let isolated = probe.pid_namespaces && probe_ns != own_ns && !probe_ns.is_empty();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    let no_new_privs = field("NoNewPrivs:") == "1";
    let caps = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(u64::MAX);

    print_header(uid);
    print_sandbox(isolated, uid, config);
    print_privileges(no_new_privs, uid, caps);
    print_containment(probe.containment, probe.process_limit, config);
    print_confinement(confined, probe.outside_write_refused, abi);
    if confined.as_ref().is_ok_and(|(writes, _)| *writes) {
        let writes_seen = probe.writes_seen;
        line(
            writes_seen,
            "refused writes seen as they happen",
            if writes_seen {
                "a write outside [confinement] writable is named to the agent (path, rule, what to ask for) from \
                 what the sandbox saw, also when the command hides the error"
            } else if !config.watch_writes {
                "turned off ([confinement] watch_writes = false): refused writes are told from the command's output"
            } else {
                "not here (another architecture, a kernel before 5.9, or shellward inside another sandbox): refused \
                 writes are told from the command's output"
            },
        );
    }
    print_unix_sockets(&probe.unix_sockets);
    line(
        probe.preview.is_ok(),
        "preview (copy-on-write view)",
        &match &probe.preview {
            Ok(()) => "execute with preview: true (shellward run --preview) runs a command in a throwaway overlay of \
                       the writable paths and lists what it would change"
                .to_string(),
            Err(e) => format!("previews cannot run here: {e}"),
        },
    );
    line(
        probe.undo.is_ok(),
        "undo (changes_list, changes_undo)",
        &match &probe.undo {
            Ok(()) => "each command's changes to its workspace are recorded and can be taken back"
                .to_string(),
            Err(e) => format!("undo is not available here: {e}"),
        },
    );
    Ok(if isolated {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The first line: who runs it, on which kernel.
fn print_header(uid: u32) {
    super::header(&format!(
        "shellward sandbox check (running as {}; kernel {})",
        if uid == 0 {
            "root".to_string()
        } else {
            format!("uid {uid}")
        },
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    ));
}

/// The session sandbox's lines: namespaces, `/proc`, host files, other sessions' output.
fn print_sandbox(isolated: bool, uid: u32, config: &shellward::exec::ExecutorConfig) {
    if isolated {
        let how = if uid == 0 {
            "PID and mount namespace per session"
        } else {
            "PID and mount namespace per session, in a user namespace of its own (your uid mapped to itself)"
        };
        line(true, "session sandbox", how);
        line(
            true,
            "private /proc",
            "`ps -e` in a command lists only its session",
        );
        line(
            true,
            "read-only host files",
            "/sys with the cgroup hierarchies, /proc/sys, shellward's config, policies and caches, and every directory \
             on the way to them (pinned: none can be renamed or replaced)",
        );
        line(
            true,
            "other sessions' output",
            "a session's sandbox shows only its own log directory: other sessions' and other shellward instances' \
             logs are covered",
        );
    } else {
        line(
            false,
            "session sandbox",
            &why_no_namespace(uid, config.pid_namespace),
        );
        line(
            false,
            "private /proc",
            "commands see every process of the host",
        );
        line(
            false,
            "read-only host files",
            "needs the session sandbox's mount namespace",
        );
        line(
            false,
            "other sessions' output",
            "needs the session sandbox's mount namespace: a command can read every log file of this user",
        );
    }
}

/// `no_new_privs`, capabilities, the host's own memory.
fn print_privileges(no_new_privs: bool, uid: u32, caps: u64) {
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    line(
        no_new_privs,
        "no_new_privs",
        if no_new_privs {
            "set-user-id programs gain nothing"
        } else {
            "not set: report this as a bug"
        },
    );
    if uid == 0 {
        line(
            caps & CAP_SYS_ADMIN == 0,
            "escape capabilities dropped",
            "CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, … (keep more with [executor] keep_capabilities)",
        );
    } else {
        line(
            true,
            "escape capabilities dropped",
            "a normal user's commands hold none",
        );
    }
    line(
        true,
        "shellward non-dumpable",
        "commands cannot read its environment or memory",
    );
}

/// How trees are contained and how many processes a command may have.
fn print_containment(
    containment: ContainmentKind,
    limit: Option<u64>,
    config: &shellward::exec::ExecutorConfig,
) {
    match containment {
        ContainmentKind::Cgroup => line(
            true,
            "tree containment",
            "one cgroup v2 per command (cgroup.kill)",
        ),
        _ => line(
            false,
            "cgroup containment",
            "no writable cgroup v2 hierarchy: trees are tracked by process group and marker instead (run as root, or \
             give shellward a delegated cgroup, e.g. systemd's Delegate=yes)",
        ),
    }
    match limit {
        Some(n) => line(
            true,
            "process limit per command",
            &format!("{n} (cgroup pids)"),
        ),
        None => line(
            false,
            "process limit per command",
            if config.limits.max_processes.is_none() {
                "turned off ([executor] max_processes = 0)"
            } else {
                "no writable pids cgroup: a fork bomb is not stopped by shellward (run as root, or delegate a cgroup)"
            },
        ),
    }
}

/// What the confined probe showed: writes, network, host Unix sockets.
fn print_confinement(
    confined: &std::result::Result<(bool, String), String>,
    refused: bool,
    abi: i32,
) {
    let own_net = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    match &confined {
        Ok((writes, out)) => {
            line(
                *writes && refused,
                "writes confined per command (Landlock)",
                &if *writes && refused {
                    format!("Landlock ABI {abi}: writes only beneath [confinement] writable")
                } else if abi == 0 {
                    "this kernel has no Landlock: commands write wherever their user may (enable the landlock LSM)"
                        .to_string()
                } else {
                    format!(
                        "Landlock ABI {abi} is present but a write outside was not refused: report this as a bug"
                    )
                },
            );
            let probe_net = out.lines().next().unwrap_or_default();
            let own = !probe_net.is_empty() && probe_net != own_net;
            line(
                own,
                "network per command",
                if own {
                    "network = \"none\" or \"loopback\" gives a command a network namespace of its own"
                } else {
                    "a command asking for no network still saw the host's: report this as a bug"
                },
            );
        }
        Err(e) => {
            line(
                abi > 0,
                "writes confined per command (Landlock)",
                &format!("Landlock ABI {abi}"),
            );
            line(
                false,
                "network per command",
                &format!("a command with network = \"none\" cannot start here: {e}"),
            );
        }
    }
}

/// Unix sockets under a network other than the host's: the session's own connect, the host's are cut.
fn print_unix_sockets(probe: &std::result::Result<bool, String>) {
    match probe {
        Ok(probed) => line(
            true,
            "host Unix sockets cut, own ones work",
            &format!(
                "with network none, loopback or allow a command's own Unix sockets (tmux, ssh-agent, gpg-agent, \
                 Python's forkserver) connect, and a host socket (docker.sock, a database's, your agent's) is \
                 refused and named to the agent; [confinement] unix_sockets lets named host sockets through{}",
                if *probed {
                    ""
                } else {
                    " (not probed: no python3 to make a socket with)"
                }
            ),
        ),
        Err(e) => line(false, "host Unix sockets cut, own ones work", e),
    }
}

/// Why commands run without a session sandbox here, and what to do.
fn why_no_namespace(uid: u32, wanted: bool) -> String {
    if !wanted {
        return "turned off ([executor] pid_namespace = false)".into();
    }
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if uid != 0 {
        if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return "this host refuses unprivileged user namespaces (kernel.unprivileged_userns_clone = 0); enable \
                    them with `sysctl -w kernel.unprivileged_userns_clone=1`, or run shellward as root"
                .into();
        }
        if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
            return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = \
                    1); give shellward an AppArmor profile with `userns,`, or set the sysctl to 0"
                .into();
        }
        if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
            return "user namespaces are disabled (user.max_user_namespaces = 0); raise it with `sysctl -w \
                    user.max_user_namespaces=15000`"
                .into();
        }
    }
    "the kernel refused to create the namespaces, or no init program could run (see the log with SHELLWARD_LOG=info)"
        .into()
}
