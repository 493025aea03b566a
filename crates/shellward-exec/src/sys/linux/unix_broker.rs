//! A session's own Unix sockets under a network other than the host's: the broker that connects them.
//!
//! A network namespace cuts IP and abstract Unix sockets, but a socket at a path (`/var/run/docker.sock`, an agent's,
//! a database's) is reached through the file system, which the namespace does not cover, and no Landlock ABI up to 7
//! scopes `connect` on a pathname socket. So a command whose network is not the host's runs under a second seccomp
//! filter (`notify_filter`; with confined writes it also sends the calls `write_watch` looks at) that
//!
//! - lets it create stream and seqpacket Unix sockets (which cannot send to an address: the kernel refuses or
//!   ignores one), and refuses datagram ones, also as a `socketpair` (a datagram socket could `sendto` any path) —
//!   through the broker, which records the refusal;
//! - turns every `connect(2)` into a user notification this module answers ([`serve`]).
//!
//! The broker (a thread per command, and one per pending call) never lets the kernel continue the call itself — the
//! command's memory and descriptor table can change between a check and a continue — but does the call for it: it
//! copies the address out of the command's memory, takes the command's socket with `pidfd_getfd`, and connects that
//! very socket. An IP or abstract address is connected as given: the socket belongs to the command's network
//! namespace, which confines it. A path is resolved as the command sees it (its root and working directory, through
//! `/proc/PID/root` with `RESOLVE_IN_ROOT`) and connected only when the socket there is **listening in the command's
//! own network namespace** — made by a process of the session, wherever it is (its workspace, its private `/tmp`).
//! A socket of the host (or of another session) listens in another namespace and is refused with `EACCES`; the
//! refusal is recorded for the command's result (`ExecResult::refused_sockets`). The namespace's listening sockets are read with
//! `sock_diag` (`UNIX_DIAG_VFS`: the device and inode of each bound socket) on a netlink socket the command's process
//! made in its namespace before exec and handed over with the listener.
//!
//! Where the filter cannot be installed with a listener (the command already runs under one: a shellward inside a
//! shellward command), the command gets the strict filter instead: no Unix socket of its own at all, as before.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub(crate) use super::notify_filter::{Programs, Watch, hand_over};

/// Whether commands here can have the broker: the fast spawn path (x86_64) and a kernel with `pidfd_getfd` and
/// `openat2` (5.9; probed once).
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if !cfg!(target_arch = "x86_64") {
            return false;
        }
        // SAFETY: both calls with an invalid descriptor and no memory: they fail with EBADF where they exist.
        let (getfd, openat2) = unsafe {
            (
                libc::syscall(libc::SYS_pidfd_getfd, -1, 0, 0),
                libc::syscall(libc::SYS_openat2, -1, std::ptr::null::<u8>(), std::ptr::null::<u8>(), 0),
            )
        };
        let exists = |r: libc::c_long| r >= 0 || errno() != libc::ENOSYS;
        let found = exists(getfd) && exists(openat2);
        if !found {
            tracing::info!(
                "Unix sockets stay refused under networks other than the host's: this kernel has no pidfd_getfd or \
                 openat2 (5.9), which the socket broker needs"
            );
        }
        found
    })
}

/// The `(device, inode)` of each of `paths` that is a socket now (`Confinement::unix_sockets`, as the host sees them).
pub(crate) fn allowed_sockets(paths: &[PathBuf]) -> Vec<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .filter(|m| m.file_type().is_socket())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// In the executor, after a brokered spawn: serves the command's calls on a thread of its own until every process
/// under the filter has exited — its connects, `allowed` (host sockets it may reach, see [`allowed_sockets`])
/// connected as its own are; with `writes`, its file-writing calls watched for what those rules refuse. Nothing when
/// the child sent nothing (the strict filter, or none, was installed).
pub(crate) fn serve_from(
    channel: RawFd,
    refusals: crate::results::Refusals,
    allowed: Vec<(u64, u64)>,
    writes: Option<super::write_watch::WriteRules>,
) {
    let Ok(fds) = super::proxy_fd::receive_fds::<2>(channel) else {
        return;
    };
    let [listener, diag] = fds;
    if writes.is_some() {
        refusals.watching_writes();
    }
    // The caller waits while its call is looked at: wake the broker, and the caller after, on the same CPU at once
    // (Linux 6.6; elsewhere the usual wake-ups: slower, the same answers).
    // SAFETY: the ioctl takes the flags as its argument (no memory).
    let synced = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SYNC_WAKE_UP,
        )
    };
    if synced != 0 {
        tracing::debug!(
            "no synchronous wake-ups for the broker: {}",
            io::Error::last_os_error()
        );
    }
    let broker = Arc::new(Broker {
        listener,
        diag: Mutex::new(diag),
        refusals,
        allowed,
        writes,
        busy: Mutex::new(0),
        freed: std::sync::Condvar::new(),
    });
    let spawned = std::thread::Builder::new()
        .name("sw-unix-broker".into())
        .spawn(move || broker.run());
    if let Err(e) = spawned {
        // The listener dropped with the closure: the command's connects fail (ENOSYS) rather than go unchecked.
        tracing::warn!("cannot start the Unix socket broker of a command: {e}");
    }
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (linux/seccomp.h).
const SYNC_WAKE_UP: libc::c_ulong = 1;

