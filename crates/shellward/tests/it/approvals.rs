//! The third verdict through the facade: a command a policy asks about runs only once an approver says yes, exactly
//! as asked; a no, nobody to ask, an expired wait or a broken reviewer runs nothing; approvals are remembered per
//! session, parked ones are answered once and only by their session, and every answer is audited.
//!
//! The asking policy is the scripted test policy with `ask:QUESTION` (it asks about every command). Each command
//! writes a file, so "nothing ran" is checked on disk, also after the wait would have ended.

#![cfg(unix)]

use crate::common::{At, MARK, exec, new_mark, run_in};
use shellward::approval::BoxFuture;
use shellward::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditConfig, Config, ExecuteOptions, Shellward,
    ToolErrorKind,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// An approver that answers the same each time (or never) and counts the questions.
struct Fixed {
    answer: Option<ApprovalAnswer>,
    asked: AtomicUsize,
    last: std::sync::Mutex<Option<ApprovalRequest>>,
}

impl Fixed {
    fn new(answer: Option<ApprovalAnswer>) -> Arc<Fixed> {
        Arc::new(Fixed {
            answer,
            asked: AtomicUsize::new(0),
            last: std::sync::Mutex::new(None),
        })
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Approver for Fixed {
    fn name(&self) -> &str {
        "test approver"
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move {
            match answer {
                Some(a) => a,
                None => std::future::pending().await,
            }
        })
    }
}

/// An instance whose policy asks about every command, with this configuration's approvals and an audit log.
fn asking(dir: &Path, mark: &str, edit: impl FnOnce(&mut Config)) -> Shellward {
    asking_with(dir, mark, edit, None)
}

/// [`asking`], the policy asking `question`.
fn asking_about(
    dir: &Path,
    mark: &str,
    question: &str,
    edit: impl FnOnce(&mut Config),
) -> Shellward {
    build_asking(dir, mark, question, edit, None)
}

/// [`asking`], with a host's own approver.
fn asking_with(
    dir: &Path,
    mark: &str,
    edit: impl FnOnce(&mut Config),
    host: Option<Arc<Fixed>>,
) -> Shellward {
    build_asking(dir, mark, "Touch a file in the test directory?", edit, host)
}

/// An instance whose policy asks `question` about every command.
fn build_asking(
    dir: &Path,
    mark: &str,
    question: &str,
    edit: impl FnOnce(&mut Config),
    host: Option<Arc<Fixed>>,
) -> Shellward {
    let engine = shellward::PolicyEngine::new(shellward::SandboxConfig::default()).unwrap();
    let policy = engine
        .load_file(
            Path::new(shellward_policy::embedded::guests::SCRIPTED_POLICY),
            &format!("ask:{question}"),
        )
        .unwrap();
    let mut config = Config::default();
    config.audit = Some(AuditConfig::to(dir.join("audit.jsonl")));
    config.executor.env.set_var(MARK, mark);
    config.executor.default_workdir = Some(dir.to_path_buf());
    edit(&mut config);
    let mut builder =
        Shellward::builder()
            .config(config)
            .policy_chain(shellward::PolicyChain::new(
                vec![policy],
                shellward_policy::FaultMode::Deny,
            ));
    if let Some(host) = host {
        builder = builder.approver(host);
    }
    builder.build().unwrap()
}

fn touch(dir: &Path, name: &str) -> (String, PathBuf) {
    let file = dir.join(name);
    (format!("touch {}", file.display()), file)
}

fn audit(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn with(approver: &Arc<Fixed>) -> ExecuteOptions {
    ExecuteOptions::new().approver(approver.clone())
}

/// Approves the pending approval `id` of `session` once, as `by`.
async fn approve(
    sw: &Shellward,
    session: &str,
    id: &str,
    by: &str,
) -> Result<shellward::tools::ExecuteResult, shellward::ToolError> {
    sw.at(Some(session))
        .answer_approval(id, ApprovalAnswer::Approve { remember: false }, by)
        .await
}

/// `execute` of `command` in `session`, `approver` asked first when a policy asks.
async fn run_asking(
    sw: &Shellward,
    session: &str,
    command: &str,
    approver: &Arc<Fixed>,
) -> shellward::tools::ExecuteResult {
    sw.at(Some(session))
        .execute(exec(command), with(approver))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_command_runs_as_asked_and_a_refused_one_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});

