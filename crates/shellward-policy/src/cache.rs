//! The on-disk precompile cache.
//!
//! Compiling a component with Cranelift takes tens to hundreds of milliseconds; loading a precompiled one takes well
//! under one. Entries are keyed by the SHA-256 of the component's bytes and the engine's compatibility hash (wasmtime
//! version, target and compilation settings), so a changed policy or a different engine never picks up a stale entry.
//!
//! `Component::deserialize` is `unsafe`: it trusts its input to be wasmtime's own output. Every entry therefore
//! carries a header with the SHA-256 of its payload, checked before deserializing; a truncated, corrupted or foreign
//! file is discarded and rebuilt, never loaded. Writes go to a temporary file renamed into place, so readers never
//! see a half-written entry.

use sha2::{Digest, Sha256};
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"SWPCACH1";
const HEADER_LEN: usize = MAGIC.len() + 32;

/// Components at least this large (bytes) take long enough to compile that a first use says so.
const NOTICE_BYTES: usize = 1 << 20;
/// Where a component came from when it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a valid cache entry.
    Hit,
    /// Compiled and stored.
    Miss,
    /// An entry existed but was invalid; it was discarded, and the component compiled and stored again.
    Rebuilt,
    /// The cache is disabled (or unusable): compiled in memory only.
    Disabled,
}

/// A precompile cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

/// The default cache directory: `$SHELLWARD_CACHE_DIR`, else `<user cache dir>/shellward/policies`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SHELLWARD_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    dirs::cache_dir().map(|d| d.join("shellward").join("policies"))
}

impl Cache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry path for `bytes` under `engine`.
    pub fn entry_path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        let content = hex(&Sha256::digest(bytes));
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        self.dir
            .join(format!("{}-{:016x}.cwasm", &content[..32], h.finish()))
    }

    /// Loads `bytes` as a component, from the cache when a valid entry exists, else compiling and storing it.
    /// Cache I/O problems are logged and never fail the load.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let path = self.entry_path(engine, bytes);
        let mut outcome = CacheOutcome::Miss;
        match fs::read(&path) {
            Ok(entry) => match verified_payload(&entry) {
                Some(payload) => {
                    // SAFETY: the payload's SHA-256 matches the one recorded when this host wrote it from
                    // `Engine::precompile_component`, and the key includes the engine's compatibility hash.
                    match unsafe { Component::deserialize(engine, payload) } {
                        Ok(c) => return Ok((c, CacheOutcome::Hit)),
                        Err(e) => {
                            tracing::warn!(path = %path.display(), "discarding unusable policy cache entry: {e}");
                            outcome = CacheOutcome::Rebuilt;
                        }
                    }
                }
                None => {
                    tracing::warn!(path = %path.display(), "discarding corrupted policy cache entry");
                    outcome = CacheOutcome::Rebuilt;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "cannot read policy cache entry: {e}"),
        }
        if outcome == CacheOutcome::Rebuilt {
            let _ = fs::remove_file(&path);
        }
        if bytes.len() >= NOTICE_BYTES {
            // Seconds of work for a large component (a Python policy): say so once, on the notice target the CLI
            // shows by default.
            tracing::info!(
                target: "shellward::notice",
                "compiling a {:.1} MB policy for this machine (once: the result is cached in {})",
                bytes.len() as f64 / 1e6,
                self.dir.display()
            );
        }
        let compiled = engine.precompile_component(bytes)?;
        if let Err(e) = self.store(&path, &compiled) {
            tracing::warn!(dir = %self.dir.display(), "cannot write the policy cache (policies still load, compiled each time): {e}");
        }
        // SAFETY: `compiled` was produced by `precompile_component` on this very engine just above.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, outcome))
    }

    fn store(&self, path: &Path, payload: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&Sha256::digest(payload))?;
        tmp.write_all(payload)?;
        tmp.as_file().sync_data()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The payload of an entry whose header and checksum are intact.
fn verified_payload(entry: &[u8]) -> Option<&[u8]> {
    if entry.len() < HEADER_LEN || &entry[..MAGIC.len()] != MAGIC {
        return None;
    }
    let (header, payload) = entry.split_at(HEADER_LEN);
    (Sha256::digest(payload).as_slice() == &header[MAGIC.len()..]).then_some(payload)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
