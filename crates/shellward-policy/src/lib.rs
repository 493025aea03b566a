//! shellward's policy host.
//!
//! This crate owns everything between a command request and a decided plan: it loads policy components (WebAssembly
//! components implementing the `shellward:policy` WIT world in `wit/`), checks they were built for a compatible
//! contract, runs each in a sandbox (deadline, memory cap, no OS access), and chains them in order. It never runs a
//! command: the plan it returns is for an executor.
//!
//! - [`PolicyEngine`]: the wasmtime engine, linker, sandbox settings and precompile cache; loads [`Policy`]s.
//! - [`Policy`]: one loaded, configured policy; evaluates requests with a reused or fresh instance.
//! - [`PolicyChain`]: policies in order; each sees the previous plan; the first deny stops the chain.
//! - [`cache`]: the on-disk precompile cache.
//! - [`embedded`]: the default policy, compiled to a component at build time and embedded in this crate.
//!
//! The request, plan and outcome types ([`Request`], [`Plan`], [`Outcome`]) are the host's own, written here and
//! `#[non_exhaustive]`: each contract version's generated bindings are private and mapped to them, so a new WIT
//! version adds fields and constructors, never breaks this API.

mod bindings;
pub mod cache;
pub mod cases;
mod chain;
mod compat;
pub mod embedded;
mod engine;
mod engine_state;
mod error;
mod host;
mod limits;
mod outside_async;
mod policy;
mod types;

pub use chain::{Decision, Fault, PolicyChain};
pub use compat::{ADAPTED_WIT_VERSIONS, PolicyInfo, WIT_PACKAGE, WIT_VERSION, supported_ranges};
pub use engine::{
    FaultMode, InstanceMode, MAX_COMPONENT_BYTES, PERFMAP_VAR, PolicyEngine, SandboxConfig,
    read_component,
};
pub use error::{FaultKind, PolicyError};
pub use limits::OutcomeLimits;
pub use policy::Policy;
pub use shellward_kit::duration;
pub use types::{Ask, Confinement, Denial, Network, OnTimeout, Outcome, Plan, Request, Rule};
