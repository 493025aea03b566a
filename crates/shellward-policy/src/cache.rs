//! The on-disk precompile cache.
//!
//! Compiling a component with Cranelift takes tens to hundreds of milliseconds; loading a precompiled one takes well
//! under one. Entries are keyed by the SHA-256 of the component's bytes and the engine's compatibility hash (wasmtime
//! version, target and compilation settings), so a changed policy or a different engine never picks up a stale entry.
//! The built-in components' digests are computed by the build script, so a start hashes nothing for them.
//!
//! **An entry is native code, so it is authenticated, not only checksummed.** It is wasmtime's artifact as
//! `Engine::precompile_component` wrote it, followed by a 48-byte trailer: a keyed BLAKE3 MAC over the component's
//! digest and the artifact, the artifact's length and a magic tag. The key is 32 random bytes in the cache
//! directory's `key` file (mode 0600, made on first use; one that is not a private regular file of this user, or not
//! 32 bytes, is refused and the cache is not used). Loading checks the MAC (over a read-only mapping of the file on
//! Unix, streamed through a small buffer elsewhere), then maps the file with `Component::deserialize_file`: the code
//! is used from the page cache in place, not read into memory and copied again (on Windows, where a mapped file's
//! pages cannot always be made read-only — Wine refuses it —, the entry is read into memory instead). An entry that fails the check —
//! truncated, edited, written by someone without the key, or another component's valid entry copied over this file
//! name — is discarded and compiled again, never loaded.
//!
//! Who can forge an entry: only someone who can read the key. Inside the session sandbox commands cannot — the
//! facade hides the key file and makes the cache directory read-only (see `shellward`'s `Config::host_files`) —
//! so a command can neither write an entry nor make one the host would accept. Without the sandbox (`shellward
//! sandbox check` says so) commands run as the host's own user and can read the key as they can rewrite the
//! configuration itself: the cache is then no weaker than the files it is built from.
//!
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

const MAGIC: &[u8; 8] = b"SWPCACH3";
/// MAC (32 bytes), artifact length (8), magic (8); little endian.
const TRAILER_LEN: usize = MAC_LEN + 8 + MAGIC.len();
/// Bytes of a MAC, and of the key.
const MAC_LEN: usize = 32;
/// The key's file name in the cache directory.
pub const KEY_FILE: &str = "key";

/// A hit refreshes an entry's modification time (its place in the eviction order) when it is at least this old.
const REFRESH_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Components at least this large (bytes) take long enough to compile that a first use says so.
const NOTICE_BYTES: usize = 1 << 20;
/// Where a component came from when it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
        self.entry_path_of(engine, &content_digest(bytes))
    }

    fn entry_path_of(&self, engine: &Engine, content: &str) -> PathBuf {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        self.dir
            .join(format!("{}-{:016x}.v3.cwasm", &content[..32], h.finish()))
    }

    /// The path of the key entries are authenticated with.
    pub fn key_path(&self) -> PathBuf {
        self.dir.join(KEY_FILE)
    }

    /// Loads `bytes` as a component, from the cache when an authentic entry exists, else compiling and storing it.
    /// Cache I/O problems are logged and never fail the load; a cache whose key cannot be trusted is not used at all
    /// (the component is compiled in memory: [`CacheOutcome::Disabled`]).
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let key = match self.key() {
            Ok(key) => key,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), "not using the policy cache: {e}");
                return Ok((Component::new(engine, bytes)?, CacheOutcome::Disabled));
            }
        };
        let content = content_digest(bytes);
        let path = self.entry_path_of(engine, &content);
        let mut outcome = CacheOutcome::Miss;
        match open_entry(&path) {
            Ok(mut file) => match verified(&mut file, &key, &content) {
                Ok(Some(meta)) => {
                    // SAFETY: the artifact's MAC, under a key only this host's user can read, matches the one recorded
                    // when this host wrote it from `Engine::precompile_component` for exactly these component bytes;
                    // the key includes the engine's compatibility hash, and entries are only ever replaced by
                    // renaming a new file over them, never modified in place.
                    match unsafe { load_entry(engine, &path) } {
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
                    tracing::warn!(path = %path.display(), "discarding a policy cache entry that fails its authentication (corrupted, or not written by this host for this component)");
                    outcome = CacheOutcome::Rebuilt;
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot read policy cache entry: {e}")
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), "discarding an unreadable policy cache entry: {e}");
                outcome = CacheOutcome::Rebuilt;
            }
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
        if let Err(e) = self.store(&path, &compiled, &key, &content) {
            tracing::warn!(dir = %self.dir.display(), "cannot write the policy cache (policies still load, compiled each time): {e}");
        }
        // SAFETY: `compiled` was produced by `precompile_component` on this very engine just above.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, outcome))
    }

    /// The cache's key: read from [`Cache::key_path`], or made (32 random bytes, mode 0600) when there is none. A key
    /// file that is not a regular file, is another user's, is readable by group or others, or is not 32 bytes long is
    /// refused: whoever could write or read it could make entries this host would run as its own code.
    fn key(&self) -> std::io::Result<[u8; MAC_LEN]> {
        let path = self.key_path();
        match read_key(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        create_private_dir(&self.dir)?;
        let mut key = [0u8; MAC_LEN];
        getrandom::fill(&mut key).map_err(|e| {
            std::io::Error::other(format!("cannot draw a random policy cache key: {e}"))
        })?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(&key)?;
        tmp.as_file().sync_data()?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => Ok(key),
            // Another process made it first: use theirs.
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => read_key(&path),
            Err(e) => Err(e.error),
        }
    }

    fn store(
        &self,
        path: &Path,
        payload: &[u8],
        key: &[u8; MAC_LEN],
        content: &str,
    ) -> std::io::Result<()> {
        create_private_dir(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(payload)?;
        tmp.write_all(mac(key, content).update(payload).finalize().as_bytes())?;
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

/// The component digest an entry is named by and authenticated for: the build script's for a built-in component,
/// else the SHA-256 of the bytes.
fn content_digest(bytes: &[u8]) -> String {
    match crate::embedded::builtin_sha256(bytes) {
        Some(digest) => digest.to_string(),
        None => hex(&Sha256::digest(bytes)),
    }
}

/// A MAC under `key` bound to the component digest `content`, ready for the artifact's bytes.
fn mac(key: &[u8; MAC_LEN], content: &str) -> blake3::Hasher {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"shellward policy cache entry\0");
    h.update(content.as_bytes());
    h.update(b"\0");
    h
}

/// Creates the cache directory (and its parents) private to this user where it does not exist yet.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens an entry without following a final symbolic link and without blocking on a FIFO; anything but a regular
/// file is refused.
fn open_entry(path: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Reads a key file, refusing one that others could have written or read (see [`Cache::key`]).
fn read_key(path: &Path) -> std::io::Result<[u8; MAC_LEN]> {
    let mut file = open_entry(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => e,
        _ => std::io::Error::new(
            e.kind(),
            format!(
                "the policy cache key {} cannot be opened as a regular file ({e}); remove it and shellward makes a new one",
                path.display()
            ),
        ),
    })?;
    let meta = file.metadata()?;
    let refuse = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the policy cache key {} {why}; remove it (or the cache directory) and shellward makes a new one",
                path.display()
            ),
        )
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if meta.uid() != unsafe { libc::geteuid() } {
            return Err(refuse("belongs to another user"));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(refuse("is readable or writable by group or others"));
        }
    }
    if meta.len() != MAC_LEN as u64 {
        return Err(refuse("is not 32 bytes long"));
    }
    let mut key = [0u8; MAC_LEN];
    file.read_exact(&mut key)?;
    Ok(key)
}

