//! Watching the drop-in directory and the configuration file (the `watch` feature, on by default): every settled
//! change reloads the chain ([`crate::Policies::reload`]) and logs the outcome. Without the feature there is
//! no watcher ([`crate::Policies::watch`] says so) and a reload is asked for explicitly (SIGHUP in the CLI).

use std::path::PathBuf;
#[cfg(feature = "watch")]
use std::time::Duration;

/// Watches the drop-in directory and the configuration file; dropping it stops watching.
pub struct PolicyWatcher {
    #[cfg(feature = "watch")]
    _watcher: notify::RecommendedWatcher,
    #[cfg(feature = "watch")]
    _thread: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for PolicyWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyWatcher")
    }
}

/// Which changes reload: the configuration file itself, and `*.wasm` / `NAME.toml` files of the drop-in directory.
/// Anything else in the watched directories (the server's own log beside the config, an editor's swap file) is
/// ignored: it used to reload the chain on every write.
#[cfg(feature = "watch")]
struct Relevant {
    /// Directories whose `*.wasm` and `*.toml` entries count (canonical).
    dirs: Vec<PathBuf>,
    /// Files that count: (canonical parent, file name).
    files: Vec<(PathBuf, std::ffi::OsString)>,
}

#[cfg(feature = "watch")]
impl Relevant {
    fn of(paths: &[PathBuf]) -> Relevant {
        let canonical = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let mut r = Relevant {
            dirs: Vec::new(),
            files: Vec::new(),
        };
        for path in paths {
            if path.is_dir() {
                r.dirs.push(canonical(path));
            } else if let Some(name) = path.file_name() {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                let parent = canonical(parent.unwrap_or(std::path::Path::new(".")));
                r.files.push((parent, name.to_os_string()));
            }
        }
        r
    }

    fn matches(&self, path: &std::path::Path) -> bool {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let parent = parent
            .canonicalize()
            .unwrap_or_else(|_| parent.to_path_buf());
        let policy_file = path.extension().is_some_and(|x| x == "wasm" || x == "toml");
        (policy_file && self.dirs.contains(&parent))
            || self.files.iter().any(|(p, n)| *p == parent && n == name)
    }
}

/// How long changes must settle before a reload (an editor or `cp` writes a file in several steps).
#[cfg(feature = "watch")]
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Starts watching what `active` reloads from; every settled change reloads (and logs the outcome).
#[cfg(feature = "watch")]
pub(crate) fn watch(
    active: std::sync::Weak<crate::Inner>,
    paths: Vec<PathBuf>,
) -> Result<Option<PolicyWatcher>, notify::Error> {
    use notify::{RecursiveMode, Watcher};
    if paths.is_empty() {
        return Ok(None);
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let relevant = Relevant::of(&paths);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access() && e.paths.iter().any(|p| relevant.matches(p))) {
            let _ = tx.send(());
        }
    })?;
    for path in &paths {
        // A file is watched through its directory: editors replace files by renaming over them.
        let target = if path.is_dir() {
            path.clone()
        } else {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        watcher.watch(&target, RecursiveMode::NonRecursive)?;
    }
    let thread = std::thread::Builder::new()
        .name("shellward-policy-watch".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                // Settle: wait until no change arrived for the debounce window.
                while rx.recv_timeout(DEBOUNCE).is_ok() {}
                let Some(inner) = active.upgrade() else {
                    return;
                };
                inner.reload_logged("a policy file changed");
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(Some(PolicyWatcher {
        _watcher: watcher,
        _thread: thread,
    }))
}

#[cfg(all(test, feature = "watch"))]
mod tests {
    use super::Relevant;

    #[test]
    fn only_policy_files_and_the_config_file_reload() {
        let dir = tempfile::tempdir().unwrap();
        let drop_ins = dir.path().join("policies.d");
        std::fs::create_dir(&drop_ins).unwrap();
        let config = dir.path().join("shellward.toml");
        std::fs::write(&config, "").unwrap();
        let r = Relevant::of(&[drop_ins.clone(), config.clone()]);
        assert!(r.matches(&config));
        assert!(r.matches(&drop_ins.join("guard2.wasm")));
        assert!(r.matches(&drop_ins.join("guard2.toml")));
        assert!(
            !r.matches(&dir.path().join("serve.log")),
            "the server's own log beside the config"
        );
        assert!(!r.matches(&dir.path().join(".shellward.toml.swp")));
        assert!(!r.matches(&drop_ins.join("notes.txt")));
        assert!(
            !r.matches(&dir.path().join("other.wasm")),
            "a component outside the drop-in directory"
        );
    }
}

/// Without the `watch` feature: no watcher can be started.
#[cfg(not(feature = "watch"))]
pub(crate) fn watch(
    _active: std::sync::Weak<crate::Inner>,
    paths: Vec<PathBuf>,
) -> Result<Option<PolicyWatcher>, String> {
    if paths.is_empty() {
        return Ok(None);
    }
    Err("this build of shellward has no file watcher (built without the `watch` feature); reload explicitly \
         (Shellward::policies().reload(), SIGHUP for the CLI)"
        .into())
}