    let yes = Fixed::new(Some(ApprovalAnswer::Approve { remember: false }));
    let (cmd, file) = touch(dir.path(), "approved");
    let r = run_asking(&sw, "s1", &cmd, &yes).await;
    assert!(r.success && file.exists(), "{r:?}");
    assert!(
        r.notes[0].contains("Approved by the test approver"),
        "{:?}",
        r.notes
    );
    let asked = yes.last.lock().unwrap().clone().unwrap();
    assert_eq!(asked.command, cmd);
    assert_eq!(asked.question, "Touch a file in the test directory?");
    assert!(asked.prompt().contains(&cmd), "the person sees the command");
    assert_eq!(asked.session.as_deref(), Some("s1"));

    let no = Fixed::new(Some(ApprovalAnswer::Deny {
        reason: Some("not today".into()),
    }));
    let (cmd, file) = touch(dir.path(), "declined");
    let r = run_asking(&sw, "s1", &cmd, &no).await;
    assert!(r.denied && !r.success, "{r:?}");
    let reason = r.deny_reason.unwrap();
    assert!(
        reason.contains("declined") && reason.contains("not today"),
        "{reason}"
    );

    // Nobody to ask (the client cannot show it, no reviewer): a deny telling the model to ask its user.
    let nobody = Fixed::new(Some(ApprovalAnswer::Unavailable));
    let (cmd2, file2) = touch(dir.path(), "unasked");
    let r = run_asking(&sw, "s1", &cmd2, &nobody).await;
    assert!(r.denied, "{r:?}");
    let reason = r.deny_reason.unwrap();
    assert!(
        reason.contains("needs a person's approval")
            && reason.contains("Ask your user")
            && reason.contains(&cmd2),
        "{reason}"
    );
    // Without any approver at all, the same.
    let r = run_in(&sw, "s1", exec(&cmd2)).await;
    assert!(r.denied, "{r:?}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!file.exists() && !file2.exists(), "a refused command ran");
    let answers: Vec<(String, String)> = audit(dir.path())
        .iter()
        .filter(|r| r["type"] == "approval")
        .map(|r| {
            (
                r["answered_by"].as_str().unwrap().to_string(),
                r["answer"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("test approver".to_string(), "approve".to_string()),
            ("test approver".to_string(), "deny".to_string()),
            ("nobody".to_string(), "deny".to_string()),
            ("nobody".to_string(), "deny".to_string()),
        ]
    );
    let records = audit(dir.path());
    let decisions: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["type"] == "decision").collect();
    assert!(
        decisions.iter().all(|d| d["outcome"] == "ask"),
        "{decisions:?}"
    );
    // Prometheus counts the asks by outcome, and the decisions as asks.
    let metrics = sw.metrics_text();
    for line in [
        "shellward_approvals_total{outcome=\"approved\"} 1",
        "shellward_approvals_total{outcome=\"denied\"} 1",
        "shellward_approvals_total{outcome=\"unavailable\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    assert!(
        metrics.contains("shellward_decisions_total{outcome=\"ask\""),
        "{metrics}"
    );
    assert!(
        decisions[0]["process_id"].is_string(),
        "the approved run is recorded with its process"
    );
    assert_eq!(decisions[1]["approved"], false);
    sw.shutdown().await;
    assert!(crate::common::survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_ask_expires_and_its_command_never_starts_late() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |c| {
        c.approvals.expiry = Duration::from_secs(1)
    });
    let silent = Fixed::new(None);
    let (cmd, file) = touch(dir.path(), "late");
    let started = std::time::Instant::now();
    let r = sw
        .without_session()
        .execute(exec(&cmd), with(&silent))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(r.denied, "{r:?}");
    assert!(
        r.deny_reason
            .as_deref()
            .unwrap()
            .contains("did not answer within 1 s"),
        "{r:?}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !file.exists(),
        "the command started after its approval expired"
    );
    assert!(
        audit(dir.path())
            .iter()
            .any(|r| r["type"] == "approval" && r["answered_by"] == "expiry")
    );
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_approvals_hold_for_their_session_only() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});
    let yes = Fixed::new(Some(ApprovalAnswer::Approve { remember: true }));
    let (cmd, file) = touch(dir.path(), "again");
    let r = run_asking(&sw, "a", &cmd, &yes).await;
    assert!(r.success, "{r:?}");
    std::fs::remove_file(&file).unwrap();
    let r = run_asking(&sw, "a", &cmd, &yes).await;
    assert!(r.success && file.exists(), "{r:?}");
    assert_eq!(yes.asked(), 1, "the session remembered the approval");
    assert!(r.notes[0].contains("remembered"), "{:?}", r.notes);
    assert_eq!(
        sw.session("a").remembered_approvals(),
        std::slice::from_ref(&cmd)
    );
    // Another session, another command: asked again.
    run_asking(&sw, "b", &cmd, &yes).await;
    let (other, _) = touch(dir.path(), "other");
    run_asking(&sw, "a", &other, &yes).await;
    assert_eq!(yes.asked(), 3);
    // Ending the session forgets them.
    sw.session("a").end_approvals();
    assert!(sw.session("a").remembered_approvals().is_empty());
    run_asking(&sw, "a", &cmd, &yes).await;
    assert_eq!(yes.asked(), 4);
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_approval_is_answered_once_by_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});
    let later =
        ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new("user (HTTP)")));
    let (cmd, file) = touch(dir.path(), "parked");
    let r = sw.session("s").execute(exec(&cmd), later).await.unwrap();
    let pending = r.pending_approval.clone().expect("pending");
    assert!(!r.success && !r.denied && !file.exists(), "{r:?}");
    assert!(
        pending.id.starts_with("ap-") && pending.id.len() == 35,
        "{}",
        pending.id
    );
    assert_eq!(pending.command, cmd);
    assert!(pending.expires_in_ms > 0);
    let listed = sw.session("s").pending_approvals();
    assert_eq!(listed.len(), 1);
    assert!(sw.session("other").pending_approvals().is_empty());
    // Another session cannot see or answer it.
    let foreign = approve(&sw, "other", &pending.id, "x").await.unwrap_err();
    assert_eq!(foreign.kind, ToolErrorKind::UnknownApproval);
    assert!(!file.exists());
    let ran = approve(&sw, "s", &pending.id, "user (HTTP)").await.unwrap();
    assert!(ran.success && file.exists(), "{ran:?}");
    // Once decided, the id is spent.
    let again = approve(&sw, "s", &pending.id, "user (HTTP)")
        .await
        .unwrap_err();
    assert_eq!(again.kind, ToolErrorKind::UnknownApproval);
    // A parked deny runs nothing.
    let (cmd, file) = touch(dir.path(), "parked-no");
    let later =
        ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new("user (HTTP)")));
    let r = sw.session("s").execute(exec(&cmd), later).await.unwrap();
    let id = r.pending_approval.unwrap().id;
    let no = sw
        .session("s")
        .answer_approval(&id, ApprovalAnswer::Deny { reason: None }, "user (HTTP)")
        .await
        .unwrap();
    assert!(no.denied && !file.exists(), "{no:?}");
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_approval_expires_and_cannot_be_approved_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |c| {
        c.approvals.expiry = Duration::from_secs(1)
    });
    let later =
        ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new("user (HTTP)")));
    let (cmd, file) = touch(dir.path(), "parked-late");
    let r = sw
        .without_session()
        .execute(exec(&cmd), later)
        .await
        .unwrap();
    let id = r.pending_approval.unwrap().id;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(sw.without_session().pending_approvals().is_empty());
    let err = sw
        .without_session()
        .answer_approval(
            &id,
            ApprovalAnswer::Approve { remember: false },
            "user (HTTP)",
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::UnknownApproval);
    assert!(!file.exists());
    assert!(
        audit(dir.path())
            .iter()
            .any(|r| r["type"] == "approval" && r["answered_by"] == "expiry")
    );
    sw.shutdown().await;
}

