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

include!(concat!(env!("OUT_DIR"), "/builtin_digests.rs"));

/// The SHA-256 (hex) of `bytes` when they are one of the embedded built-in components, computed by the build
/// script: starting never hashes the built-ins. Recognised by content (a length check, then a comparison at memory
/// speed: a fraction of the time hashing would take), so a copy of a built-in is recognised too.
pub fn builtin_sha256(bytes: &[u8]) -> Option<&'static str> {
    let package = if bytes == DEFAULT_POLICY_WASM {
        "shellward-default-policy"
    } else if bytes == GUARD_POLICY_WASM {
        "shellward-guard-policy"
    } else {
        return None;
    };
    BUILTIN_SHA256
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, d)| *d)
}

/// Paths of every guest component built by `build.rs`, so tests can load each one. Not a stable API.
#[doc(hidden)]
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn the_build_scripts_digests_are_the_embedded_components_sha256() {
        for (_, bytes) in BUILTINS {
            let hex: String = Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(builtin_sha256(bytes), Some(hex.as_str()));
            let copy: Vec<u8> = bytes.to_vec();
            assert_ne!(copy.as_ptr(), bytes.as_ptr());
            assert_eq!(builtin_sha256(&copy), Some(hex.as_str()));
            // One byte changed, or one missing: another component, hashed like any other.
            let mut other = bytes.to_vec();
            other[bytes.len() / 2] ^= 1;
            assert_eq!(builtin_sha256(&other), None);
            assert_eq!(builtin_sha256(&bytes[1..]), None);
        }
    }
}
