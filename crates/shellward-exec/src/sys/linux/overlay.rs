//! A preview's copy-on-write view (`Executor::preview`): an overlay file system over each writable directory, mounted
//! in the preview's own sandbox (a mount namespace nothing else shares), and the change set read from its upper
//! layers once the sandbox has ended.
//!
//! - [`PreviewLayers::prepare`] (executor side, before the spawn): the writable paths reduced to the outermost existing
//!   directories (plus `/dev/shm` as root, which every command may write), an upper and a work directory for each in
//!   a scratch directory outside every writable path ([`scratch_for`]; the command covers it once its overlays are
//!   mounted, so it never sees them), and each overlay's options as a C string.
//! - [`PreviewLayers::mount`] (in the child that becomes the sandbox's pid 1, first of its mounts): one `mount(2)` per
//!   layer, allocating nothing. Mounted before the sandbox's other mounts, so the host's read-only and hidden paths
//!   beneath a workspace are made read-only and hidden on top of the overlay, as without a preview. `redirect_dir`
//!   and `metacopy` are off: a renamed directory is copied, and a changed mode copies the whole file, so each upper
//!   file holds its full content.
//! - [`PreviewLayers::changes`] (executor side, after the sandbox ended, so nothing writes any more): every upper
//!   layer walked against its lower directory (the real one) without following a link: a whiteout (a `0:0`
//!   character device) is a deletion, an opaque directory (`trusted.overlay.opaque` or `user.overlay.opaque`) hides
//!   every lower entry it does not hold again, a file is created or compared with the lower one. Then deleted and
//!   created files of the same content are paired as renames, and small text files get a unified diff.
//! - [`PreviewLayers::remove`]: the scratch directory removed.

use crate::changes::{Change, ChangeKind, ChangeSet, EntryType, PreviewLimits};
use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::fs::Metadata;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Entries collected at most while walking (the rest are counted, never held).
const HARD_CAP: usize = 100_000;

/// One overlay: a writable directory and its layer's directories.
#[derive(Debug)]
struct Layer {
    /// The writable directory (canonical), the lower layer and the mount point.
    target: PathBuf,
    upper: PathBuf,
    c_target: CString,
    c_options: CString,
}

/// The layers of one preview (see the module docs).
#[derive(Debug)]
pub(crate) struct PreviewLayers {
    scratch: PathBuf,
    c_scratch: CString,
    layers: Vec<Layer>,
    read_only: Vec<(PathBuf, String)>,
}

/// Where a preview's layers go: a new private directory named `name` in the first of `$XDG_RUNTIME_DIR`, `/run`
/// (as root), `/dev/shm` (without privilege), `$XDG_STATE_HOME` (default `~/.local/state`) + `/shellward` that can be
/// used (its parent made where missing; an existing one only when it is this user's private directory) and neither
/// holds nor is held by a writable path: the kernel refuses an upper layer inside the lower one it covers, and the
/// usual writable paths (`/tmp`, `~/.cache`) hold the log directory.
pub(crate) fn scratch_for(writable: &[PathBuf], name: &str) -> io::Result<PathBuf> {
    let writable: Vec<PathBuf> = writable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let state = var("XDG_STATE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".local/state")))
        .map(|d| d.join("shellward"));
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let candidates = [
        var("XDG_RUNTIME_DIR").map(|d| d.join("shellward-preview")),
        root.then(|| PathBuf::from("/run/shellward-preview")),
        // Without privilege a preview lays no copy over `/dev/shm`, so its own directory there is outside them.
        (!root).then(|| PathBuf::from(format!("/dev/shm/shellward-preview-{uid}"))),
        state.map(|d| d.join("preview")),
    ];
    let mut refused = Vec::new();
    for dir in candidates.into_iter().flatten() {
        let Some(parent) = dir.parent() else { continue };
        let parent =
            match std::fs::create_dir_all(parent).and_then(|()| std::fs::canonicalize(parent)) {
                Ok(p) => p,
                Err(e) => {
                    refused.push(format!("{} ({e})", dir.display()));
                    continue;
                }
            };
        let dir = parent.join(dir.file_name().unwrap_or_default());
        if let Some(w) = writable
            .iter()
            .find(|w| dir.starts_with(w) || w.starts_with(&dir))
        {
            refused.push(format!(
                "{} (within the writable {})",
                dir.display(),
                w.display()
            ));
            continue;
        }
        match crate::sys::files::create_private_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                refused.push(format!("{} ({e})", dir.display()));
                continue;
            }
        }
        // One made earlier is used only when it is this user's private directory (not a link someone else put in a
        // shared place such as /dev/shm).
        match dir.symlink_metadata() {
            Ok(m) if m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0 => {}
            _ => {
                refused.push(format!(
                    "{} (not this user's private directory)",
                    dir.display()
                ));
                continue;
            }
        }
        return Ok(dir.join(name));
    }
    Err(io::Error::other(format!(
        "no place for the preview's copy-on-write layer outside the writable paths (tried: {}); set \
         XDG_RUNTIME_DIR or XDG_STATE_HOME to a directory outside them",
        refused.join(", ")
    )))
}

