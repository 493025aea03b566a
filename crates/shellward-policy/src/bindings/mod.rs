//! Private bindings per contract version, generated from the WIT by `wasmtime::component::bindgen!` and mapped to
//! the host's own types (`crate::types`): `v0_4` is the current contract (`wit/v0.4/`), `v0_3`, `v0_2` and `v0_1` are
//! the frozen earlier ones (`wit/v0.3/`, `wit/v0.2/`, `wit/v0.1/`) whose policies load through adapters. None of these types leave the crate.

pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;
pub(crate) mod v0_4;

/// Maps a log level of any version to the host's.
macro_rules! log_level {
    ($level:expr, $ty:path) => {{
        use $ty as L;
        match $level {
            L::Trace => crate::host::LogLevel::Trace,
            L::Debug => crate::host::LogLevel::Debug,
            L::Info => crate::host::LogLevel::Info,
            L::Warn => crate::host::LogLevel::Warn,
            L::Error => crate::host::LogLevel::Error,
        }
    }};
}
pub(crate) use log_level;

/// Maps a timeout action of any version to and from the host's.
macro_rules! on_timeout_mapping {
    ($ty:path) => {
        /// The host's timeout action as this version's.
        pub(crate) fn on_timeout_to(o: crate::types::OnTimeout) -> $ty {
            use $ty as G;
            match o {
                crate::types::OnTimeout::Kill => G::Kill,
                crate::types::OnTimeout::Background => G::Background,
            }
        }

        /// This version's timeout action as the host's.
        pub(crate) fn on_timeout_from(o: $ty) -> crate::types::OnTimeout {
            use $ty as G;
            match o {
                G::Kill => crate::types::OnTimeout::Kill,
                G::Background => crate::types::OnTimeout::Background,
            }
        }
    };
}
pub(crate) use on_timeout_mapping;

/// The mappings of the 0.3 shape (request, confinement, plan, rules), shared by every version that has it (0.3 and
/// 0.4 differ only in the outcome). Expands inside a bindings module, where `g` is its generated `types`.
macro_rules! shape_v0_3 {
    () => {
        fn network_to(n: &crate::types::Network) -> g::Network {
            match n {
                crate::types::Network::None => g::Network::None,
                crate::types::Network::Loopback => g::Network::Loopback,
                crate::types::Network::Allow(list) => g::Network::Allow(list.clone()),
                crate::types::Network::Host => g::Network::Host,
            }
        }

        fn network_from(n: g::Network) -> crate::types::Network {
            match n {
                g::Network::None => crate::types::Network::None,
                g::Network::Loopback => crate::types::Network::Loopback,
                g::Network::Allow(list) => crate::types::Network::Allow(list),
                g::Network::Host => crate::types::Network::Host,
            }
        }

        fn confinement_to(c: &crate::types::Confinement) -> g::Confinement {
            g::Confinement {
                network: network_to(&c.network),
                writable: c.writable.clone(),
            }
        }

        fn confinement_from(c: g::Confinement) -> crate::types::Confinement {
            crate::types::Confinement::new(network_from(c.network), c.writable)
        }

        /// The request as a policy of this version sees it.
        pub(crate) fn request(r: &crate::types::Request) -> g::Request {
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

        /// A plan of this version in the host's types.
        fn plan_from(p: g::Plan) -> crate::types::Plan {
            crate::types::Plan {
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
            }
        }

        /// This version's rule list in the host's types.
        pub(crate) fn rules(list: Vec<g::Rule>) -> Vec<crate::types::Rule> {
            list.into_iter()
                .map(|r| crate::types::Rule::new(r.id, r.summary))
                .collect()
        }
    };
}
pub(crate) use shape_v0_3;

/// The host's side of a version's `types` and `host` interfaces (logging), for a bindings module whose generated
/// code is in scope (0.3 and 0.4).
macro_rules! host_impls {
    () => {
        impl shellward::policy::types::Host for crate::host::HostState {}

        impl shellward::policy::host::Host for crate::host::HostState {
            fn log(&mut self, level: shellward::policy::host::Level, message: String) {
                let level = super::log_level!(level, shellward::policy::host::Level);
                self.log(level, message);
            }
        }
    };
}
pub(crate) use host_impls;

/// Adds every contract version's `host` interface, under its own versioned name, to `linker`.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::host::HostState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_4::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_3::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_2::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
