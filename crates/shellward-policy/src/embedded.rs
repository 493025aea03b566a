//! The built-in policies — `default` and `guard` — compiled for `wasm32-wasip2` by this crate's build script and
//! embedded in the binary. Without configuration the chain is `default`, then `guard`.

/// The default policy component (`policies/default`), as built for this release.
pub static DEFAULT_POLICY_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/shellward_default_policy.wasm"));

/// The name the embedded default policy is known by in errors, logs and notes.
pub const DEFAULT_POLICY_NAME: &str = "default";

/// The guard policy (`policies/guard`): denies catastrophic commands (whole-system kills, `rm` of `/` or system
/// directories, privilege escalation, power, block-device writes, fork bombs).
pub static GUARD_POLICY_WASM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/shellward_guard_policy.wasm"));

/// The name the embedded guard policy is known by.
pub const GUARD_POLICY_NAME: &str = "guard";

/// The built-in policies by name, in the order of the default chain.
pub const BUILTINS: &[(&str, &[u8])] = &[
    (DEFAULT_POLICY_NAME, DEFAULT_POLICY_WASM),
    (GUARD_POLICY_NAME, GUARD_POLICY_WASM),
];

/// A built-in policy's component, by name.
pub fn builtin(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Paths of every guest component built by `build.rs`, so tests can load each one. Not a stable API.
#[doc(hidden)]
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