/// A character the kernel's overlay options cannot carry in a path (separators and the escape).
fn unsafe_for_options(p: &Path) -> bool {
    p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\' | b'\n'))
}

impl PreviewLayers {
    /// Layers over `writable` (see the module docs), their directories made under `scratch` (a new private
    /// directory).
    /// `privileged`: the executor is root (the sandbox has no user namespace of its own).
    pub(crate) fn prepare(
        writable: &[PathBuf],
        scratch: PathBuf,
        privileged: bool,
    ) -> io::Result<PreviewLayers> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut read_only = Vec::new();
        // `/dev/shm` (which every command may write) gets a layer as root; a user namespace cannot lay one over
        // root's `tmpfs`, so there it is read-only in a preview.
        let shm = PathBuf::from("/dev/shm");
        if !privileged && shm.is_dir() {
            read_only.push((
                shm.clone(),
                "root's shared memory directory: without privilege a preview cannot lay a copy over it, so it is \
                 read-only there"
                    .to_string(),
            ));
        }
        let candidates = writable
            .iter()
            .cloned()
            .chain(std::iter::once(shm).filter(|_| privileged));
        for path in candidates {
            let Ok(canonical) = std::fs::canonicalize(&path) else {
                // A path that does not exist cannot be written in the preview either (Landlock names existing ones).
                continue;
            };
            if !canonical.is_dir() {
                read_only.push((
                    path.clone(),
                    "a file, not a directory: a preview cannot lay a copy over it, so it is read-only there"
                        .to_string(),
                ));
                continue;
            }
            if unsafe_for_options(&canonical) {
                read_only.push((
                    path.clone(),
                    "its name holds ',', ':' or '\\', which the kernel's overlay options cannot carry: read-only in \
                     the preview"
                        .to_string(),
                ));
                continue;
            }
            dirs.push(canonical);
        }
        dirs.sort();
        dirs.dedup();
        // An inner directory is covered by its ancestor's layer.
        let outer: Vec<PathBuf> = dirs
            .iter()
            .filter(|d| !dirs.iter().any(|o| o != *d && d.starts_with(o)))
            .cloned()
            .collect();
        if unsafe_for_options(&scratch) {
            return Err(io::Error::other(format!(
                "cannot preview: the layer's directory {} holds ',', ':' or '\\' in its name, which the kernel's \
                 overlay options cannot carry; set XDG_RUNTIME_DIR or XDG_STATE_HOME to a plain path",
                scratch.display()
            )));
        }
        crate::sys::files::create_private_dir(&scratch)?;
        let mut layers = Vec::new();
        for (i, target) in outer.into_iter().enumerate() {
            let upper = scratch.join(format!("u{i}"));
            let work = scratch.join(format!("w{i}"));
            std::fs::create_dir(&upper)?;
            std::fs::create_dir(&work)?;
            // As root, renamed directories are copied and a mode change copies the whole file (each upper file holds
            // its content); without privilege the kernel has both off and refuses to be told so, and the overlay's
            // own marks (an opaque directory) are `user.` attributes, the only ones a user namespace may write.
            let options = format!(
                "lowerdir={},upperdir={},workdir={}{}",
                target.display(),
                upper.display(),
                work.display(),
                if privileged {
                    ",redirect_dir=off,metacopy=off"
                } else {
                    ",userxattr"
                }
            );
            let c = |s: &[u8]| {
                CString::new(s)
                    .map_err(|_| io::Error::other("a path with a NUL byte cannot be previewed"))
            };
            layers.push(Layer {
                c_target: c(target.as_os_str().as_bytes())?,
                c_options: c(options.as_bytes())?,
                target,
                upper,
            });
        }
        let c_scratch = CString::new(scratch.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a path with a NUL byte cannot be previewed"))?;
        Ok(PreviewLayers {
            c_scratch,
            scratch,
            layers,
            read_only,
        })
    }

