//! Errors of the policy host. Each names the policy (file or name) that failed and says what to do.

use std::path::PathBuf;

/// What went wrong inside a running policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// It ran past its deadline (e.g. an infinite loop or a blocking call).
    Deadline,
    /// It tried to grow its memory past the cap.
    Memory,
    /// It overflowed its stack.
    Stack,
    /// It trapped (a panic, `unreachable`, an out-of-bounds access, a refused import call).
    Trap,
    /// It returned an outcome the host refuses (over the size limits, or a plan no executor can run).
    InvalidOutput,
    /// Its plan asks for more than the operator's confinement ceiling allows. Never skipped, even by a fail-open
    /// policy: skipping would also drop whatever it narrowed.
    BeyondCeiling,
}

impl FaultKind {
    /// A short stable name (`deadline`, `memory`, `stack`, `trap`, `invalid_output`, `beyond_ceiling`), for metrics
    /// and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Deadline => "deadline",
            FaultKind::Memory => "memory",
            FaultKind::Stack => "stack",
            FaultKind::Trap => "trap",
            FaultKind::InvalidOutput => "invalid_output",
            FaultKind::BeyondCeiling => "beyond_ceiling",
        }
    }
}

/// An error from loading or running a policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read policy file {path}: {io}; check the path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        io: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error(
        "policy {name} is not a WebAssembly file (no `\\0asm` header); give the .wasm component built for wasm32-wasip2"
    )]
    NotWasm {
        /// The policy.
        name: String,
    },
    /// The bytes are a core module, not a component.
    #[error(
        "policy {name} is a core WebAssembly module, not a component; build it with `cargo build --target wasm32-wasip2` \
         (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// The policy.
        name: String,
    },
    /// wasmtime could not compile or validate the component.
    #[error("policy {name} could not be compiled: {message}")]
    Compile {
        /// The policy.
        name: String,
        /// The compiler's message.
        message: String,
    },
    /// The component exports the policy interface of an incompatible contract version.
    #[error(
        "policy {name} was built against {found}, but this shellward supports {supported} (it loads {compatible}); \
         rebuild the policy against the wit/ directory of this shellward release"
    )]
    Incompatible {
        /// The policy.
        name: String,
        /// The interface it exports, e.g. `shellward:policy/policy@1.0.0`.
        found: String,
        /// The interface this host supports.
        supported: String,
        /// The ranges it loads, e.g. `0.2.x (and 0.1.x through an adapter)`.
        compatible: String,
    },
    /// The component does not export the policy interface.
    #[error(
        "policy {name} does not export {expected} (it exports: {exports}); a policy must implement the world \
         `policy-world` of wit/ (export `policy` with `configure` and `evaluate`)"
    )]
    MissingExport {
        /// The policy.
        name: String,
        /// The expected export.
        expected: String,
        /// What it exports instead.
        exports: String,
    },
    /// The component needs an import the host does not grant, or its exports have the wrong shape.
    #[error("policy {name} cannot be linked: {message}")]
    Link {
        /// The policy.
        name: String,
        /// Why.
        message: String,
    },
    /// The policy refused its settings in `configure`.
    #[error("policy {name} refused its settings: {message}")]
    Settings {
        /// The policy.
        name: String,
        /// The policy's message (it names the field).
        message: String,
    },
    /// The policy faulted while configuring or evaluating.
    #[error("policy {name} failed while {during}: {detail}")]
    Fault {
        /// The policy.
        name: String,
        /// What kind of fault.
        kind: FaultKind,
        /// `configuring` or `evaluating`.
        during: &'static str,
        /// A description, including the policy's panic message when it printed one.
        detail: String,
    },
    /// The engine could not be set up.
    #[error("the policy engine could not be set up: {0}")]
    Engine(String),
}
