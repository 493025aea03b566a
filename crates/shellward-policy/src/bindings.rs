//! Host bindings generated from `wit/` by `wasmtime::component::bindgen!`.

wasmtime::component::bindgen!({
    path: "wit",
    world: "policy-world",
    additional_derives: [PartialEq, Eq],
});

pub use shellward::policy::host;
pub use shellward::policy::types;