    /// The scratch directory, which the preview's command covers once its overlays are mounted.
    pub(crate) fn c_scratch(&self) -> &std::ffi::CStr {
        &self.c_scratch
    }

    /// The directories the layers cover, in order.
    pub(crate) fn covered(&self) -> Vec<PathBuf> {
        self.layers.iter().map(|l| l.target.clone()).collect()
    }

    /// In the sandbox's pid 1 before its other mounts: each overlay mounted on its directory. On failure, the index
    /// of the layer and the `errno`.
    ///
    /// # Safety
    /// Async-signal-safe: only `mount(2)` on strings prepared before the fork.
    pub(crate) unsafe fn mount(&self) -> Result<(), (usize, i32)> {
        for (i, layer) in self.layers.iter().enumerate() {
            // SAFETY: NUL-terminated strings that outlive the call.
            let r = unsafe {
                libc::mount(
                    c"overlay".as_ptr(),
                    layer.c_target.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    layer.c_options.as_ptr().cast(),
                )
            };
            if r != 0 {
                // SAFETY: reading this thread's errno.
                return Err((i, unsafe { *libc::__errno_location() }));
            }
        }
        Ok(())
    }

    /// In the child, once the overlays are mounted: a rule per overlay added to the write ruleset `ruleset` (not yet
    /// applied), allowing `mask` beneath the overlay's own directory (not the real one beneath it). The `errno` on
    /// failure.
    ///
    /// # Safety
    /// Async-signal-safe: `open`, `landlock_add_rule` and `close` on memory prepared before the fork.
    pub(crate) unsafe fn allow_writes(&self, ruleset: i32, mask: u64) -> Result<(), i32> {
        /// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
        #[repr(C, packed)]
        struct PathBeneath {
            allowed_access: u64,
            parent_fd: i32,
        }
        if ruleset < 0 {
            return Err(libc::EBADF);
        }
        for layer in &self.layers {
            // SAFETY: a NUL-terminated path; the descriptor is closed below.
            let fd = unsafe {
                libc::open(
                    layer.c_target.as_ptr(),
                    libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                )
            };
            if fd < 0 {
                // SAFETY: this thread's errno.
                return Err(unsafe { *libc::__errno_location() });
            }
            let attr = PathBeneath {
                allowed_access: mask,
                parent_fd: fd,
            };
            // SAFETY: LANDLOCK_RULE_PATH_BENEATH (1) with a pointer to the attribute on this stack.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    1u32,
                    &attr as *const PathBeneath,
                    0u32,
                )
            };
            // SAFETY: as above.
            let errno = unsafe { *libc::__errno_location() };
            // SAFETY: the descriptor opened above.
            unsafe { libc::close(fd) };
            if r != 0 {
                return Err(errno);
            }
        }
        Ok(())
    }

    /// Bytes the upper layers hold (blocks in use), counting at most `HARD_CAP` entries.
    pub(crate) fn bytes_written(&self) -> u64 {
        let mut total = 0u64;
        let mut seen = 0usize;
        let mut stack: Vec<PathBuf> = self.layers.iter().map(|l| l.upper.clone()).collect();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > HARD_CAP {
                    return total;
                }
                let Ok(m) = e.path().symlink_metadata() else {
                    continue;
                };
                total += m.blocks() * 512;
                if m.is_dir() {
                    stack.push(e.path());
                }
            }
        }
        total
    }

    /// The change set of the upper layers against the real directories (see the module docs).
    pub(crate) fn changes(&self, limits: &PreviewLimits) -> ChangeSet {
        let mut walk = Walk::default();
        for layer in &self.layers {
            walk.layer(&layer.upper, &layer.target);
        }
        walk.finish(limits, self)
    }

    /// Removes the scratch directory (the overlays' work directories are made unreadable by the kernel: opened up
    /// first).
    pub(crate) fn remove(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.scratch) {
            for e in entries.flatten() {
                let work = e.path().join("work");
                let _ = std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700));
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.scratch)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(
                path = %self.scratch.display(),
                "cannot remove a preview's scratch directory: {e}"
            );
        }
    }
}

