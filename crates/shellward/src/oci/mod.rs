//! Policies from an OCI registry: push a component as a Wasm OCI artifact, pull one (verified against its digests)
//! into an on-disk cache.
//!
//! Layout (the CNCF Wasm OCI artifact layout that `wkg` writes): an OCI image manifest whose config has the media
//! type `application/vnd.wasm.config.v0+json` and whose one layer is the component, `application/wasm`. Pulling also
//! accepts the older `application/vnd.wasm.content.layer.v1+wasm` layer that Kubewarden and `wasm-to-oci` push.
//!
//! Every pull is verified here, whatever the registry says: a reference pinned by digest (`REF@sha256:…`) must
//! name exactly the manifest received, and the layer must hash to the digest the manifest gives it and be exactly
//! the size it declares. A pull is bounded ([`PullLimits`]: manifest and component sizes, connect and read timeouts,
//! one deadline), and the component is streamed through its hash into a temporary file, never held whole in memory
//! while it arrives (see `registry`).
//!
//! The cache keeps, per manifest digest, the manifest (`sha256-….manifest.json`) beside the component
//! (`sha256-….wasm`). A pinned reference already in the cache is served from it without the network, and verified
//! again on every load: the manifest must hash to the pin, and the component to the manifest's layer digest and size.
//! An entry that fails (edited, swapped, or from a version that kept no manifest) is removed and pulled again. The
//! component's bytes are returned from the same read that verified them ([`Pulled::component`]), so nothing can swap
//! the file between the check and the load. Registries on loopback are spoken to over plain HTTP, all others over
//! HTTPS; access is anonymous.

use std::path::{Path, PathBuf};
use std::time::Duration;

#[cfg(feature = "oci")]
mod client;

/// Makes ring the process's TLS cryptography, once (a provider the host installed first stays). reqwest and
/// oci-client are compiled without a provider of their own, so every HTTPS client here is built after this.
#[cfg(feature = "oci")]
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
#[cfg(feature = "oci")]
pub use client::{pull_with, push};

/// What a pull accepts from a registry; [`Default`] gives small bounds that fit every real policy (`[oci]` in the
/// configuration changes them).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PullLimits {
    /// Most bytes of a manifest. Default 1 MiB (a policy's manifest is under 1 KiB).
    pub max_manifest_bytes: u64,
    /// Most bytes of a component. Default 64 MiB, the most a policy file may have (a Python policy is about 35 MB).
    pub max_component_bytes: u64,
    /// Longest wait for a connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of an answer. Default 30 s.
    pub read_timeout: Duration,
    /// Longest a whole pull may take, however steadily bytes arrive. Default 5 minutes.
    pub deadline: Duration,
    /// Fewest bytes per second an answer's body must average over each [`rate_window`](Self::rate_window): a
    /// registry that drips a byte at a time (under the read timeout, far under the deadline) is cut off after one
    /// window. Default 1 KiB/s; 0 turns the check off.
    pub min_rate: u64,
    /// The span the minimum rate is measured over. Default 15 s.
    pub rate_window: Duration,
}

impl Default for PullLimits {
    fn default() -> Self {
        PullLimits {
            max_manifest_bytes: 1 << 20,
            max_component_bytes: 64 << 20,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            deadline: Duration::from_secs(300),
            min_rate: 1024,
            rate_window: Duration::from_secs(15),
        }
    }
}

/// The layer media type shellward pushes (CNCF Wasm OCI artifact layout).
pub const WASM_LAYER: &str = "application/wasm";
/// The config media type shellward pushes.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// Why a push or pull failed; the message names the reference and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OciError(String);

impl OciError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> OciError {
        OciError(message.into())
    }
}

/// The directory pulled components are kept in: `$SHELLWARD_CACHE_DIR/oci`, else `<user cache dir>/shellward/oci`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SHELLWARD_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("oci"));
    }
    dirs::cache_dir().map(|d| d.join("shellward").join("oci"))
}

/// A pulled component: where it is cached, the manifest digest it came from, and its verified bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pulled {
    /// The cached component.
    pub path: PathBuf,
    /// `REPOSITORY@sha256:…` of the manifest, to pin it.
    pub pinned: String,
    /// Served from the cache without contacting the registry.
    pub from_cache: bool,
    /// The component's bytes, from the read that verified them: load these, not the file again.
    pub component: Vec<u8>,
}

/// Pulls a component (verified) into `cache_dir` with the default [`PullLimits`].
pub fn pull(reference: &str, cache_dir: &Path) -> Result<Pulled, OciError> {
    pull_with(reference, cache_dir, &PullLimits::default())
}

/// Without the `oci` feature: every pull is refused, saying why.
#[cfg(not(feature = "oci"))]
pub fn pull_with(
    reference: &str,
    _cache_dir: &Path,
    _limits: &PullLimits,
) -> Result<Pulled, OciError> {
    Err(OciError::new(format!(
        "{reference}: this build of shellward has no OCI registry support (built without the `oci` feature); use \
         a component file (path = \"…\"), or a build with the feature"
    )))
}

/// Without the `oci` feature: every push is refused, saying why.
#[cfg(not(feature = "oci"))]
pub fn push(_file: &Path, reference: &str) -> Result<String, OciError> {
    Err(OciError::new(format!(
        "{reference}: this build of shellward has no OCI registry support (built without the `oci` feature)"
    )))
}

#[cfg(all(test, feature = "oci"))]
mod tls_tests {
    /// The HTTP clients are compiled without a TLS provider of their own: building one needs the provider installed
    /// first (without it, rustls panics at the first HTTPS client), and a host's own provider is kept.
    #[test]
    fn https_clients_build_with_the_installed_provider() {
        super::install_tls_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        let client = reqwest::Client::builder()
            .https_only(true)
            .build()
            .expect("an HTTPS client builds with ring installed");
        drop(client);
        // Installing again changes nothing (and does not panic).
        super::install_tls_provider();
    }
}