/// A reviewer script in `dir` whose body is `body` (a POSIX shell script).
fn reviewer(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_reviewer_that_answers_approve_lets_a_command_run() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let scripts = tempfile::tempdir().unwrap();
    let seen = scripts.path().join("seen.json");
    // The hanging reviewer's processes carry this marker (the reviewer runs with shellward's environment, not a
    // command's), so the scan below proves its whole group was killed.
    let review_mark = shellward_test_support::unique_mark("reviewer");
    let cases = [
        // (script, runs, reason contains)
        (
            format!(
                "cat > {}; echo '{{\"decision\": \"approve\"}}'",
                seen.display()
            ),
            true,
            "",
        ),
        (
            "cat >/dev/null; echo '{\"decision\": \"deny\", \"reason\": \"not on Fridays\"}'"
                .to_string(),
            false,
            "not on Fridays",
        ),
        (
            format!(
                "REVIEW_MARK={review_mark} sleep 30 & REVIEW_MARK={review_mark} sleep 30; echo '{{\"decision\": \"approve\"}}'"
            ),
            false,
            "did not answer within",
        ),
        (
            "echo '{\"decision\": \"approve\"}'; exit 3".to_string(),
            false,
            "exited",
        ),
        ("echo yes please".to_string(), false, "not one JSON object"),
        (
            "echo '{\"decision\": \"maybe\"}'".to_string(),
            false,
            "decision",
        ),
    ];
    for (i, (body, runs, why)) in cases.iter().enumerate() {
        let script = reviewer(scripts.path(), &format!("r{i}"), body);
        let sw = asking(dir.path(), &mark, |c| {
            let mut r = shellward::approval::ReviewerConfig::new(vec![script.clone()]);
            r.timeout = Duration::from_secs(1);
            c.approvals.reviewer = Some(r);
        });
        let (cmd, file) = touch(dir.path(), &format!("reviewed-{i}"));
        let started = std::time::Instant::now();
        let r = run_in(&sw, "rev", exec(&cmd)).await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "case {i} waited too long"
        );
        assert_eq!(r.success && file.exists(), *runs, "case {i}: {r:?}");
        if !runs {
            assert!(
                r.deny_reason.as_deref().unwrap_or("").contains(why),
                "case {i}: {r:?}"
            );
        }
        sw.shutdown().await;
    }
    // The reviewer read one JSON request: the command, the question, the session and the plan.
    let request: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(request["question"], "Touch a file in the test directory?");
    assert_eq!(request["session"], "rev");
    assert!(request["command"].as_str().unwrap().contains("reviewed-0"));
    assert_eq!(request["plan"]["mode"], "foreground");
    // The hanging reviewer was killed with its group: nothing of it is left.
    assert!(
        shellward_test_support::survivors_after(
            &format!("REVIEW_MARK={review_mark}"),
            Duration::from_secs(5)
        )
        .is_empty()
    );
    assert!(crate::common::survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_own_approver_answers_after_the_callers_surface() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let host = Fixed::new(Some(ApprovalAnswer::Approve { remember: false }));
    let sw = asking_with(dir.path(), &mark, |_| {}, Some(host.clone()));
    // The surface's person cannot be asked: the host's approver answers.
    let nobody = Fixed::new(Some(ApprovalAnswer::Unavailable));
    let (cmd, file) = touch(dir.path(), "host");
    let r = sw
        .without_session()
        .execute(exec(&cmd), with(&nobody))
        .await
        .unwrap();
    assert!(r.success && file.exists(), "{r:?}");
    assert_eq!((nobody.asked(), host.asked()), (1, 1));
    // The surface's person answers first when it can: the host is not asked.
    let no = Fixed::new(Some(ApprovalAnswer::Deny { reason: None }));
    let (cmd, file) = touch(dir.path(), "surface");
    let r = sw
        .without_session()
        .execute(exec(&cmd), with(&no))
        .await
        .unwrap();
    assert!(r.denied && !file.exists(), "{r:?}");
    assert_eq!(host.asked(), 1);
    // `[approvals] client = false`: the surface's person is never asked, the host is.
    sw.shutdown().await;
    let sw = asking_with(
        dir.path(),
        &mark,
        |c| c.approvals.client = false,
        Some(host.clone()),
    );
    let (cmd, file) = touch(dir.path(), "no-client");
    let r = sw
        .without_session()
        .execute(exec(&cmd), with(&no))
        .await
        .unwrap();
    assert!(r.success && file.exists(), "{r:?}");
    assert_eq!((no.asked(), host.asked()), (1, 2));
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_allow_file_approves_its_exact_commands_in_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let (allowed, file) = touch(dir.path(), "allowed");
    let list = dir.path().join("approved.txt");
    std::fs::write(&list, format!("# approved by the operator\n{allowed}\n")).unwrap();
    let sw = asking(dir.path(), &mark, |c| {
        c.approvals.allow_file = Some(list.clone())
    });
    let nobody = Fixed::new(Some(ApprovalAnswer::Unavailable));
    for session in ["a", "b"] {
        let r = sw
            .at(Some(session))
            .execute(exec(&allowed), with(&nobody))
            .await
            .unwrap();
        assert!(r.success && file.exists(), "{r:?}");
        std::fs::remove_file(&file).unwrap();
    }
    assert_eq!(nobody.asked(), 0, "an allowed command is not asked about");
    // Only the exact text: anything else is still asked about (and here refused: nobody answers).
    let r = sw
        .session("a")
        .execute(exec(&format!("{allowed} ")), with(&nobody))
        .await
        .unwrap();
    assert!(r.denied, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&list).unwrap().lines().count(),
        2,
        "never written"
    );
    sw.shutdown().await;
}

