//! Fast spawning on Linux x86_64: `clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD [| CLONE_INTO_CGROUP])`.
//!
//! `std::process::Command` with a `pre_exec` hook must `fork()`, which copies the page tables of the whole (large,
//! multi-threaded) host process: measured at 10 ms per spawn for a 64 MiB process versus 1 ms for a `posix_spawn`-style
//! spawn. Joining a cgroup by writing `cgroup.procs` adds a cgroup migration (about 1 ms here). This module does what
//! `posix_spawn` does — the child shares the parent's memory on its own small stack and the parent thread is
//! suspended until the child execs — and creates the child directly inside its cgroup, so there is no migration.
//!
//! The child runs only async-signal-safe calls: it resets signal dispositions (every standard signal, handled or
//! ignored by the host, see [`signals_to_reset`]) and the mask (the parent blocks all signals
//! around the clone so no handler of the parent can run on the child's stack), then `setpgid`, `PR_SET_PDEATHSIG`,
//! `dup2`, `chdir`, `execve`. A failure is reported through shared memory and the child exits with 127.
//!
//! Callers fall back to `std::process::Command` when this returns `Unsupported` (old kernel, other architecture).

use std::ffi::{CStr, c_char, c_int};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_VM: u64 = 0x100;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
const CLONE_NEWNS: u64 = 0x2_0000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const CLONE_FILES: u64 = 0x400;
const CLONE_PARENT: u64 = 0x8000;
/// Most resource limits one spawn sets.
pub(crate) const MAX_RLIMITS: usize = 6;
const SYS_CLONE3: isize = 435;
const CHILD_STACK: usize = 64 * 1024;

/// What the child needs, prepared by the parent (no allocation happens in the child).
pub(crate) struct FastSpawn<'a> {
    /// Absolute path of the program.
    pub(crate) path: &'a CStr,
    /// NULL-terminated argument vector.
    pub(crate) argv: &'a [*const c_char],
    /// NULL-terminated environment.
    pub(crate) envp: &'a [*const c_char],
    /// Working directory.
    pub(crate) workdir: &'a CStr,
    /// Descriptors for stdin, stdout, stderr.
    pub(crate) fds: [RawFd; 3],
    /// The cgroup directory to start in, if any.
    pub(crate) cgroup_dir_fd: Option<RawFd>,
    /// Start in a new PID and mount namespace (the program is then the namespace's init).
    pub(crate) new_pid_namespace: bool,
    /// With `new_pid_namespace`: in a new user namespace too (a sandbox made without privilege).
    pub(crate) new_user_namespace: bool,
    /// Start a session (instead of only a process group) and take fd 0, a terminal, as the controlling terminal.
    pub(crate) new_session: bool,
    /// The sandbox, limits, hardening and confinement around the command.
    pub(crate) around: Around<'a>,
}

/// The namespaces a command enters (see `session`).
#[derive(Clone, Copy)]
pub(crate) struct Enter {
    /// The session's user namespace, when the sandbox was made without privilege: the command then starts from a
    /// helper process that enters all three (see [`spawn`]).
    pub(crate) user_ns: Option<RawFd>,
    /// The session's PID namespace.
    pub(crate) pid_ns: RawFd,
    /// The session's mount namespace.
    pub(crate) mnt_ns: RawFd,
    /// This process's own PID namespace, for the spawning thread's children after the clone.
    pub(crate) own_pid_ns: RawFd,
}