/// What a change set is built from while the layers are walked.
#[derive(Default)]
struct Walk {
    found: Vec<Found>,
    /// Changes beyond [`HARD_CAP`], by kind, not held.
    uncounted: crate::changes::ChangeTotals,
}

/// One change found: its path, kind and type, and where its old and new versions are read.
struct Found {
    path: PathBuf,
    kind: ChangeKind,
    entry: EntryType,
    /// The real (lower) path and its metadata, where it existed.
    before: Option<(PathBuf, Metadata)>,
    /// The upper path and its metadata, where it exists now.
    after: Option<(PathBuf, Metadata)>,
}

fn entry_type(m: &Metadata) -> EntryType {
    let t = m.file_type();
    if t.is_dir() {
        EntryType::Directory
    } else if t.is_file() {
        EntryType::File
    } else if t.is_symlink() {
        EntryType::Symlink
    } else {
        EntryType::Other
    }
}

/// An overlay whiteout: a character device numbered 0:0.
fn is_whiteout(m: &Metadata) -> bool {
    m.file_type().is_char_device() && m.rdev() == 0
}

/// Whether an upper directory is opaque (it hides the lower one's entries).
fn is_opaque(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    [c"trusted.overlay.opaque", c"user.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut value = [0u8; 4];
            // SAFETY: lgetxattr into a stack buffer of the given size; it does not follow a symlink.
            let n = unsafe {
                libc::lgetxattr(
                    c.as_ptr(),
                    name.as_ptr(),
                    value.as_mut_ptr().cast(),
                    value.len(),
                )
            };
            n >= 1 && value[0] == b'y'
        })
}

fn mode(m: &Metadata) -> u32 {
    m.permissions().mode() & 0o7777
}

impl Walk {
    fn add(&mut self, found: Found) {
        if self.found.len() < HARD_CAP {
            self.found.push(found);
        } else {
            self.uncounted.count(found.kind);
        }
    }

    /// A deleted path and, for a directory, everything beneath it (walked in the real directory).
    fn deleted(&mut self, path: PathBuf, meta: Metadata) {
        let mut stack = vec![(path, meta)];
        while let Some((p, m)) = stack.pop() {
            if m.is_dir()
                && let Ok(entries) = std::fs::read_dir(&p)
            {
                for e in entries.flatten() {
                    if let Ok(em) = e.path().symlink_metadata() {
                        stack.push((e.path(), em));
                    }
                }
            }
            self.add(Found {
                path: p.clone(),
                kind: ChangeKind::Deleted,
                entry: entry_type(&m),
                before: Some((p, m)),
                after: None,
            });
        }
    }

    /// A created path (the upper one) and, for a directory, everything beneath it.
    fn created(&mut self, path: PathBuf, upper: PathBuf, meta: Metadata) {
        let mut stack = vec![(path, upper, meta)];
        while let Some((p, u, m)) = stack.pop() {
            if m.is_dir()
                && let Ok(entries) = std::fs::read_dir(&u)
            {
                for e in entries.flatten() {
                    if let Ok(em) = e.path().symlink_metadata() {
                        // A whiteout under a new directory hides nothing.
                        if !is_whiteout(&em) {
                            stack.push((p.join(e.file_name()), e.path(), em));
                        }
                    }
                }
            }
            self.add(Found {
                path: p,
                kind: ChangeKind::Created,
                entry: entry_type(&m),
                before: None,
                after: Some((u, m)),
            });
        }
    }