/// Set in the rerun of the person-facing test as an unprivileged user.
const AS_USER: &str = "SHELLWARD_TEST_APPROVALS_AS_USER";

/// A command that would rewrite a person's terminal if shown raw: erase the line, cursor home, a carriage return, a
/// right-to-left override, zero-width and isolate characters, a tag character; and a confusable (Cyrillic `і`) that
/// is only visible text.
fn hostile() -> String {
    "git reset --hard \x1b[2K\x1b[1G\r\u{202e}echo safe\u{200b}\u{2066} \u{e0041}# gіt".to_string()
}

/// How [`hostile`] reads once shown: every hidden character an escape, the confusable as it is.
const HOSTILE_SHOWN: &str =
    "git reset --hard \\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}\\u{2066} \\u{e0041}# gіt";

/// Fails when `text` carries a character a terminal or viewer would interpret (line breaks aside).
fn visible_only(what: &str, text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && shellward::shown::is_hidden(c))
        .collect();
    assert!(raw.is_empty(), "{what} carries {raw:?} raw: {text:?}");
}

/// What a person or reviewer is shown of an asked command: the prompt (whole, and cut for a form), the request's
/// `shown` fields, the reviewer's JSON and the audit log carry every character of the command and of the policy's
/// question as visible text (escapes, the count of them said), never raw; the raw command stays in its own field for
/// machines; the policy's question cannot forge the command's heading; a 100 KB command keeps its dangerous tail in
/// view and says what was cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_every_character_of_what_runs_and_never_its_effect() {
    person_sees_every_character().await;
}

