//! The default policy, compiled for `wasm32-wasip2` by this crate's build script and embedded in the binary.

/// The default policy component (`policies/default`), as built for this release.
pub static DEFAULT_POLICY_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/shellward_default_policy.wasm"));

/// The name the embedded default policy is known by in errors, logs and notes.
pub const DEFAULT_POLICY_NAME: &str = "default";

/// Paths of every guest component built by `build.rs`, so tests can load each one. Not a stable API.
#[doc(hidden)]
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
