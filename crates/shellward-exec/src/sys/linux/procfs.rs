//! Reading the process table from `/proc` (Linux): parents, process groups, states and start times, environments
//! and cgroups, for the process-group fallback and for verifying a process's identity before it is signalled.

use std::collections::{HashMap, HashSet};
use std::fs;

/// One process as seen in `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcEntry {
    /// Process id.
    pub(crate) pid: i32,
    /// Parent process id.
    pub(crate) ppid: i32,
    /// Process group id.
    pub(crate) pgrp: i32,
    /// Session id.
    pub(crate) session: i32,
    /// State letter (`R`, `S`, `Z`, ...).
    pub(crate) state: char,
    /// Start time after boot, in clock ticks (`/proc/<pid>/stat` field 22). With the pid, it names one process: a
    /// pid reused by another process comes with another start time (unless both started in the same tick).
    pub(crate) start: u64,
}

impl ProcEntry {
    /// Whether the process is running or could run (not a zombie or dead).
    pub(crate) fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses one `/proc/<pid>/stat` line.
pub(crate) fn parse_stat(line: &str) -> Option<ProcEntry> {
    let pid = line.split_whitespace().next()?.parse().ok()?;
    // The command name is in parentheses and may contain anything, so parse after the last `)`.
    let rest = &line[line.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let session = f.next()?.parse().ok()?;
    // Field 22 (starttime) is the 16th after the session (field 6).
    let start = f.nth(15)?.parse().ok()?;
    Some(ProcEntry {
        pid,
        ppid,
        pgrp,
        session,
        state,
        start,
    })
}

/// Every process currently in `/proc`.
pub(crate) fn scan() -> Vec<ProcEntry> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// One process by id, if it exists.
pub(crate) fn stat(pid: i32) -> Option<ProcEntry> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The direct children of this process (of all its threads), from `/proc/self/task/*/children`; `None` when the
/// kernel does not provide those files (`CONFIG_PROC_CHILDREN`).
///
/// Each list is read with one large `read` call: the kernel builds it in one pass then, whereas a list read in small
/// pieces can skip entries when children come and go between the pieces.
#[cfg(test)]
pub(crate) fn own_children() -> Option<Vec<i32>> {
    let tids: Vec<i32> = fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
        .collect();
    let mut out = Vec::new();
    for tid in tids {
        match children_of(&[tid]) {
            Some(kids) => out.extend(kids),
            // A thread that ended after the directory was read (test threads come and go) lists nothing.
            None if !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() => {}
            None => return None,
        }
    }
    Some(out)
}

/// The direct children of the given threads of this process (`/proc/self/task/<tid>/children`), read as
/// [`own_children`] reads them; `None` when a list cannot be read (no such thread, or no such files).
pub(crate) fn children_of(tids: &[i32]) -> Option<Vec<i32>> {
    children_of_in("self", tids)
}

/// The children of another process `pid`'s threads `tids` (as [`children_of`]): a session sandbox's pid 1, single
/// threaded, is `children_of_process(pid)`.
pub(crate) fn children_of_process(pid: i32) -> Option<Vec<i32>> {
    children_of_in(&pid.to_string(), &[pid])
}

fn children_of_in(process: &str, tids: &[i32]) -> Option<Vec<i32>> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for tid in tids {
        let mut file = fs::File::open(format!("/proc/{process}/task/{tid}/children")).ok()?;
        let mut len = 0;
        loop {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    if len == buf.len() {
                        buf.resize(buf.len() * 2, 0);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        let list = std::str::from_utf8(&buf[..len]).ok()?;
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    Some(out)
}

/// The environment of a process as `NAME=value` entries, if it can be read (`None` for zombies and processes of
/// other users).
pub(crate) fn environ(pid: i32) -> Option<Vec<Vec<u8>>> {
    let raw = fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter(|kv| !kv.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

/// Whether the environment of `pid` holds exactly `entry` (`NAME=value`); false when it cannot be read.
pub(crate) fn has_env(pid: i32, entry: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|kv| kv == entry))
        .unwrap_or(false)
}

/// Living processes of `table` whose environment holds exactly `entry` (`NAME=value`).
pub(crate) fn with_env(table: &[ProcEntry], entry: &str) -> Vec<ProcEntry> {
    table
        .iter()
        .filter(|p| p.alive() && has_env(p.pid, entry.as_bytes()))
        .copied()
        .collect()
}

/// The cgroup v2 path of `pid` (the `0::` line of `/proc/<pid>/cgroup`), if it can be read.
pub(crate) fn cgroup_v2(pid: i32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
}

/// The living members of a tree, from one table snapshot: the `roots` (processes already proven to be members),
/// everything in process group `pgid` when the group is proven to be the tree's (`group_is_ours`, or a root is in
/// it: a group id cannot be reused while a member lives), and the descendants of all of those.
///
/// Nothing is a member by its pid number alone: a pid remembered from an earlier snapshot must come back as a root
/// with the same start time, so a stranger that received a dead member's pid is never included.
pub(crate) fn tree_members(
    table: &[ProcEntry],
    pgid: i32,
    group_is_ours: bool,
    roots: &HashMap<i32, u64>,
) -> HashMap<i32, u64> {
    let mut children: HashMap<i32, Vec<&ProcEntry>> = HashMap::new();
    for p in table {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut members: HashMap<i32, u64> = table
        .iter()
        .filter(|p| roots.get(&p.pid) == Some(&p.start))
        .map(|p| (p.pid, p.start))
        .collect();
    let group_is_ours = group_is_ours
        || table
            .iter()
            .any(|p| p.pgrp == pgid && members.contains_key(&p.pid));
    if group_is_ours {
        members.extend(
            table
                .iter()
                .filter(|p| p.pgrp == pgid)
                .map(|p| (p.pid, p.start)),
        );
    }
    let mut stack: Vec<i32> = members.keys().copied().collect();
    while let Some(pid) = stack.pop() {
        for c in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            if members.insert(c.pid, c.start).is_none() {
                stack.push(c.pid);
            }
        }
    }
    let alive: HashSet<i32> = table.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
    members.retain(|pid, _| alive.contains(pid));
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let e = parse_stat(
            "42 (a (weird) name) S 1 42 40 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100",
        )
        .unwrap();
        assert_eq!(
            (e.pid, e.ppid, e.pgrp, e.session, e.state, e.start),
            (42, 1, 42, 40, 'S', 987654)
        );
        assert!(
            parse_stat("42 (short) S 1 42 40 0 -1 4194560 0 0").is_none(),
            "a line without a start time is refused"
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn own_children_lists_what_this_process_started() {
        let mut kids: Vec<std::process::Child> = (0..3)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let listed = own_children().expect("/proc/self/task/*/children");
        for k in &kids {
            assert!(
                listed.contains(&(k.id() as i32)),
                "{} not in {listed:?}",
                k.id()
            );
        }
        let starts: Vec<(i32, u64)> = kids
            .iter()
            .map(|k| (k.id() as i32, stat(k.id() as i32).unwrap().start))
            .collect();
        for k in &mut kids {
            k.kill().unwrap();
            k.wait().unwrap();
        }
        // A listed pid may be reused meanwhile by a child another test started: only the same process counts.
        let listed = own_children().unwrap();
        for (pid, start) in starts {
            assert!(
                !listed.contains(&pid) || stat(pid).is_none_or(|e| e.start != start),
                "{pid} is still listed after it was reaped"
            );
        }
    }

    #[test]
    fn children_are_listed_under_the_thread_that_started_them() {
        // Started from a thread of its own, so the child is that thread's and nobody else's.
        let (tid, mut kid) = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            (
                tid,
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap(),
            )
        })
        .join()
        .unwrap();
        let pid = kid.id() as i32;
        // The thread has exited: its children moved to a living thread of this process (the kernel's rule for
        // orphans of a thread whose group lives on), which is what `children_of` callers rely on.
        let everywhere = own_children().unwrap();
        assert!(everywhere.contains(&pid), "{pid} not in {everywhere:?}");
        // `join` returns once the thread's code is done; the kernel removes its `/proc/self/task` entry a moment
        // later (when the exited task is released), so wait for that, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while children_of(&[tid]).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            children_of(&[tid]).is_none(),
            "an exited thread has no children file"
        );
        let here = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let mut k = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap();
            let listed = children_of(&[tid]).unwrap();
            let found = listed.contains(&(k.id() as i32));
            k.kill().unwrap();
            k.wait().unwrap();
            found
        });
        assert!(here.join().unwrap(), "a thread's own child is in its list");
        kid.kill().unwrap();
        kid.wait().unwrap();
    }