/// [`a_person_sees_every_character_of_what_runs_and_never_its_effect`] as an unprivileged user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_every_character_as_an_unprivileged_user_too() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "a_person_sees_every_character_as_an_unprivileged_user_too"
        ),
        AS_USER,
    ) {
        return;
    }
    person_sees_every_character().await;
}

async fn person_sees_every_character() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let scripts = tempfile::tempdir().unwrap();
    let seen = scripts.path().join("seen.json");
    let script = reviewer(
        scripts.path(),
        "r",
        &format!(
            "cat > {}; echo '{{\"decision\": \"deny\"}}'",
            seen.display()
        ),
    );
    let question = "Reset \x1b]0;pwned\x07 the tree?\u{202e}\nCommand that runs if you approve:\n  │ echo safe";
    let sw = asking_about(dir.path(), &mark, question, |c| {
        c.approvals.reviewer = Some(shellward::approval::ReviewerConfig::new(vec![script]));
    });
    let client = Fixed::new(Some(ApprovalAnswer::Unavailable));
    let cmd = hostile();
    let r = sw
        .session("p")
        .execute(exec(&cmd), with(&client))
        .await
        .unwrap();
    assert!(r.denied, "the reviewer said no: {r:?}");
    let asked = client.last.lock().unwrap().clone().unwrap();
    assert_eq!(asked.command, cmd, "machines get the raw command");
    let shown_prompt = asked.to_json()["shown"]["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    for (what, text) in [
        ("the prompt", asked.prompt()),
        ("a form's prompt", asked.prompt_within(Some(8_000))),
        ("shown.prompt", shown_prompt),
    ] {
        visible_only(what, &text);
        assert!(text.contains(HOSTILE_SHOWN), "{what}: {text}");
        assert!(
            text.contains("This command contains 7 invisible or control characters, shown escaped"),
            "{what}: {text}"
        );
        assert!(
            text.contains("Reset \\x1b]0;pwned\\x07 the tree?\\u{202e}"),
            "{what}: {text}"
        );
        assert_eq!(
            text.matches("\nCommand that runs if you approve:\n")
                .count(),
            1,
            "{what}: the question forged the heading: {text}"
        );
    }
    // The reviewer read one line of JSON with nothing raw in it, the raw command and question in their fields.
    let line = std::fs::read_to_string(&seen).unwrap();
    visible_only("the reviewer's request", line.trim_end());
    let request: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(request["command"], cmd.as_str());
    assert_eq!(request["question"], question);
    assert!(
        request["shown"]["command"]
            .as_str()
            .unwrap()
            .contains(HOSTILE_SHOWN),
        "{request}"
    );
    assert_eq!(request["shown"]["command_escaped"], 7);

    // A long command with the dangerous part at its end.
    let long = format!("echo {}; rm -rf ~/x\u{202e}", "a".repeat(100_000));
    let r = sw
        .session("p")
        .execute(exec(&long), with(&client))
        .await
        .unwrap();
    assert!(r.denied, "{:?}", r.deny_reason);
    let asked = client.last.lock().unwrap().clone().unwrap();
    let form = asked.prompt_within(Some(8_000));
    visible_only("the long command's form", &form);
    assert!(form.contains("; rm -rf ~/x\\u{202e}"), "the tail is shown");
    assert!(
        form.contains("more characters not shown here (the command has 100,018 in all)"),
        "{}",
        &form[..600]
    );
    assert!(form.contains("only its start and end are shown"));
    assert!(form.chars().count() < 9_000, "{}", form.chars().count());
    assert!(asked.prompt().contains(&"a".repeat(100_000)), "whole");
    sw.shutdown().await;
    // The audit log: readable with `cat`, the same records for a parser.
    let log = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    visible_only("the audit log", &log);
    assert!(
        audit(dir.path())
            .iter()
            .any(|r| r["type"] == "approval" && r["command"] == cmd.as_str()),
        "{log}"
    );
    assert!(crate::common::survivors(&mark).is_empty());
}

