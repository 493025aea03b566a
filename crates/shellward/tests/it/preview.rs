//! `execute` with `preview: true` on the facade: the command runs in a throwaway view, the answer carries its change
//! set and `applied: false`, and nothing reaches the workspace — for a plan the policy runs and for one it would ask
//! about (a preview needs no approval); a denied command is not previewed either.

#![cfg(target_os = "linux")]

use crate::common::*;
use shellward::tools::ExecuteArgs;
use std::path::Path;

fn previewed(command: &str) -> ExecuteArgs {
    let mut args = ExecuteArgs::new(command);
    args.preview = Some(true);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_answers_the_change_set_and_applies_nothing() {
    let (_dir, ws) = source_workspace(&[("README", "hello\n")]);
    let mark = new_mark();
    let sw = instance_in(&ws, &mark, None);
    let s = sw.session("previews");
    let r = s
        .execute(
            previewed("rm -rf src && echo bye >> README && echo made > new.txt"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    assert_eq!(r.applied, Some(false));
    assert!(ws.join("src/a.rs").exists() && !ws.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("README")).unwrap(),
        "hello\n"
    );
    let report = r.preview.as_deref().expect("a change set");
    assert_eq!(report.totals.deleted, 3, "{report:#?}");
    assert_eq!((report.totals.modified, report.totals.created), (1, 1));
    assert!(
        report.summary.starts_with(
            "would delete 3 paths (src/a.rs, src/b.rs), modify 1 (README), create 1 (new.txt)"
        ),
        "{}",
        report.summary
    );
    assert!(
        r.notes[0].starts_with("Preview only, nothing was applied"),
        "{:?}",
        r.notes
    );
    assert!(r.process_id.is_none() && r.background_process_id.is_none());
    // On the wire: `applied` and `preview.changes`.
    let wire = serde_json::to_value(&r).unwrap();
    assert_eq!(wire["applied"], false);
    let kinds: Vec<(&str, &str)> = wire["preview"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap(), c["kind"].as_str().unwrap()))
        .collect();
    let readme = ws.join("README").display().to_string();
    assert!(kinds.contains(&(readme.as_str(), "modified")), "{kinds:?}");
    assert!(
        wire["preview"]["cannot_show"]
            .as_str()
            .unwrap()
            .contains("network")
    );
    // Without `preview` the same call applies.
    let r = s
        .execute(ExecuteArgs::new("rm -rf src"), ExecuteOptions::new())
        .await
        .unwrap();
    assert!(r.success && r.applied.is_none() && r.preview.is_none());
    assert!(!ws.join("src").exists());
    assert!(survivors(&mark).is_empty());
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_of_an_asked_command_needs_no_approval_and_a_denied_one_is_not_run() {
    let (_dir, ws) = source_workspace(&[("README", "hello\n")]);
    let mark = new_mark();
    let engine = shellward::PolicyEngine::new(shellward::SandboxConfig::default()).unwrap();
    let load = |settings: &str| {
        engine
            .load_file(
                Path::new(shellward_policy::embedded::guests::SCRIPTED_POLICY),
                settings,
            )
            .unwrap()
    };
    let chain = |settings: &str| {
        shellward::PolicyChain::new(vec![load(settings)], shellward_policy::FaultMode::Deny)
    };
    // Asks about everything, and no one is there to answer: a preview still runs, a real run does not.
    let sw = instance_in(&ws, &mark, Some(chain("ask:Delete the sources?")));
    let s = sw.session("asked");
    let r = s
        .execute(previewed("rm -rf src"), ExecuteOptions::new())
        .await
        .unwrap();
    assert!(r.pending_approval.is_none(), "{r:?}");
    assert_eq!(r.preview.as_deref().unwrap().totals.deleted, 3, "{r:?}");
    assert!(ws.join("src/a.rs").exists());
    let real = s
        .execute(ExecuteArgs::new("rm -rf src"), ExecuteOptions::new())
        .await
        .unwrap();
    assert!(!real.success && ws.join("src/a.rs").exists(), "{real:?}");
    sw.shutdown().await;
    // Denied: not previewed, not run.
    let sw = instance_in(&ws, &mark, Some(chain("deny:no deletions")));
    let r = run_in(&sw, "denied", previewed("rm -rf src")).await;
    assert!(r.denied && r.preview.is_none(), "{r:?}");
    assert!(ws.join("src/a.rs").exists());
    assert!(survivors(&mark).is_empty());
    sw.shutdown().await;
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the default writable paths hold `/tmp` and `~/.cache`: the layer goes
    /// elsewhere).
    every_facade_preview_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_FACADE_PREVIEW_AS_USER"
);