    #[test]
    fn the_own_process_is_found() {
        let me = std::process::id() as i32;
        assert!(scan().iter().any(|p| p.pid == me));
        assert_eq!(stat(me).unwrap().pid, me);
    }

    #[test]
    fn members_follow_groups_and_parents() {
        let e = |pid, ppid, pgrp, state| ProcEntry {
            pid,
            ppid,
            pgrp,
            session: 0,
            state,
            start: 1000 + pid as u64,
        };
        let table = [
            e(10, 1, 10, 'S'),
            e(11, 10, 10, 'S'),
            e(12, 11, 12, 'S'),
            e(13, 12, 13, 'S'),
            e(14, 1, 10, 'Z'),
            e(20, 1, 20, 'S'),
        ];
        let sorted = |m: HashMap<i32, u64>| {
            let mut v: Vec<_> = m.into_keys().collect();
            v.sort();
            v
        };
        assert_eq!(
            sorted(tree_members(&table, 10, true, &HashMap::new())),
            [10, 11, 12, 13]
        );
        // A group not proven to be the tree's contributes nothing by its number.
        assert!(tree_members(&table, 10, false, &HashMap::new()).is_empty());
        // A proven member in the group proves the group.
        assert_eq!(
            sorted(tree_members(
                &table,
                10,
                false,
                &HashMap::from([(11, 1011)])
            )),
            [10, 11, 12, 13]
        );
        assert_eq!(
            sorted(tree_members(
                &table,
                99,
                false,
                &HashMap::from([(12, 1012)])
            )),
            [12, 13]
        );
        // A remembered pid now held by another process (another start time) is not a member.
        assert!(tree_members(&table, 99, false, &HashMap::from([(20, 5)])).is_empty());
    }
}