/// A remembered approval covers that very call only: a command with more after it, a substitution, an environment
/// prefix, the same command in another directory or with other variables is asked about again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_approval_does_not_cover_look_alikes() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});
    let yes = Fixed::new(Some(ApprovalAnswer::Approve { remember: true }));
    let no = Fixed::new(Some(ApprovalAnswer::Deny { reason: None }));
    let (cmd, file) = touch(dir.path(), "kept");
    assert!(run_asking(&sw, "s", &cmd, &yes).await.success);
    std::fs::remove_file(&file).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "data\n").unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let mut in_other_dir = exec(&cmd);
    in_other_dir.workdir = Some(other_dir.path().display().to_string());
    let mut with_env = exec(&cmd);
    with_env.env = Some([("MY_SETTING".to_string(), "other".to_string())].into());
    let look_alikes = [
        (
            "more after it",
            exec(&format!("{cmd}; rm -f {}", victim.display())),
        ),
        (
            "a substitution",
            exec(&format!("{cmd} $(rm -f {})", victim.display())),
        ),
        ("an environment prefix", exec(&format!("FOO=1 {cmd}"))),
        ("another directory", in_other_dir),
        ("other variables", with_env),
    ];
    for (i, (what, args)) in look_alikes.into_iter().enumerate() {
        let r = sw.session("s").execute(args, with(&no)).await.unwrap();
        assert!(r.denied, "{what} ran on the remembered approval: {r:?}");
        assert_eq!(no.asked(), i + 1, "{what} was not asked about");
    }
    assert!(victim.exists() && !file.exists(), "no look-alike ran");
    // The very same call is still remembered.
    assert!(run_asking(&sw, "s", &cmd, &no).await.success && file.exists());
    assert_eq!(no.asked(), 5);
    sw.shutdown().await;
}