    /// One layer: `upper` against the real `lower`.
    fn layer(&mut self, upper: &Path, lower: &Path) {
        // (path relative to the layer, whether the lower one is a real directory, whether the upper one is opaque)
        let mut stack: Vec<(PathBuf, bool, bool)> = vec![(PathBuf::new(), true, false)];
        while let Some((rel, lower_dir, opaque)) = stack.pop() {
            let udir = upper.join(&rel);
            let ldir = lower.join(&rel);
            let Ok(entries) = std::fs::read_dir(&udir) else {
                continue;
            };
            let mut names = BTreeSet::new();
            for e in entries.flatten() {
                let name = e.file_name();
                names.insert(name.clone());
                let u = e.path();
                let Ok(um) = u.symlink_metadata() else {
                    continue;
                };
                let l = ldir.join(&name);
                let lm = if lower_dir {
                    l.symlink_metadata().ok()
                } else {
                    None
                };
                if is_whiteout(&um) {
                    if let Some(lm) = lm {
                        self.deleted(l, lm);
                    }
                    continue;
                }
                match (um.is_dir(), lm) {
                    (true, Some(lm)) if lm.is_dir() => {
                        if mode(&um) != mode(&lm) {
                            self.add(Found {
                                path: l.clone(),
                                kind: ChangeKind::ModeChanged,
                                entry: EntryType::Directory,
                                before: Some((l.clone(), lm)),
                                after: Some((u.clone(), um)),
                            });
                        }
                        stack.push((rel.join(&name), true, is_opaque(&u)));
                    }
                    (true, Some(lm)) => {
                        self.deleted(l.clone(), lm);
                        self.created(l, u, um);
                    }
                    (true, None) => self.created(l, u, um),
                    (false, Some(lm)) if lm.is_dir() => {
                        self.deleted(l.clone(), lm);
                        self.created(l, u, um);
                    }
                    (false, Some(lm)) => {
                        let kind = if same_content(&l, &lm, &u, &um) {
                            (mode(&um) != mode(&lm)).then_some(ChangeKind::ModeChanged)
                        } else {
                            Some(ChangeKind::Modified)
                        };
                        if let Some(kind) = kind {
                            self.add(Found {
                                path: l.clone(),
                                kind,
                                entry: entry_type(&um),
                                before: Some((l, lm)),
                                after: Some((u, um)),
                            });
                        }
                    }
                    (false, None) => self.created(l, u, um),
                }
            }
            // An opaque directory hides whatever of the real one it does not hold again.
            if opaque
                && lower_dir
                && let Ok(entries) = std::fs::read_dir(&ldir)
            {
                for e in entries.flatten() {
                    if !names.contains(&e.file_name())
                        && let Ok(m) = e.path().symlink_metadata()
                    {
                        self.deleted(e.path(), m);
                    }
                }
            }
        }
    }

    /// The change set: renames paired, sorted by path, diffs and hashes within the limits.
    fn finish(mut self, limits: &PreviewLimits, layers: &PreviewLayers) -> ChangeSet {
        let renames = pair_renames(&self.found);
        let mut changes: Vec<(Found, Option<PathBuf>)> = Vec::new();
        let mut found: Vec<Option<Found>> = self.found.drain(..).map(Some).collect();
        for &(deleted, created) in &renames {
            let from = found[deleted].take().map(|f| f.path);
            if let Some(mut f) = found[created].take() {
                f.kind = ChangeKind::Renamed;
                f.before = from
                    .as_ref()
                    .and_then(|p| p.symlink_metadata().ok().map(|m| (p.clone(), m)));
                changes.push((f, from));
            }
        }
        changes.extend(found.into_iter().flatten().map(|f| (f, None)));
        changes.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        let mut set = ChangeSet {
            totals: self.uncounted,
            omitted: self.uncounted.all(),
            bytes_written: layers.bytes_written(),
            covered: layers.covered(),
            read_only: layers.read_only.clone(),
            ..ChangeSet::default()
        };
        let mut diff_budget = limits.diff_bytes;
        for (f, from) in changes {
            set.totals.count(f.kind);
            if set.changes.len() >= limits.max_changes {
                set.omitted += 1;
                continue;
            }
            set.changes
                .push(describe(f, from, limits, &mut diff_budget));
        }
        set
    }
}

