//! Host bindings generated from the WIT contract by `wasmtime::component::bindgen!`: the current version (`wit/`,
//! whose types are the host's) and each earlier version still loaded (frozen copies, adapted in `policy`).

wasmtime::component::bindgen!({
    path: "wit",
    world: "policy-world",
    additional_derives: [PartialEq, Eq],
});

pub use shellward::policy::host;
pub use shellward::policy::types;

/// `shellward:policy@0.1.0`, frozen in `wit-v0.1/`: policies built against it load through an adapter.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit-v0.1",
        world: "policy-world",
        additional_derives: [PartialEq, Eq],
    });

    pub use shellward::policy::host;
    pub use shellward::policy::types;
}
