//! The on-disk precompile cache.
//!
//! Compiling a component with Cranelift takes tens to hundreds of milliseconds; loading a precompiled one takes well
//! under one. Entries are keyed by the SHA-256 of the component's bytes and the engine's compatibility hash (wasmtime
//! version, target and compilation settings), so a changed policy or a different engine never picks up a stale entry.
//! The built-in components' digests are computed by the build script, so a start hashes nothing for them.
//!
//! An entry is wasmtime's artifact as `Engine::precompile_component` wrote it, followed by a 20-byte trailer: the
//! CRC-32 of the artifact, its length and a magic tag. Loading checks the trailer (over a read-only mapping of the
//! file on Unix, streamed through a small buffer elsewhere), then maps the file with `Component::deserialize_file`:
//! the code is used from the page cache in place, not read into memory and copied again, which was most of the cost
//! of starting `shellward run` or `policy check`.
//! `Component::deserialize_file` is `unsafe`: it trusts its input to be wasmtime's own output. A truncated,
//! corrupted or foreign file fails the trailer check and is discarded and rebuilt, never loaded. The checksum guards
//! against accidents (a torn or damaged file), not against someone who can write the cache directory — they could
//! write a matching checksum, cryptographic or not — so a CRC, checked at memory speed, does the job a SHA-256 did.
//! Writes go to a temporary file renamed into place, so readers never see a half-written entry and a file in use is
//! never changed under a running policy (a mapped entry must not be modified in place; replacing or deleting it is
//! safe).
//!
//! The directory is bounded: after each write, entries beyond [`DEFAULT_SIZE_LIMIT`] bytes in all are removed, least
//! recently used first (a hit refreshes an entry's modification time when it is an hour old or more, so a start
//! usually writes nothing). Without this every rebuilt policy left its entry behind for good — 1.6 GB on a development
//! machine after a day, each Python policy build 35 MB.

use sha2::{Digest, Sha256};
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"SWPCACH2";
/// CRC-32 (4 bytes), artifact length (8), magic (8); little endian.
const TRAILER_LEN: usize = 4 + 8 + MAGIC.len();

/// A hit refreshes an entry's modification time (its place in the eviction order) when it is at least this old.
const REFRESH_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

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

/// Most bytes of entries a cache directory keeps by default (see [`Cache::with_size_limit`]).
pub const DEFAULT_SIZE_LIMIT: u64 = 1 << 30;