/// Pairs of (deleted, created) files of the same size and content: renames.
fn pair_renames(found: &[Found]) -> Vec<(usize, usize)> {
    let files = |kind: ChangeKind| {
        found
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.kind == kind && f.entry == EntryType::File)
    };
    let mut by_size: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, f) in files(ChangeKind::Deleted) {
        if let Some((_, m)) = &f.before {
            by_size.entry(m.len()).or_default().push(i);
        }
    }
    let mut pairs = Vec::new();
    let mut hashes: HashMap<usize, Option<[u8; 32]>> = HashMap::new();
    // Bounded: hashing costs a read of both files.
    for (i, f) in files(ChangeKind::Created).take(10_000) {
        let Some((upath, um)) = &f.after else {
            continue;
        };
        let Some(candidates) = by_size.get_mut(&um.len()) else {
            continue;
        };
        let Some(new) = sha256_of(upath) else {
            continue;
        };
        let at = candidates.iter().position(|&d| {
            *hashes
                .entry(d)
                .or_insert_with(|| found[d].before.as_ref().and_then(|(p, _)| sha256_of(p)))
                == Some(new)
        });
        if let Some(at) = at {
            pairs.push((candidates.remove(at), i));
        }
    }
    pairs
}

/// A found change, described within the limits.
fn describe(
    f: Found,
    renamed_from: Option<PathBuf>,
    limits: &PreviewLimits,
    diff_budget: &mut usize,
) -> Change {
    let mut c = Change::new(f.path.clone(), f.kind, f.entry);
    c.renamed_from = renamed_from;
    let sized = |m: &Metadata| (!m.is_dir()).then_some(m.len());
    if let Some((p, m)) = &f.before {
        c.size_before = sized(m);
        c.mode_before = Some(mode(m));
        if m.file_type().is_symlink() && f.after.is_none() {
            c.link_target = std::fs::read_link(p).ok();
        }
    }
    if let Some((p, m)) = &f.after {
        c.size_after = sized(m);
        c.mode_after = Some(mode(m));
        if m.file_type().is_symlink() {
            c.link_target = std::fs::read_link(p).ok();
        }
    }
    let file_after = f.after.as_ref().filter(|(_, m)| m.is_file());
    if let Some((upath, um)) = file_after
        && matches!(f.kind, ChangeKind::Created | ChangeKind::Modified)
    {
        let old = match &f.before {
            Some((p, m)) if m.is_file() && m.len() <= limits.diff_file_bytes => {
                read_text(p, limits)
            }
            Some(_) => None,
            None => Some(String::new()),
        };
        let new = (um.len() <= limits.diff_file_bytes)
            .then(|| read_text(upath, limits))
            .flatten();
        if let (Some(old), Some(new)) = (old, new) {
            let name = f.path.display().to_string();
            let diff = similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(3)
                .header(
                    if f.before.is_some() {
                        &name
                    } else {
                        "/dev/null"
                    },
                    &name,
                )
                .to_string();
            if diff.len() <= *diff_budget {
                *diff_budget -= diff.len();
                c.diff = Some(diff);
            }
        }
        if c.diff.is_none() {
            c.sha256_after = sha256_of(upath).map(hex);
        }
    }
    c
}

/// Opens a regular file without following a link or blocking on a FIFO put in its place.
fn open_plain(path: &Path) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
}

/// A small file's content when it is text (UTF-8, no NUL).
fn read_text(path: &Path, limits: &PreviewLimits) -> Option<String> {
    let mut bytes = Vec::new();
    open_plain(path)?
        .take(limits.diff_file_bytes + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > limits.diff_file_bytes || bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

fn sha256_of(path: &Path) -> Option<[u8; 32]> {
    use sha2::Digest;
    let mut file = open_plain(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(hasher.finalize().into())
}

fn hex(bytes: [u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether two versions of a file (a regular file or a symlink each) hold the same content.
fn same_content(lower: &Path, lm: &Metadata, upper: &Path, um: &Metadata) -> bool {
    if lm.file_type().is_symlink() || um.file_type().is_symlink() {
        return lm.file_type().is_symlink()
            && um.file_type().is_symlink()
            && std::fs::read_link(lower).ok() == std::fs::read_link(upper).ok();
    }
    if !(lm.is_file() && um.is_file()) {
        return lm.file_type() == um.file_type() && lm.rdev() == um.rdev();
    }
    if lm.len() != um.len() {
        return false;
    }
    let (Some(mut a), Some(mut b)) = (open_plain(lower), open_plain(upper)) else {
        return false;
    };
    let mut x = vec![0u8; 64 << 10];
    let mut y = vec![0u8; 64 << 10];
    loop {
        let n = match a.read(&mut x) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return b.read(&mut y[..1]).is_ok_and(|m| m == 0);
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
    }
}
