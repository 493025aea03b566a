//! Policies from an OCI registry: push a component as a Wasm OCI artifact, pull one (verified against its digests)
//! into an on-disk cache.
//!
//! Layout (the CNCF Wasm OCI artifact layout that `wkg` writes): an OCI image manifest whose config has the media
//! type `application/vnd.wasm.config.v0+json` and whose one layer is the component, `application/wasm`. Pulling also
//! accepts the older `application/vnd.wasm.content.layer.v1+wasm` layer that Kubewarden and `wasm-to-oci` push.
//!
//! Every pull is verified here, whatever the registry says: a reference pinned by digest (`REF@sha256:…`) must
//! name exactly the manifest received, and the layer must hash to the digest the manifest gives it. A pinned
//! reference already in the cache is served from it without the network. Registries on loopback are spoken to over
//! plain HTTP, all others over HTTPS; access is anonymous.

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The layer media type shellward pushes (CNCF Wasm OCI artifact layout).
pub const WASM_LAYER: &str = "application/wasm";
/// The config media type shellward pushes.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The older layer media type (Kubewarden, `wasm-to-oci`), accepted when pulling.
const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";

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

fn fail(reference: &str, what: impl std::fmt::Display) -> OciError {
    OciError(format!("{reference}: {what}"))
}

/// `sha256:` and the hex digest of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    let mut out = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The directory pulled components are kept in: `$SHELLWARD_CACHE_DIR/oci`, else `<user cache dir>/shellward/oci`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SHELLWARD_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("oci"));
    }
    dirs::cache_dir().map(|d| d.join("shellward").join("oci"))
}

fn parse(reference: &str) -> Result<Reference, OciError> {
    reference.parse().map_err(|e| {
        fail(
            reference,
            format!("not an OCI reference ({e}); write REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST"),
        )
    })
}

fn is_loopback(registry: &str) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(registry, |(h, _)| h);
    matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1") || host.starts_with("127.")
}

fn client(reference: &Reference) -> Client {
    let registry = reference.resolve_registry().to_string();
    let protocol = if is_loopback(&registry) {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        ..Default::default()
    })
}

/// Writes `bytes` to `path` through a temporary file renamed over it, so a reader never sees a partial file. The
/// temporary name is unique per call, not only per process: a chain that names one reference twice pulls it from
/// two threads at once (policies load concurrently), and with a shared name one writer truncated the file the other
/// was renaming, or found it already renamed away.
fn store_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.{n}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Runs an async registry call to completion on a runtime of its own, on a thread of its own (so it can be called
/// from inside or outside a Tokio runtime).
fn block_on<T: Send + 'static>(
    f: impl std::future::Future<Output = Result<T, OciError>> + Send + 'static,
) -> Result<T, OciError> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| OciError(format!("cannot start the registry client: {e}")))?
            .block_on(f)
    })
    .join()
    .unwrap_or_else(|_| Err(OciError("the registry client panicked".into())))
}

/// The raw manifest `reference` names (an OCI image manifest).
async fn manifest(client: &Client, reference: &Reference) -> oci_client::errors::Result<Vec<u8>> {
    client
        .pull_manifest_raw(
            reference,
            &RegistryAuth::Anonymous,
            &[OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE],
        )
        .await
        .map(|(raw, _)| raw.to_vec())
}

/// A pulled component: where it is cached and the manifest digest it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The cached component.
    pub path: PathBuf,
    /// `REPOSITORY@sha256:…` of the manifest, to pin it.
    pub pinned: String,
    /// Served from the cache without contacting the registry.
    pub from_cache: bool,
}

