//! The per-executor platform state on macOS and FreeBSD, and spawning one command's leader: `std::process::Command`
//! with the leader in a process group of its own (or, on a terminal, a session of its own with the terminal as its
//! controlling one), its streams on close-on-exec pipes or a pseudo-terminal, and on macOS its confinement as a
//! Seatbelt profile applied by `sandbox-exec`.

use super::pty;
use super::tree::Tree;
use crate::plan::Network;
use crate::sys::{ContainmentKind, SpawnSpec};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Platform state shared by all trees of one executor.
pub(crate) struct Platform {
    /// What Seatbelt profiles protect beyond each plan: the executor's own files (macOS).
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    protected: crate::seatbelt::Protected,
    /// What to do with confinement this platform cannot give.
    unenforceable: crate::Unenforceable,
    /// Kills the commands' groups if this process dies (`None`: it could not start).
    pub(super) watchdog: Option<super::watchdog::Watchdog>,
}

/// A spawned leader and its streams (no proxy here: an allow-list network is refused).
pub(crate) type Spawned = super::super::Spawned<Leader, Tree, OwnedFd, OwnedFd>;

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

/// How a command runs confined: the program and arguments, and what of its plan's confinement holds.
struct Confined {
    program: OsString,
    args: Vec<OsString>,
    writes_confined: bool,
    network_enforced: bool,
}

impl Confined {
    /// `spec`'s own program and arguments, nothing confined (`network_enforced`: its network is the host's anyway).
    fn unconfined(spec: &SpawnSpec, network_enforced: bool) -> Confined {
        Confined {
            program: spec.program.clone(),
            args: spec.args.clone(),
            writes_confined: false,
            network_enforced,
        }
    }
}

/// The command's ends of its streams, and the host's.
struct Streams {
    child_in: Stdio,
    child_out: Stdio,
    child_err: Stdio,
    stdout: OwnedFd,
    stderr: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    terminal: bool,
}

impl Platform {
    /// The process-group platform; the executor's protected files from `config`.
    pub(crate) fn new(config: &crate::ExecutorConfig, _log_dir: &Path) -> io::Result<Platform> {
        // Seatbelt matches real paths (on macOS `/tmp` is `/private/tmp`): resolve what exists.
        let real = |paths: &[PathBuf]| -> Vec<PathBuf> {
            paths
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect()
        };
        // FreeBSD: orphans of the commands stay the executor's, so their trees can be followed and reaped whole.
        super::reaper::become_reaper();
        Ok(Platform {
            protected: crate::seatbelt::Protected::new()
                .read_only(real(&config.read_only_paths))
                .hidden(real(&config.hidden_paths)),
            unenforceable: config.unenforceable,
            watchdog: super::watchdog::Watchdog::start(),
        })
    }

    /// Process groups.
    pub(crate) fn kind(&self) -> ContainmentKind {
        ContainmentKind::ProcessGroup
    }

    /// No PID namespaces here.
    pub(crate) fn pid_namespaces(&self) -> bool {
        false
    }

    /// No per-tree process limit here.
    pub(crate) fn process_limit(&self) -> Option<u64> {
        None
    }

    /// No cgroups here.
    pub(crate) fn cgroup_dir(&self) -> Option<&Path> {
        None
    }