#[repr(C)]
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    workdir: *const c_char,
    fds: [RawFd; 3],
    /// `tasks` of a v1 `pids` group to write `0` to, or -1.
    join_procs_fd: RawFd,
    /// Resource limits: the first `rlimit_count` entries.
    rlimits: [(u32, u64); MAX_RLIMITS],
    rlimit_count: usize,
    /// Non-zero: `setsid` instead of `setpgid`, and fd 0 becomes the controlling terminal.
    new_session: c_int,
    /// Bit `n` set: reset signal `n` to its default disposition in the child.
    reset_signals: u64,
    /// The hardening steps (see `child_setup`), and whether the child has a mount namespace of its own.
    hardening: *const super::child_setup::Hardening,
    new_mount_namespace: c_int,
    /// A session's mount namespace to enter, or -1.
    enter_mnt_ns: RawFd,
    /// Nonzero when the child starts in a session's sandbox (by `setns` here or by the helper).
    in_sandbox: c_int,
    /// errno of the failing step, written by the child (shared memory).
    errno: c_int,
    /// Non-zero: the hardening step that failed (`child_setup::Failure::step`), written by the child.
    failed_step: c_int,
    /// The command's network (`child_setup::NET_*`) and its write-confinement ruleset (-1: none).
    net_mode: c_int,
    net_fd: RawFd,
    /// With `NET_PROXIED`: where the child sends its proxy listener (`proxy_fd::proxy_listener`).
    proxy_fd: RawFd,
    landlock_fd: RawFd,
    /// The seccomp program to install last (null: none).
    seccomp_filter: *const libc::c_void,
    seccomp_len: usize,
    /// With a network other than the host's: where the child sends its Unix socket broker's listener (-1: none), and
    /// the broker's filters.
    broker_fd: RawFd,
    broker_programs: *const super::unix_broker::Programs,
    /// The helper of a start in an unprivileged sandbox (`hop_main`): the namespaces it enters, the clone of the
    /// command it makes, where that clone's pidfd lands, and the pipe it reports on.
    hop_user_ns: RawFd,
    hop_mnt_ns: RawFd,
    hop_pid_ns: RawFd,
    hop_inner: *const CloneArgs,
    hop_pidfd: *const c_int,
    hop_report: RawFd,
}

/// The signals a command starts with at their default disposition, as a bit set: every standard signal, and each
/// real-time one this process handles or ignores.
///
/// Not only the handled ones (which `execve` resets anyway, and which must not run on the child's stack before it):
/// an ignored signal stays ignored across `execve`, and a host started in the background by a non-interactive shell
/// ignores SIGINT and SIGQUIT — its commands then could not be interrupted, not even with Ctrl-C on their terminal
/// (`interactive::ctrl_c_interrupts_the_foreground_job_not_the_shell` failed so under `.ci/run` started with `&`).
/// `nohup` ignores SIGHUP, Rust ignores SIGPIPE, and a host ignoring SIGCHLD would make its commands' children
/// vanish without a status.
pub(crate) fn signals_to_reset() -> u64 {
    let mut mask = 0u64;
    // 32 and 33 are the C library's own (NPTL): it refuses to change them.
    for sig in 1..32 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            mask |= 1 << sig;
        }
    }
    for sig in libc::SIGRTMIN()..64 {
        // SAFETY: querying the disposition only.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
            {
                mask |= 1 << sig;
            }
        }
    }
    mask
}

