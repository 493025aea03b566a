//! The notify filter of a command: the seccomp program (hand-written BPF: `seccompiler` has no user-notification
//! action) that sends a command's connects, datagram Unix sockets (a network other than the host's) and path-writing
//! calls (confined writes) to its broker (`unix_broker`), and its installation in the child, last before exec.

use std::os::fd::RawFd;

/// BPF: `seccomp_data` offsets (nr, arch, the low halves of args 0 and 1 on a little-endian machine).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0: u32 = 16;
const OFF_ARG1: u32 = OFF_ARG0 + 8;
/// The type bits of `socket(2)`'s second argument (without `SOCK_NONBLOCK` / `SOCK_CLOEXEC`).
const SOCK_TYPE_MASK: u32 = 0xf;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
/// Elsewhere the broker is never used ([`available`] is false): the filters are built but never installed.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// One instruction of a filter as written: jumps name labels (`None`: the next instruction).
enum Op {
    /// An instruction without a jump.
    Stmt(u16, u32),
    /// A conditional jump on `k`: to the first label when true, the second when false.
    Jump(u16, u32, Option<&'static str>, Option<&'static str>),
    /// Where a label points (not an instruction).
    Label(&'static str),
}

/// The program of `ops`, labels resolved to relative jumps.
fn assemble(ops: &[Op]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for op in ops {
        match op {
            Op::Label(name) => {
                at.insert(*name, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for op in ops {
        let here = out.len();
        let offset = |label: &Option<&'static str>| -> u8 {
            let Some(name) = label else { return 0 };
            let target = at[name];
            // Every label is ahead (BPF jumps only forward), and the programs are short.
            u8::try_from(target - here - 1).expect("a filter jump within 255 instructions")
        };
        match op {
            Op::Stmt(code, k) => out.push(libc::sock_filter {
                code: *code,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Op::Jump(code, k, t, f) => out.push(libc::sock_filter {
                code: *code,
                jt: offset(t),
                jf: offset(f),
                k: *k,
            }),
            Op::Label(_) => {}
        }
    }
    out
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// What a command's notify filter sends to the broker.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Watch {
    /// Its connects, and datagram Unix sockets (a network other than the host's).
    pub(crate) sockets: bool,
    /// Its file-writing calls (writes confined: `write_watch`).
    pub(crate) writes: bool,
}

/// The filter sending what `watch` names to the broker (stream and seqpacket Unix sockets may then be made); with
/// `watch` empty, the strict one: `socket(AF_UNIX, …)` refused and connects straight to the kernel (there is no Unix
/// socket to connect but a `socketpair`'s, which is connected already).
fn program(watch: Watch) -> Vec<libc::sock_filter> {
    use Op::*;
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let x32 = if cfg!(target_arch = "x86_64") {
        0x4000_0000
    } else {
        u32::MAX
    };
    let mut ops = vec![
        Stmt(LD_W_ABS, OFF_ARCH),
        Jump(JEQ_K, AUDIT_ARCH, None, Some("kill")),
        Stmt(LD_W_ABS, OFF_NR),
        Jump(JGE_K, x32, Some("eperm"), None),
    ];
    let strict = !watch.sockets && !watch.writes;
    if strict {
        ops.extend([
            Jump(JEQ_K, libc::SYS_socket as u32, None, Some("allow")),
            Stmt(LD_W_ABS, OFF_ARG0),
            Jump(JEQ_K, libc::AF_UNIX as u32, Some("eperm"), Some("allow")),
        ]);
    }
    if watch.sockets {
        ops.extend([
            Jump(JEQ_K, libc::SYS_connect as u32, Some("notify"), None),
            Jump(JEQ_K, libc::SYS_socket as u32, Some("unix"), None),
            Jump(JEQ_K, libc::SYS_socketpair as u32, Some("unix"), None),
        ]);
    }
    const OPEN_ARG: [&str; 4] = ["open0", "open1", "open2", "open3"];
    if watch.writes {
        for nr in super::write_watch::WRITE_CALLS {
            ops.push(Jump(JEQ_K, *nr as u32, Some("notify"), None));
        }
        for (nr, arg) in super::write_watch::OPEN_CALLS {
            ops.push(Jump(JEQ_K, *nr as u32, Some(OPEN_ARG[*arg as usize]), None));
        }
    }
    ops.push(Jump(JEQ_K, 0, Some("allow"), Some("allow")));
    if watch.sockets {
        // A Unix socket: stream and seqpacket ones are made; a datagram one (or pair) goes to the broker, which
        // refuses it (EPERM) and records it.
        ops.extend([
            Label("unix"),
            Stmt(LD_W_ABS, OFF_ARG0),
            Jump(JEQ_K, libc::AF_UNIX as u32, None, Some("allow")),
            Stmt(LD_W_ABS, OFF_ARG1),
            Stmt(AND_K, SOCK_TYPE_MASK),
            Jump(JEQ_K, libc::SOCK_STREAM as u32, Some("allow"), None),
            Jump(
                JEQ_K,
                libc::SOCK_SEQPACKET as u32,
                Some("allow"),
                Some("notify"),
            ),
        ]);
    }
    if watch.writes {
        // An open goes to the broker only with a flag that may write (the low half of its flags argument).
        let mut args: Vec<u32> = super::write_watch::OPEN_CALLS
            .iter()
            .map(|(_, a)| *a)
            .collect();
        args.sort_unstable();
        args.dedup();
        for arg in args {
            ops.extend([
                Label(OPEN_ARG[arg as usize]),
                Stmt(LD_W_ABS, OFF_ARG0 + 8 * arg),
                Jump(
                    JSET_K,
                    super::write_watch::WRITE_FLAGS,
                    Some("notify"),
                    Some("allow"),
                ),
            ]);
        }
    }
    ops.extend([
        Label("allow"),
        Stmt(RET_K, libc::SECCOMP_RET_ALLOW),
        Label("notify"),
        Stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF),
        Label("eperm"),
        Stmt(RET_K, eperm),
        Label("kill"),
        Stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
    ]);
    assemble(&ops)
}

/// The filters (by `Watch { sockets, writes }`: both, sockets, writes; then the strict one), built once.
fn programs() -> &'static [Vec<libc::sock_filter>; 4] {
    static PROGRAMS: std::sync::OnceLock<[Vec<libc::sock_filter>; 4]> = std::sync::OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let watch = |sockets, writes| program(Watch { sockets, writes });
        [
            watch(true, true),
            watch(true, false),
            watch(false, true),
            watch(false, false),
        ]
    })
}

/// What the child needs of the filters, prepared by the parent: the one to install with a listener, and the one to
/// install where a listener cannot be had (the strict one for sockets; none, `len` 0, for writes only), as
/// (instructions, count).
#[derive(Clone, Copy)]
pub(crate) struct Programs {
    brokered: (*const libc::sock_filter, usize),
    strict: (*const libc::sock_filter, usize),
}

// SAFETY: the pointers are into the `'static` programs of `programs()`, never written after they are built.
unsafe impl Send for Programs {}
// SAFETY: as for `Send`: shared read-only data.
unsafe impl Sync for Programs {}

impl Programs {
    /// The filters of this architecture for a command whose broker watches `watch` (not empty).
    pub(crate) fn get(watch: Watch) -> Programs {
        let all = programs();
        let at = |i: usize| (all[i].as_ptr(), all[i].len());
        let brokered = match (watch.sockets, watch.writes) {
            (true, true) => at(0),
            (true, false) => at(1),
            _ => at(2),
        };
        Programs {
            brokered,
            strict: if watch.sockets {
                at(3)
            } else {
                (std::ptr::null(), 0)
            },
        }
    }
}

/// In the child, last before exec (after every other filter): installs the brokered filter, makes the netlink socket
/// that reads its network namespace's sockets, and sends both descriptors over `channel`; where a listener cannot be
/// had (`EBUSY`: an enclosing filter has one) the strict filter instead, sending nothing. Returns the errno on
/// failure. Async-signal-safe: socket, seccomp, sendmsg, close on stack memory.
pub(crate) fn hand_over(programs: &Programs, channel: RawFd) -> Result<(), i32> {
    // SAFETY: system calls on descriptors this function owns and `channel` (held open by the parent for the spawn);
    // the programs are `'static` instructions; the message is laid out as `proxy_fd` does for one descriptor.
    unsafe {
        let errno = || *libc::__errno_location();
        let diag = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        );
        if diag < 0 {
            return Err(errno());
        }
        let fprog = |(filter, len): (*const libc::sock_filter, usize)| libc::sock_fprog {
            len: len as libc::c_ushort,
            filter: filter as *mut libc::sock_filter,
        };
        let brokered = fprog(programs.brokered);
        let install = |flags: libc::c_ulong| {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &brokered as *const libc::sock_fprog,
            )
        };
        // Once the broker has a call, only a fatal signal interrupts the caller's wait (5.19): a handled signal
        // would restart the connect after the broker had made it, which would then say EISCONN.
        let mut listener = install(
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
        );
        if listener < 0 && errno() == libc::EINVAL {
            listener = install(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
        }
        if listener < 0 {
            let e = errno();
            libc::close(diag);
            if e != libc::EBUSY {
                return Err(e);
            }
            if programs.strict.1 == 0 {
                // Writes only: they stay confined (Landlock), unwatched.
                return Ok(());
            }
            let strict = fprog(programs.strict);
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &strict as *const libc::sock_fprog,
            ) != 0
            {
                return Err(errno());
            }
            return Ok(());
        }
        let listener = listener as RawFd;
        let sent = super::proxy_fd::send_fds(channel, &[listener, diag]);
        // The executor has its copies; the command must not keep the listener (it could answer its own calls).
        libc::close(listener);
        libc::close(diag);
        sent
    }
}