    /// Starts the command as the leader of a process group of its own (a session of its own on a terminal).
    pub(crate) async fn spawn(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        // A variable with a NUL byte is an error naming it (the same check Linux makes).
        spec.env.envp()?;
        let Confined {
            program,
            args,
            writes_confined,
            network_enforced,
        } = self.confined(&spec)?;
        tracing::debug!(name = %spec.name, session = ?spec.session, log_dir = %spec.log_dir.display(), "starting in a process group of its own");
        let streams = streams(spec.stdin, spec.separate_stderr)?;
        let mut cmd = Command::new(&program);
        cmd.args(&args)
            .env_clear()
            .envs(spec.env.pairs())
            .current_dir(&spec.workdir)
            .stdin(streams.child_in)
            .stdout(streams.child_out)
            .stderr(streams.child_err);
        if streams.terminal {
            // SAFETY: the hook only makes async-signal-safe system calls on the child's own descriptors.
            unsafe {
                cmd.pre_exec(pty::become_controlled);
            }
        } else {
            cmd.process_group(0);
        }
        let child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", Path::new(&program).display()),
            )
        })?;
        // The command's ends of the streams are closed here, in `cmd`: only the child holds them now.
        drop(cmd);
        let tree = Tree::new(child.id() as i32);
        self.watchdog_send(&format!("+ {}\n", tree.pgid()));
        Ok(Spawned {
            leader: Leader { child },
            stdout: streams.stdout,
            stderr: streams.stderr,
            stdin: streams.stdin,
            terminal: streams.terminal,
            tree,
            writes_confined,
            syscalls_filtered: false,
            network_enforced,
            proxy_listener: None,
            refusals: Default::default(),
        })
    }

    /// How `spec` runs as confined as it asks; a confinement this platform cannot give is an error naming it (never
    /// run wider than decided) unless the operator chose [`crate::Unenforceable::Run`].
    #[cfg(target_os = "macos")]
    fn confined(&self, spec: &SpawnSpec) -> io::Result<Confined> {
        let c = &spec.confinement;
        let protects = !self.protected.read_only.is_empty() || !self.protected.hidden.is_empty();
        if c.writable.is_none() && c.network == Network::Host && !protects {
            return Ok(Confined::unconfined(spec, true));
        }
        // Seatbelt matches real paths (`/tmp` is `/private/tmp`): the writable paths too.
        let mut real = c.clone();
        if let Some(paths) = real.writable.as_mut() {
            for p in paths.iter_mut() {
                if let Ok(canonical) = std::fs::canonicalize(&*p) {
                    *p = canonical;
                }
            }
        }
        let mut profile = crate::seatbelt::profile(&real, &self.protected)
            .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
        let gap = |p: &crate::seatbelt::Profile| {
            p.gaps
                .iter()
                .find(|g| **g != crate::seatbelt::Gap::SystemCallFilter)
                .copied()
        };
        let mut network_enforced = true;
        if let Some(missing) = gap(&profile) {
            if self.unenforceable == crate::Unenforceable::Refuse {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "macOS cannot give {}; the command was not run. Run it with network `host` or `none`, on \
                         Linux, or set [confinement] unenforceable = \"run\" to run such commands on the host's \
                         network",
                        missing.describe()
                    ),
                ));
            }
            // The operator's choice: the host's network, everything else as asked.
            real = crate::plan::Confinement::new(real.writable.clone(), Network::Host);
            profile = crate::seatbelt::profile(&real, &self.protected)
                .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
            network_enforced = false;
        }
        let mut args: Vec<OsString> = vec!["-p".into(), profile.text.into(), spec.program.clone()];
        args.extend(spec.args.iter().cloned());
        Ok(Confined {
            program: "/usr/bin/sandbox-exec".into(),
            args,
            writes_confined: c.writable.is_some(),
            network_enforced,
        })
    }

    /// How `spec` runs: nothing is confined here yet, so a plan that confines writes or the network is refused,
    /// naming the platform (fail closed) — unless the operator chose [`crate::Unenforceable::Run`], and then it runs
    /// with the user's own permissions on the host's network, its result saying so.
    #[cfg(not(target_os = "macos"))]
    fn confined(&self, spec: &SpawnSpec) -> io::Result<Confined> {
        let os = std::env::consts::OS;
        let network_enforced = spec.confinement.network == Network::Host;
        if self.unenforceable == crate::Unenforceable::Run {
            if spec.confinement.writable.is_some() || !network_enforced {
                tracing::debug!(
                    name = %spec.name,
                    "running without the confinement {os} cannot give ([confinement] unenforceable = \"run\")"
                );
            }
            return Ok(Confined::unconfined(spec, network_enforced));
        }
        if spec.confinement.writable.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "writes cannot be confined on {os} yet (Linux has Landlock, macOS Seatbelt); the command was not \
                     run. Set [confinement] writable = \"any\" to run commands with the user's own permissions, \
                     [confinement] unenforceable = \"run\" to run confined plans unconfined here (results say so), \
                     or run on Linux or macOS"
                ),
            ));
        }
        if !network_enforced {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "network `{}` cannot be enforced on {os} (it needs Linux network namespaces or macOS Seatbelt); \
                     the command was not run. Run it with network `host`, on Linux, or set [confinement] \
                     unenforceable = \"run\" to run such commands on the host's network",
                    spec.confinement.network.as_str(),
                ),
            ));
        }
        Ok(Confined::unconfined(spec, true))
    }

    /// Tells the watchdog of a group started (`+ PGID`) or released (`- PGID`).
    pub(crate) fn watchdog_send(&self, line: &str) {
        if let Some(dog) = &self.watchdog {
            dog.send(line);
        }
    }

    /// Nothing to track.
    pub(crate) fn leader_exited(&self, _pid: i32) {}

    /// Lets the watchdog go (the trees are gone by now: the executor's shutdown ended them).
    pub(crate) fn shutdown(&self) {
        if let Some(dog) = &self.watchdog {
            dog.quit();
        }
    }

    /// No session sandboxes here.
    pub(crate) fn has_sessions(&self) -> bool {
        false
    }

    /// No session sandboxes here.
    pub(crate) fn end_idle_sessions(&self, _idle: std::time::Duration) {}

    /// Reaps the exited orphans of this executor's trees that were re-parented to it (FreeBSD, where it is a reaper;
    /// elsewhere orphans go to init and there is nothing to reap).
    pub(crate) fn reap_orphans(&self, known: &HashMap<i32, u64>) {
        super::reaper::reap_orphans(known);
    }
}

/// The streams for `stdin`: pipes (stderr on its own or with stdout), or a pseudo-terminal.
fn streams(stdin: crate::StdinMode, separate_stderr: bool) -> io::Result<Streams> {
    if let crate::StdinMode::Terminal { rows, cols } = stdin {
        let (master, slave) = pty::open(rows, cols)?;
        return Ok(Streams {
            child_in: Stdio::from(slave.try_clone()?),
            child_out: Stdio::from(slave.try_clone()?),
            child_err: Stdio::from(slave),
            stdin: Some(master.try_clone()?),
            stdout: master,
            stderr: None,
            terminal: true,
        });
    }
    let (out_r, out_w) = std::io::pipe()?;
    let (err_r, err_w) = if separate_stderr {
        let (r, w) = std::io::pipe()?;
        (Some(OwnedFd::from(r)), w)
    } else {
        (None, out_w.try_clone()?)
    };
    let (child_in, input) = match stdin {
        crate::StdinMode::Pipe => {
            let (r, w) = std::io::pipe()?;
            (Stdio::from(r), Some(OwnedFd::from(w)))
        }
        _ => (Stdio::null(), None),
    };
    Ok(Streams {
        child_in,
        child_out: Stdio::from(out_w),
        child_err: Stdio::from(err_w),
        stdout: out_r.into(),
        stderr: err_r,
        stdin: input,
        terminal: false,
    })
}