extern "C" fn child_main(arg: *mut ChildArgs) -> ! {
    // SAFETY: runs in the vfork-style child on its own stack; only async-signal-safe libc calls, no allocation;
    // `arg` points to the parent's `ChildArgs`, alive because the parent is suspended until exec or exit.
    unsafe {
        let a = &mut *arg;
        let fail = |a: &mut ChildArgs| -> ! {
            a.errno = *libc::__errno_location();
            libc::_exit(127)
        };
        let hardening_failed = |a: &mut ChildArgs, f: super::child_setup::Failure| -> ! {
            a.failed_step = f.step;
            a.errno = f.errno;
            libc::_exit(127)
        };
        let hardening = &*a.hardening;
        // The steps every spawn path takes first (signals, death signal, pids group, limits).
        let early = super::child_setup::Early {
            reset_signals: a.reset_signals,
            join_procs_fd: a.join_procs_fd,
            rlimits: &a.rlimits[..a.rlimit_count],
        };
        if let Err(f) = super::child_setup::early(&early) {
            hardening_failed(a, f);
        }
        // A session leader is also a group leader: the tree's group is the child's pid either way.
        if a.new_session != 0 {
            if libc::setsid() < 0 {
                fail(a);
            }
        } else if libc::setpgid(0, 0) != 0 {
            fail(a);
        }
        // A session's sandbox: its mounts are made already. Pid 1 of a new PID and mount namespace: its /proc, and
        // what the command must not write.
        if a.enter_mnt_ns >= 0 {
            if libc::setns(a.enter_mnt_ns, libc::CLONE_NEWNS) != 0 {
                fail(a);
            }
        } else if a.new_mount_namespace != 0
            && let Err(f) = hardening.mounts()
        {
            hardening_failed(a, f);
        }
        // In a sandbox (entered here, or by the helper without privilege): a preview's command lays its
        // copy-on-write view over the writable paths.
        if a.in_sandbox != 0
            && let Err(f) = hardening.preview_view(a.landlock_fd)
        {
            hardening_failed(a, f);
        }
        // Its own network, while it still holds the capability to make one.
        if let Err(f) = super::child_setup::network(a.net_mode, a.net_fd, a.proxy_fd) {
            hardening_failed(a, f);
        }
        for (target, &fd) in a.fds.iter().enumerate() {
            if fd != target as RawFd && libc::dup2(fd, target as RawFd) < 0 {
                fail(a);
            }
        }
        if a.new_session != 0 && libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
            fail(a);
        }
        if libc::chdir(a.workdir) != 0 {
            fail(a);
        }
        // Last: every step before may need a capability this drops.
        if let Err(f) = hardening.privileges() {
            hardening_failed(a, f);
        }
        // Then its write confinement (Landlock needs `no_new_privs`, set just now).
        if let Err(f) = super::child_setup::restrict_writes(a.landlock_fd) {
            hardening_failed(a, f);
        }
        // Last, its system-call filter.
        if let Err(f) = super::child_setup::restrict_syscalls(a.seccomp_filter, a.seccomp_len) {
            hardening_failed(a, f);
        }
        // And, with a network other than the host's, the filter whose connects the broker answers.
        if a.broker_fd >= 0
            && !a.broker_programs.is_null()
            && let Err(errno) = super::unix_broker::hand_over(&*a.broker_programs, a.broker_fd)
        {
            hardening_failed(
                a,
                super::child_setup::Failure {
                    step: super::child_setup::STEP_UNIX_BROKER,
                    errno,
                },
            );
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(a.path, a.argv, a.envp);
        fail(a)
    }
}

/// The helper of a start in an unprivileged sandbox: a process of its own (not sharing the executor's memory, which
/// the kernel requires of a process entering a user namespace, and sharing its descriptor table) that enters the
/// session's user, mount and PID namespaces, clones the command with `CLONE_PARENT` (so the command is the
/// executor's child, as on every other path) running [`child_main`], and reports `[pid, errno, failed step, pidfd]`
/// on its pipe before it exits.
extern "C" fn hop_main(arg: *mut ChildArgs) -> ! {
    // SAFETY: runs in a fork-style child (its own copy of the parent's memory) on its own stack; only
    // async-signal-safe calls, no allocation; `arg` points into that copy.
    unsafe {
        let a = &mut *arg;
        let mut out = [0 as c_int; 4];
        let report = |out: &[c_int; 4]| -> ! {
            libc::write(
                a.hop_report,
                out.as_ptr().cast(),
                std::mem::size_of_val(out),
            );
            libc::_exit(0)
        };
        for (step, fd, kind) in [
            (HOP_USER, a.hop_user_ns, libc::CLONE_NEWUSER),
            (HOP_MNT, a.hop_mnt_ns, libc::CLONE_NEWNS),
            (HOP_PID, a.hop_pid_ns, libc::CLONE_NEWPID),
        ] {
            if libc::setns(fd, kind) != 0 {
                out[1] = *libc::__errno_location();
                out[2] = step;
                report(&out);
            }
        }
        let ret = clone3_call(&*a.hop_inner, child_main, arg);
        if ret < 0 {
            out[1] = -ret as c_int;
            out[2] = HOP_CLONE;
        } else {
            // The command has exec'd or failed (CLONE_VFORK): what it wrote is in this process's memory.
            out = [
                ret as c_int,
                std::ptr::read_volatile(&a.errno),
                std::ptr::read_volatile(&a.failed_step),
                std::ptr::read_volatile(a.hop_pidfd),
            ];
        }
        report(&out)
    }
}

