//! The recorder's store and what it compares: an entry's fingerprint ([`Meta`]), a recorded path ([`Entry`]), the
//! numbered, reference-counted copies of contents ([`Blobs`]), and whether two states of a path are the same.

use crate::changes::{ChangeKind, EntryType};
use nix::sys::stat::FileStat;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

/// An entry's fingerprint: equal fingerprints mean an unchanged entry (as git's index judges a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) ty: EntryType,
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) size: u64,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
    pub(super) ino: u64,
}

impl Meta {
    pub(super) fn of(st: &FileStat) -> Meta {
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
pub(super) struct Entry {
    pub(super) meta: Meta,
    /// A file's content in the store; `None` when it was not kept (too large, or unreadable).
    pub(super) blob: Option<u64>,
    /// A symlink's target.
    pub(super) target: Option<OsString>,
}

/// One path's change: what it was and what it became (`None`: absent).
pub(super) type Delta = (Option<Entry>, Option<Entry>);

/// The session's store of contents: numbered copies, counted by reference.
pub(super) struct Blobs {
    pub(super) dir: PathBuf,
    pub(super) refs: HashMap<u64, (u32, u64)>,
    pub(super) next: u64,
    pub(super) bytes: u64,
}

impl Blobs {
    pub(super) fn path(&self, id: u64) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// Copies at most `limit` bytes of `src` (whose size is `size`) into a new blob with one reference. `None` when
    /// the file is larger than the limit (or grew past it while read).
    pub(super) fn put(&mut self, mut src: File, size: u64, limit: u64) -> io::Result<Option<u64>> {
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

    pub(super) fn hold(&mut self, entry: &Option<Entry>) {
        if let Some(id) = entry.as_ref().and_then(|e| e.blob)
            && let Some(r) = self.refs.get_mut(&id)
        {
            r.0 += 1;
        }
    }

    pub(super) fn release(&mut self, entry: &Option<Entry>) {
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
    pub(super) fn same(&self, a: u64, b: u64) -> bool {
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

/// Whether two states of a path are the same for undo: both absent, or the same type, mode and owner and the same
/// content (a file's bytes, a symlink's target).
pub(super) fn equivalent(blobs: &Blobs, a: Option<&Entry>, b: Option<&Entry>) -> bool {
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
pub(super) fn kind_of(
    blobs: &Blobs,
    before: Option<&Entry>,
    after: Option<&Entry>,
) -> Option<ChangeKind> {
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
