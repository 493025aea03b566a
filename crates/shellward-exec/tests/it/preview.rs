//! Previews (`Executor::preview`): a command run in a copy-on-write view of its writable paths lists what it would
//! change and changes nothing — as root and (rerun at the end) as a normal user; hostile commands stay inside it.

#![cfg(target_os = "linux")]

use crate::common::*;
use shellward_exec::{
    ChangeKind, Confinement, EntryType, ExecError, ExecPlan, Executor, Network, PreviewLimits,
};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every entry beneath `root`: its kind, mode and content (a symlink's target), without following links.
pub(crate) fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = p.symlink_metadata().unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let entry = if m.is_dir() {
                stack.push(p.clone());
                ("dir".to_string(), mode, Vec::new())
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                (
                    "link".to_string(),
                    mode,
                    t.into_os_string().into_encoded_bytes(),
                )
            } else if m.is_file() {
                ("file".to_string(), mode, std::fs::read(&p).unwrap())
            } else {
                ("other".to_string(), mode, Vec::new())
            };
            out.insert(p, entry);
        }
    }
    out
}

fn plan(command: &str, mark: &str, writable: Vec<PathBuf>) -> ExecPlan {
    let mut p = marked_plan(command, mark);
    p.confinement = Confinement::new(Some(writable), Network::Host);
    p.session = Some("previewing".into());
    p
}

/// Overlay mounts this process can see (the host's mount table).
fn overlays_over(path: &Path) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - overlay ") && l.contains(path.to_str().unwrap()))
        .count()
}

