//! [`Executor::preview`]: a plan run in a copy-on-write view of its writable paths, in a sandbox of its own with no
//! network, bounded in time and in the bytes it may write; the view's change set is read once the sandbox has ended,
//! and nothing of it reaches the real files. The view itself is `sys/linux/overlay.rs`; other platforms refuse.

use super::Executor;
use crate::changes::{Preview, PreviewLimits};
use crate::error::ExecError;
use crate::plan::ExecPlan;

/// What a preview's spawn carries to the platform: its layers (Linux), nothing elsewhere.
#[cfg(target_os = "linux")]
pub(super) type PreviewSpawn = std::sync::Arc<crate::sys::linux::overlay::PreviewLayers>;
/// What a preview's spawn carries to the platform: its layers (Linux), nothing elsewhere.
#[cfg(not(target_os = "linux"))]
pub(super) type PreviewSpawn = ();

/// How often a running preview's layer is measured against its space limit.
#[cfg(target_os = "linux")]
const SPACE_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

impl Executor {
    /// Whether [`Executor::preview`] can run here; the reason when not (the platform, a host without PID and mount
    /// namespaces, a kernel without Landlock).
    pub fn preview_support(&self) -> Result<(), String> {
        #[cfg(target_os = "linux")]
        {
            if !self.pid_namespaces() {
                return Err(
                    "this host runs commands without a session sandbox (no PID and mount namespace), and a preview \
                     needs one of its own: see `shellward sandbox check`"
                        .into(),
                );
            }
            if Executor::landlock_abi() == 0 {
                return Err(
                    "this kernel has no Landlock, so a preview's writes outside its copy-on-write view could not be \
                     refused: see `shellward sandbox check`"
                        .into(),
                );
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(format!(
                "previews need Linux (an overlay file system in a mount namespace of the command's own); this is {}",
                std::env::consts::OS
            ))
        }
    }

    /// Runs `plan` in a copy-on-write view of its writable paths and returns its run and the change set, applying
    /// nothing.
    ///
    /// The run is a foreground one whatever the plan says: in a sandbox (PID and mount namespace) of its own with
    /// an overlay over each writable directory, no network (`Network::None`), stdin on `/dev/null`, stopped after
    /// [`PreviewLimits::time`] (or the plan's shorter timeout) and when its layer holds more than
    /// [`PreviewLimits::space`] bytes (measured every 100 ms, so it may overshoot by what the disk writes in that
    /// time). Writable paths that are files, not directories, are read-only in it ([`crate::ChangeSet::read_only`]).
    /// The sandbox is ended (every process of it killed, its mounts gone) before the change set is read, and the
    /// layer is removed afterwards. The run's process id names a finished process of no session.
    ///
    /// Errors: [`ExecError::PreviewUnavailable`] where [`Executor::preview_support`] says no, or the plan's writes
    /// are not confined (with writes anywhere there is nothing to lay a view over); the errors of
    /// [`Executor::execute`] otherwise.
    pub async fn preview(
        &self,
        plan: ExecPlan,
        limits: &PreviewLimits,
    ) -> Result<Preview, ExecError> {
        self.preview_support()
            .map_err(ExecError::PreviewUnavailable)?;
        #[cfg(target_os = "linux")]
        {
            self.preview_linux(plan, limits).await
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (plan, limits);
            unreachable!("preview_support refuses every platform but Linux")
        }
    }

    #[cfg(target_os = "linux")]
    async fn preview_linux(
        &self,
        plan: ExecPlan,
        limits: &PreviewLimits,
    ) -> Result<Preview, ExecError> {
        use crate::plan::{Network, OnTimeout, StdinMode};
        use crate::sys::linux::overlay::PreviewLayers;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

        static PREVIEWS: AtomicU64 = AtomicU64::new(1);
        let Some(writable) = plan.confinement.writable.clone() else {
            return Err(ExecError::PreviewUnavailable(
                "the plan's writes are not confined (no writable paths), so there is nothing to lay a copy-on-write \
                 view over; give the plan its writable paths"
                    .into(),
            ));
        };
        let n = PREVIEWS.fetch_add(1, Ordering::Relaxed);
        let owner = plan.session.as_ref().map(|s| s.as_str().to_string());
        // A sandbox of its own: a session name no caller can give (it holds a control character).
        let own = format!("{}\u{1f}preview-{n}", owner.as_deref().unwrap_or(""));
        // Named after this executor's log directory (unique per executor), and the preview's number.
        let name = format!(
            "{}-{n}",
            self.inner
                .log_dir
                .path()
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| "shellward".into())
        );
        // SAFETY: geteuid has no preconditions.
        let privileged = unsafe { libc::geteuid() } == 0;
        let layers = tokio::task::spawn_blocking(move || {
            let scratch = crate::sys::linux::overlay::scratch_for(&writable, &name)?;
            PreviewLayers::prepare(&writable, scratch, privileged)
        })
        .await
        .map_err(|e| ExecError::Setup(format!("the preview's preparation failed: {e}")))?
        .map_err(ExecError::Spawn)?;
        let layers = Arc::new(layers);
        let mut run = plan;
        run.background = false;
        run.startup_wait = None;
        run.deadline = None;
        run.on_timeout = OnTimeout::Kill;
        run.timeout = Some(run.timeout.map_or(limits.time, |t| t.min(limits.time)));
        run.confinement.network = Network::None;
        run.confinement.allow = Vec::new();
        run.stdin = StdinMode::Null;
        run.report_cwd = None;
        run.session = Some(crate::Session::new(own.clone()));
        let exceeded = Arc::new(AtomicBool::new(false));
        let result = async {
            let proc = self
                .start_with(&run, Some((layers.clone(), owner.as_deref())))
                .await?;
            let watcher = {
                let proc = proc.clone();
                let layers = layers.clone();
                let exceeded = exceeded.clone();
                let space = limits.space;
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(SPACE_CHECK).await;
                        let l = layers.clone();
                        let bytes = tokio::task::spawn_blocking(move || l.bytes_written())
                            .await
                            .unwrap_or(0);
                        if bytes > space {
                            exceeded.store(true, Ordering::SeqCst);
                            tracing::info!(id = %proc.id, bytes, space, "a preview reached its space limit: stopping it");
                            proc.tree.kill();
                            return;
                        }
                    }
                })
            };
            let r = self.foreground(&run, &proc).await;
            watcher.abort();
            r
        }
        .await;
        // Every process of the preview ends with its sandbox, and its mounts with them; then the layer is read.
        self.inner.platform.end_sandbox(Some(own)).await;
        let read = {
            let layers = layers.clone();
            let limits = limits.clone();
            tokio::task::spawn_blocking(move || {
                let changes = layers.changes(&limits);
                layers.remove();
                changes
            })
            .await
        };
        let result = result?;
        let mut changes = read
            .map_err(|e| ExecError::Setup(format!("reading the preview's changes failed: {e}")))?;
        changes.space_exceeded = exceeded.load(Ordering::SeqCst);
        Ok(Preview { result, changes })
    }
}
