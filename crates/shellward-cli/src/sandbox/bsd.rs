//! `sandbox check` on macOS and FreeBSD: what a process group gives every command, whether a confined command's
//! write outside its writable directory is refused (macOS: Seatbelt), and what these systems do not have here — each
//! said, never pretended. Built and linted here, never run on either system. It exits 1: commands are contained, not
//! isolated in a session sandbox.

use super::line;
use anyhow::Result;
use std::process::ExitCode;

pub(super) fn check(config: &shellward::exec::ExecutorConfig) -> Result<ExitCode> {
    let probe = super::probe(config)?;
    let os = std::env::consts::OS;
    super::header(&format!(
        "shellward sandbox check ({os}; uid {}; shell {}; built here, not tested on {os})",
        crate::sys::effective_uid(),
        config.shell.join(" ")
    ));
    line(
        true,
        "tree containment",
        &format!(
            "{}: terminate and kill reach the whole group at once; {}",
            probe.containment,
            if os == "freebsd" {
                "shellward is a reaper, so processes that leave the group (setsid) stay in the command's subtree and \
                 are killed with it"
            } else {
                "processes that leave the group (setsid) are followed while a parent of theirs in the tree lives"
            }
        ),
    );
    line(
        false,
        "process limit per command",
        &format!("{os} has no cgroup pids controller here"),
    );
    line(
        false,
        "session sandbox",
        &format!(
            "{os} has no PID or mount namespaces: commands see the processes and files their user can"
        ),
    );
    writes(&probe.confined, probe.outside_write_refused, os);
    line(
        false,
        "system-call filter",
        &format!("none on {os}: results say the calls were not filtered"),
    );
    line(
        true,
        "a watchdog",
        "a /bin/sh process kills the commands' process groups if shellward itself is killed (processes that left \
         their group are not reached)",
    );
    super::linux_only(os);
    Ok(ExitCode::from(1))
}

/// What the confined probe (writes beneath one directory, network none) showed.
fn writes(confined: &std::result::Result<(bool, String), String>, refused: bool, os: &str) {
    match confined {
        Ok((true, _)) if refused => {
            line(
                true,
                "writes confined per command",
                "a Seatbelt profile (sandbox-exec): writes only beneath [confinement] writable",
            );
            line(
                true,
                "network none per command",
                "Seatbelt; loopback and allow-lists are refused (Seatbelt cannot give a session its own loopback)",
            );
        }
        Ok((false, _)) => {
            line(
                false,
                "writes confined per command",
                &format!(
                    "not on {os}: [confinement] unenforceable = \"run\" runs plans that confine writes with the \
                     user's own permissions (results say so); set \"refuse\" to refuse them"
                ),
            );
            line(
                false,
                "network per command",
                "what the platform cannot give runs on the host's network (unenforceable = \"run\")",
            );
        }
        Ok((true, out)) => line(
            false,
            "writes confined per command",
            &format!(
                "a confined command wrote outside its writable directory ({}): report this as a bug",
                out.trim()
            ),
        ),
        Err(e) => {
            line(false, "writes confined per command", e);
            line(
                false,
                "network per command",
                &format!("only the host's network on {os}: a plan asking for another is refused"),
            );
        }
    }
}