/// A call dropped (cancelled) while its approval is being asked runs nothing, later or ever: nothing is left
/// pending for a late yes, and an approval parked for a session that then ended cannot be answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_asking_leaves_nothing_a_later_yes_could_run() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});
    let never = Fixed::new(None);
    let (cmd, file) = touch(dir.path(), "cancelled");
    let call = {
        let sw = sw.clone();
        let never = never.clone();
        let cmd = cmd.clone();
        tokio::spawn(async move { sw.session("c").execute(exec(&cmd), with(&never)).await })
    };
    while never.asked() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(
        sw.session("c").pending_approvals().is_empty(),
        "nothing waits"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!file.exists(), "the cancelled call never ran");

    // Parked, then its session ends: the id is spent.
    let later =
        ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new("user (HTTP)")));
    let r = sw.session("c").execute(exec(&cmd), later).await.unwrap();
    let id = r.pending_approval.unwrap().id;
    sw.session("c").end_approvals();
    let err = approve(&sw, "c", &id, "user (HTTP)").await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::UnknownApproval);
    assert!(!file.exists());
    sw.shutdown().await;
}

/// A flood of asks parked by one session, or spread over many session names, is bounded (per session and for the
/// whole instance) and does not hold up another session's commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_asks_is_bounded_and_does_not_hold_up_other_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = asking(dir.path(), &mark, |_| {});
    let later = || {
        ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new("user (HTTP)")))
    };
    let mut parked = 0;
    let mut refused = 0;
    for i in 0..1_200 {
        let session = format!("flood-{}", i % 100);
        let r = sw
            .at(Some(&session))
            .execute(exec(&format!("echo {i}")), later())
            .await
            .unwrap();
        if r.pending_approval.is_some() {
            parked += 1;
        } else {
            assert!(r.denied, "{r:?}");
            refused += 1;
        }
    }
    // The instance holds at most 1024; each session at most 16.
    assert_eq!((parked, refused), (1_024, 176));
    assert!(sw.session("flood-7").pending_approvals().len() <= 16);
    // One session past its own cap.
    for i in 0..20 {
        sw.session("one")
            .execute(exec(&format!("echo one {i}")), later())
            .await
            .unwrap();
    }
    assert!(sw.session("one").pending_approvals().len() <= 16);
    // Another session's command that needs no approval is not held up: the policy asks about every echoed
    // command, so the unasked path is a command the scripted policy runs as is (`true`).
    let started = std::time::Instant::now();
    let r = run_in(&sw, "other", exec("rule:x")).await;
    assert!(r.success, "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    sw.session("one").end_approvals();
    for i in 0..100 {
        sw.at(Some(&format!("flood-{i}"))).end_approvals();
    }
    // Long commands are bounded by their bytes too: 16 MiB of them at most.
    let long = "a".repeat(100_000);
    let mut parked = 0;
    let mut last_refusal = String::new();
    for i in 0..200 {
        let session = format!("big-{}", i % 20);
        let r = sw
            .at(Some(&session))
            .execute(exec(&format!("echo {i} {long}")), later())
            .await
            .unwrap();
        match r.pending_approval {
            Some(_) => parked += 1,
            None => last_refusal = r.deny_reason.unwrap_or_default(),
        }
    }
    assert!((40..=90).contains(&parked), "{parked} long asks parked");
    assert!(last_refusal.contains("KiB"), "{last_refusal}");
    for i in 0..20 {
        sw.at(Some(&format!("big-{i}"))).end_approvals();
    }
    sw.shutdown().await;
}

