//! The executor's watchdog: a process that outlives a killed executor just long enough to kill what it started.
//!
//! shellward-exec starts it with [`WATCHDOG_ARG`]` CGROUP_DIR TOKEN` (either may be empty) and its standard input on a
//! pipe whose only write end the executor holds. It reads lines from that pipe:
//!
//! - `+ PGID` / `- PGID`: a process group the executor made for a command, or no longer has;
//! - `quit`: the executor is shutting down cleanly and has removed its trees: exit at once.
//!
//! At end of input (the executor died, `SIGKILL` included: the kernel closed the write end) it:
//!
//! 1. writes `1` to `CGROUP_DIR/cgroup.kill`, which kills every process of the executor's cgroup, escapers included;
//! 2. with a `TOKEN`, round after round (at most 50) until none is found, kills every process whose environment
//!    carries `SHELLWARD_TREE=TOKEN/…`, read just before, and the process group of each such process when the executor
//!    had announced that group (a marked process proves the group is still one of ours);
//! 3. removes the executor's cgroup directories (its command groups first), trying for up to five seconds while the
//!    killed processes leave them.
//!
//! It signals nothing else: a process is killed only on the strength of its own marker, a group only when announced
//! and holding a marked process. Without pidfds the window between reading a process's environment and killing it
//! is a few microseconds (the executor itself never signals a number it has not verified through a pidfd).
//!
//! Like the init, it allocates nothing and needs no C library, so the executor starts it from the same small static
//! binary it already has in memory instead of a shell.

use core::ffi::CStr;
use core::mem::MaybeUninit;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};

/// The first argument that puts the static binary into watchdog mode.
pub const WATCHDOG_ARG: &str = "__shellward-watchdog";

/// The environment variable whose value starts with an executor's token and a `/` in every process it started.
const MARKER: &[u8] = b"SHELLWARD_TREE=";

/// How many announced process groups are remembered; past that, groups are no longer killed as groups (their marked
/// members still are, one by one).
const MAX_GROUPS: usize = 4096;

/// Rounds of the marker scan before giving up on processes that keep appearing.
const ROUNDS: usize = 50;

/// The process groups the executor announced.
struct Groups {
    list: [i32; MAX_GROUPS],
    len: usize,
}

impl Groups {
    fn add(&mut self, pg: i32) {
        if self.len < MAX_GROUPS && !self.contains(pg) {
            self.list[self.len] = pg;
            self.len += 1;
        }
    }

    fn remove(&mut self, pg: i32) {
        if let Some(i) = self.list[..self.len].iter().position(|&g| g == pg) {
            self.len -= 1;
            self.list[i] = self.list[self.len];
        }
    }

    fn contains(&self, pg: i32) -> bool {
        self.list[..self.len].contains(&pg)
    }
}

/// A positive decimal that fits an `i32`.
fn parse_pid(s: &[u8]) -> Option<i32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let n = s.iter().try_fold(0i64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
    })?;
    (n > 0 && n <= i64::from(i32::MAX)).then_some(n as i32)
}

/// One line of the executor's protocol.
enum Command {
    Add(i32),
    Remove(i32),
    Quit,
}

fn command(line: &[u8]) -> Option<Command> {
    if line == b"quit" {
        return Some(Command::Quit);
    }
    let (op, pg) = (line.first()?, line.get(2..)?);
    if line.get(1) != Some(&b' ') {
        return None;
    }
    let pg = parse_pid(pg)?;
    match op {
        b'+' => Some(Command::Add(pg)),
        b'-' => Some(Command::Remove(pg)),
        _ => None,
    }
}

/// Reads the protocol from standard input until `quit` (returns `true`) or end of input (`false`).
fn follow(groups: &mut Groups) -> bool {
    // SAFETY: the executor gave this process the pipe as its standard input; nothing closes it.
    let stdin = unsafe { BorrowedFd::borrow_raw(0) };
    let mut buf = [0u8; 512];
    let mut line = [0u8; 64];
    let (mut len, mut too_long) = (0usize, false);
    loop {
        let n = match rustix::io::read(stdin, &mut buf) {
            Ok(0) => return false,
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(_) => return false,
        };
        for &b in &buf[..n] {
            if b != b'\n' {
                match line.get_mut(len) {
                    Some(slot) => {
                        *slot = b;
                        len += 1;
                    }
                    None => too_long = true,
                }
                continue;
            }
            match command(&line[..len]).filter(|_| !too_long) {
                Some(Command::Quit) => return true,
                Some(Command::Add(pg)) => groups.add(pg),
                Some(Command::Remove(pg)) => groups.remove(pg),
                None => {}
            }
            (len, too_long) = (0, false);
        }
    }
}

