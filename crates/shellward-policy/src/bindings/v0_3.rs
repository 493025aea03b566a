//! `shellward:policy@0.3.0`, the current contract (`wit/`): every field maps one to one.

use crate::types::{Confinement, Denial, NetworkAccess, Outcome, Plan, Request, Rule};

wasmtime::component::bindgen!({
    path: "wit",
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

fn network_to(n: &NetworkAccess) -> g::Network {
    match n {
        NetworkAccess::None => g::Network::None,
        NetworkAccess::Loopback => g::Network::Loopback,
        NetworkAccess::Allow(list) => g::Network::Allow(list.clone()),
        NetworkAccess::Host => g::Network::Host,
    }
}

fn network_from(n: g::Network) -> NetworkAccess {
    match n {
        g::Network::None => NetworkAccess::None,
        g::Network::Loopback => NetworkAccess::Loopback,
        g::Network::Allow(list) => NetworkAccess::Allow(list),
        g::Network::Host => NetworkAccess::Host,
    }
}

fn confinement_to(c: &Confinement) -> g::Confinement {
    g::Confinement {
        network: network_to(&c.network),
        writable: c.writable.clone(),
    }
}

fn confinement_from(c: g::Confinement) -> Confinement {
    Confinement::new(network_from(c.network), c.writable)
}

/// The request as a 0.3 policy sees it.
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
        confinement: confinement_to(&r.confinement),
        ceiling: confinement_to(&r.ceiling),
        hidden: r.hidden.clone(),
        startup_wait_ms: r.startup_wait_ms,
        os: r.os.clone(),
        shell: r.shell.clone(),
    }
}

/// A 0.3 policy's outcome in the host's types.
pub(crate) fn outcome(o: g::Outcome) -> Outcome {
    match o {
        g::Outcome::Deny(d) => Outcome::Deny(Denial {
            reason: d.reason,
            rule: d.rule,
        }),
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
            confinement: confinement_from(p.confinement),
            startup_wait_ms: p.startup_wait_ms,
            rules: p.rules,
        }),
    }
}

/// A 0.3 policy's rule list in the host's types.
pub(crate) fn rules(list: Vec<g::Rule>) -> Vec<Rule> {
    list.into_iter()
        .map(|r| Rule::new(r.id, r.summary))
        .collect()
}