/// Steps of [`hop_main`] that can fail, as reported: entering the user, mount and PID namespaces, the clone.
const HOP_USER: c_int = -1;
const HOP_MNT: c_int = -2;
const HOP_PID: c_int = -3;
const HOP_CLONE: c_int = -4;

/// The stack a vfork-style child runs on until it execs: one mapping, reused by every spawn that holds it.
///
/// Mapping a fresh stack per spawn and unmapping it afterwards cost a page fault or two in the child and, in a
/// multi-threaded host, a TLB shoot-down of every other CPU at the `munmap`, on the spawn's critical path.
pub(crate) struct ChildStack {
    base: std::ptr::NonNull<libc::c_void>,
}

// SAFETY: the mapping is plain memory owned by this value; only the holder of `&mut ChildStack` hands it to a child.
unsafe impl Send for ChildStack {}

impl ChildStack {
    /// Maps a stack of [`CHILD_STACK`] bytes.
    pub(crate) fn new() -> io::Result<ChildStack> {
        // SAFETY: an anonymous private mapping, checked below; released by `Drop`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(ChildStack {
            base: std::ptr::NonNull::new(base)
                .ok_or_else(|| io::Error::other("mmap returned NULL"))?,
        })
    }

    fn base(&mut self) -> *mut libc::c_void {
        self.base.as_ptr()
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used by any child (a spawn holds `&mut self` until its child
        // has exec'd or exited).
        unsafe { libc::munmap(self.base.as_ptr(), CHILD_STACK) };
    }
}

