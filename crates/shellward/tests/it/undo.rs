//! The undo tools on the facade (`SessionHandle::changes_list`, `changes_undo`, and by name through `call`): a
//! session's command is listed with what it changed and taken back byte for byte; a repeat, an undo over a later
//! change, and one from another session are refused as conflicts, naming why.

#![cfg(target_os = "linux")]

use crate::common::*;
use shellward::config::Config;
use shellward::tools::{ChangesListArgs, ChangesUndoArgs};
use shellward::{Shellward, ToolErrorKind};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let (dir, ws) = source_workspace(&[("tool.sh", "echo tool\n")]);
    std::fs::set_permissions(ws.join("tool.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    (dir, ws)
}

fn contents(ws: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![ws.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = p.symlink_metadata().unwrap();
            let rel = p.strip_prefix(ws).unwrap().display().to_string();
            if m.is_dir() {
                stack.push(p.clone());
                out.push((rel, m.permissions().mode() & 0o7777, Vec::new()));
            } else {
                out.push((
                    rel,
                    m.permissions().mode() & 0o7777,
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lists_and_undoes_its_command_and_others_cannot() {
    let (_dir, ws) = workspace();
    let mark = new_mark();
    let sw = instance_in(&ws, &mark, None);
    let s = sw.session("undo-facade");
    let before = contents(&ws);
    let r = s
        .execute(
            exec("rm -rf src && echo made > new.txt && chmod 700 tool.sh"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    let id = r.process_id.clone().unwrap();
    let list = s.changes_list(ChangesListArgs::default()).await.unwrap();
    assert_eq!(list.workspace.as_deref(), Some(ws.to_str().unwrap()));
    assert_eq!(list.commands.len(), 1, "{list:#?}");
    let c = &list.commands[0];
    assert_eq!(c.process_id, id);
    assert!(
        c.summary
            .starts_with("deleted 3 paths (src/a.rs, src/b.rs), modified 0, created 1 (new.txt)"),
        "{}",
        c.summary
    );
    let kinds: Vec<(&str, &str)> = c
        .changes
        .iter()
        .map(|p| (p.path.as_str(), p.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("new.txt", "created"),
            ("src", "deleted"),
            ("src/a.rs", "deleted"),
            ("src/b.rs", "deleted"),
            ("tool.sh", "mode_changed"),
        ]
    );
    // Another session sees nothing and cannot undo it.
    let other = sw.session("someone-else");
    assert!(
        other
            .changes_list(ChangesListArgs::default())
            .await
            .unwrap()
            .commands
            .is_empty()
    );
    let err = other
        .changes_undo(ChangesUndoArgs::new(Some(&id)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Conflict, "{err}");
    assert!(err.message.contains("changes_list"), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.join("new.txt")).unwrap(),
        "made\n"
    );
    // By name, as MCP and HTTP call it: the command's changes are taken back, byte for byte, modes too.
    let undone = s
        .call("changes_undo", serde_json::json!({}), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(undone["success"], true, "{undone}");
    assert_eq!(undone["process_id"], id.as_str());
    assert_eq!(undone["removed"], serde_json::json!(["new.txt"]));
    assert_eq!(contents(&ws), before);
    // Twice is refused.
    let err = s
        .changes_undo(ChangesUndoArgs::new(Some(&id)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Conflict);
    assert!(err.message.contains("already undone"), "{err}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_over_a_later_command_names_it_and_force_overwrites() {
    let (_dir, ws) = workspace();
    let mark = new_mark();
    let logs = tempfile::tempdir().unwrap();
    let audit = logs.path().join("audit.jsonl");
    let mut config = Config::default();
    config.executor.env.set_var(MARK, &mark);
    config.executor.default_workdir = Some(ws.to_path_buf());
    config.audit = Some(shellward::AuditConfig::to(&audit));
    let sw = Shellward::builder().config(config).build().unwrap();
    let s = sw.session("undo-conflict");
    let first = s
        .execute(exec("echo one >> src/a.rs"), ExecuteOptions::new())
        .await
        .unwrap()
        .process_id
        .unwrap();
    let second = s
        .execute(exec("echo two >> src/a.rs"), ExecuteOptions::new())
        .await
        .unwrap()
        .process_id
        .unwrap();
    let err = s
        .changes_undo(ChangesUndoArgs::new(Some(&first)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Conflict);
    assert!(
        err.message.contains("src/a.rs")
            && err.message.contains(&second)
            && err.message.contains("force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "fn a() {}\none\ntwo\n"
    );
    let forced = s
        .changes_undo(ChangesUndoArgs::new(Some(&first)).forced())
        .await
        .unwrap();
    assert_eq!(forced.restored, ["src/a.rs"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    sw.shutdown().await;
    // Both asks are audited: the refusal with its reason, the forced undo with what it did.
    let undos: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "undo")
        .collect();
    assert_eq!(undos.len(), 2, "{undos:#?}");
    assert!(
        undos[0]["refused"].as_str().unwrap().contains("src/a.rs"),
        "{undos:#?}"
    );
    assert_eq!(undos[1]["process_id"], first.as_str());
    assert_eq!(undos[1]["restored"], 1);
    assert_eq!(undos[1]["forced"], true);
    assert_eq!(undos[1]["session"], "undo-conflict");
}

/// A session given its directory (an MCP client's root) takes its baseline at once, not at its first command; that
/// directory is the workspace even inside the instance's own (which would be the whole home of a client started
/// there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_its_directory_is_recorded_there_from_the_start() {
    let (dir, ws) = workspace();
    let mark = new_mark();
    // The instance works in the parent: the session's root, beneath it, is what is recorded.
    let sw = instance_in(dir.path(), &mark, None);
    let project = ws.join("src");
    let s = sw.session("rooted");
    s.set_workdir(&project).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let list = s.changes_list(ChangesListArgs::default()).await.unwrap();
        if list.workspace.as_deref() == Some(project.to_str().unwrap()) {
            assert!(list.commands.is_empty());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no baseline: {list:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // An edit before the first command is no one's; the command's own is undone alone.
    std::fs::write(project.join("b.rs"), "fn host_edit() {}\n").unwrap();
    let r = s
        .execute(exec("echo more >> a.rs"), ExecuteOptions::new())
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    let undone = s.changes_undo(ChangesUndoArgs::default()).await.unwrap();
    assert_eq!(undone.restored, ["a.rs"]);
    assert_eq!(
        std::fs::read_to_string(project.join("b.rs")).unwrap(),
        "fn host_edit() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("a.rs")).unwrap(),
        "fn a() {}\n"
    );
    sw.shutdown().await;
}
