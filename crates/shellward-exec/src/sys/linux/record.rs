//! Undo recording on Linux (see [`crate::undo`] for what it is): one [`Recorder`] per session and workspace.
//!
//! - **Baseline.** At creation the workspace is walked once and every file's content copied into the session's
//!   store (`blobs/N`, owner-only, in the executor's log directory beside the sessions' logs, where no sandbox sees
//!   it), with every entry's type, mode, owner, size, times and inode (its *fingerprint*).
//! - **Dirty paths.** Every directory walked gets an inotify watch; the kernel queues an event for each path created,
//!   written, deleted, moved or changed in its attributes, whichever mount namespace did it. A recorded command's
//!   start and end *settle*: the queue is read (never blocking) and each path named is compared with the baseline.
//!   A directory created or moved in is walked (and watched) whole; one deleted or moved out takes its subtree with
//!   it; a queue that overflowed compares the whole workspace.
//! - **Changes.** A path whose fingerprint differs is read again: a file's new content is copied (it is the next
//!   command's pre-image) and, where the content and mode are what they were, the difference was only times and no
//!   change is recorded. What differs goes to every recorded command of the session running at that moment.
//! - **Undo.** The record's paths must be as the command left them (else refused, naming what changed them, unless
//!   forced); then what it created is removed (deepest first) and what it changed or deleted put back (shallowest
//!   first: directories, then files written beside their place and renamed over it, modes and owners). A step that
//!   fails puts back the steps before it, so nothing is half-done.
//!
//! The parts: `record/store.rs` (fingerprints, entries, the numbered copies and how two states compare),
//! `record/undo.rs` (an undo's checks and steps); this file the recorder itself (baseline, watches, settling).
//!
//! Every file operation is relative to a directory descriptor opened one name at a time with `O_NOFOLLOW` from the
//! workspace's own descriptor: a command that turns a directory into a symlink (to `/etc`, to a secret) makes the
//! paths beneath it absent, never followed, both when they are read into the store and when they are restored.

mod store;
mod undo;

use crate::ProcessId;
use crate::changes::{Change, ChangeSet, EntryType};
use crate::undo::{ChangesConfig, ChangesList, CommandChanges};
use inotify::{EventMask, Inotify, WatchMask};
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstatat};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;
use store::{Blobs, Delta, Entry, Meta, equivalent, kind_of};

/// What inotify reports for a watched directory: everything that can change an entry beneath it.
fn watch_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::EXCL_UNLINK
}

/// A recorded command still running: what it changed so far.
struct Running {
    id: String,
    command: String,
    changes: BTreeMap<PathBuf, Delta>,
    overlapped: BTreeSet<String>,
}

/// A finished command's changes.
struct Record {
    id: String,
    command: String,
    ended: SystemTime,
    changes: BTreeMap<PathBuf, Delta>,
    overlapped: Vec<String>,
    undone: bool,
}

struct State {
    base: BTreeMap<PathBuf, Entry>,
    /// Watch descriptor → the directory it watches (relative to the root).
    dirs: HashMap<i32, PathBuf>,
    inotify: Inotify,
    dirty: BTreeSet<PathBuf>,
    deep: BTreeSet<PathBuf>,
    everything: bool,
    running: Vec<Running>,
    records: VecDeque<Record>,
    dropped: usize,
    blobs: Blobs,
    /// Recording stopped (the workspace outgrew the limits): why.
    broken: Option<String>,
}

/// A session's recorder (see the module docs).
pub(crate) struct Recorder {
    root: PathBuf,
    root_fd: OwnedFd,
    config: ChangesConfig,
    /// Trees not recorded, as paths from the root (the configured ones with a `/`, the host's hidden paths and its
    /// log root beneath the workspace).
    ignored_paths: Vec<PathBuf>,
    ignored_names: Vec<OsString>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("root", &self.root)
            .finish()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            let _ = std::fs::remove_dir_all(&state.blobs.dir);
        }
    }
}