/// A precompile cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    size_limit: u64,
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
        Cache {
            dir: dir.into(),
            size_limit: DEFAULT_SIZE_LIMIT,
        }
    }

    /// The same cache keeping at most `bytes` of entries: after a write, the least recently used entries beyond it
    /// are removed (the entry just written always stays, even when it alone is larger).
    pub fn with_size_limit(mut self, bytes: u64) -> Cache {
        self.size_limit = bytes;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry path for `bytes` under `engine`.
    pub fn entry_path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        let content = match crate::embedded::builtin_sha256(bytes) {
            Some(digest) => digest.to_string(),
            None => hex(&Sha256::digest(bytes)),
        };
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        self.dir
            .join(format!("{}-{:016x}.v2.cwasm", &content[..32], h.finish()))
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
        match fs::File::open(&path) {
            Ok(mut file) => match verified(&mut file) {
                Ok(Some(meta)) => {
                    // SAFETY: the artifact's checksum matches the one recorded when this host wrote it from
                    // `Engine::precompile_component`, the key includes the engine's compatibility hash, and entries
                    // are only ever replaced by renaming a new file over them, never modified in place.
                    match unsafe { Component::deserialize_file(engine, &path) } {
                        Ok(c) => {
                            // Recently used: the last to be evicted. Best effort (a read-only cache still loads).
                            // Eviction needs the order of use only roughly, so an entry used within the last hour
                            // keeps its time: a start writes nothing to the disk.
                            let age = meta.modified().ok().and_then(|t| t.elapsed().ok());
                            if age.is_none_or(|age| age >= REFRESH_AFTER) {
                                let _ = file.set_modified(std::time::SystemTime::now());
                            }
                            return Ok((c, CacheOutcome::Hit));
                        }
                        Err(e) => {
                            tracing::warn!(path = %path.display(), "discarding unusable policy cache entry: {e:#}");
                            outcome = CacheOutcome::Rebuilt;
                        }
                    }
                }
                Ok(None) => {
                    tracing::warn!(path = %path.display(), "discarding corrupted policy cache entry");
                    outcome = CacheOutcome::Rebuilt;
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot read policy cache entry: {e}")
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
        tmp.write_all(payload)?;
        tmp.write_all(&crc32fast::hash(payload).to_le_bytes())?;
        tmp.write_all(&(payload.len() as u64).to_le_bytes())?;
        tmp.write_all(MAGIC)?;
        tmp.as_file().sync_data()?;
        tmp.persist(path).map_err(|e| e.error)?;
        if let Err(e) = self.evict(path) {
            tracing::warn!(dir = %self.dir.display(), "cannot trim the policy cache: {e}");
        }
        Ok(())
    }

    /// Removes the least recently used entries (oldest modification time first) until the entries left, `keep`
    /// included, take at most the size limit. Only this cache's entries (`*.cwasm`) are counted or removed; one that
    /// vanished meanwhile (another process trimming too) is skipped.
    fn evict(&self, keep: &Path) -> std::io::Result<()> {
        let mut entries = Vec::new();
        let mut total = 0u64;
        for entry in fs::read_dir(&self.dir)?.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "cwasm") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            total += meta.len();
            if path != keep {
                let used = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                entries.push((used, meta.len(), path));
            }
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.size_limit {
                break;
            }
            match fs::remove_file(&path) {
                Ok(()) => total -= len,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => total -= len,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// `file`'s metadata if it is an intact entry: a trailer with the magic tag, the artifact's length and its CRC-32
/// (see [`checksum`]; the entry is never read into an allocation of its size); `None` if it is not.
fn verified(file: &mut fs::File) -> std::io::Result<Option<fs::Metadata>> {
    let meta = file.metadata()?;
    let len = meta.len();
    if len < TRAILER_LEN as u64 {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER_LEN];
    file.seek(std::io::SeekFrom::Start(len - TRAILER_LEN as u64))?;
    file.read_exact(&mut trailer)?;
    let (crc, rest) = trailer.split_at(4);
    let (artifact_len, magic) = rest.split_at(8);
    let artifact_len = u64::from_le_bytes(artifact_len.try_into().expect("8 bytes"));
    if magic != MAGIC || artifact_len != len - TRAILER_LEN as u64 {
        return Ok(None);
    }
    let intact =
        checksum(file, artifact_len)? == Some(u32::from_le_bytes(crc.try_into().expect("4 bytes")));
    Ok(intact.then_some(meta))
}

/// The CRC-32 of the first `len` bytes of `file`, computed over a read-only mapping: the pages come from the page
/// cache, which the component's own mapping shares next, instead of being copied into a buffer (copying was a third
/// of a cached load's cost). `None` when the file is shorter than `len`.
#[cfg(unix)]
fn checksum(file: &fs::File, len: u64) -> std::io::Result<Option<u32>> {
    use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};
    if len == 0 {
        return Ok(Some(crc32fast::hash(&[])));
    }
    let Ok(size) = usize::try_from(len) else {
        return Ok(None);
    };
    // SAFETY: a fresh private read-only mapping of an open file, at an address the kernel picks: it aliases no Rust
    // object. The file is only ever replaced by a rename, never truncated in place (see the module docs), so every
    // page of the first `len` bytes stays backed while the slice below is read.
    let ptr = unsafe {
        mmap(
            std::ptr::null_mut(),
            size,
            ProtFlags::READ,
            MapFlags::PRIVATE,
            file,
            0,
        )
    }
    .map_err(std::io::Error::from)?;
    // SAFETY: `ptr` is a readable mapping of `size` bytes, alive until the `munmap` below.
    let crc = crc32fast::hash(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), size) });
    // SAFETY: unmaps exactly the mapping made above; nothing refers to it any more.
    unsafe { munmap(ptr, size) }.map_err(std::io::Error::from)?;
    Ok(Some(crc))
}

/// The CRC-32 of the first `len` bytes of `file`, streamed through a small buffer. `None` when the file is shorter.
#[cfg(not(unix))]
fn checksum(file: &mut fs::File, len: u64) -> std::io::Result<Option<u32>> {
    file.rewind()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(Some(hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