/// `clone3` with the child continuing in `f(arg)` on the stack given in `args`.
///
/// # Safety
/// `args` must describe a valid stack; `f` must never return and only make async-signal-safe calls.
#[cfg(target_arch = "x86_64")]
unsafe fn clone3_call(
    args: &CloneArgs,
    f: extern "C" fn(*mut ChildArgs) -> !,
    arg: *mut ChildArgs,
) -> isize {
    let ret: isize;
    // SAFETY: upheld by the caller. The child branch switches to the new stack (set by the kernel) and never
    // returns into Rust code of this frame.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") SYS_CLONE3 => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") f,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Spawns the program; returns its pid and a pidfd. `Unsupported` means: use the portable path instead.
pub(crate) fn spawn(req: &FastSpawn<'_>, stack: &mut ChildStack) -> io::Result<(i32, OwnedFd)> {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (req, stack);
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the stack is a private mapping held exclusively (`&mut`) for this spawn, which the child is done with once
    // the clone returns (CLONE_VFORK: the parent resumes after the child has exec'd or exited);
    // all pointers handed to the child stay valid for that time; signals are blocked around the clone.
    unsafe {
        let stack = stack.base();
        let mut child = child_args(req);
        let mut pidfd: c_int = -1;
        let args = clone_args(req, stack, &mut pidfd);
        if let Some(e) = req.around.enter
            && let Some(user_ns) = e.user_ns
        {
            return spawn_through_helper(args, child, e, user_ns, stack);
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        // This thread's children start in the session's PID namespace (only this thread's: `pid_for_children`).
        if let Some(e) = req.around.enter
            && libc::setns(e.pid_ns, libc::CLONE_NEWPID) != 0
        {
            let err = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return Err(io::Error::other(format!(
                "cannot enter the session's PID namespace: {err}"
            )));
        }
        let ret = clone3_call(&args, child_main, &mut child);
        if let Some(e) = req.around.enter
            && libc::setns(e.own_pid_ns, libc::CLONE_NEWPID) != 0
        {
            // Every later child of this thread (other sessions' sandboxes included) would start inside this
            // session: never go on like that.
            tracing::error!(
                "cannot return the spawner thread to its own PID namespace: {}; aborting",
                io::Error::last_os_error()
            );
            std::process::abort();
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if ret < 0 {
            let errno = -ret as i32;
            return Err(match errno {
                libc::ENOSYS | libc::EINVAL | libc::E2BIG => {
                    io::Error::from(io::ErrorKind::Unsupported)
                }
                e => io::Error::from_raw_os_error(e),
            });
        }
        let pid = ret as i32;
        let pidfd = OwnedFd::from_raw_fd(pidfd);
        // Reading what the child wrote before it exec'd or exited (the parent was suspended until then).
        let errno = std::ptr::read_volatile(&child.errno);
        let step = std::ptr::read_volatile(&child.failed_step);
        if errno != 0 || step != 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            if step != 0 {
                return Err(req
                    .around
                    .hardening
                    .describe(super::child_setup::Failure { step, errno }));
            }
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok((pid, pidfd))
    }
}

/// What the cloned child reads: `req`'s program, environment, descriptors and confinement, as raw values that stay
/// valid while `req` lives.
#[cfg(target_arch = "x86_64")]
fn child_args(req: &FastSpawn<'_>) -> ChildArgs {
    ChildArgs {
        path: req.path.as_ptr(),
        argv: req.argv.as_ptr(),
        envp: req.envp.as_ptr(),
        workdir: req.workdir.as_ptr(),
        fds: req.fds,
        join_procs_fd: req.around.join_procs_fd.unwrap_or(-1),
        rlimits: {
            let mut r = [(0u32, 0u64); MAX_RLIMITS];
            for (slot, l) in r.iter_mut().zip(req.around.rlimits) {
                *slot = *l;
            }
            r
        },
        rlimit_count: req.around.rlimits.len().min(MAX_RLIMITS),
        new_session: req.new_session as c_int,
        reset_signals: signals_to_reset(),
        hardening: req.around.hardening,
        new_mount_namespace: req.new_pid_namespace as c_int,
        enter_mnt_ns: req
            .around
            .enter
            .filter(|e| e.user_ns.is_none())
            .map_or(-1, |e| e.mnt_ns),
        in_sandbox: req.around.enter.is_some() as c_int,
        errno: 0,
        failed_step: 0,
        net_mode: req.around.net_mode,
        net_fd: req.around.net_fd,
        proxy_fd: req.around.proxy_fd,
        landlock_fd: req.around.landlock_fd,
        seccomp_filter: req.around.seccomp.0,
        seccomp_len: req.around.seccomp.1,
        broker_fd: req.around.broker.map_or(-1, |(fd, _)| fd),
        broker_programs: req
            .around
            .broker
            .map_or(std::ptr::null(), |(_, p)| p as *const _),
        hop_user_ns: -1,
        hop_mnt_ns: -1,
        hop_pid_ns: -1,
        hop_inner: std::ptr::null(),
        hop_pidfd: std::ptr::null(),
        hop_report: -1,
    }
}

/// The `clone3` arguments of a start of `req` on `stack`, the pidfd written to `pidfd`: into its cgroup when it has
/// one, in new PID and mount (and user) namespaces when it asks for them.
#[cfg(target_arch = "x86_64")]
fn clone_args(req: &FastSpawn<'_>, stack: *mut libc::c_void, pidfd: &mut c_int) -> CloneArgs {
    let mut args = CloneArgs {
        flags: CLONE_VM | CLONE_VFORK | CLONE_PIDFD,
        pidfd: pidfd as *mut c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: CHILD_STACK as u64,
        ..Default::default()
    };
    if let Some(fd) = req.cgroup_dir_fd {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    if req.new_pid_namespace {
        args.flags |= CLONE_NEWPID | CLONE_NEWNS;
        if req.new_user_namespace {
            args.flags |= CLONE_NEWUSER;
        }
    }
    args
}

/// A start in an unprivileged sandbox, through [`hop_main`]: `command` is the clone the helper makes (its stack is the
/// lower half of `stack`, the helper's the upper half), `child` what the command runs.
///
/// # Safety
/// As [`spawn`]'s body: `stack` is held exclusively, the pointers in `child` stay valid until the clone returns.
#[cfg(target_arch = "x86_64")]
unsafe fn spawn_through_helper(
    mut command: CloneArgs,
    mut child: ChildArgs,
    enter: Enter,
    user_ns: RawFd,
    stack: *mut libc::c_void,
) -> io::Result<(i32, OwnedFd)> {
    // SAFETY: upheld by the caller; the helper only reads `child` and its own copy of this frame.
    unsafe {
        let mut fds = [0 as c_int; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        let (report_r, report_w) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
        let half = (CHILD_STACK / 2) as u64;
        // With CLONE_PARENT the kernel takes the exit signal from the helper (SIGCHLD) and refuses one given here.
        command.flags |= CLONE_PARENT;
        command.exit_signal = 0;
        command.stack_size = half;
        let pidfd_slot = command.pidfd as *const c_int;
        child.hop_user_ns = user_ns;
        child.hop_mnt_ns = enter.mnt_ns;
        child.hop_pid_ns = enter.pid_ns;
        child.hop_inner = &command;
        child.hop_pidfd = pidfd_slot;
        child.hop_report = std::os::fd::AsRawFd::as_raw_fd(&report_w);
        let helper = CloneArgs {
            flags: CLONE_VFORK | CLONE_FILES,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack as u64 + half,
            stack_size: half,
            ..Default::default()
        };
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let ret = clone3_call(&helper, hop_main, &mut child);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if ret < 0 {
            return Err(io::Error::from_raw_os_error(-ret as i32));
        }
        drop(report_w);
        let mut out = [0 as c_int; 4];
        let n = libc::read(
            std::os::fd::AsRawFd::as_raw_fd(&report_r),
            out.as_mut_ptr().cast(),
            std::mem::size_of_val(&out),
        );
        let mut status = 0;
        libc::waitpid(ret as i32, &mut status, 0);
        if n != std::mem::size_of_val(&out) as isize {
            return Err(io::Error::other(
                "the helper that enters the session's sandbox died before it reported",
            ));
        }
        let [pid, errno, step, pidfd] = out;
        if errno != 0 || step != 0 {
            if pidfd >= 0 && pid > 0 {
                drop(OwnedFd::from_raw_fd(pidfd));
            }
            if pid > 0 {
                libc::waitpid(pid, &mut status, 0);
            }
            let what = match step {
                HOP_USER => "enter the session's user namespace",
                HOP_MNT => "enter the session's mount namespace",
                HOP_PID => "enter the session's PID namespace",
                HOP_CLONE => "start the command in the session's sandbox",
                _ => return Err(io::Error::from_raw_os_error(errno)),
            };
            return Err(io::Error::other(format!(
                "cannot {what}: {}",
                io::Error::from_raw_os_error(errno)
            )));
        }
        Ok((pid, OwnedFd::from_raw_fd(pidfd)))
    }
}

/// Finds `program` on `path` (a `PATH` value) unless it already names a file.
fn resolve(
    program: &std::ffi::OsStr,
    path: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = std::path::Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return Some(p.to_path_buf());
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(p))
        .find(|c| {
            std::fs::metadata(c)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

fn cstring(s: impl Into<Vec<u8>>) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))
}

/// What [`spawn_spec`] keeps between spawns so each one does less work: the resolved program and an open
/// `/dev/null`.
#[derive(Default)]
pub(crate) struct SpawnCache {
    /// `(program, PATH value, resolved path)` of the last resolution. The shell is the same for every command, so
    /// this saves a `stat` per `PATH` entry per spawn; it is checked against the current `PATH` and re-done after a
    /// failed exec.
    resolved: std::sync::Mutex<
        Option<(
            std::ffi::OsString,
            Option<std::ffi::OsString>,
            std::path::PathBuf,
        )>,
    >,
    /// `/dev/null` for stdin, opened once (close-on-exec; the child gets it through `dup2`).
    devnull: std::sync::OnceLock<std::fs::File>,
    /// The child stack, mapped at the first spawn.
    stack: std::sync::Mutex<Option<ChildStack>>,
    /// This process's own PID namespace (`/proc/self/ns/pid`), opened at the first start in a session.
    own_pid_ns: std::sync::OnceLock<std::fs::File>,
}

impl SpawnCache {
    /// The program's path, and whether it came from the cache.
    fn resolve(
        &self,
        program: &std::ffi::OsStr,
        path: Option<&std::ffi::OsStr>,
    ) -> Option<(std::path::PathBuf, bool)> {
        let mut slot = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, env_path, found)) = slot.as_ref()
            && p == program
            && env_path.as_deref() == path
        {
            return Some((found.clone(), true));
        }
        let found = resolve(program, path)?;
        *slot = Some((
            program.to_owned(),
            path.map(|p| p.to_owned()),
            found.clone(),
        ));
        Some((found, false))
    }

    fn forget(&self) {
        *self.resolved.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// This process's own PID namespace, for the spawner thread to return to after a start in a session.
    pub(crate) fn own_pid_ns(&self) -> io::Result<RawFd> {
        use std::os::fd::AsRawFd;
        if let Some(f) = self.own_pid_ns.get() {
            return Ok(f.as_raw_fd());
        }
        let f = std::fs::File::open("/proc/self/ns/pid")?;
        Ok(self.own_pid_ns.get_or_init(|| f).as_raw_fd())
    }

    fn devnull(&self) -> io::Result<RawFd> {
        use std::os::fd::AsRawFd;
        if let Some(f) = self.devnull.get() {
            return Ok(f.as_raw_fd());
        }
        let f = std::fs::File::open("/dev/null")?;
        Ok(self.devnull.get_or_init(|| f).as_raw_fd())
    }
}

/// Starts pid 1 of a new session sandbox: `init` (with `argv0`) in session mode, in a new PID and mount namespace
/// whose mounts the child sets up, with `/dev/null` on its standard streams and `marker` (`SHELLWARD_TREE=…`) as its
/// whole environment. Returns its pid and pidfd.
pub(crate) fn spawn_session_init(
    init: &std::path::Path,
    argv0: &std::ffi::OsStr,
    marker: &str,
    cache: &SpawnCache,
    hardening: &super::child_setup::Hardening,
    new_user_namespace: bool,
) -> io::Result<(i32, OwnedFd)> {
    use std::os::unix::ffi::OsStrExt;
    let path = cstring(init.as_os_str().as_bytes())?;
    let argv_c = [
        cstring(argv0.as_bytes())?,
        cstring(shellward_init::SESSION_ARG)?,
    ];
    let argv: Vec<*const c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let env_c = cstring(marker)?;
    let envp = [env_c.as_ptr(), std::ptr::null()];
    let devnull = cache.devnull()?;
    let request = FastSpawn {
        path: &path,
        argv: &argv,
        envp: &envp,
        workdir: c"/",
        fds: [devnull; 3],
        cgroup_dir_fd: None,
        new_pid_namespace: true,
        new_user_namespace,
        new_session: false,
        around: Around::only(hardening),
    };
    let mut stack = cache.stack.lock().unwrap_or_else(|p| p.into_inner());
    let stack = match &mut *stack {
        Some(s) => s,
        None => stack.insert(ChildStack::new()?),
    };
    spawn(&request, stack)
}

/// What a spawn adds around the command: a session's sandbox, a process-count group, resource limits, hardening.
#[derive(Clone, Copy)]
pub(crate) struct Around<'a> {
    /// An open `tasks` file of a v1 `pids` group to join before exec.
    pub(crate) join_procs_fd: Option<RawFd>,
    /// Resource limits.
    pub(crate) rlimits: &'a [(u32, u64)],
    /// Capabilities and `no_new_privs` (the mounts are the sandbox's, made when it was).
    pub(crate) hardening: &'a super::child_setup::Hardening,
    /// Start in a session's sandbox.
    pub(crate) enter: Option<Enter>,
    /// The command's network (`child_setup::NET_*`), and the session's prepared namespace for it (-1: a new one).
    pub(crate) net_mode: c_int,
    pub(crate) net_fd: RawFd,
    /// With `NET_PROXIED`: the unix socket the child sends its proxy listener over (-1 otherwise).
    pub(crate) proxy_fd: RawFd,
    /// Its write-confinement ruleset, or -1.
    pub(crate) landlock_fd: RawFd,
    /// Its seccomp program (instructions, count); null for none.
    pub(crate) seccomp: (*const libc::c_void, usize),
    /// With a network other than the host's: the socket the child sends its Unix socket broker's listener over, and
    /// the broker's filters (`sys::linux::unix_broker`).
    pub(crate) broker: Option<(RawFd, &'a super::unix_broker::Programs)>,
}

impl<'a> Around<'a> {
    /// Nothing around the command but `hardening`: no sandbox, no process-count group, no limits, the host's network,
    /// writes and system calls unconfined.
    pub(crate) fn only(hardening: &'a super::child_setup::Hardening) -> Around<'a> {
        Around {
            join_procs_fd: None,
            rlimits: &[],
            hardening,
            enter: None,
            net_mode: super::child_setup::NET_HOST,
            net_fd: -1,
            proxy_fd: -1,
            landlock_fd: -1,
            seccomp: (std::ptr::null(), 0),
            broker: None,
        }
    }
}

/// Prepares everything for [`spawn`] from a spawn spec (on the spawner thread, before cloning) and spawns.
pub(crate) fn spawn_spec(
    spec: &crate::sys::SpawnSpec,
    stdin: Option<RawFd>,
    stdout: RawFd,
    stderr: RawFd,
    cgroup_dir: Option<&std::path::Path>,
    cache: &SpawnCache,
    confine: &Around<'_>,
) -> io::Result<(i32, OwnedFd)> {
    use std::os::unix::ffi::OsStrExt;
    // The spec's environment is complete (the executor built it from its environment policy): nothing of this
    // process's own environment is added here.
    let path_var = spec.env.get("PATH");
    let (program, cached) = cache.resolve(&spec.program, path_var).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{:?} not found on PATH", spec.program),
        )
    })?;
    let path = cstring(program.as_os_str().as_bytes())?;
    let argv_c: Vec<std::ffi::CString> = std::iter::once(spec.program.as_os_str())
        .chain(spec.args.iter().map(|a| a.as_os_str()))
        .map(|a| cstring(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let envp = spec.env.envp()?;
    let argv: Vec<*const c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let workdir = cstring(spec.workdir.as_os_str().as_bytes())?;
    let devnull = cache.devnull()?;
    let cgroup = match cgroup_dir {
        Some(dir) => Some(
            // `O_PATH` is enough for `CLONE_INTO_CGROUP` and skips opening the directory for reading.
            std::fs::File::options()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(dir)?,
        ),
        None => None,
    };
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let mut request = FastSpawn {
        path: &path,
        argv: &argv,
        envp: envp.ptrs(),
        workdir: &workdir,
        fds: [stdin.unwrap_or(devnull), stdout, stderr],
        cgroup_dir_fd: cgroup.as_ref().map(|f| f.as_raw_fd()),
        new_pid_namespace: false,
        new_user_namespace: false,
        new_session: matches!(spec.stdin, crate::StdinMode::Terminal { .. }),
        around: *confine,
    };
    let mut stack = cache.stack.lock().unwrap_or_else(|p| p.into_inner());
    let stack = match &mut *stack {
        Some(s) => s,
        None => stack.insert(ChildStack::new()?),
    };
    match spawn(&request, stack) {
        Err(e) if cached && e.raw_os_error().is_some() => {
            // The program may have moved since it was resolved: look it up afresh and try once more.
            cache.forget();
            let fresh = match cache.resolve(&spec.program, path_var) {
                Some((p, _)) if p != program => cstring(p.as_os_str().as_bytes())?,
                _ => return Err(e),
            };
            request.path = &fresh;
            spawn(&request, stack)
        }
        other => other,
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