/// Whether the environment file `fd` holds a variable that starts with `prefix` (`SHELLWARD_TREE=TOKEN/`), read in
/// pieces of `buf`'s size.
fn environ_has(fd: BorrowedFd<'_>, prefix: &[&[u8]], buf: &mut [u8]) -> bool {
    let total: usize = prefix.iter().map(|p| p.len()).sum();
    // How much of the prefix the current variable has matched; `None` once it cannot match.
    let mut matched = Some(0usize);
    loop {
        let n = match rustix::io::read(fd, &mut *buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == 0 {
                matched = Some(0);
                continue;
            }
            if let Some(m) = matched {
                matched = (prefix_byte(prefix, m) == Some(b)).then_some(m + 1);
                if matched == Some(total) {
                    return true;
                }
            }
        }
    }
}

/// Byte `i` of the concatenation of `parts`.
fn prefix_byte(parts: &[&[u8]], mut i: usize) -> Option<u8> {
    for part in parts {
        if i < part.len() {
            return Some(part[i]);
        }
        i -= part.len();
    }
    None
}

/// `PID/NAME` with a NUL, in `buf`.
fn proc_path<'a>(pid: &[u8], name: &[u8], buf: &'a mut [u8; 64]) -> Option<&'a CStr> {
    let len = pid.len() + 1 + name.len();
    if len + 1 > buf.len() {
        return None;
    }
    buf[..pid.len()].copy_from_slice(pid);
    buf[pid.len()] = b'/';
    buf[pid.len() + 1..len].copy_from_slice(name);
    buf[len] = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).ok()
}

/// The process group in a `/proc/PID/stat` line (the fifth field, counted after the name in parentheses).
fn stat_pgrp(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    // state, ppid, pgrp
    parse_pid(fields.nth(2)?)
}

