//! `shellward:policy@0.2.0`, frozen in `wit/v0.2/`: its policies do not see what 0.3 added (confinement, start-up
//! wait, platform); those pass through their plans unchanged, and their plans and denials name no rule.

use crate::types::{Denial, Outcome, Plan, Request};

wasmtime::component::bindgen!({
    path: "wit/v0.2",
    world: "policy-world",
});

use shellward::policy::types as g;

super::on_timeout_mapping!(g::OnTimeout);

impl shellward::policy::types::Host for crate::host::HostState {}

impl shellward::policy::host::Host for crate::host::HostState {
    fn log(&mut self, level: shellward::policy::host::Level, message: String) {
        let level = super::log_level!(level, shellward::policy::host::Level);
        self.log(level, message);
    }
}

/// The request as a 0.2 policy sees it.
pub(crate) fn request(r: &Request) -> g::Request {
    g::Request {
        command: r.command.clone(),
        workdir: r.workdir.clone(),
        timeout_ms: r.timeout_ms,
        background: r.background,
        on_timeout: r.on_timeout.map(on_timeout_to),
        env: r.env.clone(),
        context: r.context.clone(),
        interactive: r.interactive,
        tty: r.tty,
    }
}

/// A 0.2 policy's outcome in the host's types: what it cannot see passes through from `request`.
pub(crate) fn outcome(o: g::Outcome, request: &Request) -> Outcome {
    match o {
        g::Outcome::Deny(reason) => Outcome::Deny(Denial::new(reason)),
        g::Outcome::Run(p) => Outcome::Run(Plan {
            command: p.command,
            workdir: p.workdir,
            background: p.background,
            timeout_ms: p.timeout_ms,
            on_timeout: on_timeout_from(p.on_timeout),
            env: p.env,
            notes: p.notes,
            interactive: p.interactive,
            tty: p.tty,
            confinement: request.confinement.clone(),
            startup_wait_ms: request.startup_wait_ms,
            rules: Vec::new(),
        }),
    }
}
