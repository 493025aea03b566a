//! [`Executor::changes`] and [`Executor::undo`]: each session's recorder (`sys/linux/record.rs`, made at the
//! session's first recorded command, its store in the executor's log directory) and the calls that start and end a
//! command's recording. Other platforms record nothing and refuse naming the platform.

use super::Executor;
use crate::error::ExecError;
#[cfg(target_os = "linux")]
use crate::ids::session_str;
use crate::ids::{ProcessId, Session};
use crate::undo::{ChangesList, Undone};

#[cfg(target_os = "linux")]
use crate::sys::linux::record::Recorder;
#[cfg(target_os = "linux")]
use std::sync::Arc;

/// A session's recorder, made once on a task of its own (its baseline taken), or why it cannot be.
#[cfg(target_os = "linux")]
type Slot = Arc<SlotInner>;

/// See [`Slot`]: the recorder once made, whether its making has begun, and who waits for it.
#[cfg(target_os = "linux")]
#[derive(Default)]
pub(crate) struct SlotInner {
    cell: tokio::sync::OnceCell<Result<Arc<Recorder>, String>>,
    begun: std::sync::atomic::AtomicBool,
    ready: tokio::sync::Notify,
}

/// Sessions recorded at once at most: each holds an inotify instance (the kernel allows 128 per user by default)
/// and a copy of its workspace. Past it, the session whose last recorded command is oldest loses its records.
#[cfg(target_os = "linux")]
const MAX_RECORDED_SESSIONS: usize = 32;

/// Each session's recorder slot, with when it was last used (a counter), the least recently used one dropped past
/// [`MAX_RECORDED_SESSIONS`].
#[cfg(target_os = "linux")]
#[derive(Default)]
pub(crate) struct Recorders {
    slots: std::sync::Mutex<Slots>,
}

/// The slots by session, each with the clock's value when it was last used, and the clock.
#[cfg(target_os = "linux")]
#[derive(Default)]
struct Slots {
    by_session: std::collections::HashMap<String, (Slot, u64)>,
    clock: u64,
}

#[cfg(target_os = "linux")]
impl Recorders {
    fn get(&self, session: &str) -> Option<Slot> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.by_session.get(session).map(|(slot, _)| slot.clone())
    }

    /// The slot of `session`, made if need be (dropping the least recently used one past the bound).
    fn slot(&self, session: &str) -> Slot {
        let mut guard = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let Slots {
            by_session: map,
            clock,
        } = &mut *guard;
        *clock += 1;
        let now = *clock;
        if let Some((slot, used)) = map.get_mut(session) {
            *used = now;
            return slot.clone();
        }
        if map.len() >= MAX_RECORDED_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            tracing::info!(session = %oldest, "undo: dropping the least recently used session's records");
            map.remove(&oldest);
        }
        let slot = Slot::default();
        map.insert(session.to_string(), (slot.clone(), now));
        slot
    }
}
/// Nothing is recorded off Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) type Recorders = ();

impl Executor {
    /// Whether commands' changes can be recorded and undone here; the reason when not.
    pub fn changes_support(&self) -> Result<(), String> {
        if !self.inner.config.changes.enabled {
            return Err("undo is turned off ([changes] enabled = false)".into());
        }
        #[cfg(target_os = "linux")]
        {
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(format!(
                "undo needs Linux (the kernel's change notifications, inotify); this is {}",
                std::env::consts::OS
            ))
        }
    }