/// Most calls of one command answered at once (each on a thread of its own).
const MAX_IN_FLIGHT: usize = 32;
/// An answering thread's name (what `/proc/PID/task/TID/comm` shows: at most 15 bytes).
pub(crate) const ANSWER_THREAD: &str = "sw-unix-answer";
/// An answering thread's stack: it makes a few system calls and one netlink read into a heap buffer.
const ANSWER_STACK: usize = 128 * 1024;

/// One taken answering slot, given back when dropped.
struct Slot(Arc<Broker>);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|p| p.into_inner());
        *busy = busy.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

/// One command's broker.
struct Broker {
    listener: OwnedFd,
    diag: Mutex<OwnedFd>,
    refusals: crate::results::Refusals,
    /// Host sockets the operator lets it reach, by `(device, inode)`.
    allowed: Vec<(u64, u64)>,
    /// With its writes watched: the rules of its write confinement.
    writes: Option<super::write_watch::WriteRules>,
    /// Answers in flight, and the signal that one ended.
    busy: Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Broker {
    /// Receives notifications until the listener hangs up; each is answered on a thread of its own (a connect may
    /// block, and must not hold up the command's other threads).
    fn run(self: Arc<Self>) {
        loop {
            let mut poll = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one valid pollfd.
            let n = unsafe { libc::poll(&mut poll, 1, -1) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if poll.revents & libc::POLLIN == 0 {
                // POLLHUP: no process runs under the filter any more.
                return;
            }
            // SAFETY: `seccomp_notif` is plain data; RECV fills it (the kernel requires it zeroed).
            let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: the ioctl writes one `seccomp_notif` into `notif`.
            let got = unsafe {
                libc::ioctl(
                    self.listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    &mut notif,
                )
            };
            if got != 0 {
                match io::Error::last_os_error().raw_os_error() {
                    // The caller went away (killed) between poll and receive.
                    Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                    _ => return,
                }
            }
            // A write is only looked at while its caller waits (a few file system calls, here: so a refusal is
            // recorded before the command can end), then made by the kernel as asked.
            if let Some(rules) = &self.writes
                && super::write_watch::watched(notif.data.nr as libc::c_long)
            {
                let asked = super::write_watch::asked(&notif, rules, || self.valid(notif.id));
                if let Some(path) = asked.and_then(|a| super::write_watch::refused(&a, rules)) {
                    self.refusals.write(super::write_watch::tidy(&path));
                }
                self.continue_call(notif.id);
                continue;
            }
            // At most MAX_IN_FLIGHT calls answered at once: more wait, holding up only this command (a command
            // opening thousands of connects that never complete cannot make the host spawn a thread each).
            let Some(slot) = self.slot() else {
                return;
            };
            let broker = self.clone();
            let answered = std::thread::Builder::new()
                .name(ANSWER_THREAD.into())
                .stack_size(ANSWER_STACK)
                .spawn(move || {
                    let _slot = slot;
                    broker.answer(&notif)
                });
            if answered.is_err() {
                self.reply(notif.id, Err(libc::EAGAIN));
            }
        }
    }

    /// A free slot for one answer, waiting while every one is taken; `None` once no process runs under the filter.
    fn slot(self: &Arc<Self>) -> Option<Slot> {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy >= MAX_IN_FLIGHT {
            let (guard, _) = self
                .freed
                .wait_timeout(busy, std::time::Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner());
            busy = guard;
            if *busy >= MAX_IN_FLIGHT && self.hung_up() {
                return None;
            }
        }
        *busy += 1;
        Some(Slot(self.clone()))
    }

    /// Whether the listener hung up (no process runs under the filter any more).
    fn hung_up(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd, without waiting.
        let n = unsafe { libc::poll(&mut poll, 1, 0) };
        n > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR) != 0
    }

    /// Whether the notification `id` still stands (its caller is still in the call).
    fn valid(&self, id: u64) -> bool {
        // SAFETY: the ioctl reads one u64.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &id,
            ) == 0
        }
    }

    /// Answers call `id` with `result` (the call's return value or errno).
    fn reply(&self, id: u64, result: Result<i64, i32>) {
        let mut resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match result {
            Ok(v) => resp.val = v,
            Err(e) => resp.error = -e,
        }
        // SAFETY: the ioctl reads one `seccomp_notif_resp`. It fails (ENOENT) when the caller is gone: nothing to do.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp,
            );
        }
    }

    /// Lets the kernel make call `id` as the command asked (a watched write: Landlock decides it).
    fn continue_call(&self, id: u64) {
        let mut resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: the ioctl reads one `seccomp_notif_resp`; ENOENT when the caller is gone: nothing to do.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp,
            );
        }
    }

    /// One `connect(fd, addr, len)` of the command's process `notif.pid`, done for it.
    fn answer(&self, notif: &libc::seccomp_notif) {
        let nr = notif.data.nr as libc::c_long;
        if nr == libc::SYS_socket || nr == libc::SYS_socketpair {
            // Only a datagram Unix socket comes here (the filter): refused, and said in the result.
            self.refusals.datagram();
            return self.reply(notif.id, Err(libc::EPERM));
        }
        if nr != libc::SYS_connect {
            return self.reply(notif.id, Err(libc::ENOSYS));
        }
        let result = self.connect_for(notif);
        self.reply(notif.id, result.map(|()| 0));
    }

    fn connect_for(&self, notif: &libc::seccomp_notif) -> Result<(), i32> {
        // The calling thread (any thread of the command, not only its main one).
        let pid = notif.pid as libc::pid_t;
        let [fd, addr, len, ..] = notif.data.args;
        let pidfd = thread_pidfd(pid)?;
        // The pid named the caller when the pidfd was opened only if the call still stands now.
        if !self.valid(notif.id) {
            return Err(libc::EINTR);
        }
        let len = len as usize;
        if len > std::mem::size_of::<libc::sockaddr_storage>() {
            return Err(libc::EINVAL);
        }
        let mut buf = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
        read_memory(pid, addr, &mut buf[..len])?;
        // SAFETY: pidfd_getfd on a pidfd this function owns; the result is a new descriptor owned from here.
        let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd as i32, 0) };
        if sock < 0 {
            return Err(errno());
        }
        // SAFETY: as above.
        let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
        // What was read and taken belongs to the caller only if the call still stands (the pid was not reused).
        if !self.valid(notif.id) {
            return Err(libc::EINTR);
        }
        let family = u16::from_ne_bytes([buf[0], buf[1]]);
        let pathname = domain(&sock) == Some(libc::AF_UNIX)
            && family == libc::AF_UNIX as u16
            && len > 2
            && buf[2] != 0;
        if !pathname {
            // IP, abstract or unnamed: confined by the socket's network namespace, connected as asked; an IP
            // address the namespace has no route to is recorded as refused.
            let result = connect_raw(&sock, &buf[..len]);
            if let Err(libc::ENETUNREACH | libc::EHOSTUNREACH) = result
                && let Some(to) = ip_address(&buf[..len])
            {
                self.refusals.address(to);
            }
            return result;
        }
        // As the kernel would: a pathname address longer than `sockaddr_un` is invalid.
        if len > std::mem::size_of::<libc::sockaddr_un>() {
            return Err(libc::EINVAL);
        }
        let path_bytes = &buf[2..len];
        let path_bytes = &path_bytes[..path_bytes
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(path_bytes.len())];
        let path = PathBuf::from(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path_bytes),
        );
        let target = resolve(pid, &path)?;
        let (dev, ino) = socket_identity(&target)?;
        let own = self.allowed.contains(&(dev, ino)) || {
            let diag = self.diag.lock().unwrap_or_else(|p| p.into_inner());
            listening_here(&diag, dev, ino).map_err(|e| {
                tracing::warn!("cannot read the sockets of a command's network namespace: {e}");
                libc::EACCES
            })?
        };
        if !own {
            self.refusals.push(path);
            return Err(libc::EACCES);
        }
        let via = format!("/proc/self/fd/{}", target.as_raw_fd());
        connect_raw(
            &sock,
            &unix_address(via.as_bytes()).ok_or(libc::ENAMETOOLONG)?,
        )
    }
}