/// `file`'s metadata if it is an authentic entry for component `content`: a trailer with the magic tag, the
/// artifact's length and a MAC under `key` that matches (see [`authenticate`]; the entry is never read into an
/// allocation of its size); `None` if it is not.
fn verified(
    file: &mut fs::File,
    key: &[u8; MAC_LEN],
    content: &str,
) -> std::io::Result<Option<fs::Metadata>> {
    let meta = file.metadata()?;
    let len = meta.len();
    if len < TRAILER_LEN as u64 {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER_LEN];
    file.seek(std::io::SeekFrom::Start(len - TRAILER_LEN as u64))?;
    file.read_exact(&mut trailer)?;
    let (recorded, rest) = trailer.split_at(MAC_LEN);
    let (artifact_len, magic) = rest.split_at(8);
    let artifact_len = u64::from_le_bytes(artifact_len.try_into().expect("8 bytes"));
    if magic != MAGIC || artifact_len != len - TRAILER_LEN as u64 {
        return Ok(None);
    }
    let recorded = blake3::Hash::from_bytes(recorded.try_into().expect("32 bytes"));
    // `blake3::Hash`'s equality is constant-time.
    let authentic = authenticate(file, artifact_len, mac(key, content))? == Some(recorded);
    Ok(authentic.then_some(meta))
}

/// The MAC of the first `len` bytes of `file`, computed over a read-only mapping: the pages come from the page
/// cache, which the component's own mapping shares next, instead of being copied into a buffer (copying was a third
/// of a cached load's cost). `None` when the file is shorter than `len`.
#[cfg(unix)]
fn authenticate(
    file: &fs::File,
    len: u64,
    mut mac: blake3::Hasher,
) -> std::io::Result<Option<blake3::Hash>> {
    use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};
    if len == 0 {
        return Ok(Some(mac.finalize()));
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
    mac.update(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), size) });
    // SAFETY: unmaps exactly the mapping made above; nothing refers to it any more.
    unsafe { munmap(ptr, size) }.map_err(std::io::Error::from)?;
    Ok(Some(mac.finalize()))
}

/// The MAC of the first `len` bytes of `file`, streamed through a small buffer. `None` when the file is shorter.
#[cfg(not(unix))]
fn authenticate(
    file: &mut fs::File,
    len: u64,
    mut mac: blake3::Hasher,
) -> std::io::Result<Option<blake3::Hash>> {
    file.rewind()?;
    let mut buf = vec![0u8; 64 << 10];
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Ok(None);
        }
        mac.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(Some(mac.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Loads a verified entry: mapped from the page cache.
///
/// # Safety
/// As [`Component::deserialize_file`]: the file must be an artifact `Engine::precompile_component` wrote for this
/// engine, and must not change while it is mapped.
#[cfg(not(windows))]
unsafe fn load_entry(engine: &Engine, path: &std::path::Path) -> wasmtime::Result<Component> {
    // SAFETY: the caller's.
    unsafe { Component::deserialize_file(engine, path) }
}

/// Loads a verified entry: read into memory (a mapping's pages cannot always be made read-only here).
///
/// # Safety
/// As [`Component::deserialize`]: the file must be an artifact `Engine::precompile_component` wrote for this engine.
#[cfg(windows)]
unsafe fn load_entry(engine: &Engine, path: &std::path::Path) -> wasmtime::Result<Component> {
    let bytes = std::fs::read(path)?;
    // SAFETY: the caller's.
    unsafe { Component::deserialize(engine, &bytes) }
}