    /// The recorded commands of `session`, newest first (see [`crate::undo`]).
    pub async fn changes(&self, session: Option<&Session>) -> Result<ChangesList, ExecError> {
        self.changes_support()
            .map_err(ExecError::ChangesUnavailable)?;
        #[cfg(target_os = "linux")]
        {
            match self.recorder_of(session_str(session)) {
                None => Ok(ChangesList::default()),
                Some(Err(why)) => Ok(ChangesList {
                    not_recording: Some(why),
                    ..ChangesList::default()
                }),
                Some(Ok(rec)) => Ok(tokio::task::spawn_blocking(move || rec.list())
                    .await
                    .unwrap_or_default()),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = session;
            Ok(ChangesList::default())
        }
    }

    /// Takes back what command `id` of `session` changed in its workspace (the newest command not yet undone when
    /// `None`): what it modified or deleted is put back, what it created removed. Refused, with nothing changed,
    /// when a later change touched the same paths (unless `force`), when it was already undone, and for a command
    /// of another session.
    pub async fn undo(
        &self,
        session: Option<&Session>,
        id: Option<&ProcessId>,
        force: bool,
    ) -> Result<Undone, ExecError> {
        self.changes_support()
            .map_err(ExecError::ChangesUnavailable)?;
        #[cfg(target_os = "linux")]
        {
            let rec = match self.recorder_of(session_str(session)) {
                Some(Ok(rec)) => rec,
                Some(Err(why)) => {
                    return Err(ExecError::UndoRefused(format!(
                        "nothing is recorded for this session: {why}"
                    )));
                }
                None => {
                    return Err(ExecError::UndoRefused(
                        "no command of this session has recorded changes yet".into(),
                    ));
                }
            };
            let id = id.map(|i| i.as_str().to_string());
            tokio::task::spawn_blocking(move || rec.undo(id.as_deref(), force))
                .await
                .map_err(|e| ExecError::UndoRefused(format!("the undo stopped: {e}")))?
                .map_err(ExecError::UndoRefused)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (session, id, force);
            unreachable!("changes_support refused")
        }
    }

    /// The recorder of `session` when one was made (or why it could not be).
    #[cfg(target_os = "linux")]
    fn recorder_of(&self, session: Option<&str>) -> Option<Result<Arc<Recorder>, String>> {
        let slot = self.inner.recorders.get(session.unwrap_or(""))?;
        slot.cell.get().cloned()
    }

    /// Starts recording command `id` of `plan` (when the plan names a workspace and undo is on): the session's
    /// recorder is made first if need be (its baseline taken). Returns the recorder to end with.
    #[cfg(target_os = "linux")]
    pub(super) async fn record_begin(
        &self,
        plan: &crate::plan::ExecPlan,
        id: &str,
    ) -> Option<Arc<Recorder>> {
        let root = plan.record.as_ref()?;
        let session = session_str(plan.session.as_ref()).unwrap_or("");
        let wait = self.inner.config.changes.baseline_wait;
        let rec = self.recorder_for(session, root, wait).await?;
        // One workspace per session: a plan naming another is not recorded.
        let asked = root.canonicalize().ok()?;
        if !asked.starts_with(rec.root()) {
            return None;
        }
        let (r, id, command) = (rec.clone(), id.to_string(), plan.command.clone());
        tokio::task::spawn_blocking(move || r.begin(&id, &command))
            .await
            .ok()?;
        Some(rec)
    }

    /// Takes the baseline of `session`'s workspace `workspace` now, on a task of its own, so the session's first
    /// recorded command does not wait for it (a host calls this when it learns the workspace, e.g. an MCP client's
    /// root). Does nothing when undo is off, off Linux, or when the session already has a recorder.
    pub fn prepare_changes(&self, session: Option<&Session>, workspace: &std::path::Path) {
        #[cfg(target_os = "linux")]
        {
            if !self.inner.config.changes.enabled {
                return;
            }
            let this = self.clone();
            let session = session_str(session).unwrap_or("").to_string();
            let workspace = workspace.to_path_buf();
            tokio::spawn(async move {
                this.recorder_for(&session, &workspace, std::time::Duration::ZERO)
                    .await;
            });
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (session, workspace);
        }
    }

    /// The recorder of `session`, its making begun (on a task of its own: its baseline of `root`) if it has none,
    /// waited for at most `wait`; `None` when it cannot be made, or is not made yet.
    #[cfg(target_os = "linux")]
    async fn recorder_for(
        &self,
        session: &str,
        root: &std::path::Path,
        wait: std::time::Duration,
    ) -> Option<Arc<Recorder>> {
        if !self.inner.config.changes.enabled {
            return None;
        }
        let slot = self.inner.recorders.slot(session);
        let made_before = slot.cell.get().cloned();
        if made_before.is_none() && !slot.begun.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let (this, made, root) = (self.clone(), slot.clone(), root.to_path_buf());
            tokio::spawn(async move {
                let recorder = this.make_recorder(&root).await;
                let _ = made.cell.set(recorder);
                made.ready.notify_waiters();
            });
        }
        // Not waiting at all: what was not made before this call is not used by it (however soon it is made).
        if wait.is_zero() {
            return made_before.and_then(Result::ok);
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(made) = slot.cell.get() {
                return match made {
                    Ok(rec) => Some(rec.clone()),
                    Err(why) => {
                        tracing::debug!("not recording: {why}");
                        None
                    }
                };
            }
            let ready = slot.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if slot.cell.get().is_some() {
                continue;
            }
            if tokio::time::timeout_at(deadline, ready).await.is_err() {
                if !wait.is_zero() {
                    tracing::info!(
                        session,
                        "the workspace's undo baseline is not ready: this command is not recorded"
                    );
                }
                return None;
            }
        }
    }

    /// Makes a recorder of `root` (its store in the log directory), taking its baseline on a blocking thread.
    #[cfg(target_os = "linux")]
    async fn make_recorder(&self, root: &std::path::Path) -> Result<Arc<Recorder>, String> {
        let name = crate::logdir::random_name(8)
            .map_err(|e| format!("cannot name the undo store ({e})"))?;
        let store = self.inner.log_dir.path().join(".changes").join(name);
        let config = self.inner.config.changes.clone();
        let mut never = self.inner.config.hidden_paths.clone();
        never.push(self.inner.log_dir.parent().to_path_buf());
        if let Some(root) = self.inner.log_dir.path().parent() {
            never.push(root.to_path_buf());
        }
        let root = root.to_path_buf();
        // Owner-only, like every directory of the log directory.
        let _ = crate::sys::files::create_private_dir(&self.inner.log_dir.path().join(".changes"));
        tokio::task::spawn_blocking(move || {
            Recorder::new(&root, store, &config, &never).map(Arc::new)
        })
        .await
        .unwrap_or_else(|e| Err(format!("the baseline stopped: {e}")))
    }

    /// Ends the recording of command `id` of `session` (a second end does nothing).
    #[cfg(target_os = "linux")]
    pub(super) async fn record_end(&self, session: Option<&str>, id: &str) {
        if let Some(Ok(rec)) = self.recorder_of(session) {
            let id = id.to_string();
            let _ = tokio::task::spawn_blocking(move || rec.end(&id)).await;
        }
    }
}