/// `PIDFD_THREAD` (`O_EXCL`, Linux 6.9): a pidfd for one thread, whose descriptor table `pidfd_getfd` reads.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// A pidfd for the thread `tid` (whose call is answered): `PIDFD_THREAD` where the kernel has it, else its thread
/// group's (threads share a descriptor table unless one was unshared, which commands do not do).
fn thread_pidfd(tid: libc::pid_t) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_open has no memory arguments.
    let mut fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if fd < 0 && errno() == libc::EINVAL {
        let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse::<libc::pid_t>().ok())
            })
            .ok_or(libc::ESRCH)?;
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    }
    if fd < 0 {
        return Err(libc::ESRCH);
    }
    // SAFETY: a fresh descriptor owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The current errno.
fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Reads `buf.len()` bytes at `addr` of process `pid`.
pub(crate) fn read_memory(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> Result<(), i32> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: one local iovec into `buf`; the remote one is only read by the kernel, in the other process.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n != buf.len() as isize {
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// The socket's domain (`SO_DOMAIN`).
fn domain(sock: &OwnedFd) -> Option<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into one int.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

/// `connect(sock, addr)`.
fn connect_raw(sock: &OwnedFd, addr: &[u8]) -> Result<(), i32> {
    // SAFETY: `addr` is `addr.len()` readable bytes; the kernel checks the family and length.
    let r = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(errno()) }
}

/// An IPv4 or IPv6 socket address as `host:port` (`[::1]:80`), `None` for another family or a short one.
fn ip_address(addr: &[u8]) -> Option<String> {
    let family = u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]);
    let port = u16::from_be_bytes([*addr.get(2)?, *addr.get(3)?]);
    match family as i32 {
        libc::AF_INET => {
            let ip: [u8; 4] = addr.get(4..8)?.try_into().ok()?;
            Some(std::net::SocketAddr::from((ip, port)).to_string())
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
            Some(std::net::SocketAddr::from((ip, port)).to_string())
        }
        _ => None,
    }
}