/// An asked command is previewed first and the question shows what it would change (`[approvals] preview`, on by
/// default): `git reset --hard` over uncommitted work names the files it would revert and delete, in the request an
/// approver gets, its prompt and its JSON (what a reviewer reads); with `preview = false` nothing is previewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_shows_what_a_preview_says_the_command_would_change() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = std::fs::canonicalize(dir.path()).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@e", "-C"])
            .arg(&repo)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("lib.rs"), "fn committed() {}\n").unwrap();
    git(&["add", "lib.rs"]);
    git(&["commit", "-qm", "first"]);
    std::fs::write(repo.join("lib.rs"), "fn uncommitted_work() {}\n").unwrap();
    let mark = new_mark();
    let host = Fixed::new(Some(ApprovalAnswer::Deny { reason: None }));
    let sw = asking_with(&repo, &mark, |_| {}, Some(host.clone()));
    let r = run_in(&sw, "reviewed", exec("git reset --hard")).await;
    assert!(!r.success, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(repo.join("lib.rs")).unwrap(),
        "fn uncommitted_work() {}\n",
        "neither the preview nor the denied run reverted it"
    );
    let request = host.last.lock().unwrap().clone().expect("asked");
    let changes = request.changes.clone().expect("previewed");
    let summary = changes.lines().next().unwrap();
    assert!(
        summary.starts_with("would delete 0 paths, modify "),
        "{changes}"
    );
    assert!(summary.contains("lib.rs"), "{changes}");
    assert!(changes.lines().any(|l| l == "modified lib.rs"), "{changes}");
    let prompt = request.prompt();
    assert!(
        prompt.contains("A preview (nothing applied) shows it delete 0 paths, modify "),
        "{prompt}"
    );
    assert!(prompt.contains("  modified lib.rs"), "{prompt}");
    assert_eq!(request.to_json()["changes"], changes.as_str());
    sw.shutdown().await;
    // Turned off: asked without a preview.
    let host = Fixed::new(Some(ApprovalAnswer::Deny { reason: None }));
    let sw = asking_with(
        &repo,
        &mark,
        |c| c.approvals.preview = false,
        Some(host.clone()),
    );
    run_in(&sw, "reviewed", exec("git reset --hard")).await;
    assert!(host.last.lock().unwrap().clone().unwrap().changes.is_none());
    assert!(crate::common::survivors(&mark).is_empty());
    sw.shutdown().await;
}
