//! Undo (`Executor::changes`, `Executor::undo`): each recorded command's changes to its workspace are listed and can
//! be taken back byte for byte — refused when already undone, when a later change touched the same paths, and from
//! another session; a hostile command cannot turn an undo into a write outside the workspace. As root and (rerun
//! at the end) as a normal user.

#![cfg(target_os = "linux")]

use crate::common::*;
use crate::preview::snapshot;
use shellward_exec::{ChangeKind, ExecError, ExecPlan, Executor, ProcessId, Session};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// [`workspace`] with `run.sh` executable and a symlink `link` to `notes.txt`.
fn linked_workspace() -> (tempfile::TempDir, PathBuf) {
    let (dir, ws) = workspace();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("notes.txt", ws.join("link")).unwrap();
    (dir, ws)
}

fn in_ws(command: &str, ws: &Path, session: &str, mark: &str) -> ExecPlan {
    let mut p = marked_plan(command, mark);
    p.workdir = Some(ws.to_path_buf());
    p.record = Some(ws.to_path_buf());
    p.session = Some(session.into());
    p.timeout = Some(Duration::from_secs(30));
    p
}

async fn run(ex: &Executor, command: &str, ws: &Path, session: &str, mark: &str) -> ProcessId {
    let r = ex.execute(in_ws(command, ws, session, mark)).await.unwrap();
    assert_eq!(
        r.exit,
        shellward_exec::ExitState::Code(0),
        "{command}: {r:?}"
    );
    r.id
}

