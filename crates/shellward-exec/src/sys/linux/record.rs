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
//! Every file operation is relative to a directory descriptor opened one name at a time with `O_NOFOLLOW` from the
//! workspace's own descriptor: a command that turns a directory into a symlink (to `/etc`, to a secret) makes the
//! paths beneath it absent, never followed, both when they are read into the store and when they are restored.

use crate::ProcessId;
use crate::changes::{Change, ChangeKind, ChangeSet, EntryType};
use crate::undo::{ChangesConfig, ChangesList, CommandChanges, Undone};
use inotify::{EventMask, Inotify, WatchMask};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, symlinkat, unlinkat};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

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

/// An entry's fingerprint: equal fingerprints mean an unchanged entry (as git's index judges a file).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    ty: EntryType,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
}

impl Meta {
    fn of(st: &FileStat) -> Meta {
        let ty = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => EntryType::File,
            libc::S_IFDIR => EntryType::Directory,
            libc::S_IFLNK => EntryType::Symlink,
            _ => EntryType::Other,
        };
        Meta {
            ty,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            ino: st.st_ino,
        }
    }
}

/// One path as recorded: its fingerprint, and what it takes to make it again.
#[derive(Debug, Clone)]
struct Entry {
    meta: Meta,
    /// A file's content in the store; `None` when it was not kept (too large, or unreadable).
    blob: Option<u64>,
    /// A symlink's target.
    target: Option<OsString>,
}

/// One path's change: what it was and what it became (`None`: absent).
type Delta = (Option<Entry>, Option<Entry>);

/// The session's store of contents: numbered copies, counted by reference.
struct Blobs {
    dir: PathBuf,
    refs: HashMap<u64, (u32, u64)>,
    next: u64,
    bytes: u64,
}

impl Blobs {
    fn path(&self, id: u64) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// Copies at most `limit` bytes of `src` (whose size is `size`) into a new blob with one reference. `None` when
    /// the file is larger than the limit (or grew past it while read).
    fn put(&mut self, mut src: File, size: u64, limit: u64) -> io::Result<Option<u64>> {
        if size > limit {
            return Ok(None);
        }
        let id = self.next;
        self.next += 1;
        let path = self.path(id);
        let mut dst = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?
        };
        let copied = io::copy(&mut (&mut src).take(limit + 1), &mut dst)?;
        if copied > limit {
            drop(dst);
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        self.refs.insert(id, (1, copied));
        self.bytes += copied;
        Ok(Some(id))
    }

    fn hold(&mut self, entry: &Option<Entry>) {
        if let Some(id) = entry.as_ref().and_then(|e| e.blob)
            && let Some(r) = self.refs.get_mut(&id)
        {
            r.0 += 1;
        }
    }

    fn release(&mut self, entry: &Option<Entry>) {
        if let Some(id) = entry.as_ref().and_then(|e| e.blob)
            && let Some(r) = self.refs.get_mut(&id)
        {
            r.0 -= 1;
            if r.0 == 0 {
                self.bytes -= r.1;
                self.refs.remove(&id);
                let _ = std::fs::remove_file(self.path(id));
            }
        }
    }

    /// Whether two blobs hold the same bytes.
    fn same(&self, a: u64, b: u64) -> bool {
        if a == b {
            return true;
        }
        let (Ok(fa), Ok(fb)) = (File::open(self.path(a)), File::open(self.path(b))) else {
            return false;
        };
        same_bytes(fa, fb)
    }
}

