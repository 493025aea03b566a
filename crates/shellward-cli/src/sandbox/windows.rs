//! `sandbox check` on Windows: what a job object gives every command, and what Windows does not have here (each said,
//! never pretended). It exits 1, as on a Linux host without the session sandbox: commands are contained, not
//! isolated.

use super::line;
use anyhow::Result;
use shellward::ContainmentKind;
use std::process::ExitCode;

pub(super) fn check(config: &shellward::exec::ExecutorConfig) -> Result<ExitCode> {
    let probe = super::probe(config)?;
    super::header(&format!(
        "shellward sandbox check (Windows; shell {})",
        config.shell.join(" ")
    ));
    line(
        probe.containment == ContainmentKind::JobObject,
        "tree containment",
        "one job object per command (Windows has no cgroups): the whole tree is killed at once, and what is left \
         dies when shellward exits or is killed (kill on close)",
    );
    match probe.process_limit {
        Some(n) => line(
            true,
            "process limit per command",
            &format!("{n} (the job's active-process limit)"),
        ),
        None => line(
            false,
            "process limit per command",
            "turned off ([executor] max_processes = 0)",
        ),
    }
    line(
        false,
        "session sandbox",
        "Windows has no PID or mount namespaces: commands see the processes and files their user can",
    );
    line(
        false,
        "writes confined per command",
        "Windows has no Landlock: commands write wherever their user may, and results say so",
    );
    line(
        false,
        "network per command",
        "only the host's network: a plan asking for network none, loopback or an allow-list is refused",
    );
    line(
        false,
        "system-call filter",
        "none on Windows: results say the calls were not filtered",
    );
    line(
        false,
        "terminal (tty)",
        "not available yet: a tty start is refused; input still goes over a pipe",
    );
    line(
        false,
        "unix sockets (serve --listen unix:…)",
        "not served on Windows: listen on TCP (127.0.0.1, or with a token)",
    );
    super::linux_only("windows");
    Ok(ExitCode::from(1))
}