/// A `sockaddr_un` of `path`, as bytes, or `None` when it does not fit.
fn unix_address(path: &[u8]) -> Option<Vec<u8>> {
    if path.len() >= 108 {
        return None;
    }
    let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    out.extend_from_slice(path);
    out.push(0);
    Some(out)
}

/// `path` as process `pid` would resolve it for `connect` (its root, its working directory for a relative path,
/// symbolic links followed inside its root), opened `O_PATH`.
fn resolve(pid: libc::pid_t, path: &std::path::Path) -> Result<OwnedFd, i32> {
    use std::os::unix::ffi::OsStrExt;
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|_| libc::ENOENT)?;
        if cwd.as_os_str().as_bytes().ends_with(b" (deleted)") {
            return Err(libc::ENOENT);
        }
        cwd.join(path)
    };
    let root = CString::new(format!("/proc/{pid}/root")).map_err(|_| libc::EINVAL)?;
    // SAFETY: open of a NUL-terminated path.
    let root = unsafe {
        libc::open(
            root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if root < 0 {
        return Err(libc::ENOENT);
    }
    // SAFETY: a fresh descriptor owned from here.
    let root = unsafe { OwnedFd::from_raw_fd(root) };
    super::write_watch::open_in_root(&root, &full, libc::O_PATH)
}

/// The device and inode of the socket file `fd` names; `ECONNREFUSED` (as `connect` says) when it is no socket.
fn socket_identity(fd: &OwnedFd) -> Result<(u64, u64), i32> {
    // SAFETY: fstat into a zeroed `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of a valid descriptor into `st`.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(errno());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED);
    }
    Ok((st.st_dev, st.st_ino))
}