/// The file a process's standard input is, as `(device, inode)` of what `/proc/<pid>/fd/0` opens (a pipe's inode,
/// or a terminal's device node); `None` when it has none or it cannot be read.
pub(crate) fn stdin_identity(pid: i32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(format!("/proc/{pid}/fd/0")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Whether a process is blocked reading its standard input now: in `read`/`readv`/`pread64` on descriptor 0, or in
/// `select`/`pselect6` watching descriptors up to 0 only (what line editors such as readline do). From
/// `/proc/<pid>/syscall` (x86_64 numbers); any other state, or an unreadable file, is "no".
pub(crate) fn blocked_reading_stdin(pid: i32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    blocked_reading_fd0(&text)
}

/// [`blocked_reading_stdin`] on the text of a `/proc/<pid>/syscall` file.
fn blocked_reading_fd0(text: &str) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut fields = text.split_whitespace();
    let (Some(nr), Some(arg0)) = (fields.next(), fields.next()) else {
        return false;
    };
    let Ok(nr) = nr.parse::<i64>() else {
        // "running", or "-1 …" (blocked outside a system call).
        return false;
    };
    let Ok(arg0) = u64::from_str_radix(arg0.trim_start_matches("0x"), 16) else {
        return false;
    };
    match nr {
        // read, pread64, readv: the descriptor.
        0 | 17 | 19 => arg0 == 0,
        // select, pselect6: the number of descriptors watched (1: only descriptor 0).
        23 | 270 => arg0 == 1,
        _ => false,
    }
}

#[cfg(test)]
mod syscall_tests {
    use super::blocked_reading_fd0;

    #[test]
    fn a_read_of_descriptor_zero_is_waiting_for_input_and_nothing_else_is() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        assert!(blocked_reading_fd0(
            "0 0x0 0x7ffd1234 0x400 0x0 0x0 0x0 0x7ffd 0x7f00\n"
        ));
        assert!(blocked_reading_fd0(
            "270 0x1 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7ffd 0x7f00\n"
        ));
        assert!(!blocked_reading_fd0(
            "0 0x3 0x7ffd1234 0x400 0x0 0x0 0x0 0x7ffd 0x7f00\n"
        ));
        assert!(!blocked_reading_fd0(
            "230 0x0 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f00\n"
        ));
        assert!(!blocked_reading_fd0("running\n"));
        assert!(!blocked_reading_fd0("-1 0x7ffd 0x7f00\n"));
    }
}