/// One pass over `/proc`: kills each marked process (and its announced group); returns how many were found.
fn kill_marked(proc_dir: &OwnedFd, token: &[u8], groups: &Groups) -> usize {
    let prefix: [&[u8]; 3] = [MARKER, token, b"/"];
    let mut dents = [MaybeUninit::<u8>::uninit(); 4096];
    let mut read_buf = [0u8; 4096];
    let mut path = [0u8; 64];
    let mut found = 0;
    // A fresh descriptor per pass: the listing starts over.
    let Ok(dir) = rustix::fs::openat(
        proc_dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return 0;
    };
    let mut entries = rustix::fs::RawDir::new(&dir, &mut dents);
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name().to_bytes();
        let Some(pid) = parse_pid(name) else {
            continue;
        };
        let marked = proc_path(name, b"environ", &mut path)
            .and_then(|p| {
                rustix::fs::openat(proc_dir, p, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .ok()
            })
            .is_some_and(|fd| environ_has(fd.as_fd(), &prefix, &mut read_buf));
        if !marked {
            continue;
        }
        found += 1;
        let pgrp = proc_path(name, b"stat", &mut path)
            .and_then(|p| {
                rustix::fs::openat(proc_dir, p, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .ok()
            })
            .and_then(|fd| match rustix::io::read(&fd, &mut read_buf) {
                Ok(n) => stat_pgrp(&read_buf[..n]),
                Err(_) => None,
            });
        if let Some(pg) = pgrp.filter(|pg| groups.contains(*pg))
            && let Some(pg) = Pid::from_raw(pg)
        {
            let _ = rustix::process::kill_process_group(pg, Signal::KILL);
        }
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
    found
}

/// Removes the command groups under `dir` and then `dir` itself; returns whether `dir` is gone.
fn remove_cgroup(cg: &CStr) -> bool {
    if let Ok(dir) = rustix::fs::open(
        cg,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let mut dents = [MaybeUninit::<u8>::uninit(); 4096];
        let mut entries = rustix::fs::RawDir::new(&dir, &mut dents);
        while let Some(Ok(entry)) = entries.next() {
            let name = entry.file_name();
            if entry.file_type() == rustix::fs::FileType::Directory
                && name.to_bytes() != b"."
                && name.to_bytes() != b".."
            {
                let _ = rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR);
            }
        }
    }
    match rustix::fs::unlinkat(rustix::fs::CWD, cg, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => true,
        Err(_) => false,
    }
}

/// Runs the watchdog and returns its exit code: 0, or 2 on a usage error.
///
/// `args` are the arguments after [`WATCHDOG_ARG`]: `CGROUP_DIR TOKEN [PIDS_DIR]`, a NULL-terminated array of
/// NUL-terminated strings (an empty `CGROUP_DIR`: none).
///
/// # Safety
/// `args` must be a valid NULL-terminated array of NUL-terminated strings that lives as long as the call, and the
/// process must be the one the executor started for this purpose, its standard input the executor's pipe.
pub unsafe fn run(args: *const *const u8) -> i32 {
    // SAFETY: NULL-terminated (caller); each index is read only after the previous one was not NULL.
    let (cg, token, pids) = unsafe {
        let cg = crate::arg(args, 0);
        let token = cg.and_then(|_| crate::arg(args, 1));
        (cg, token, token.and_then(|_| crate::arg(args, 2)))
    };
    let (Some(cg), Some(token)) = (cg, token) else {
        crate::say(&[b"usage: __shellward-watchdog CGROUP_DIR TOKEN (started by shellward only)"]);
        return crate::USAGE;
    };
    // Started from an in-memory file, the kernel names this process after the descriptor: name it.
    let _ = rustix::thread::set_name(c"shellward-watch");
    let mut groups = Groups {
        list: [0; MAX_GROUPS],
        len: 0,
    };
    if follow(&mut groups) {
        return 0;
    }
    if !cg.is_empty()
        && let Ok(dir) = rustix::fs::open(
            cg,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        && let Ok(kill) = rustix::fs::openat(
            &dir,
            c"cgroup.kill",
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    {
        let _ = rustix::io::write(&kill, b"1");
    }
    if !token.is_empty()
        && let Ok(proc_dir) = rustix::fs::open(
            c"/proc",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    {
        for _ in 0..ROUNDS {
            if kill_marked(&proc_dir, token.to_bytes(), &groups) == 0 {
                break;
            }
        }
    }
    // The cgroup v2 parent, then the v1 `pids` root (optional third argument): both emptied by the kills above.
    let pause = rustix::thread::Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    for dir in [Some(cg), pids].into_iter().flatten() {
        if dir.is_empty() {
            continue;
        }
        for _ in 0..ROUNDS {
            if remove_cgroup(dir) {
                break;
            }
            let _ = rustix::thread::nanosleep(&pause);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines_parse_and_nothing_else_does() {
        assert!(matches!(command(b"quit"), Some(Command::Quit)));
        assert!(matches!(command(b"+ 42"), Some(Command::Add(42))));
        assert!(matches!(command(b"- 7"), Some(Command::Remove(7))));
        for bad in [
            &b""[..],
            b"+",
            b"+ ",
            b"+42",
            b"+ -1",
            b"+ 0",
            b"* 3",
            b"+ 99999999999",
            b"quit ",
        ] {
            assert!(command(bad).is_none(), "{:?}", core::str::from_utf8(bad));
        }
    }

    #[test]
    fn groups_are_added_once_and_removed() {
        let mut g = Groups {
            list: [0; MAX_GROUPS],
            len: 0,
        };
        g.add(5);
        g.add(5);
        g.add(9);
        assert_eq!(g.len, 2);
        g.remove(5);
        assert!(!g.contains(5) && g.contains(9));
        for pg in 1..=(MAX_GROUPS as i32 + 10) {
            g.add(pg);
        }
        assert_eq!(g.len, MAX_GROUPS, "the list is bounded");
    }

    #[test]
    fn the_marker_is_found_only_at_the_start_of_a_variable() {
        let prefix: [&[u8]; 3] = [MARKER, b"tok", b"/"];
        let check = |env: &[u8], piece: usize| {
            let (r, mut w) = std::io::pipe().unwrap();
            std::io::Write::write_all(&mut w, env).unwrap();
            drop(w);
            let mut buf = vec![0u8; piece];
            // SAFETY: `r` is open for the whole call.
            let fd = unsafe { BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(&r)) };
            environ_has(fd, &prefix, &mut buf)
        };
        for piece in [1, 3, 4096] {
            assert!(check(b"A=1\0SHELLWARD_TREE=tok/12\0B=2\0", piece));
            assert!(check(b"SHELLWARD_TREE=tok/", piece));
            assert!(!check(b"XSHELLWARD_TREE=tok/1\0", piece));
            assert!(!check(b"A=SHELLWARD_TREE=tok/1\0", piece));
            assert!(!check(b"SHELLWARD_TREE=toke/1\0", piece));
            assert!(!check(b"SHELLWARD_TREE=tok\0", piece));
            assert!(!check(b"", piece));
        }
    }

    #[test]
    fn the_group_is_read_after_the_name_whatever_the_name_holds() {
        assert_eq!(stat_pgrp(b"12 (sleep) S 1 12 12 0 -1"), Some(12));
        assert_eq!(stat_pgrp(b"12 (a) b (c) S 1 77 12 0 -1"), Some(77));
        assert_eq!(stat_pgrp(b"12 (x"), None);
    }

    #[test]
    fn proc_paths_are_nul_terminated_and_bounded() {
        let mut buf = [0u8; 64];
        assert_eq!(
            proc_path(b"123", b"environ", &mut buf).unwrap().to_bytes(),
            b"123/environ"
        );
        assert!(proc_path(&[b'1'; 60], b"environ", &mut buf).is_none());
    }
}
