//! [`SandboxProbe`]: what confinement this host really gives commands, found by starting an executor as a server
//! would and running two probe commands in a session sandbox (one unconfined, one with writes confined to a scratch
//! directory and no network). `shellward sandbox check` prints it; a host can run it at start-up and refuse to serve
//! without the confinement it needs.

use crate::BuildError;
use shellward_exec::{Confinement, ContainmentKind, Network};
use shellward_exec::{ExecPlan, Executor, ExecutorConfig};

/// The session the probe commands run in.
const PROBE_SESSION: &str = "sandbox-check";

/// What the probe found. The fields are facts, not judgements: the caller decides what is enough.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SandboxProbe {
    /// Commands run in a PID and mount namespace per session (the executor could create them).
    pub pid_namespaces: bool,
    /// How process trees are contained (cgroup, or process group and marker).
    pub containment: ContainmentKind,
    /// The process limit per command, when a writable `pids` cgroup enforces one.
    pub process_limit: Option<u64>,
    /// The Landlock ABI the kernel offers (0: none).
    pub landlock_abi: i32,
    /// What the unconfined probe printed: its PID namespace (`readlink /proc/self/ns/pid`), its `NoNewPrivs:` and
    /// `CapEff:` lines of `/proc/self/status`, and how many processes its `/proc` lists.
    pub output: String,
    /// The confined probe: whether the executor reported writes confined, and what it printed (its network namespace,
    /// then `written` or `refused` for a write outside its writable directory); or why it could not start.
    pub confined: Result<(bool, String), String>,
    /// The confined probe ran to its end and its write outside its writable directory did not land (the file is
    /// absent after it): what the file system shows, whatever the probe printed.
    pub outside_write_refused: bool,
    /// The confined probe's write outside its directory was seen refused by the sandbox itself
    /// (`ExecResult::refused_writes` named it): refused writes are named to the agent as they happen. False where
    /// the write watch is off (`ExecutorConfig::watch_writes`) or cannot be had here (then they are told from the
    /// command's output).
    pub writes_seen: bool,
    /// A preview (`Executor::preview`) of a command that creates one file and deletes another in a scratch directory:
    /// `Ok` when its change set listed exactly those and nothing was applied; why not otherwise (the platform, the
    /// kernel, or what went wrong).
    pub preview: Result<(), String>,
    /// Undo (`Executor::undo`) of a recorded command that changed a file in a scratch directory: `Ok` when the file
    /// was put back as it was; why not otherwise (the platform, `[changes]` turned off, or what went wrong).
    pub undo: Result<(), String>,
    /// Unix sockets under `network = "none"`: `Ok(true)` when a probe command's own socket connected and a socket of
    /// the probe's (the host's) was refused and reported, `Ok(false)` when the socket broker is here but the probe
    /// could not run (no `python3` to make a socket with); why not otherwise (no broker on this platform or kernel:
    /// such commands cannot make a Unix socket at all, or what went wrong).
    pub unix_sockets: Result<bool, String>,
}

impl SandboxProbe {
    /// Starts an executor with `config`, runs the probes, and shuts it down. Needs a Tokio runtime.
    pub async fn run(config: &ExecutorConfig) -> Result<SandboxProbe, BuildError> {
        let executor = Executor::new(config.clone())?;
        let probe = Self::probe(&executor).await;
        executor.shutdown().await;
        probe
    }

    async fn probe(executor: &Executor) -> Result<SandboxProbe, BuildError> {
        let mut plan = ExecPlan::new(
            "readlink /proc/self/ns/pid; grep -E '^(NoNewPrivs|CapEff):' /proc/self/status; ls /proc | grep -c '^[0-9]'",
        );
        plan.session = Some(PROBE_SESSION.into());
        let plain = executor.execute(plan).await?;
        // The per-command confinement: writes only beneath one directory, and no network.
        let scratch = tempfile::tempdir().map_err(|source| BuildError::Scratch {
            path: std::env::temp_dir(),
            source,
        })?;
        let (inside, outside) = (scratch.path().join("in"), scratch.path().join("out"));
        for dir in [&inside, &outside] {
            std::fs::create_dir_all(dir).map_err(|source| BuildError::Scratch {
                path: dir.clone(),
                source,
            })?;
        }
        let mut confined = ExecPlan::new(format!(
            "readlink /proc/self/ns/net; (echo x > {}/probe) 2>/dev/null && echo written || echo refused",
            outside.display()
        ));
        confined.session = Some(PROBE_SESSION.into());
        confined.confinement = Confinement::new(Some(vec![inside]), Network::None);
        let probe_file = outside.join("probe");
        let (mut writes_seen, mut outside_write_refused) = (false, false);
        let confined = match executor.execute(confined).await {
            Ok(c) => {
                writes_seen =
                    c.confinement.writes_watched && c.refused_writes == [probe_file.clone()];
                // It ran to its end (it exits 0 either way) and its write did not land.
                outside_write_refused =
                    c.exit == shellward_exec::ExitState::Code(0) && !probe_file.exists();
                Ok((c.confinement.writes, c.output.text))
            }
            Err(e) => Err(e.to_string()),
        };
        let preview = Self::preview(executor, &scratch.path().join("in")).await;
        let undo = Self::undo(executor, &scratch.path().join("out")).await;
        let unix_sockets = Self::unix_sockets(executor, scratch.path()).await;
        Ok(SandboxProbe {
            pid_namespaces: executor.pid_namespaces(),
            containment: executor.containment(),
            process_limit: executor.process_limit(),
            landlock_abi: Executor::landlock_abi(),
            output: plain.output.text,
            confined,
            outside_write_refused,
            writes_seen,
            preview,
            undo,
            unix_sockets,
        })
    }