fn same_bytes(mut a: impl Read, mut b: impl Read) -> bool {
    let (mut ba, mut bb) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let Ok(na) = read_full(&mut a, &mut ba) else {
            return false;
        };
        let Ok(nb) = read_full(&mut b, &mut bb) else {
            return false;
        };
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
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

    /// Takes back what command `id` changed (the newest record not undone when `None`). See the module docs.
    pub(crate) fn undo(&self, id: Option<&str>, force: bool) -> Result<Undone, String> {
        let mut state = self.lock();
        if let Some(why) = &state.broken {
            return Err(format!("nothing is recorded for this session: {why}"));
        }
        self.settle(&mut state);
        let at = match id {
            Some(id) => state
                .records
                .iter()
                .position(|r| r.id == id)
                .ok_or_else(|| {
                    if state.running.iter().any(|r| r.id == id) {
                        format!("{id} is still running; undo it once it has ended")
                    } else {
                        format!(
                            "no recorded changes for {id} in this session (it changed nothing in the workspace, \
                             was dropped by retention, or is another session's)"
                        )
                    }
                })?,
            None => state
                .records
                .iter()
                .rposition(|r| !r.undone)
                .ok_or("no command of this session has changes left to undo")?,
        };
        let record = &state.records[at];
        if record.undone {
            return Err(format!(
                "{} was already undone; its changes are back as they were",
                record.id
            ));
        }
        // Every path as the command left it, or the undo would overwrite a later change.
        let mut conflicts = Vec::new();
        for (rel, (_, after)) in &record.changes {
            let now = state.base.get(rel);
            if !equivalent(&state.blobs, now, after.as_ref()) {
                let by = state
                    .records
                    .iter()
                    .skip(at + 1)
                    .rev()
                    .find(|r| !r.undone && r.changes.contains_key(rel))
                    .map(|r| r.id.clone());
                conflicts.push((rel.clone(), by));
            }
        }
        if !conflicts.is_empty() && !force {
            let shown: Vec<String> = conflicts
                .iter()
                .take(5)
                .map(|(rel, by)| match by {
                    Some(by) => format!("{} (changed since by {by})", rel.display()),
                    None => format!(
                        "{} (changed since, not by a recorded command)",
                        rel.display()
                    ),
                })
                .collect();
            let more = conflicts.len().saturating_sub(5);
            return Err(format!(
                "undoing {} would overwrite later changes to {}{}; undo the later command first, or pass force to \
                 overwrite them",
                record.id,
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        let missing: Vec<PathBuf> = record
            .changes
            .iter()
            .filter(|(_, (before, _))| {
                before
                    .as_ref()
                    .is_some_and(|b| b.meta.ty == EntryType::File && b.blob.is_none())
            })
            .map(|(rel, _)| rel.clone())
            .collect();
        if !missing.is_empty() && !force {
            return Err(format!(
                "the old content of {} was not kept (larger than [changes] max_file_bytes, {} bytes); pass force \
                 to undo the rest and leave it as it is",
                missing
                    .iter()
                    .take(5)
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.config.max_file_bytes
            ));
        }
        let changes: Vec<(PathBuf, Delta)> = record
            .changes
            .iter()
            .filter(|(rel, _)| !missing.contains(rel))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (id, command) = (record.id.clone(), record.command.clone());
        let done = self.apply(&state.blobs, &changes)?;
        // The workspace is as before the command: so is the baseline (the events the undo made compare equal).
        for (rel, (before, _)) in &changes {
            let now = self.entry_now(&mut state, rel, before.as_ref());
            self.set_base(&mut state, rel, now);
        }
        state.records[at].undone = true;
        let mut out = Undone {
            id: ProcessId::new(id),
            command,
            restored: Vec::new(),
            removed: Vec::new(),
            skipped: missing.iter().map(|p| self.root.join(p)).collect(),
        };
        for (rel, removed) in done {
            if removed {
                out.removed.push(self.root.join(rel));
            } else {
                out.restored.push(self.root.join(rel));
            }
        }
        out.restored.sort();
        out.removed.sort();
        Ok(out)
    }

    /// The entry at `rel` now, after the undo restored `restored` there (its blob reused: the same content).
    fn entry_now(&self, state: &mut State, rel: &Path, restored: Option<&Entry>) -> Option<Entry> {
        let meta = self.stat(rel)?;
        let mut entry = Entry {
            meta,
            blob: None,
            target: None,
        };
        if let Some(r) = restored.filter(|r| r.meta.ty == entry.meta.ty) {
            entry.blob = r.blob;
            entry.target = r.target.clone();
            state.blobs.hold(&Some(entry.clone()));
        }
        Some(entry)
    }

    fn set_base(&self, state: &mut State, rel: &Path, entry: Option<Entry>) {
        let old = match entry {
            Some(e) => state.base.insert(rel.to_path_buf(), e),
            None => state.base.remove(rel),
        };
        state.blobs.release(&old);
    }

    /// Applies an undo: removals deepest first, then restorations shallowest first; on an error, what was done is
    /// put back and the error returned. Returns each path done, `true` where it was removed.
    fn apply(
        &self,
        blobs: &Blobs,
        changes: &[(PathBuf, Delta)],
    ) -> Result<Vec<(PathBuf, bool)>, String> {
        let mut removals: Vec<&(PathBuf, Delta)> = changes
            .iter()
            .filter(|(_, (before, after))| {
                after.is_some()
                    && before
                        .as_ref()
                        .is_none_or(|b| Some(b.meta.ty) != after.as_ref().map(|a| a.meta.ty))
            })
            .collect();
        removals.sort_by_key(|(rel, _)| std::cmp::Reverse(rel.components().count()));
        let mut restorations: Vec<&(PathBuf, Delta)> = changes
            .iter()
            .filter(|(_, (before, _))| before.is_some())
            .collect();
        restorations.sort_by_key(|(rel, _)| rel.components().count());
        // Journal: (path, what it was before this step) for putting back.
        let mut journal: Vec<(&Path, Option<&Entry>, bool)> = Vec::new();
        let mut failure = None;
        for (rel, (_, after)) in &removals {
            if let Err(e) = self.remove(rel) {
                failure = Some(format!("removing {}: {e}", rel.display()));
                break;
            }
            journal.push((rel, after.as_ref(), true));
        }
        if failure.is_none() {
            for (rel, (before, after)) in &restorations {
                let Some(before) = before else { continue };
                if let Err(e) = self.restore(blobs, rel, before) {
                    failure = Some(format!("restoring {}: {e}", rel.display()));
                    break;
                }
                // A removal already recorded the after state for a path whose type changed.
                let replaced = journal.iter().any(|(p, _, _)| p == rel);
                journal.push((rel, if replaced { None } else { after.as_ref() }, false));
            }
        }
        let Some(failure) = failure else {
            let mut done: Vec<(PathBuf, bool)> = Vec::new();
            for (rel, _, removed) in &journal {
                if let Some(d) = done.iter_mut().find(|(p, _)| p == rel) {
                    d.1 = false;
                } else {
                    done.push((rel.to_path_buf(), *removed));
                }
            }
            return Ok(done);
        };
        // Put back what was done, newest step first.
        let mut unrestored = Vec::new();
        for (rel, was, removed) in journal.iter().rev() {
            let back = match (was, removed) {
                (Some(entry), _) => self.restore(blobs, rel, entry),
                (None, false) => self.remove(rel),
                (None, true) => Ok(()),
            };
            if back.is_err() {
                unrestored.push(rel.display().to_string());
            }
        }
        if unrestored.is_empty() {
            Err(format!(
                "the undo failed ({failure}) and was rolled back: the workspace is as it was before the undo"
            ))
        } else {
            Err(format!(
                "the undo failed ({failure}) and could not put back {}; check those paths",
                unrestored.join(", ")
            ))
        }
    }

    /// Removes the entry at `rel` (a directory must be empty of everything but what the undo removed before it).
    fn remove(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_of(rel)?;
        let st = fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io::Error::from)?;
        let flag = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            UnlinkatFlags::RemoveDir
        } else {
            UnlinkatFlags::NoRemoveDir
        };
        match unlinkat(&dir, name, flag) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes `rel` what `entry` says: a directory (made if absent; mode and owner set), a file (its kept content
    /// written beside it and renamed over it) or a symlink.
    fn restore(&self, blobs: &Blobs, rel: &Path, entry: &Entry) -> io::Result<()> {
        let (dir, name) = self.parent_of(rel)?;
        let owner = (
            Some(Uid::from_raw(entry.meta.uid)),
            Some(Gid::from_raw(entry.meta.gid)),
        );
        let root = nix::unistd::geteuid().is_root();
        match entry.meta.ty {
            EntryType::Directory => {
                match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                let fd = openat(
                    &dir,
                    name,
                    OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                if root {
                    let _ = fchown(&fd, owner.0, owner.1);
                }
                let file = File::from(fd);
                file.set_permissions(std::fs::Permissions::from_mode(entry.meta.mode))
            }
            EntryType::File => {
                let Some(blob) = entry.blob else {
                    return Err(io::Error::other("its old content was not kept"));
                };
                let tmp = temp_name(name);
                let fd = openat(
                    &dir,
                    tmp.as_os_str(),
                    OFlag::O_WRONLY
                        | OFlag::O_CREAT
                        | OFlag::O_EXCL
                        | OFlag::O_NOFOLLOW
                        | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(0o600),
                )?;
                let mut file = File::from(fd);
                let written = (|| {
                    io::copy(&mut File::open(blobs.path(blob))?, &mut file)?;
                    if root {
                        fchown(&file, owner.0, owner.1)?;
                    }
                    file.set_permissions(std::fs::Permissions::from_mode(entry.meta.mode))?;
                    renameat(&dir, tmp.as_os_str(), &dir, name)?;
                    Ok::<(), io::Error>(())
                })();
                if written.is_err() {
                    let _ = unlinkat(&dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
                }
                written
            }
            EntryType::Symlink => {
                let target = entry.target.clone().unwrap_or_default();
                let tmp = temp_name(name);
                symlinkat(target.as_os_str(), &dir, tmp.as_os_str())?;
                if root {
                    let _ = nix::unistd::fchownat(
                        &dir,
                        tmp.as_os_str(),
                        owner.0,
                        owner.1,
                        AtFlags::AT_SYMLINK_NOFOLLOW,
                    );
                }
                renameat(&dir, tmp.as_os_str(), &dir, name).inspect_err(|_| {
                    let _ = unlinkat(&dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
                })?;
                Ok(())
            }
            // A FIFO or socket is not made again (nothing to restore of it).
            _ => Ok(()),
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
                let why = format!(
                    "the workspace's files take more than [changes] max_bytes ({} bytes): raise it, or add its large \
                     trees to [changes] ignore",
                    self.config.max_bytes
                );
                self.stop(state, why);
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
            let why = format!(
                "the workspace's files take more than [changes] max_bytes ({} bytes): raise it, or add its large \
                 trees to [changes] ignore",
                self.config.max_bytes
            );
            self.stop(state, why);
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

/// Whether two states of a path are the same for undo: both absent, or the same type, mode and owner and the same
/// content (a file's bytes, a symlink's target).
fn equivalent(blobs: &Blobs, a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            if a.meta == b.meta {
                return true;
            }
            if (a.meta.ty, a.meta.mode, a.meta.uid, a.meta.gid)
                != (b.meta.ty, b.meta.mode, b.meta.uid, b.meta.gid)
            {
                return false;
            }
            match a.meta.ty {
                EntryType::File => {
                    a.meta.size == b.meta.size
                        && match (a.blob, b.blob) {
                            (Some(x), Some(y)) => blobs.same(x, y),
                            _ => false,
                        }
                }
                EntryType::Symlink => a.target == b.target,
                _ => true,
            }
        }
        _ => false,
    }
}

/// What a change is, seen from its two ends (`None`: no change).
fn kind_of(blobs: &Blobs, before: Option<&Entry>, after: Option<&Entry>) -> Option<ChangeKind> {
    Some(match (before, after) {
        (None, None) => return None,
        (None, Some(_)) => ChangeKind::Created,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(b), Some(a)) => {
            let content_same = b.meta.ty == a.meta.ty
                && b.meta.size == a.meta.size
                && b.target == a.target
                && (b.meta.ty != EntryType::File
                    || matches!((b.blob, a.blob), (Some(x), Some(y)) if blobs.same(x, y)));
            if b.meta.ty == a.meta.ty && (content_same || b.meta.ty == EntryType::Directory) {
                ChangeKind::ModeChanged
            } else {
                ChangeKind::Modified
            }
        }
    })
}

/// A name beside `name` for writing its restored content before renaming it into place.
fn temp_name(name: &OsStr) -> OsString {
    let mut tmp = OsString::from(".");
    let short: Vec<u8> = name.as_bytes().iter().take(200).copied().collect();
    tmp.push(OsStr::from_bytes(&short));
    tmp.push(format!(".shellward-undo-{}", std::process::id()));
    tmp
}
