//! The per-executor platform state on Windows, and spawning one command's leader: started suspended in a console
//! process group of its own, put in a new job object, then resumed, so that everything it ever starts is in the job.

use super::job::Job;
use super::tree::Tree;
use crate::sys::{ContainmentKind, SpawnSpec};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use windows_sys::Win32::Foundation::{CloseHandle, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME,
};

/// Platform state shared by all trees of one executor.
pub(crate) struct Platform {
    /// The most processes one tree may have at once (the job's active-process limit).
    max_processes: Option<u32>,
    /// What to do with a network this platform cannot enforce.
    unenforceable: crate::Unenforceable,
}

/// A spawned leader and its streams (never a terminal, confined writes or a filter on Windows yet).
pub(crate) type Spawned =
    super::super::Spawned<Leader, Tree, OwnedHandle, std::os::windows::io::OwnedSocket>;

/// A spawned leader process.
pub(crate) struct Leader {
    pub(crate) child: Child,
}

impl Leader {
    /// The process id.
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// Whether `program` is `cmd.exe`, whose command line is not parsed by the usual quoting rules.
fn is_cmd(program: &std::ffi::OsStr) -> bool {
    Path::new(program)
        .file_stem()
        .is_some_and(|s| s.eq_ignore_ascii_case("cmd"))
}

impl Platform {
    /// The job-object platform; `max_processes` from the configuration's limits.
    pub(crate) fn new(config: &crate::ExecutorConfig, _log_dir: &Path) -> io::Result<Platform> {
        let max_processes = match config.limits.max_processes {
            Some(n) => Some(u32::try_from(n).map_err(|_| {
                io::Error::other(format!(
                    "max_processes {n} is more than a job object can limit; give at most {}",
                    u32::MAX
                ))
            })?),
            None => None,
        };
        Ok(Platform {
            max_processes,
            unenforceable: config.unenforceable,
        })
    }

    /// Job objects.
    pub(crate) fn kind(&self) -> ContainmentKind {
        ContainmentKind::JobObject
    }

    /// No PID namespaces on Windows.
    pub(crate) fn pid_namespaces(&self) -> bool {
        false
    }

    /// The job's active-process limit, when set.
    pub(crate) fn process_limit(&self) -> Option<u64> {
        self.max_processes.map(u64::from)
    }

    /// No cgroups on Windows.
    pub(crate) fn cgroup_dir(&self) -> Option<&Path> {
        None
    }

    /// Starts the command: suspended, in a console process group of its own, assigned to a new job, then resumed.
    pub(crate) async fn spawn(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        if let crate::StdinMode::Terminal { .. } = spec.stdin {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a terminal (tty) is not available on Windows yet; run the command without tty (input can still be \
                 written to it over a pipe)",
            ));
        }
        let network_enforced = spec.confinement.network == crate::Network::Host;
        if !network_enforced && self.unenforceable == crate::Unenforceable::Refuse {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "network `{}` cannot be enforced on Windows (it needs Linux network namespaces); the command was \
                     not run. Run it with network `host`, on Linux, or set [confinement] unenforceable = \"run\" to \
                     run such commands on the host's network",
                    spec.confinement.network.as_str()
                ),
            ));
        }
        spec.env.check()?;
        tracing::debug!(name = %spec.name, session = ?spec.session, log_dir = %spec.log_dir.display(), "starting in a job object of its own");
        let (out_r, out_w) = std::io::pipe()?;
        let (err_r, err_w) = if spec.separate_stderr {
            let (r, w) = std::io::pipe()?;
            (Some(r), w)
        } else {
            (None, out_w.try_clone()?)
        };
        let (child_in, input) = match spec.stdin {
            crate::StdinMode::Pipe => {
                let (r, w) = std::io::pipe()?;
                (Stdio::from(r), Some(w))
            }
            _ => (Stdio::null(), None),
        };
        let mut cmd = Command::new(&spec.program);
        let (command, flags) = spec
            .args
            .split_last()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command to run"))?;
        cmd.args(flags);
        if is_cmd(&spec.program) {
            // `cmd /s /c "…"` runs what is between the outer quotes as typed: the command is passed verbatim.
            let mut raw = OsString::from("\"");
            raw.push(command);
            raw.push("\"");
            cmd.raw_arg(raw);
        } else {
            cmd.arg(command);
        }
        cmd.env_clear()
            .envs(spec.env.pairs())
            .current_dir(&spec.workdir)
            .stdin(child_in)
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w))
            .creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED);
        let job = Job::new(self.max_processes)?;
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", Path::new(&spec.program).display()),
            )
        })?;
        // The command's ends of the pipes are closed here, in `cmd`: only the child holds them now.
        drop(cmd);
        let pid = child.id();
        let started = job
            .assign(child.as_raw_handle())
            .map_err(|e| {
                io::Error::other(format!("cannot put {} in its job object: {e}", spec.name))
            })
            .and_then(|()| resume(pid));
        if let Err(e) = started {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        let tree = Tree::new(pid as i32, job);
        Ok(Spawned {
            leader: Leader { child },
            stdout: out_r.into(),
            stderr: err_r.map(Into::into),
            stdin: input.map(Into::into),
            terminal: false,
            tree,
            writes_confined: false,
            syscalls_filtered: false,
            network_enforced,
            proxy_listener: None,
            refusals: Default::default(),
        })
    }

    /// No watchdog: the jobs kill their processes when the executor's handles close.
    pub(crate) fn watchdog_send(&self, _line: &str) {}

    /// Nothing to track.
    pub(crate) fn leader_exited(&self, _pid: i32) {}

    /// Nothing to release: each job goes with its tree.
    pub(crate) fn shutdown(&self) {}

    /// No session sandboxes on Windows.
    pub(crate) fn has_sessions(&self) -> bool {
        false
    }

    /// No session sandboxes on Windows.
    pub(crate) fn end_idle_sessions(&self, _idle: std::time::Duration) {}

    /// Nothing to reap: processes outside the jobs are not the executor's.
    pub(crate) fn reap_orphans(&self, _known: &HashMap<i32, u64>) {}
}

/// Resumes the threads of the suspended process `pid` (one, its main thread, just after creation).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread; the handle is checked, then closed below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE {
        return Err(io::Error::other(format!(
            "cannot list the new process's threads to resume it: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: THREADENTRY32 is plain data; its size field is set as the API requires.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: a valid snapshot handle and entry.
    let mut more = unsafe { Thread32First(snapshot, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: a thread id from the snapshot; the handle is checked and closed.
            unsafe {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if !thread.is_null() {
                    if ResumeThread(thread) != u32::MAX {
                        resumed += 1;
                    }
                    CloseHandle(thread);
                }
            }
        }
        // SAFETY: as above.
        more = unsafe { Thread32Next(snapshot, &mut entry) } != 0;
    }
    // SAFETY: the snapshot handle is ours.
    unsafe { CloseHandle(snapshot) };
    if resumed == 0 {
        return Err(io::Error::other(format!(
            "cannot resume the new process {pid}: no thread of it could be resumed"
        )));
    }
    Ok(())
}
