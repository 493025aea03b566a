//! Private bindings per contract version, generated from the WIT by `wasmtime::component::bindgen!` and mapped to
//! the host's own types (`crate::types`): `v0_3` is the current contract (`wit/`), `v0_2` and `v0_1` are frozen copies
//! (`wit-v0.2/`, `wit-v0.1/`) whose policies load through adapters. None of these types leave the crate.

pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;

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

/// Adds every contract version's `host` interface, under its own versioned name, to `linker`.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::host::HostState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_3::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_2::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1::PolicyWorld::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