impl Recorder {
    /// Makes the recorder of `root` with its store in `store` (created, owner-only), and takes the baseline; paths
    /// in `never` (the host's hidden files, its log root) are not recorded. `Err` says why the workspace cannot be
    /// recorded (for [`ChangesList::not_recording`]).
    pub(crate) fn new(
        root: &Path,
        store: PathBuf,
        config: &ChangesConfig,
        never: &[PathBuf],
    ) -> Result<Recorder, String> {
        let root = root
            .canonicalize()
            .map_err(|e| format!("the workspace {} cannot be read ({e})", root.display()))?;
        let root_fd = nix::fcntl::open(
            &root,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("the workspace {} cannot be opened ({e})", root.display()))?;
        let inotify = Inotify::init().map_err(|e| {
            format!(
                "the kernel refused a change watch ({e}); raise fs.inotify.max_user_instances, or turn [changes] off"
            )
        })?;
        crate::sys::files::create_private_dir(&store)
            .map_err(|e| format!("the undo store {} cannot be made ({e})", store.display()))?;
        let mut ignored_paths = Vec::new();
        let mut ignored_names = Vec::new();
        for entry in &config.ignore {
            if entry.contains('/') {
                ignored_paths.push(PathBuf::from(entry.trim_matches('/')));
            } else if !entry.is_empty() {
                ignored_names.push(OsString::from(entry));
            }
        }
        for p in never {
            let p = p.canonicalize().unwrap_or_else(|_| p.clone());
            if let Ok(rel) = p.strip_prefix(&root) {
                if rel.as_os_str().is_empty() {
                    return Err(format!(
                        "the workspace {} holds the host's own files; choose a workspace beside them",
                        root.display()
                    ));
                }
                ignored_paths.push(rel.to_path_buf());
            }
        }
        let recorder = Recorder {
            root,
            root_fd,
            config: config.clone(),
            ignored_paths,
            ignored_names,
            state: Mutex::new(State {
                base: BTreeMap::new(),
                dirs: HashMap::new(),
                inotify,
                dirty: BTreeSet::new(),
                deep: BTreeSet::new(),
                everything: true,
                running: Vec::new(),
                records: VecDeque::new(),
                dropped: 0,
                blobs: Blobs {
                    dir: store,
                    refs: HashMap::new(),
                    next: 0,
                    bytes: 0,
                },
                broken: None,
            }),
        };
        {
            let mut state = recorder.lock();
            recorder.settle(&mut state);
            if let Some(why) = state.broken.clone() {
                return Err(why);
            }
        }
        Ok(recorder)
    }

    /// The workspace recorded (canonical).
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A command starts: what changed before belongs to what ran before (or the host); from now on its changes are
    /// its own.
    pub(crate) fn begin(&self, id: &str, command: &str) {
        let mut state = self.lock();
        if state.broken.is_some() {
            return;
        }
        self.settle(&mut state);
        let others: BTreeSet<String> = state.running.iter().map(|r| r.id.clone()).collect();
        for r in &mut state.running {
            r.overlapped.insert(id.to_string());
        }
        state.running.push(Running {
            id: id.to_string(),
            command: command.to_string(),
            changes: BTreeMap::new(),
            overlapped: others,
        });
    }

    /// A command ended (or never started): its changes become a record. A second call does nothing.
    pub(crate) fn end(&self, id: &str) {
        let mut state = self.lock();
        if !state.running.iter().any(|r| r.id == id) {
            return;
        }
        self.settle(&mut state);
        let Some(at) = state.running.iter().position(|r| r.id == id) else {
            return;
        };
        let run = state.running.remove(at);
        if run.changes.is_empty() {
            return;
        }
        state.records.push_back(Record {
            id: run.id,
            command: run.command,
            ended: SystemTime::now(),
            changes: run.changes,
            overlapped: run.overlapped.into_iter().collect(),
            undone: false,
        });
        self.retain(&mut state);
    }