fn leftover_scratch(ex: &Executor) -> Vec<PathBuf> {
    let name = ex
        .log_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let parents = [
        std::env::var_os("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).join("shellward-preview")),
        Some(PathBuf::from("/run/shellward-preview")),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/shellward/preview")),
    ];
    parents
        .into_iter()
        .flatten()
        .filter_map(|p| std::fs::read_dir(p).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_lists_what_the_command_would_change_and_changes_nothing() {
    let ex = Executor::new(namespaced()).unwrap();
    ex.preview_support().expect("previews work on this machine");
    let (_dir, ws) = workspace();
    let before = snapshot(&ws);
    let mark = new_mark();
    let command = "rm -rf src && echo three >> notes.txt && echo new > made.txt && mv blob blob2 && \
                   chmod 755 run.sh && mkdir -p out/deep && echo x > out/deep/x && ls src 2>&1; echo done";
    let mut p = plan(command, &mark, vec![ws.clone()]);
    p.workdir = Some(ws.clone());
    let preview = ex.preview(p, &PreviewLimits::default()).await.unwrap();
    assert!(
        preview.result.output.text.contains("done"),
        "{:?}",
        preview.result.output
    );
    // Nothing reached the workspace, no view is left mounted, and the layer is gone.
    assert_eq!(snapshot(&ws), before, "the workspace is byte-identical");
    assert_eq!(overlays_over(&ws), 0);
    assert!(
        leftover_scratch(&ex).is_empty(),
        "{:?}",
        leftover_scratch(&ex)
    );
    let set = &preview.changes;
    let of = |rel: &str| {
        set.changes
            .iter()
            .find(|c| c.path == ws.join(rel))
            .unwrap_or_else(|| panic!("no change for {rel}: {:#?}", set.changes))
    };
    for rel in ["src", "src/a.rs", "src/b.rs"] {
        assert_eq!(of(rel).kind, ChangeKind::Deleted, "{rel}");
    }
    assert_eq!(of("src").entry, EntryType::Directory);
    assert_eq!(of("src/a.rs").size_before, Some(10));
    let notes = of("notes.txt");
    assert_eq!(notes.kind, ChangeKind::Modified);
    assert!(
        notes.diff.as_deref().unwrap().contains("+three"),
        "{notes:?}"
    );
    let made = of("made.txt");
    assert_eq!(made.kind, ChangeKind::Created);
    assert!(made.diff.as_deref().unwrap().contains("+new"));
    let moved = of("blob2");
    assert_eq!(moved.kind, ChangeKind::Renamed);
    assert_eq!(
        moved.renamed_from.as_deref(),
        Some(ws.join("blob").as_path())
    );
    let script = of("run.sh");
    assert_eq!(script.kind, ChangeKind::ModeChanged);
    assert_eq!(script.mode_after, Some(0o755));
    assert_eq!(of("out/deep/x").kind, ChangeKind::Created);
    // Exactly these: the three deletions, one modification, the created file and directories, one rename, one mode.
    let listed = relative_kinds(set, &ws);
    assert_eq!(
        listed,
        [
            ("blob2", "renamed"),
            ("made.txt", "created"),
            ("notes.txt", "modified"),
            ("out", "created"),
            ("out/deep", "created"),
            ("out/deep/x", "created"),
            ("run.sh", "mode_changed"),
            ("src", "deleted"),
            ("src/a.rs", "deleted"),
            ("src/b.rs", "deleted"),
        ]
        .map(|(p, k)| (p.to_string(), k))
    );
    assert!(
        set.summary(Some(&ws))
            .starts_with("would delete 3 paths (src/a.rs, src/b.rs), modify 1 (notes.txt)"),
        "{}",
        set.summary(Some(&ws))
    );
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_preview_stays_inside_its_view() {
    let ex = Executor::new(namespaced()).unwrap();
    let (dir, ws) = workspace();
    let outside = ws.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "keep").unwrap();
    let before_ws = snapshot(&ws);
    let before_out = snapshot(&outside);
    let mark = new_mark();
    let o = outside.display();
    // A symlink out of the workspace written through, a hard link to a file outside, a FIFO, writes outside, a
    // rename out of the workspace, and a background process left behind.
    let command = format!(
        "ln -s {o} link; echo x > link/through; ln {o}/secret hard; mkfifo pipe; echo y > {o}/direct; \
         mv notes.txt {o}/; (sleep 300 &); echo end"
    );
    let mut p = plan(&command, &mark, vec![ws.clone()]);
    p.workdir = Some(ws.clone());
    let preview = ex.preview(p, &PreviewLimits::default()).await.unwrap();
    assert_eq!(snapshot(&ws), before_ws);
    assert_eq!(snapshot(&outside), before_out, "nothing outside changed");
    let rel: Vec<(String, &str, EntryType)> = preview
        .changes
        .changes
        .iter()
        .map(|c| {
            (
                c.path.strip_prefix(&ws).unwrap().display().to_string(),
                c.kind.as_str(),
                c.entry,
            )
        })
        .collect();
    assert_eq!(
        rel,
        vec![
            ("link".to_string(), "created", EntryType::Symlink),
            ("pipe".to_string(), "created", EntryType::Other),
        ],
        "{:#?}",
        preview.changes
    );
    let link = &preview.changes.changes[0];
    assert_eq!(link.link_target.as_deref(), Some(outside.as_path()));
    // The background process died with the preview's sandbox.
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    assert!(leftover_scratch(&ex).is_empty());
    drop(dir);
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_is_bounded_in_time_and_space() {
    let ex = Executor::new(namespaced()).unwrap();
    let (_dir, ws) = workspace();
    let mark = new_mark();
    // Never ends: stopped at its time.
    let started = Instant::now();
    let mut p = plan("echo started; sleep 300", &mark, vec![ws.clone()]);
    p.workdir = Some(ws.clone());
    let preview = ex
        .preview(
            p,
            &PreviewLimits::default().with_time(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert!(preview.result.timed_out);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Fills the disk: stopped at its space.
    let mut p = plan(
        "while :; do head -c 1048576 /dev/zero >> big; done",
        &mark,
        vec![ws.clone()],
    );
    p.workdir = Some(ws.clone());
    let preview = ex
        .preview(
            p,
            &PreviewLimits::default()
                .with_space(8 << 20)
                .with_time(Duration::from_secs(20)),
        )
        .await
        .unwrap();
    assert!(preview.changes.space_exceeded, "{:?}", preview.changes);
    assert!(!preview.result.timed_out, "stopped by space, not time");
    assert!(preview.changes.summary(None).contains("space limit"));
    assert!(!ws.join("big").exists());
    assert!(leftover_scratch(&ex).is_empty());
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_needs_confined_writes() {
    let ex = Executor::new(namespaced()).unwrap();
    let err = ex
        .preview(ExecPlan::new("true"), &PreviewLimits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::PreviewUnavailable(_)), "{err}");
    assert!(err.to_string().contains("writable paths"), "{err}");
    ex.shutdown().await;
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the preview's sandbox in a user namespace of its own).
    every_preview_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_PREVIEW_AS_USER"
);