/// Pulls a component (verified) into `cache_dir`.
pub fn pull(reference: &str, cache_dir: &Path) -> Result<Pulled, OciError> {
    let parsed = parse(reference)?;
    let repository = format!("{}/{}", parsed.registry(), parsed.repository());
    let pinned_digest = parsed.digest().map(str::to_string);
    if let Some(d) = &pinned_digest {
        let cached = cache_dir.join(format!("{}.wasm", d.replace(':', "-")));
        if cached.is_file() {
            return Ok(Pulled {
                path: cached,
                pinned: reference.to_string(),
                from_cache: true,
            });
        }
    }
    let name = reference.to_string();
    let (manifest_digest, component) = block_on(async move {
        let client = client(&parsed);
        let raw = manifest(&client, &parsed)
            .await
            .map_err(|e| fail(&name, format!("cannot fetch the manifest: {e}")))?;
        let actual = sha256(&raw);
        if let Some(want) = parsed.digest()
            && want != actual
        {
            return Err(fail(
                &name,
                format!(
                    "the registry sent a manifest with digest {actual}, not the pinned {want}; refusing it (the \
                     registry or the path to it is not trustworthy)"
                ),
            ));
        }
        let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|e| {
            fail(
                &name,
                format!("the manifest is not an OCI image manifest: {e}"),
            )
        })?;
        let layer = manifest
            .layers
            .iter()
            .find(|l| l.media_type == WASM_LAYER || l.media_type == LEGACY_WASM_LAYER)
            .ok_or_else(|| {
                fail(
                    &name,
                    format!(
                        "the artifact has no WebAssembly layer ({WASM_LAYER} or {LEGACY_WASM_LAYER}); push components \
                         with `shellward policy push` or `wkg oci push`"
                    ),
                )
            })?
            .clone();
        let mut data: Vec<u8> = Vec::new();
        client
            .pull_blob(&parsed, &layer, &mut data)
            .await
            .map_err(|e| fail(&name, format!("cannot fetch the component: {e}")))?;
        let got = sha256(&data);
        if got != layer.digest {
            return Err(fail(
                &name,
                format!(
                    "the component's digest is {got}, not {} as its manifest says; refusing it",
                    layer.digest
                ),
            ));
        }
        Ok((actual, data))
    })?;
    std::fs::create_dir_all(cache_dir).map_err(|e| {
        fail(
            reference,
            format!("cannot create the cache {}: {e}", cache_dir.display()),
        )
    })?;
    let path = cache_dir.join(format!("{}.wasm", manifest_digest.replace(':', "-")));
    store_atomically(&path, &component)
        .map_err(|e| fail(reference, format!("cannot write {}: {e}", path.display())))?;
    Ok(Pulled {
        path,
        pinned: format!("{repository}@{manifest_digest}"),
        from_cache: false,
    })
}

/// Pushes a component as a Wasm OCI artifact; returns the pinned reference (`REPOSITORY@sha256:…`).
pub fn push(file: &Path, reference: &str) -> Result<String, OciError> {
    let data = std::fs::read(file)
        .map_err(|e| fail(reference, format!("cannot read {}: {e}", file.display())))?;
    if !data.starts_with(b"\0asm") {
        return Err(fail(
            reference,
            format!("{} is not a WebAssembly file", file.display()),
        ));
    }
    let parsed = parse(reference)?;
    let repository = format!("{}/{}", parsed.registry(), parsed.repository());
    let name = reference.to_string();
    let layer_digest = sha256(&data);
    let digest = block_on(async move {
        let layer = ImageLayer::new(data, WASM_LAYER.to_string(), None);
        let config = Config::new(
            serde_json::to_vec(&serde_json::json!({
                "architecture": "wasm",
                "os": "wasip2",
                "layerDigests": [layer_digest],
            }))
            .unwrap_or_default(),
            WASM_CONFIG.to_string(),
            None,
        );
        let built = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let client = client(&parsed);
        client
            .push(
                &parsed,
                &[layer],
                config,
                &RegistryAuth::Anonymous,
                Some(built),
            )
            .await
            .map_err(|e| fail(&name, format!("cannot push: {e}")))?;
        // The digest of what was pushed, as the registry stored it.
        let raw = manifest(&client, &parsed)
            .await
            .map_err(|e| fail(&name, format!("pushed, but cannot read it back: {e}")))?;
        Ok(sha256(&raw))
    })?;
    Ok(format!("{repository}@{digest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_stores_of_one_entry_all_succeed_and_leave_a_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sha256-abc.wasm");
        let payload: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..40 {
                        store_atomically(&path, &payload).unwrap();
                        assert_eq!(std::fs::read(&path).unwrap(), payload);
                    }
                });
            }
        });
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("sha256-abc.wasm")]);
    }
}