/// The `(device, inode)` a command's stdin has in its processes, from the executor's end of it (`fd`): the pipe's
/// inode (both ends share it), or on a terminal the slave device node of the master `fd` (`/dev/pts/N`).
pub(crate) fn input_identity(fd: std::os::fd::RawFd, terminal: bool) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    if terminal {
        let mut n: libc::c_uint = 0;
        // SAFETY: TIOCGPTN writes the terminal's number into `n`, a local it owns.
        if unsafe { libc::ioctl(fd, libc::TIOCGPTN, &mut n) } != 0 {
            return None;
        }
        let meta = fs::metadata(format!("/dev/pts/{n}")).ok()?;
        return Some((meta.dev(), meta.ino()));
    }
    let meta = fs::metadata(format!("/proc/self/fd/{fd}")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The socket inodes among a process's open descriptors (`/proc/<pid>/fd/*` → `socket:[inode]`).
pub(crate) fn socket_inodes(pid: i32, out: &mut std::collections::HashSet<u64>) {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return;
    };
    for entry in dir.flatten() {
        if let Ok(target) = fs::read_link(entry.path())
            && let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse().ok())
        {
            out.insert(inode);
        }
    }
}

/// What of `inodes` listens, as seen from `pid`'s network namespace: TCP sockets in `LISTEN`
/// (`tcp 127.0.0.1:5173`), bound UDP sockets (`udp 0.0.0.0:5353`) and listening unix sockets (`unix /tmp/app.sock`),
/// from `/proc/<pid>/net/{tcp,tcp6,udp,udp6,unix}`. Sorted, without repeats.
pub(crate) fn listening(pid: i32, inodes: &std::collections::HashSet<u64>) -> Vec<String> {
    let mut found = std::collections::BTreeSet::new();
    if inodes.is_empty() {
        return Vec::new();
    }
    for (file, proto, v6) in [
        ("tcp", "tcp", false),
        ("tcp6", "tcp", true),
        ("udp", "udp", false),
        ("udp6", "udp", true),
    ] {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{file}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            // TCP: 0A is LISTEN; UDP: 07 is the state of a bound socket.
            let wanted = if proto == "tcp" { "0A" } else { "07" };
            if *state != wanted || !inode.parse::<u64>().is_ok_and(|i| inodes.contains(&i)) {
                continue;
            }
            if let Some(address) = socket_address(local, v6) {
                found.insert(format!("{proto} {address}"));
            }
        }
    }
    if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/unix")) {
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; flag __SO_ACCEPTCON (0x10000): listening.
            let (Some(flags), Some(inode)) = (f.get(3), f.get(6)) else {
                continue;
            };
            let listens = u32::from_str_radix(flags, 16).is_ok_and(|fl| fl & 0x1_0000 != 0);
            if listens && inode.parse::<u64>().is_ok_and(|i| inodes.contains(&i)) {
                found.insert(format!("unix {}", f.get(7).copied().unwrap_or("(unnamed)")));
            }
        }
    }
    found.into_iter().collect()
}

/// `ADDR:PORT` of a `/proc/net/tcp` local address (`0100007F:1435` → `127.0.0.1:5173`, IPv6 in brackets).
fn socket_address(local: &str, v6: bool) -> Option<String> {
    let (addr, port) = local.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    if v6 {
        if addr.len() != 32 {
            return None;
        }
        // Four 32-bit words, each in host (little-endian) order.
        let mut bytes = [0u8; 16];
        for w in 0..4 {
            let word = u32::from_str_radix(&addr[w * 8..w * 8 + 8], 16).ok()?;
            bytes[w * 4..w * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        Some(format!("[{}]:{port}", std::net::Ipv6Addr::from(bytes)))
    } else {
        let word = u32::from_str_radix(addr, 16).ok()?;
        Some(format!(
            "{}:{port}",
            std::net::Ipv4Addr::from(word.to_le_bytes())
        ))
    }
}

#[cfg(test)]
mod listening_tests {
    use super::*;

    #[test]
    fn addresses_are_read_as_the_kernel_writes_them() {
        assert_eq!(
            socket_address("0100007F:1435", false).unwrap(),
            "127.0.0.1:5173"
        );
        assert_eq!(
            socket_address("00000000:0050", false).unwrap(),
            "0.0.0.0:80"
        );
        assert_eq!(
            socket_address("00000000000000000000000001000000:1F90", true).unwrap(),
            "[::1]:8080"
        );
        assert_eq!(socket_address("zz:1", false), None);
    }

    #[test]
    fn this_process_s_listening_socket_is_found_and_a_connected_one_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let pid = std::process::id() as i32;
        let mut inodes = std::collections::HashSet::new();
        socket_inodes(pid, &mut inodes);
        let found = listening(pid, &inodes);
        assert!(
            found.contains(&format!("tcp 127.0.0.1:{port}")),
            "{found:?}"
        );
        assert_eq!(
            found
                .iter()
                .filter(|f| f.ends_with(&format!(":{port}")))
                .count(),
            1,
            "{found:?}"
        );
    }
}