/// `SOCK_DIAG_BY_FAMILY`, `UDIAG_SHOW_VFS`, `UNIX_DIAG_VFS` (linux/sock_diag.h, linux/unix_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_VFS: u32 = 0x2;
const UNIX_DIAG_VFS: u16 = 1;
/// The listening state (`TCP_LISTEN`), as a bit of `udiag_states`.
const LISTENING: u32 = 1 << 10;

/// Whether a socket listening in the network namespace of `diag` is bound at the file `(dev, ino)`.
fn listening_here(diag: &OwnedFd, dev: u64, ino: u64) -> io::Result<bool> {
    // nlmsghdr (16) + unix_diag_req (24).
    let mut req = [0u8; 40];
    req[0..4].copy_from_slice(&40u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[16] = libc::AF_UNIX as u8;
    req[20..24].copy_from_slice(&LISTENING.to_ne_bytes());
    req[28..32].copy_from_slice(&UDIAG_SHOW_VFS.to_ne_bytes());
    req[32..40].copy_from_slice(&[0xff; 8]);
    // SAFETY: send of `req`'s bytes on the netlink socket (to the kernel: no address needed).
    if unsafe { libc::send(diag.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let (want_major, want_minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    let mut found = false;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: recv into `buf`.
        let n = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut at = 0usize;
        let n = n as usize;
        while at + 16 <= n {
            let word = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap_or([0; 4]));
            let msg_len = word(at) as usize;
            let msg_type = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
            if msg_len < 16 || at + msg_len > n {
                return Err(io::Error::other("a malformed sock_diag answer"));
            }
            match msg_type as i32 {
                libc::NLMSG_DONE => return Ok(found),
                libc::NLMSG_ERROR => {
                    return Err(io::Error::other("sock_diag refused the query"));
                }
                _ => {}
            }
            // unix_diag_msg (16 bytes) after the header, then attributes.
            let mut a = at + 16 + 16;
            while a + 4 <= at + msg_len {
                let rta_len = u16::from_ne_bytes([buf[a], buf[a + 1]]) as usize;
                let rta_type = u16::from_ne_bytes([buf[a + 2], buf[a + 3]]);
                if rta_len < 4 || a + rta_len > at + msg_len {
                    break;
                }
                if rta_type == UNIX_DIAG_VFS && rta_len >= 12 {
                    let vfs_ino = word(a + 4) as u64;
                    let vfs_dev = word(a + 8) as u64;
                    // The kernel's dev_t: major in the high 12 bits, minor in the low 20.
                    if vfs_ino == ino
                        && vfs_dev >> 20 == want_major
                        && vfs_dev & 0xf_ffff == want_minor
                    {
                        found = true;
                    }
                }
                a += (rta_len + 3) & !3;
            }
            at += (msg_len + 3) & !3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_are_shown_as_host_and_port() {
        let mut v4 = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        v4.extend(443u16.to_be_bytes());
        v4.extend([93, 184, 216, 34, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ip_address(&v4).as_deref(), Some("93.184.216.34:443"));
        let mut v6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        v6.extend(80u16.to_be_bytes());
        v6.extend([0; 4]);
        v6.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend([0; 4]);
        assert_eq!(ip_address(&v6).as_deref(), Some("[::1]:80"));
        assert_eq!(ip_address(&v4[..6]), None);
        let unix = (libc::AF_UNIX as u16).to_ne_bytes();
        assert_eq!(ip_address(&unix), None);
    }

    #[test]
    fn a_unix_address_fits_or_is_refused() {
        let a = unix_address(b"/proc/self/fd/7").unwrap();
        assert_eq!(&a[2..a.len() - 1], b"/proc/self/fd/7");
        assert_eq!(a.last(), Some(&0));
        assert!(unix_address(&[b'a'; 108]).is_none());
    }

    #[test]
    fn a_listener_of_this_namespace_is_found_by_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let st = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        // SAFETY: socket(2) with constant arguments.
        let diag = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        assert!(diag >= 0);
        // SAFETY: a fresh descriptor.
        let diag = unsafe { OwnedFd::from_raw_fd(diag) };
        assert!(listening_here(&diag, st.dev(), st.ino()).unwrap());
        assert!(!listening_here(&diag, st.dev(), st.ino() + 1_000_000).unwrap());
        drop(listener);
        assert!(!listening_here(&diag, st.dev(), st.ino()).unwrap());
    }
}
