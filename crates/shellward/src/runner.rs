//! The running half's state: the executor, the working directory each session continues in (as its last foreground
//! command left it), the notes waiting for a session's next answer, and the private directory commands report their
//! last working directory into. What runs a decided plan with it is `run.rs`; this file owns the state and its rules.

use crate::shape::cwd_file;
use shellward_exec::{ExecPlan, Executor, PrivateDir};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Most notes kept for a session's next answer.
const MAX_PENDING_NOTES: usize = 8;

/// Most sessions remembered as told about an unwritable working directory (then they are told again).
const MAX_TOLD: usize = 4096;

/// Most sessions whose working directory is remembered: a client that names a new session per call cannot grow the
/// map without bound; past it the session that moved longest ago starts again in the default directory.
const MAX_SESSION_DIRS: usize = 4096;

/// Each session's working directory, bounded by [`MAX_SESSION_DIRS`] (the least recently moved one goes first).
#[derive(Default)]
struct SessionDirs {
    dirs: HashMap<Option<String>, (PathBuf, u64)>,
    next: u64,
}

impl SessionDirs {
    fn get(&self, session: &Option<String>) -> Option<PathBuf> {
        self.dirs.get(session).map(|(dir, _)| dir.clone())
    }

    fn remove(&mut self, session: &Option<String>) {
        self.dirs.remove(session);
    }

    fn insert(&mut self, session: Option<String>, dir: PathBuf) {
        if self.dirs.len() >= MAX_SESSION_DIRS
            && !self.dirs.contains_key(&session)
            && let Some(oldest) = self
                .dirs
                .iter()
                .min_by_key(|(_, (_, n))| *n)
                .map(|(k, _)| k.clone())
        {
            self.dirs.remove(&oldest);
        }
        self.next += 1;
        self.dirs.insert(session, (dir, self.next));
    }
}

/// What a [`crate::Shellward`] runs plans with (see the module docs).
pub(crate) struct Runner {
    pub(crate) executor: Executor,
    /// How long output is drained after a command's leader exits (`[executor] drain`).
    pub(crate) drain: Duration,
    /// How long the executor keeps an exited process (`[executor] retention`): how long a token's deny is kept.
    pub(crate) retention: Duration,
    /// A cancelled call's foreground command is kept in the background (`[tools] on_cancel = "background"`).
    pub(crate) keep_cancelled: bool,
    /// The paths no command can read (`[confinement] deny_read`), for the confinement line of a result.
    pub(crate) deny_read: Vec<PathBuf>,
    /// Where a plan without a working directory runs (`[executor] workdir`; `None`: this process's own).
    pub(crate) default_workdir: Option<PathBuf>,
    /// The executor's shell understands `trap … EXIT` (how a command's last directory is learned).
    posix_shell: bool,
    /// Each session's working directory, as its last foreground `execute` left it (a terminal keeps its `cd`).
    session_dirs: Mutex<SessionDirs>,
    /// The directory each session was given (`choose_session_dir`: an MCP client's root), its undo workspace.
    session_roots: Mutex<SessionDirs>,
    /// Notes for each session's next answer (a cancelled call's command kept in the background), a few at most.
    pending_notes: Mutex<HashMap<Option<String>, Vec<crate::Note>>>,
    /// The sessions already told their working directory is not writable (forgotten past [`MAX_TOLD`]).
    told_unwritable: Mutex<HashSet<Option<String>>>,
    /// A private directory for the files through which commands report their last working directory (writable to
    /// every confined command); removed with this instance.
    cwd_dir: Option<PrivateDir>,
}

impl Runner {
    /// Where `plan` runs: its own directory, else the executor's default (`[executor] workdir`, `mcp --workdir`),
    /// else this process's.
    pub(crate) fn workdir_of(&self, plan: &shellward_exec::ExecPlan) -> Option<PathBuf> {
        plan.workdir
            .clone()
            .or_else(|| self.default_workdir.clone())
            .or_else(|| std::env::current_dir().ok())
    }

