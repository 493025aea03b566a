//! The registry side of `oci` (the `oci` feature): pulls spoken through `registry` (reqwest) and pushes through
//! `oci-client`, the cache and its verification.

/// The older layer media type (Kubewarden, `wasm-to-oci`), accepted when pulling.
const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";

mod registry;

use super::{OciError, PullLimits, Pulled, WASM_CONFIG, WASM_LAYER};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

fn fail(reference: &str, what: impl std::fmt::Display) -> OciError {
    OciError(format!("{reference}: {what}"))
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:` and the hex digest of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
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
    super::install_tls_provider();
    let registry = reference.resolve_registry().to_string();
    let protocol = if is_loopback(&registry) {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    let limits = PullLimits::default();
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(limits.connect_timeout),
        read_timeout: Some(limits.read_timeout),
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

/// `work`, or an error naming `name` once `deadline` passed: every transfer with a registry has an end.
async fn within<T>(
    deadline: std::time::Duration,
    name: &str,
    what: &str,
    work: impl std::future::Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    match tokio::time::timeout(deadline, work).await {
        Ok(result) => result,
        Err(_) => Err(fail(
            name,
            format!(
                "the {what} did not finish within {}s; refusing it (raise [oci] deadline if the registry is \
                 genuinely this slow)",
                deadline.as_secs_f64()
            ),
        )),
    }
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

/// The cache's files for manifest digest `digest`: the component and its manifest.
fn cache_paths(cache_dir: &Path, digest: &str) -> (PathBuf, PathBuf) {
    let stem = digest.replace(':', "-");
    (
        cache_dir.join(format!("{stem}.wasm")),
        cache_dir.join(format!("{stem}.manifest.json")),
    )
}

/// Opens a cache file for reading without following a final link or blocking on a FIFO; only a regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    crate::sys::open_regular(path)
}

/// Reads at most `cap` bytes of `file`; `None` when it is longer.
fn read_at_most(file: &mut std::fs::File, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= cap).then_some(bytes))
}

/// The WebAssembly layer of a manifest, with its declared size.
fn wasm_layer(name: &str, raw: &[u8]) -> Result<(String, u64), OciError> {
    let manifest: OciImageManifest = serde_json::from_slice(raw).map_err(|e| {
        fail(
            name,
            format!("the manifest is not an OCI image manifest: {e}"),
        )
    })?;
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == WASM_LAYER || l.media_type == LEGACY_WASM_LAYER)
        .ok_or_else(|| {
            fail(
                name,
                format!(
                    "the artifact has no WebAssembly layer ({WASM_LAYER} or {LEGACY_WASM_LAYER}); push components \
                     with `shellward policy push` or `wkg oci push`"
                ),
            )
        })?;
    let size = u64::try_from(layer.size).map_err(|_| {
        fail(
            name,
            format!(
                "the manifest declares a negative size ({}) for the component",
                layer.size
            ),
        )
    })?;
    Ok((layer.digest.clone(), size))
}

/// The cached component of pinned manifest `digest`, verified again: the manifest kept beside it hashes to the pin,
/// and the component to the manifest's layer digest and declared size. `Ok(None)` when there is no such entry;
/// `Err` with what failed when there is one that does not verify.
fn verify_cached(
    name: &str,
    cache_dir: &Path,
    digest: &str,
    limits: &PullLimits,
) -> Result<Option<(PathBuf, Vec<u8>)>, String> {
    let (component_path, manifest_path) = cache_paths(cache_dir, digest);
    let mut component_file = match open_regular(&component_path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{} cannot be read: {e}", component_path.display())),
    };
    let raw = match open_regular(&manifest_path) {
        Ok(mut f) => read_at_most(&mut f, limits.max_manifest_bytes)
            .map_err(|e| format!("{} cannot be read: {e}", manifest_path.display()))?
            .ok_or_else(|| {
                format!(
                    "{} is over the manifest size limit",
                    manifest_path.display()
                )
            })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{} has no manifest beside it to verify it with (cached by an older shellward)",
                component_path.display()
            ));
        }
        Err(e) => return Err(format!("{} cannot be read: {e}", manifest_path.display())),
    };
    let actual = sha256(&raw);
    if actual != digest {
        return Err(format!(
            "the cached manifest's digest is {actual}, not the pinned {digest}"
        ));
    }
    let (layer_digest, size) = wasm_layer(name, &raw).map_err(|e| e.to_string())?;
    let bytes = read_at_most(&mut component_file, size.min(limits.max_component_bytes))
        .map_err(|e| format!("{} cannot be read: {e}", component_path.display()))?
        .filter(|b| b.len() as u64 == size)
        .ok_or_else(|| {
            format!("the cached component is not the {size} bytes its manifest declares")
        })?;
    let got = sha256(&bytes);
    if got != layer_digest {
        return Err(format!(
            "the cached component's digest is {got}, not {layer_digest} as its manifest says"
        ));
    }
    Ok(Some((component_path, bytes)))
}

/// Pulls a component (verified, within `limits`) into `cache_dir`. A pinned reference already cached is verified
/// again and served without the network; a cached entry that fails is removed and pulled again.
pub fn pull_with(
    reference: &str,
    cache_dir: &Path,
    limits: &PullLimits,
) -> Result<Pulled, OciError> {
    let parsed = parse(reference)?;
    let repository = format!("{}/{}", parsed.registry(), parsed.repository());
    if let Some(d) = parsed.digest() {
        if !d.starts_with("sha256:") {
            return Err(fail(
                reference,
                format!("{d} is not a sha256 digest; pin by sha256 (only it is verified)"),
            ));
        }
        match verify_cached(reference, cache_dir, d, limits) {
            Ok(Some((path, component))) => {
                return Ok(Pulled {
                    path,
                    pinned: reference.to_string(),
                    from_cache: true,
                    component,
                });
            }
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(
                    reference,
                    "discarding a cached policy that does not verify ({why}); pulling it again"
                );
                let (component, manifest) = cache_paths(cache_dir, d);
                let _ = std::fs::remove_file(component);
                let _ = std::fs::remove_file(manifest);
            }
        }
    }
    create_cache_dir(cache_dir).map_err(|e| {
        fail(
            reference,
            format!("cannot create the cache {}: {e}", cache_dir.display()),
        )
    })?;
    let name = reference.to_string();
    let limits_owned = limits.clone();
    let dir = cache_dir.to_path_buf();
    let deadline = limits.deadline;
    let (manifest_digest, raw, mut tmp) = block_on(async move {
        let work = async {
            let mut registry = registry::Registry::new(&parsed, &name, &limits_owned)?;
            let target = parsed
                .digest()
                .or(parsed.tag())
                .unwrap_or("latest")
                .to_string();
            let raw = registry.manifest(&target).await?;
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
            let (layer_digest, size) = wasm_layer(&name, &raw)?;
            let tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| {
                fail(
                    &name,
                    format!("cannot write to the cache {}: {e}", dir.display()),
                )
            })?;
            let mut out = std::io::BufWriter::new(tmp);
            registry.blob(&layer_digest, size, &mut out).await?;
            let tmp = out.into_inner().map_err(|e| {
                fail(
                    &name,
                    format!("cannot write the component to the cache: {}", e.error()),
                )
            })?;
            Ok((actual, raw, tmp))
        };
        within(deadline, &name, "pull", work).await
    })?;
    let (path, manifest_path) = cache_paths(cache_dir, &manifest_digest);
    let mut component = Vec::new();
    tmp.as_file_mut()
        .rewind()
        .and_then(|()| tmp.as_file_mut().read_to_end(&mut component))
        .map_err(|e| {
            fail(
                reference,
                format!("cannot read back the pulled component: {e}"),
            )
        })?;
    store_atomically(&manifest_path, &raw).map_err(|e| {
        fail(
            reference,
            format!("cannot write {}: {e}", manifest_path.display()),
        )
    })?;
    tmp.persist(&path).map_err(|e| {
        fail(
            reference,
            format!("cannot write {}: {}", path.display(), e.error),
        )
    })?;
    Ok(Pulled {
        path,
        pinned: format!("{repository}@{manifest_digest}"),
        from_cache: false,
        component,
    })
}

/// Creates the cache directory private to this user where it does not exist yet.
fn create_cache_dir(dir: &Path) -> std::io::Result<()> {
    crate::sys::create_private_dir_all(dir)
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
    let deadline = PullLimits::default().deadline;
    let digest = block_on(async move {
        let work = async {
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
        };
        within(deadline, &name, "push", work).await
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