    /// Drops the oldest records past the count and bytes the configuration allows.
    fn retain(&self, state: &mut State) {
        while state.records.len() > self.config.keep
            || (state.blobs.bytes > self.config.max_bytes && !state.records.is_empty())
        {
            let Some(old) = state.records.pop_front() else {
                break;
            };
            for (before, after) in old.changes.values() {
                state.blobs.release(before);
                state.blobs.release(after);
            }
            state.dropped += 1;
        }
        if state.blobs.bytes > self.config.max_bytes {
            self.stop(
                state,
                format!(
                    "the workspace's files take more than [changes] max_bytes ({} bytes): raise it, or add its \
                     large trees to [changes] ignore",
                    self.config.max_bytes
                ),
            );
        }
    }

    /// Why recording stops when the workspace's files outgrow `[changes] max_bytes`.
    fn too_many_bytes(&self) -> String {
        format!(
            "the workspace's files take more than [changes] max_bytes ({} bytes): raise it, or add its large trees \
             to [changes] ignore",
            self.config.max_bytes
        )
    }

    /// Stops recording, freeing the store, saying why.
    fn stop(&self, state: &mut State, why: String) {
        tracing::warn!(workspace = %self.root.display(), "undo recording stopped: {why}");
        state.broken = Some(why);
        state.base.clear();
        state.records.clear();
        state.running.clear();
        for id in state.blobs.refs.keys().copied().collect::<Vec<_>>() {
            let _ = std::fs::remove_file(state.blobs.path(id));
        }
        state.blobs.refs.clear();
        state.blobs.bytes = 0;
    }

    /// The session's records, newest first.
    pub(crate) fn list(&self) -> ChangesList {
        let mut state = self.lock();
        if state.broken.is_none() {
            self.settle(&mut state);
        }
        ChangesList {
            workspace: Some(self.root.clone()),
            commands: state
                .records
                .iter()
                .rev()
                .map(|r| self.describe(&state.blobs, r))
                .collect(),
            dropped: state.dropped,
            not_recording: state.broken.clone(),
        }
    }

    fn describe(&self, blobs: &Blobs, r: &Record) -> CommandChanges {
        let mut set = ChangeSet {
            covered: vec![self.root.clone()],
            ..ChangeSet::default()
        };
        let mut not_kept = Vec::new();
        for (rel, (before, after)) in &r.changes {
            let Some(kind) = kind_of(blobs, before.as_ref(), after.as_ref()) else {
                continue;
            };
            let shown = after.as_ref().or(before.as_ref()).map(|e| e.meta.ty);
            let mut c = Change::new(self.root.join(rel), kind, shown.unwrap_or(EntryType::Other));
            c.size_before = before.as_ref().map(|e| e.meta.size);
            c.size_after = after.as_ref().map(|e| e.meta.size);
            c.mode_before = before.as_ref().map(|e| e.meta.mode);
            c.mode_after = after.as_ref().map(|e| e.meta.mode);
            c.link_target = after
                .as_ref()
                .or(before.as_ref())
                .and_then(|e| e.target.as_ref())
                .map(PathBuf::from);
            if before
                .as_ref()
                .is_some_and(|b| b.meta.ty == EntryType::File && b.blob.is_none())
            {
                not_kept.push(self.root.join(rel));
            }
            set.totals.count(kind);
            set.changes.push(c);
        }
        CommandChanges {
            id: ProcessId::new(r.id.clone()),
            command: r.command.clone(),
            ended: r.ended,
            changes: set,
            not_kept,
            overlapped: r
                .overlapped
                .iter()
                .map(|o| ProcessId::new(o.clone()))
                .collect(),
            undone: r.undone,
        }
    }