    /// The workspace whose changes `plan` records for undo (`ExecPlan::record`): the directory the session was
    /// given (an MCP client's first root, `SessionHandle::set_workdir`), else the instance's working directory
    /// (`[executor] workdir`, `mcp --workdir`, else this process's), whichever the plan runs beneath first, else the
    /// plan's own directory; `None` for `/` and for a directory commands may not write.
    pub(crate) fn workspace_of(&self, plan: &ExecPlan) -> Option<PathBuf> {
        let workdir = self.workdir_of(plan)?;
        let session = plan.session.as_ref().map(|s| s.as_str().to_string());
        let given = self
            .session_roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&session);
        let instance = self
            .default_workdir
            .clone()
            .or_else(|| std::env::current_dir().ok());
        let root = [given, instance]
            .into_iter()
            .flatten()
            .find(|d| workdir.starts_with(d) && d != Path::new("/"))
            .unwrap_or(workdir);
        if root == Path::new("/") {
            return None;
        }
        if let Some(paths) = &plan.confinement.writable
            && !paths.iter().any(|p| root.starts_with(p))
        {
            return None;
        }
        Some(root)
    }

    /// A runner over `executor`; `shell_name` is the shell's program name (`sh`, `bash`, …).
    pub(crate) fn new(
        executor: Executor,
        config: &crate::Config,
        shell_name: &str,
        cwd_dir: Option<PrivateDir>,
    ) -> Runner {
        Runner {
            executor,
            drain: config.executor.drain,
            retention: config.executor.retention,
            keep_cancelled: config.tools.on_cancel == crate::config::OnCancel::Background,
            deny_read: config.confinement.deny_read.clone(),
            default_workdir: config.executor.default_workdir.clone(),
            posix_shell: matches!(shell_name, "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash"),
            session_dirs: Mutex::new(SessionDirs::default()),
            session_roots: Mutex::new(SessionDirs::default()),
            pending_notes: Mutex::new(HashMap::new()),
            told_unwritable: Mutex::new(HashSet::new()),
            cwd_dir,
        }
    }

    /// Where commands report their last working directory, while this runner has that directory.
    pub(crate) fn cwd_dir(&self) -> Option<&Path> {
        self.cwd_dir.as_ref().map(|d| d.path())
    }

    /// Removes the directory commands report their last working directory into (nothing runs any more).
    pub(crate) fn remove_cwd_dir(&self) {
        if let Some(dir) = &self.cwd_dir {
            dir.remove();
        }
    }

    /// The file a foreground `plan` that follows its session's directory reports its last directory into: only for
    /// a POSIX shell, and not for background or interactive runs (their directory is not the session's).
    pub(crate) fn cwd_report_file(&self, follow: bool, plan: &ExecPlan) -> Option<PathBuf> {
        (follow && self.posix_shell && !plan.background && !plan.stdin.interactive())
            .then(|| cwd_file(self.cwd_dir()))
            .flatten()
    }

    /// The working directory `session`'s commands continue in, when one was left and still exists.
    pub(crate) fn session_dir(&self, session: Option<&str>) -> Option<PathBuf> {
        let mut dirs = self.session_dirs.lock().unwrap_or_else(|p| p.into_inner());
        let key = session.map(str::to_string);
        match dirs.get(&key) {
            Some(dir) if dir.is_dir() => Some(dir),
            Some(_) => {
                dirs.remove(&key);
                None
            }
            None => None,
        }
    }

    /// `session`'s commands continue in `dir` from now on.
    pub(crate) fn set_session_dir(&self, session: Option<String>, dir: PathBuf) {
        self.session_dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session, dir);
    }

    /// The note for `session`'s first command in a working directory it cannot write (a client started in `/`): what
    /// fails there and how to choose another. Said once per session; `None` when `dir` is writable or it was said.
    pub(crate) fn unwritable_note(&self, session: Option<&str>, dir: &Path) -> Option<crate::Note> {
        if crate::sys::writable(dir) {
            return None;
        }
        let mut told = self
            .told_unwritable
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if told.len() >= MAX_TOLD {
            told.clear();
        }
        if !told.insert(session.map(str::to_string)) {
            return None;
        }
        Some(crate::Note::new(
            crate::NoteKind::Workdir,
            format!(
                "The working directory {} is not writable by shellward's user, so commands that create or change \
                 files there fail. Give `workdir` a directory you can write, or start shellward where you work \
                 (`shellward mcp --workdir DIR`, `[executor] workdir`); an MCP client that sends roots gets its first \
                 root.",
                dir.display()
            ),
        ))
    }

    /// `session`'s commands continue in `dir` from now on, when it is an existing absolute directory.
    pub(crate) fn choose_session_dir(
        &self,
        session: Option<&str>,
        dir: &Path,
    ) -> Result<(), crate::ToolError> {
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(crate::ToolError::invalid(format!(
                "{} is not an existing absolute directory; give one the session's commands should run in",
                dir.display()
            )));
        }
        self.set_session_dir(session.map(str::to_string), dir.to_path_buf());
        self.session_roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.map(str::to_string), dir.to_path_buf());
        // Its undo baseline is taken now, not at its first command.
        if crate::sys::writable(dir) {
            self.executor
                .prepare_changes(session.map(shellward_exec::Session::from).as_ref(), dir);
        }
        Ok(())
    }

    /// Adds a note for `session`'s next answer (at most [`MAX_PENDING_NOTES`]; the oldest go first).
    pub(crate) fn add_pending_note(&self, session: Option<&str>, note: crate::Note) {
        let mut notes = self.pending_notes.lock().unwrap_or_else(|p| p.into_inner());
        let list = notes.entry(session.map(str::to_string)).or_default();
        if list.len() >= MAX_PENDING_NOTES {
            list.remove(0);
        }
        list.push(note);
    }

    /// Puts the notes waiting for `session`'s next answer first in `notes` (and forgets them).
    pub(crate) fn lead_with_pending_notes(
        &self,
        session: Option<&str>,
        notes: &mut Vec<crate::Note>,
    ) {
        let pending = self
            .pending_notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session.map(str::to_string))
            .unwrap_or_default();
        notes.splice(0..0, pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client naming a new session per call cannot grow the remembered directories without bound: past the limit
    /// the session that moved longest ago is forgotten, and a session that moves again is kept.
    #[test]
    fn session_directories_are_bounded() {
        let mut dirs = SessionDirs::default();
        dirs.insert(Some("first".into()), "/a".into());
        for i in 0..MAX_SESSION_DIRS + 100 {
            dirs.insert(Some(format!("s{i}")), "/b".into());
            if i % 1000 == 0 {
                // Moving again keeps it recent.
                dirs.insert(Some("first".into()), "/a".into());
            }
        }
        assert_eq!(dirs.dirs.len(), MAX_SESSION_DIRS);
        assert_eq!(dirs.get(&Some("first".into())), Some("/a".into()));
        assert_eq!(
            dirs.get(&Some("s0".into())),
            None,
            "the oldest is forgotten"
        );
        let last = format!("s{}", MAX_SESSION_DIRS + 99);
        assert_eq!(dirs.get(&Some(last)), Some("/b".into()));
    }
}