    /// The Unix socket probe (see [`SandboxProbe::unix_sockets`]) in `dir` (its `in` writable to the command).
    async fn unix_sockets(executor: &Executor, dir: &std::path::Path) -> Result<bool, String> {
        if !Executor::unix_socket_broker() {
            return Err(
                "no socket broker here (it needs Linux on x86_64 and kernel 5.9): with network none, loopback or \
                 allow a command cannot make a Unix socket at all"
                    .into(),
            );
        }
        #[cfg(unix)]
        return Self::unix_socket_probe(executor, dir).await;
        #[cfg(not(unix))]
        {
            let _ = (executor, dir);
            Ok(false)
        }
    }

    /// [`unix_sockets`](Self::unix_sockets) where there is a broker.
    #[cfg(unix)]
    async fn unix_socket_probe(executor: &Executor, dir: &std::path::Path) -> Result<bool, String> {
        let python = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .any(|d| d.join("python3").is_file());
        if !python {
            return Ok(false);
        }
        let host = dir.join("out").join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&host)
            .map_err(|e| format!("cannot bind {}: {e}", host.display()))?;
        let inside = dir.join("in");
        let mut plan = ExecPlan::new(format!(
            "python3 -c \"
import socket, threading
s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen()
threading.Thread(target=lambda: s.accept(), daemon=True).start()
socket.socket(socket.AF_UNIX).connect('own.sock'); print('own')
try:
    socket.socket(socket.AF_UNIX).connect('{}'); print('host reached')
except OSError:
    print('host refused')
\"",
            host.display()
        ));
        plan.session = Some(PROBE_SESSION.into());
        plan.workdir = Some(inside.clone());
        plan.confinement = Confinement::new(Some(vec![inside]), Network::None);
        let r = executor.execute(plan).await.map_err(|e| e.to_string())?;
        drop(listener);
        if r.output.text == "own\nhost refused\n" && r.refused_sockets == [host] {
            Ok(true)
        } else {
            Err(format!(
                "the probe printed {:?} (refused: {:?}) instead of its own socket connecting and the host's refused: \
                 report this as a bug",
                r.output.text, r.refused_sockets
            ))
        }
    }

    /// The undo probe (see [`SandboxProbe::undo`]) in `dir`.
    async fn undo(executor: &Executor, dir: &std::path::Path) -> Result<(), String> {
        executor.changes_support()?;
        let file = dir.join("undone");
        std::fs::write(&file, "before")
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let mut plan = ExecPlan::new(format!("echo after > {}", file.display()));
        plan.session = Some(PROBE_SESSION.into());
        plan.record = Some(dir.to_path_buf());
        let session = shellward_exec::Session::from(PROBE_SESSION);
        let ran = executor.execute(plan).await.map_err(|e| e.to_string())?;
        executor
            .undo(Some(&session), Some(&ran.id), false)
            .await
            .map_err(|e| e.to_string())?;
        match std::fs::read_to_string(&file) {
            Ok(t) if t == "before" => Ok(()),
            other => Err(format!(
                "the undo left {} as {other:?} instead of \"before\": report this as a bug",
                file.display()
            )),
        }
    }

    /// The preview probe (see [`SandboxProbe::preview`]) in `dir`.
    async fn preview(executor: &Executor, dir: &std::path::Path) -> Result<(), String> {
        executor.preview_support()?;
        let keep = dir.join("keep");
        std::fs::write(&keep, "kept")
            .map_err(|e| format!("cannot write {}: {e}", keep.display()))?;
        let mut plan = ExecPlan::new(format!(
            "echo new > {d}/made && rm {d}/keep",
            d = dir.display()
        ));
        plan.session = Some(PROBE_SESSION.into());
        plan.confinement = Confinement::new(Some(vec![dir.to_path_buf()]), Network::None);
        let preview = executor
            .preview(plan, &shellward_exec::PreviewLimits::default())
            .await
            .map_err(|e| e.to_string())?;
        let listed: Vec<(std::path::PathBuf, shellward_exec::ChangeKind)> = preview
            .changes
            .changes
            .iter()
            .map(|c| (c.path.clone(), c.kind))
            .collect();
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let expected = vec![
            (dir.join("keep"), shellward_exec::ChangeKind::Deleted),
            (dir.join("made"), shellward_exec::ChangeKind::Created),
        ];
        if listed != expected {
            return Err(format!(
                "the preview listed {listed:?} instead of {expected:?} (exit {:?}, output {:?}): report this as a bug",
                preview.result.exit, preview.result.output.text
            ));
        }
        if dir.join("made").exists() || !keep.exists() {
            return Err(
                "the preview's changes reached the real files: report this as a bug".into(),
            );
        }
        Ok(())
    }
}