    /// The directory holding `rel` (opened one name at a time, never through a symlink) and `rel`'s last name.
    fn parent_of<'a>(&self, rel: &'a Path) -> io::Result<(OwnedFd, &'a OsStr)> {
        let name = rel
            .file_name()
            .ok_or_else(|| io::Error::other("the workspace's root itself"))?;
        let dir = self.open_dir(rel.parent().unwrap_or(Path::new("")))?;
        Ok((dir, name))
    }

    /// Opens the directory `rel` beneath the root, one name at a time with `O_NOFOLLOW`.
    fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        let mut fd = self.root_fd.try_clone()?;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(io::Error::other("not a plain path"));
            };
            fd = openat(
                &fd,
                name,
                OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
        }
        Ok(fd)
    }

    /// The fingerprint of `rel` now (`None`: absent, or beneath something that is not a directory).
    fn stat(&self, rel: &Path) -> Option<Meta> {
        let (dir, name) = self.parent_of(rel).ok()?;
        fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| Meta::of(&st))
    }

    fn is_ignored(&self, rel: &Path) -> bool {
        rel.file_name()
            .is_some_and(|n| self.ignored_names.iter().any(|i| i == n))
            || self.ignored_paths.iter().any(|p| rel.starts_with(p))
    }

    /// Reads the queued events, then compares every path they name with the baseline, and hands what changed to
    /// the commands running.
    fn settle(&self, state: &mut State) {
        self.drain(state);
        if state.everything {
            state.everything = false;
            state.deep.clear();
            state.dirty.clear();
            state.deep.insert(PathBuf::new());
        }
        let deep: Vec<PathBuf> = std::mem::take(&mut state.deep).into_iter().collect();
        let deep: Vec<PathBuf> = deep
            .iter()
            .filter(|d| !deep.iter().any(|o| o != *d && d.starts_with(o)))
            .filter(|d| d.as_os_str().is_empty() || !self.is_ignored(d))
            .cloned()
            .collect();
        let dirty: Vec<PathBuf> = std::mem::take(&mut state.dirty)
            .into_iter()
            .filter(|p| !deep.iter().any(|d| p.starts_with(d)))
            .collect();
        // Directories moved or deleted lose their watches first; those found again are watched anew.
        for d in &deep {
            let gone: Vec<i32> = state
                .dirs
                .iter()
                .filter(|(_, p)| {
                    p.starts_with(d) && !p.as_os_str().is_empty() || d.as_os_str().is_empty()
                })
                .map(|(wd, _)| *wd)
                .collect();
            for wd in gone {
                state.dirs.remove(&wd);
                // The kernel drops a deleted directory's watch itself; this one may be gone already.
                let _ = inotify_rm(&state.inotify, wd);
            }
        }
        let mut found: BTreeMap<PathBuf, Option<Meta>> = BTreeMap::new();
        for d in &deep {
            for rel in state.base.range(d.clone()..).map(|(k, _)| k) {
                if !rel.starts_with(d) {
                    break;
                }
                found.insert(rel.clone(), None);
            }
            if let Err(why) = self.walk(state, d, &mut found) {
                self.stop(state, why);
                return;
            }
        }
        for p in dirty {
            if self.is_ignored(&p) {
                continue;
            }
            let meta = self.stat(&p);
            if meta.as_ref().is_some_and(|m| m.ty == EntryType::Directory)
                && !state.base.contains_key(&p)
            {
                // A directory that appeared under a name an event gave: walk it whole.
                if let Err(why) = self.walk(state, &p, &mut found) {
                    self.stop(state, why);
                    return;
                }
            }
            found.insert(p, meta);
        }
        // A baseline larger than the store may hold is refused before anything is copied.
        if state.base.is_empty() {
            let limit = self.config.max_file_bytes;
            let bytes: u64 = found
                .values()
                .flatten()
                .filter(|m| m.ty == EntryType::File && m.size <= limit)
                .map(|m| m.size)
                .sum();
            if bytes > self.config.max_bytes {
                let why = format!(
                    "the workspace's files take {bytes} bytes, more than [changes] max_bytes ({}): raise it, or add \
                     its large trees to [changes] ignore",
                    self.config.max_bytes
                );
                self.stop(state, why);
                return;
            }
        }
        let mut changed: Vec<(PathBuf, Delta)> = Vec::new();
        for (rel, meta) in found {
            if rel.as_os_str().is_empty() {
                continue;
            }
            if let Some(delta) = self.compare(state, &rel, meta) {
                changed.push((rel, delta));
            }
            // A workspace too large to keep stops here, before it is copied whole (with records to drop, at twice
            // the limit: dropping them at the command's end makes room).
            let limit = self.config.max_bytes;
            if state.blobs.bytes > limit && state.records.is_empty()
                || state.blobs.bytes > limit.saturating_mul(2)
            {
                self.stop(state, self.too_many_bytes());
                return;
            }
        }
        if state.base.len() > self.config.max_files {
            let why = format!(
                "the workspace has more than [changes] max_files ({}) entries: raise it, or add its large trees to \
                 [changes] ignore",
                self.config.max_files
            );
            self.stop(state, why);
            return;
        }
        if state.blobs.bytes > self.config.max_bytes && state.records.is_empty() {
            self.stop(state, self.too_many_bytes());
            return;
        }
        let State { running, blobs, .. } = state;
        for (rel, (before, after)) in changed {
            for run in running.iter_mut() {
                match run.changes.get_mut(&rel) {
                    Some(delta) => {
                        blobs.hold(&after);
                        blobs.release(&delta.1);
                        delta.1 = after.clone();
                    }
                    None => {
                        blobs.hold(&before);
                        blobs.hold(&after);
                        run.changes
                            .insert(rel.clone(), (before.clone(), after.clone()));
                    }
                }
                // Made and gone again within the command: no change of its.
                if let Some((b, a)) = run.changes.get(&rel)
                    && equivalent(blobs, b.as_ref(), a.as_ref())
                    && b.as_ref().map(|e| e.meta.ty) == a.as_ref().map(|e| e.meta.ty)
                {
                    let (b, a) = run.changes.remove(&rel).unwrap_or_default();
                    blobs.release(&b);
                    blobs.release(&a);
                }
            }
            blobs.release(&before);
        }
    }

    /// Compares `rel` (fingerprint now: `meta`) with the baseline; moves the baseline and returns the change where
    /// they differ. The returned delta holds no references of its own (the caller holds what it keeps).
    fn compare(&self, state: &mut State, rel: &Path, meta: Option<Meta>) -> Option<Delta> {
        let before = state.base.get(rel).cloned();
        match (&before, &meta) {
            (None, None) => return None,
            (Some(b), Some(m)) if b.meta == *m => return None,
            (Some(b), Some(m))
                if b.meta.ty == EntryType::Directory
                    && m.ty == EntryType::Directory
                    && (b.meta.mode, b.meta.uid, b.meta.gid) == (m.mode, m.uid, m.gid) =>
            {
                state.base.get_mut(rel)?.meta = m.clone();
                return None;
            }
            _ => {}
        }
        let after = meta.map(|m| self.read_entry(state, rel, m));
        // Same content, mode and owner: only the times moved.
        if let (Some(b), Some(a)) = (&before, &after)
            && equivalent(&state.blobs, Some(b), Some(a))
        {
            let new = after.clone();
            state.blobs.release(&new);
            if let Some(e) = state.base.get_mut(rel) {
                e.meta = a.meta.clone();
            }
            return None;
        }
        // The baseline takes the new entry's reference; the old one's passes to the caller (released there).
        match &after {
            Some(a) => {
                state.base.insert(rel.to_path_buf(), a.clone());
            }
            None => {
                state.base.remove(rel);
            }
        }
        Some((before, after))
    }

    /// `rel` as an entry, a file's content copied into the store (one reference, the caller's).
    fn read_entry(&self, state: &mut State, rel: &Path, meta: Meta) -> Entry {
        let mut entry = Entry {
            meta,
            blob: None,
            target: None,
        };
        let Ok((dir, name)) = self.parent_of(rel) else {
            return entry;
        };
        match entry.meta.ty {
            EntryType::File => {
                let opened = openat(
                    &dir,
                    name,
                    OFlag::O_RDONLY
                        | OFlag::O_NOFOLLOW
                        | OFlag::O_NONBLOCK
                        | OFlag::O_NOCTTY
                        | OFlag::O_CLOEXEC,
                    Mode::empty(),
                );
                if let Ok(fd) = opened {
                    let file = File::from(fd);
                    // Still the file stat saw (not swapped for another between the two calls).
                    let same = nix::sys::stat::fstat(file.as_fd()).is_ok_and(|st| {
                        st.st_ino == entry.meta.ino && st.st_mode & libc::S_IFMT == libc::S_IFREG
                    });
                    if same {
                        let limit = self.config.max_file_bytes;
                        entry.blob = state.blobs.put(file, entry.meta.size, limit).ok().flatten();
                    }
                }
            }
            EntryType::Symlink => {
                entry.target = nix::fcntl::readlinkat(&dir, name).ok();
            }
            _ => {}
        }
        entry
    }

    /// Walks the tree at `rel` (watching each directory before reading it), adding every entry's fingerprint to
    /// `found`. `Err` when the workspace outgrows [`ChangesConfig::max_files`].
    fn walk(
        &self,
        state: &mut State,
        rel: &Path,
        found: &mut BTreeMap<PathBuf, Option<Meta>>,
    ) -> Result<(), String> {
        let start = if rel.as_os_str().is_empty() {
            self.root_fd.try_clone().ok()
        } else {
            let meta = self.stat(rel);
            let is_dir = meta.as_ref().is_some_and(|m| m.ty == EntryType::Directory);
            found.insert(rel.to_path_buf(), meta);
            if !is_dir {
                return Ok(());
            }
            self.open_dir(rel).ok()
        };
        let Some(start) = start else { return Ok(()) };
        let mut stack = vec![(rel.to_path_buf(), start)];
        while let Some((dir_rel, fd)) = stack.pop() {
            let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            match state.inotify.watches().add(&proc_path, watch_mask()) {
                Ok(wd) => {
                    state
                        .dirs
                        .insert(wd.get_watch_descriptor_id(), dir_rel.clone());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err(
                        "the kernel's limit of watched directories was reached; raise fs.inotify.max_user_watches, \
                         or add large trees to [changes] ignore"
                            .into(),
                    );
                }
                Err(_) => continue,
            }
            let Ok(entries) = std::fs::read_dir(&proc_path) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let child = dir_rel.join(&name);
                if self.is_ignored(&child) {
                    continue;
                }
                let Ok(st) = fstatat(&fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let meta = Meta::of(&st);
                if meta.ty == EntryType::Directory
                    && let Ok(sub) = openat(
                        &fd,
                        name.as_os_str(),
                        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                {
                    stack.push((child.clone(), sub));
                }
                found.insert(child, Some(meta));
                if found.len() > self.config.max_files {
                    return Err(format!(
                        "the workspace has more than [changes] max_files ({}) entries: raise it, or add its large \
                         trees to [changes] ignore",
                        self.config.max_files
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads every queued event (never blocking) into the dirty paths.
    fn drain(&self, state: &mut State) {
        let mut buffer = [0u8; 16 << 10];
        loop {
            let State {
                inotify,
                dirs,
                dirty,
                deep,
                everything,
                ..
            } = &mut *state;
            let events = match inotify.read_events(&mut buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    *everything = true;
                    return;
                }
            };
            let mut any = false;
            for event in events {
                any = true;
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    *everything = true;
                    continue;
                }
                let wd = event.wd.get_watch_descriptor_id();
                if event.mask.contains(EventMask::IGNORED) {
                    dirs.remove(&wd);
                    continue;
                }
                let Some(dir) = dirs.get(&wd) else { continue };
                if event
                    .mask
                    .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
                {
                    if !dir.as_os_str().is_empty() {
                        deep.insert(dir.clone());
                    }
                    continue;
                }
                let Some(name) = event.name else { continue };
                let path = dir.join(name);
                if event.mask.contains(EventMask::ISDIR)
                    && event.mask.intersects(
                        EventMask::CREATE
                            | EventMask::MOVED_TO
                            | EventMask::MOVED_FROM
                            | EventMask::DELETE,
                    )
                {
                    deep.insert(path);
                } else {
                    dirty.insert(path);
                }
            }
            if !any {
                return;
            }
        }
    }
}

/// Removes watch `wd` (by number: the map keeps numbers, not the crate's descriptors).
fn inotify_rm(inotify: &Inotify, wd: i32) -> io::Result<()> {
    // SAFETY: `inotify_rm_watch` on the instance's own descriptor, which lives as long as `inotify`; an unknown or
    // already removed `wd` is only an `EINVAL`.
    let r = unsafe { libc::inotify_rm_watch(inotify.as_raw_fd(), wd) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
