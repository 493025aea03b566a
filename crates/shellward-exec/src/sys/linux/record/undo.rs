//! An undo: the checks that refuse it (a later change, a repeat, content not kept), then the steps that take a
//! command's changes back — removals deepest first, restorations shallowest first — each one name at a time beneath
//! the workspace's descriptor, and the steps put back when one fails.

use super::store::{Blobs, Delta, Entry, equivalent};
use super::{Recorder, State};
use crate::ProcessId;
use crate::changes::EntryType;
use crate::undo::Undone;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, symlinkat, unlinkat};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

impl Recorder {
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
}

/// A name beside `name` for writing its restored content before renaming it into place.
fn temp_name(name: &OsStr) -> OsString {
    let mut tmp = OsString::from(".");
    let short: Vec<u8> = name.as_bytes().iter().take(200).copied().collect();
    tmp.push(OsStr::from_bytes(&short));
    tmp.push(format!(".shellward-undo-{}", std::process::id()));
    tmp
}