fn relative(ws: &Path, paths: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = paths
        .iter()
        .map(|p| p.strip_prefix(ws).unwrap().display().to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_s_changes_are_listed_and_undone_byte_for_byte() {
    let ex = Executor::new(namespaced()).unwrap();
    ex.changes_support().expect("undo works on this machine");
    let (_dir, ws) = linked_workspace();
    let mark = new_mark();
    let s = Session::from("undoing");
    // A command that changes nothing is not listed.
    run(&ex, "cat notes.txt >/dev/null; ls", &ws, "undoing", &mark).await;
    assert!(ex.changes(Some(&s)).await.unwrap().commands.is_empty());
    let before = snapshot(&ws);
    let id = run(
        &ex,
        "rm -rf src && echo three >> notes.txt && printf 'x' > blob && chmod 700 run.sh && \
         mkdir -p out/deep && echo new > out/deep/made.txt && ln -sfn blob link && echo fresh > made.txt",
        &ws,
        "undoing",
        &mark,
    )
    .await;
    let list = ex.changes(Some(&s)).await.unwrap();
    assert_eq!(list.workspace.as_deref(), Some(ws.as_path()));
    assert_eq!(list.commands.len(), 1, "{list:#?}");
    let rec = &list.commands[0];
    assert_eq!(rec.id, id);
    let listed = relative_kinds(&rec.changes, &ws);
    assert_eq!(
        listed,
        [
            ("blob", "modified"),
            ("link", "modified"),
            ("made.txt", "created"),
            ("notes.txt", "modified"),
            ("out", "created"),
            ("out/deep", "created"),
            ("out/deep/made.txt", "created"),
            ("run.sh", "mode_changed"),
            ("src", "deleted"),
            ("src/a.rs", "deleted"),
            ("src/b.rs", "deleted"),
        ]
        .map(|(p, k)| (p.to_string(), k))
    );
    assert_eq!(rec.changes.totals.deleted, 3);
    let undone = ex.undo(Some(&s), None, false).await.unwrap();
    assert_eq!(undone.id, id);
    assert_eq!(
        relative(&ws, &undone.removed),
        ["made.txt", "out", "out/deep", "out/deep/made.txt"]
    );
    assert_eq!(
        snapshot(&ws),
        before,
        "the workspace is back, byte for byte, modes too"
    );
    // The record says so, and a second undo is refused.
    let list = ex.changes(Some(&s)).await.unwrap();
    assert!(list.commands[0].undone);
    let again = ex.undo(Some(&s), Some(&id), false).await.unwrap_err();
    assert!(matches!(again, ExecError::UndoRefused(_)), "{again}");
    assert!(again.to_string().contains("already undone"), "{again}");
    // The undo's own writes are no one's change.
    run(&ex, "true", &ws, "undoing", &mark).await;
    assert_eq!(ex.changes(Some(&s)).await.unwrap().commands.len(), 1);
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_over_a_later_change_or_from_another_session_is_refused() {
    let ex = Executor::new(namespaced()).unwrap();
    let (_dir, ws) = linked_workspace();
    let mark = new_mark();
    let s = Session::from("one");
    let first = run(&ex, "echo first >> notes.txt", &ws, "one", &mark).await;
    let second = run(
        &ex,
        "echo second >> notes.txt; echo z > z.txt",
        &ws,
        "one",
        &mark,
    )
    .await;
    // The first command's path was changed since by the second: refused, naming it, and nothing changed.
    let now = snapshot(&ws);
    let err = ex.undo(Some(&s), Some(&first), false).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("notes.txt") && text.contains(second.as_str()),
        "{text}"
    );
    assert!(text.contains("force"), "{text}");
    assert_eq!(snapshot(&ws), now);
    // A change by no recorded command (the host's own edit) is a conflict too.
    std::fs::write(ws.join("z.txt"), "host\n").unwrap();
    let err = ex.undo(Some(&s), Some(&second), false).await.unwrap_err();
    assert!(err.to_string().contains("z.txt"), "{err}");
    assert!(
        err.to_string().contains("not by a recorded command"),
        "{err}"
    );
    // Another session cannot see or undo this one's commands.
    let other = Session::from("two");
    let err = ex
        .undo(Some(&other), Some(&second), false)
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::UndoRefused(_)), "{err}");
    assert!(ex.changes(Some(&other)).await.unwrap().commands.is_empty());
    assert_eq!(snapshot(&ws), {
        let mut n = now.clone();
        n.insert(
            ws.join("z.txt"),
            ("file".into(), n[&ws.join("z.txt")].1, b"host\n".to_vec()),
        );
        n
    });
    // Forced, the later changes are overwritten: the second command's undo puts notes back and removes z.txt.
    let undone = ex.undo(Some(&s), Some(&second), true).await.unwrap();
    assert_eq!(relative(&ws, &undone.removed), ["z.txt"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "one\ntwo\nfirst\n"
    );
    // Now the first one can go too.
    ex.undo(Some(&s), Some(&first), false).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_command_cannot_make_an_undo_write_or_read_outside() {
    let ex = Executor::new(namespaced()).unwrap();
    let (dir, ws) = linked_workspace();
    let outside = dir.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("a.rs"), "outside\n").unwrap();
    std::fs::write(outside.join("secret"), "secret\n").unwrap();
    let before_out = snapshot(&outside);
    let mark = new_mark();
    let s = Session::from("hostile");
    let edit = run(&ex, "echo edited > src/a.rs", &ws, "hostile", &mark).await;
    // Replace the directory with a symlink out of the workspace, and link a secret in by a symlink.
    let o = outside.display();
    let swap = run(
        &ex,
        &format!("rm -rf src && ln -s {o} src && ln -s {o}/secret peek"),
        &ws,
        "hostile",
        &mark,
    )
    .await;
    // The listing shows the symlink, never what is beyond it.
    let list = ex.changes(Some(&s)).await.unwrap();
    let swapped = list.commands.iter().find(|c| c.id == swap).unwrap();
    assert!(
        swapped
            .changes
            .changes
            .iter()
            .all(|c| c.path.starts_with(&ws)),
        "{swapped:#?}"
    );
    // A forced undo of the edit would write src/a.rs: through the symlink it would land outside. It fails instead,
    // rolled back, and outside is untouched.
    let err = ex.undo(Some(&s), Some(&edit), true).await.unwrap_err();
    assert!(err.to_string().contains("rolled back"), "{err}");
    assert_eq!(snapshot(&outside), before_out);
    // Undoing the swap puts the directory back (the symlinks removed, not followed).
    let undone = ex.undo(Some(&s), Some(&swap), false).await.unwrap();
    assert!(
        relative(&ws, &undone.removed).contains(&"peek".to_string()),
        "{undone:?}"
    );
    assert!(ws.join("src").symlink_metadata().unwrap().is_dir());
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "edited\n"
    );
    assert_eq!(snapshot(&outside), before_out);
    ex.undo(Some(&s), Some(&edit), false).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_trees_and_large_files_are_bounded_and_said() {
    let mut config = namespaced();
    config.changes.max_file_bytes = 1024;
    config.changes.keep = 2;
    let ex = Executor::new(config).unwrap();
    let (_dir, ws) = linked_workspace();
    std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
    std::fs::write(ws.join("node_modules/pkg/index.js"), "x").unwrap();
    std::fs::write(ws.join("big"), vec![b'b'; 4096]).unwrap();
    let mark = new_mark();
    let s = Session::from("bounded");
    let id = run(
        &ex,
        "rm -rf node_modules/pkg && echo y > node_modules/new.js && rm big && echo 1 >> notes.txt && \
         mkdir -p src/node_modules/dep && echo z > src/node_modules/dep/z.js",
        &ws,
        "bounded",
        &mark,
    )
    .await;
    let list = ex.changes(Some(&s)).await.unwrap();
    let rec = &list.commands[0];
    let paths = relative(
        &ws,
        &rec.changes
            .changes
            .iter()
            .map(|c| c.path.clone())
            .collect::<Vec<_>>(),
    );
    // node_modules is not recorded (it is reinstalled, not restored).
    assert_eq!(paths, ["big", "notes.txt"], "{rec:#?}");
    assert_eq!(relative(&ws, &rec.not_kept), ["big"]);
    let err = ex.undo(Some(&s), Some(&id), false).await.unwrap_err();
    assert!(err.to_string().contains("max_file_bytes"), "{err}");
    let undone = ex.undo(Some(&s), Some(&id), true).await.unwrap();
    assert_eq!(relative(&ws, &undone.skipped), ["big"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    // Retention: three more commands with changes keep the newest two, and count what was dropped.
    for n in 0..3 {
        run(&ex, &format!("echo {n} > n{n}"), &ws, "bounded", &mark).await;
    }
    let list = ex.changes(Some(&s)).await.unwrap();
    assert_eq!(list.commands.len(), 2);
    assert_eq!(list.dropped, 2);
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_is_recorded_when_it_ends() {
    let ex = Executor::new(namespaced()).unwrap();
    let (_dir, ws) = linked_workspace();
    let mark = new_mark();
    let s = Session::from("bg");
    let mut p = in_ws("sleep 0.3; echo later > later.txt", &ws, "bg", &mark);
    p.background = true;
    p.timeout = None;
    let started = ex.execute(p).await.unwrap();
    ex.wait_exit(Some(&s), &started.id).await.unwrap();
    // Its end is recorded right after its exit.
    let mut found = false;
    for _ in 0..50 {
        let list = ex.changes(Some(&s)).await.unwrap();
        if list.commands.iter().any(|c| c.id == started.id) {
            found = true;
            let c = &list.commands[0];
            assert_eq!(c.changes.changes[0].kind, ChangeKind::Created);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(found, "the background command's changes were not recorded");
    ex.undo(Some(&s), Some(&started.id), false).await.unwrap();
    assert!(!ws.join("later.txt").exists());
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_past_the_bounds_is_not_recorded_and_says_why() {
    for (bytes, files, expected) in [(16, 100_000, "max_bytes"), (1 << 30, 3, "max_files")] {
        let mut config = namespaced();
        config.changes.max_bytes = bytes;
        config.changes.max_files = files;
        let ex = Executor::new(config).unwrap();
        let (_dir, ws) = linked_workspace();
        let mark = new_mark();
        let s = Session::from("too-big");
        run(&ex, "echo x > new.txt", &ws, "too-big", &mark).await;
        let list = ex.changes(Some(&s)).await.unwrap();
        assert!(list.commands.is_empty());
        let why = list.not_recording.expect("the reason");
        assert!(
            why.contains(expected) && why.contains("[changes] ignore"),
            "{why}"
        );
        let err = ex.undo(Some(&s), None, false).await.unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        // Nothing was copied: the store is gone.
        let store = ex.log_dir().join(".changes");
        let left: Vec<_> = std::fs::read_dir(&store)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
        ex.shutdown().await;
    }
}

/// A command that starts before the workspace's baseline is ready runs at once, unrecorded; the baseline goes on and
/// the commands after it are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_command_does_not_wait_past_the_baseline_bound() {
    let mut config = namespaced();
    config.changes.baseline_wait = Duration::ZERO;
    let ex = Executor::new(config).unwrap();
    let (_dir, ws) = linked_workspace();
    let mark = new_mark();
    let s = Session::from("impatient");
    run(&ex, "echo early > early.txt", &ws, "impatient", &mark).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ex.changes(Some(&s)).await.unwrap().workspace.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the baseline never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let list = ex.changes(Some(&s)).await.unwrap();
    assert!(list.commands.is_empty(), "{list:#?}");
    let later = run(&ex, "echo later > later.txt", &ws, "impatient", &mark).await;
    let list = ex.changes(Some(&s)).await.unwrap();
    assert_eq!(list.commands.len(), 1, "{list:#?}");
    assert_eq!(list.commands[0].id, later);
    ex.undo(Some(&s), None, false).await.unwrap();
    assert!(!ws.join("later.txt").exists() && ws.join("early.txt").exists());
    ex.shutdown().await;
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user.
    every_undo_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_UNDO_AS_USER"
);
