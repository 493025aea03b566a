//! The facade end to end in-process: the real default policy component, the real executor, the five tools.
//! Every test marks its processes through the instance's default environment and proves none survive.

// Unix only: these tests prove what the facade does on Linux (`/proc` scans, signals, sandboxes); the executor's
// `portable.rs` and the CLI's Windows tests cover what every platform shares.
#![cfg(unix)]

use serde_json::{Value, json};
use shellward::tools::{
    ExecuteArgs, ProcessListArgs, ProcessOutputArgs, ProcessSignalArgs, SignalName, ToolName,
};
use shellward::{Config, Shellward, ToolErrorKind};
use std::time::Duration;

use crate::common::*;

mod handles;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_run_reports_exit_code_and_output() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = sw
        .without_session()
        .execute(
            exec("echo hello; echo oops >&2; exit 3"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.success);
    assert_eq!(r.exit_code, Some(3));
    assert!(
        r.output.contains("hello") && r.output.contains("oops"),
        "{r:?}"
    );
    assert!(!r.running);
    assert_eq!(r.background_process_id, None);
    let ok = run(&sw, exec("true")).await;
    assert!(ok.success);
    assert_eq!(ok.exit_code, Some(0));
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// Whoever puts a command in the background — the caller (run_in_background), a policy (a trailing `&`, a server
/// promoted), or both — the agent is told its id and how to follow up exactly once, never twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_start_says_how_to_follow_up_once() {
    let mark = new_mark();
    let sw = instance(&mark);
    for (command, asked) in [
        ("sleep 300", true),
        ("sleep 300 &", false),
        ("sleep 300 &", true),
        ("sleep 1 & sleep 300", false),
        ("sleep 1 & sleep 300", true),
    ] {
        let r = run_in(&sw, "follow-up", exec(command).background(asked)).await;
        let id = r.background_process_id.clone().expect("background id");
        let all = r.notes.join("\n");
        assert_eq!(
            all.matches("process_output").count(),
            1,
            "{command} (asked: {asked}): {:?}",
            r.notes
        );
        assert_eq!(all.matches("process_signal").count(), 1, "{:?}", r.notes);
        assert!(all.contains(&id), "{:?}", r.notes);
        // The host's note naming the id is a background note; what a policy said is the policy's.
        assert!(
            r.notes
                .iter()
                .any(|n| n.kind() == shellward::NoteKind::Background && n.contains(&id)),
            "{:?}",
            r.notes.iter().map(|n| n.kind()).collect::<Vec<_>>()
        );
        if !asked {
            assert_eq!(
                r.notes[0].kind(),
                shellward::NoteKind::Policy,
                "{:?}",
                r.notes
            );
        }
        sw.session("follow-up")
            .process_signal(ProcessSignalArgs::new(id, SignalName::Kill))
            .await
            .unwrap();
    }
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_ampersand_becomes_a_tracked_background_process() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = run_in(
        &sw,
        "s1",
        exec("echo started; sleep 0.3; echo later; sleep 300 &"),
    )
    .await;
    assert!(r.success, "{r:?}");
    assert!(r.running);
    let id = r.background_process_id.clone().expect("background id");
    assert!(
        r.notes.iter().any(|n| n.contains('&')),
        "the policy explains the rewrite: {:?}",
        r.notes
    );
    assert!(r.notes.iter().any(|n| n.contains(&id)), "{:?}", r.notes);
    assert!(!r.command.trim_end().ends_with('&'), "{}", r.command);

    // Cursor reads see every byte once.
    let mut cursor = 0;
    let mut seen = String::new();
    while !seen.contains("later") {
        let out = sw
            .session("s1")
            .process_output({
                let mut built = ProcessOutputArgs::new(id.clone()).cursor(cursor).wait("2s");
                built.idle = None;
                built
            })
            .await
            .unwrap();
        assert!(out.running);
        assert!(out.cursor >= cursor);
        cursor = out.cursor;
        seen.push_str(&out.output);
    }
    assert_eq!(seen, "started\nlater\n");

    let list = sw
        .session("s1")
        .process_list(ProcessListArgs::default())
        .await
        .unwrap();
    assert_eq!(list.processes.len(), 1);
    assert_eq!(list.processes[0].process_id, id);
    assert!(list.processes[0].running);

    // Another session sees nothing and cannot signal it.
    let other = sw
        .session("s2")
        .process_list(ProcessListArgs::default())
        .await
        .unwrap();
    assert!(other.processes.is_empty());
    let e = sw
        .session("s2")
        .process_signal(ProcessSignalArgs::new(id.clone(), SignalName::Kill))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::UnknownProcess);

    let s = sw
        .session("s1")
        .process_signal(ProcessSignalArgs::new(id.clone(), SignalName::Terminate))
        .await
        .unwrap();
    assert!(s.success && !s.running, "{s:?}");
    assert!(survivors(&mark).is_empty());
    // Signalling a dead tree is refused with a clear error.
    let e = sw
        .session("s1")
        .process_signal(ProcessSignalArgs::new(id, SignalName::Kill))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotAlive);
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_timeout_keeps_the_process_and_returns_its_id() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = sw
        .without_session()
        .execute(
            ExecuteArgs::new("echo before; sleep 30").timeout("300ms"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.timed_out && r.running, "{r:?}");
    assert_eq!(r.output, "before\n");
    let id = r.background_process_id.expect("kept in background");
    assert!(
        r.notes.iter().any(|n| n.contains("Still running")),
        "{:?}",
        r.notes
    );
    let snap = sw
        .without_session()
        .process_output({
            let mut built = ProcessOutputArgs::new(id).wait("0s");
            built.cursor = None;
            built.idle = None;
            built
        })
        .await
        .unwrap();
    assert!(snap.running);
    assert_eq!(snap.output, "before\n");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A bad call: the tool, its arguments, the error kind, and a text its message must contain.
type BadCall = (&'static str, Value, ToolErrorKind, &'static str);

/// Bad `execute` arguments (`huge`: a command past the size limit).
fn bad_execute_calls(huge: String) -> Vec<BadCall> {
    vec![
        (
            "execute",
            json!({"command": "ls", "timeout": "soon"}),
            ToolErrorKind::InvalidArguments,
            "500ms",
        ),
        (
            "execute",
            json!({"command": "ls", "timeout": "0s"}),
            ToolErrorKind::InvalidArguments,
            "greater than zero",
        ),
        (
            "execute",
            json!({"command": "ls", "timeout": "-5s"}),
            ToolErrorKind::InvalidArguments,
            "negative",
        ),
        (
            "execute",
            json!({"command": "ls", "timeout": "10"}),
            ToolErrorKind::InvalidArguments,
            "no unit",
        ),
        (
            "execute",
            json!({"command": "ls", "timeout": 10}),
            ToolErrorKind::InvalidArguments,
            "expected",
        ),
        (
            "execute",
            json!({"command": ""}),
            ToolErrorKind::InvalidArguments,
            "empty",
        ),
        (
            "execute",
            json!({"command": "   "}),
            ToolErrorKind::InvalidArguments,
            "empty",
        ),
        (
            "execute",
            json!({}),
            ToolErrorKind::InvalidArguments,
            "command",
        ),
        (
            "execute",
            json!({"command": "echo a\u{0}b"}),
            ToolErrorKind::InvalidArguments,
            "NUL",
        ),
        (
            "execute",
            json!({"command": huge}),
            ToolErrorKind::InvalidArguments,
            "limit",
        ),
        (
            "execute",
            json!({"command": "ls", "workdir": "/no/such/dir"}),
            ToolErrorKind::InvalidArguments,
            "/no/such/dir",
        ),
        (
            "execute",
            json!({"command": "ls", "workdir": "/etc/passwd"}),
            ToolErrorKind::InvalidArguments,
            "not a directory",
        ),
        (
            "execute",
            json!({"command": "ls", "colour": 1}),
            ToolErrorKind::InvalidArguments,
            "colour",
        ),
    ]
}

/// Bad arguments to the process tools, and an unknown tool.
fn bad_process_calls() -> Vec<BadCall> {
    vec![
        (
            "process_output",
            json!({"process_id": "p999"}),
            ToolErrorKind::UnknownProcess,
            "process_list",
        ),
        (
            "process_output",
            json!({"process_id": "nonsense"}),
            ToolErrorKind::UnknownProcess,
            "nonsense",
        ),
        (
            "process_output",
            json!({"process_id": "p1", "wait": "forever"}),
            ToolErrorKind::InvalidArguments,
            "wait",
        ),
        (
            "process_output",
            json!({"cursor": 0}),
            ToolErrorKind::InvalidArguments,
            "process_id",
        ),
        (
            "process_signal",
            json!({"process_id": "p1", "signal": "hup"}),
            ToolErrorKind::InvalidArguments,
            "terminate",
        ),
        (
            "process_signal",
            json!({"process_id": "p999", "signal": "kill"}),
            ToolErrorKind::UnknownProcess,
            "p999",
        ),
        (
            "process_list",
            json!({"all": true}),
            ToolErrorKind::InvalidArguments,
            "all",
        ),
        ("rm_rf", json!({}), ToolErrorKind::UnknownTool, "execute"),
    ]
}

/// Bad arguments to every tool: each gets a clear error, and the instance keeps answering afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_get_clear_errors_and_the_service_keeps_answering() {
    let mark = new_mark();
    let sw = instance(&mark);
    let mut cases = bad_execute_calls("x".repeat(1 << 20));
    cases.extend(bad_process_calls());
    for (tool, args, kind, needle) in cases {
        let shown = format!(
            "{tool} {}",
            args.to_string().chars().take(80).collect::<String>()
        );
        let e = sw
            .without_session()
            .call(tool, args, ExecuteOptions::new())
            .await
            .expect_err(&shown);
        assert_eq!(e.kind, kind, "{shown}: {e}");
        assert!(
            e.message.contains(needle),
            "{shown}: {:?} lacks {needle:?}",
            e.message
        );
        let j = e.to_json();
        assert_eq!(j["success"], false);
        // Still answering.
        let ok = sw
            .without_session()
            .call(
                "execute",
                json!({"command": "echo alive"}),
                ExecuteOptions::new(),
            )
            .await
            .unwrap();
        assert_eq!(ok["output"], "alive\n", "{shown}");
    }
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_command_is_not_run_and_says_why() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let engine = shellward::PolicyEngine::new(shellward::SandboxConfig::default()).unwrap();
    let deny = engine
        .load_file(
            std::path::Path::new(shellward_policy::embedded::guests::SCRIPTED_POLICY),
            "deny:no rockets today",
        )
        .unwrap();
    let chain = shellward::PolicyChain::new(vec![deny], shellward_policy::FaultMode::Deny);
    let mut executor = shellward::exec::ExecutorConfig::default();
    executor.env.set_var(MARK, mark.clone());
    executor.default_workdir = Some(dir.path().to_path_buf());
    let sw = Shellward::builder()
        .policy_chain(chain)
        .executor_config(executor)
        .build()
        .unwrap();
    let r = run(&sw, exec("touch should-not-exist")).await;
    assert!(!r.success && r.denied, "{r:?}");
    assert_eq!(r.deny_reason.as_deref(), Some("no rockets today"));
    assert_eq!(r.exit_code, None);
    assert!(!dir.path().join("should-not-exist").exists());
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

fn scripted_chain() -> shellward::PolicyChain {
    let engine = shellward::PolicyEngine::new(shellward::SandboxConfig::default()).unwrap();
    let policy = engine
        .load_file(
            std::path::Path::new(shellward_policy::embedded::guests::SCRIPTED_POLICY),
            "",
        )
        .unwrap();
    shellward::PolicyChain::new(vec![policy], shellward_policy::FaultMode::Deny)
}

async fn a_trapping_policy_fails_closed_and_recovers(mark: &str) {
    let mut executor = shellward::exec::ExecutorConfig::default();
    executor.env.set_var(MARK, mark);
    let sw = Shellward::builder()
        .policy_chain(scripted_chain())
        .executor_config(executor)
        .build()
        .unwrap();
    // `trap` makes the scripted policy panic: its message goes to the guest's stderr through WASI, which must work
    // from inside the async runtime.
    let r = run(&sw, exec("trap")).await;
    assert!(r.denied, "{r:?}");
    assert!(r.deny_reason.unwrap().contains("fail closed"));
    let ok = run(&sw, exec("echo recovered")).await;
    assert_eq!(ok.output, "recovered\n");
    sw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_fault_inside_a_multi_thread_runtime_is_contained() {
    let mark = new_mark();
    a_trapping_policy_fails_closed_and_recovers(&mark).await;
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_policy_fault_inside_a_current_thread_runtime_is_contained() {
    let mark = new_mark();
    a_trapping_policy_fails_closed_and_recovers(&mark).await;
    assert!(survivors(&mark).is_empty());
}

#[test]
fn every_tool_has_a_schema_generated_from_its_arguments() {
    for tool in ToolName::ALL {
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{tool}");
        assert!(tool.description().len() > 100, "{tool}");
    }
    let exec = ToolName::Execute.input_schema();
    assert_eq!(exec["required"], json!(["command"]));
    for field in ["command", "timeout", "workdir", "run_in_background"] {
        assert!(exec["properties"][field].is_object(), "{field}: {exec}");
    }
    for tool in ToolName::ALL {
        for schema in [tool.input_schema(), tool.output_schema()] {
            let text = schema.to_string();
            assert!(
                !text.contains("\"format\":\"uint") && !text.contains("\"format\":\"int"),
                "{tool}: non-standard integer formats in {text}"
            );
        }
    }
    // The output schemas stock clients validate every result against: draft-07, flat (no definitions or refs), a
    // typed property for each field every result carries, and every field of the full schema described.
    for tool in ToolName::ALL {
        let (compact, full) = (tool.output_schema(), tool.full_output_schema());
        assert_eq!(
            compact["$schema"], "http://json-schema.org/draft-07/schema#",
            "{tool}"
        );
        let text = compact.to_string();
        assert!(
            !text.contains("$ref") && compact.get("definitions").is_none(),
            "{tool}: {text}"
        );
        assert_eq!(compact["required"], full["required"], "{tool}");
        for required in full["required"].as_array().unwrap() {
            let name = required.as_str().unwrap();
            assert!(
                compact["properties"][name]["type"].is_string(),
                "{tool}.{name}: {text}"
            );
        }
        let about = compact["description"].as_str().unwrap();
        for name in full["properties"].as_object().unwrap().keys() {
            assert!(
                about.contains(&format!("`{name}` (")),
                "{tool}.{name} not described: {about}"
            );
        }
    }
    let signal = ToolName::ProcessSignal.input_schema().to_string();
    assert!(
        signal.contains("terminate") && signal.contains("kill"),
        "{signal}"
    );
    assert!(
        ToolName::Execute
            .description()
            .contains("run_in_background")
    );
}

/// A policy that returns what no host should accept (a 10 MiB note, deny reason or command, an invalid variable, a
/// working directory that does not exist) is at fault: the command is denied with a short reason naming the policy
/// and the field, nothing of the oversized text reaches the result, and the caller is not blamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_policy_output_is_the_policys_fault() {
    let sw = Shellward::builder()
        .policy_chain(scripted_chain())
        .build()
        .unwrap();
    for (command, field) in [
        ("huge-note", "note"),
        ("huge-deny", "deny reason"),
        ("huge-command", "command"),
        ("bad-env", "A=B"),
        ("workdir:/no/such/dir/shellward", "does not exist"),
    ] {
        let r = run(&sw, exec(command)).await;
        assert!(r.denied && !r.success, "{command}: {r:?}");
        let reason = r.deny_reason.clone().unwrap();
        assert!(reason.contains("scripted"), "{command}: {reason}");
        assert!(reason.contains(field), "{command}: {reason}");
        let size = serde_json::to_string(&r).unwrap().len();
        assert!(size < 4096, "{command}: a {size}-byte result");
        assert!(
            !r.notes.iter().any(|n| n.contains(&reason)),
            "the reason is not repeated in the notes"
        );
    }
    sw.shutdown().await;
}

/// The caller chooses what a timeout means, per call, and gives per-call variables; both are in the tool's schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_chooses_on_timeout_and_env_per_call() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = sw
        .without_session()
        .execute(
            ExecuteArgs::new("sleep 31 | cat; echo never")
                .timeout("1s")
                .on_timeout(shellward::tools::OnTimeout::Kill),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.timed_out && !r.running, "{r:?}");
    assert!(survivors(&mark).is_empty(), "kill leaves nothing running");
    let r = sw
        .without_session()
        .execute(
            ExecuteArgs::new("sleep 30")
                .timeout("1s")
                .on_timeout(shellward::tools::OnTimeout::Background),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.running && r.background_process_id.is_some(), "{r:?}");
    let r = sw
        .without_session()
        .call(
            "execute",
            json!({"command": "echo \"$GREETING\"", "env": {"GREETING": "hi there"}}),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(r["output"], "hi there\n", "{r}");
    let bad = sw
        .without_session()
        .call(
            "execute",
            json!({"command": "true", "on_timeout": "explode"}),
            ExecuteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.kind, ToolErrorKind::InvalidArguments);
    let schema = ToolName::Execute.input_schema();
    assert!(schema["properties"]["on_timeout"].is_object(), "{schema}");
    assert!(schema["properties"]["env"].is_object(), "{schema}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A foreground command that exits but leaves a process running is reported with how many are left, the id they are
/// tracked under, and — with `on_timeout: kill` — that they will be stopped at the deadline, which they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_are_reported_with_their_id_and_their_fate() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = sw
        .without_session().execute(ExecuteArgs::new("python3 -c 'import os, time; os.fork() or (os.close(1), os.close(2), time.sleep(31))'; echo started").timeout("2s").on_timeout(shellward::tools::OnTimeout::Kill), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(r.output, "started\n", "{r:?}");
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("still running, tracked as"))
        .unwrap_or_else(|| panic!("no leftover note: {r:?}"));
    assert!(note.contains("1 process(es)"), "{note}");
    let id = r.process_id.clone().expect("a tracked id");
    assert!(note.contains(&id), "{note}");
    assert!(
        note.contains("will be stopped when the 2s timeout"),
        "{note}"
    );
    assert!(
        !shellward_test_support::with_env(&format!("{MARK}={mark}")).is_empty(),
        "the leftover is running before the deadline"
    );
    assert!(
        survivors(&mark).is_empty(),
        "the leftover was stopped at the deadline"
    );
    // With on_timeout background, the note says how to stop them instead.
    let r = sw
        .without_session().execute(ExecuteArgs::new("python3 -c 'import os, time; os.fork() or (os.close(1), os.close(2), time.sleep(32))'; echo started").timeout("2s").on_timeout(shellward::tools::OnTimeout::Background), ExecuteOptions::new())
        .await
        .unwrap();
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("still running, tracked as"))
        .unwrap_or_else(|| panic!("no leftover note: {r:?}"));
    assert!(note.contains("stop them with process_signal"), "{note}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A trailing `&` is explained once: the policy's note says how to follow up, so the host's own note only names the
/// id (two notes said the same thing, 495 bytes against 174 without the `&`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trailing_ampersand_is_explained_once() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = run(&sw, exec("sleep 5 &")).await;
    let id = r.background_process_id.clone().expect("backgrounded");
    let telling = r
        .notes
        .iter()
        .filter(|n| n.contains("process_output"))
        .count();
    assert_eq!(telling, 1, "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains(&id)), "{:?}", r.notes);
    // Without a policy note, the host's note still says how to follow up.
    let r = sw
        .without_session()
        .execute(
            ExecuteArgs::new("sleep 5").background(true),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("process_output") && n.contains("process_signal")),
        "{:?}",
        r.notes
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A large output left out of the middle is pointed at as a log to search, with commands that work on it from the
/// next `execute` (the log is readable inside the session's sandbox), not as 64 KiB pages to read one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_output_suggests_searching_its_log() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = run(&sw, exec("seq 1 300000")).await;
    assert!(r.output_omitted_bytes > 1_000_000, "{r:?}");
    let log = r.log_path.clone().expect("a log");
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("left out of the middle"))
        .unwrap_or_else(|| panic!("no note: {:?}", r.notes));
    assert!(note.contains(&format!("tail -n 200 {log}")), "{note}");
    assert!(note.contains("grep -n -i error"), "{note}");
    let tail = run(&sw, exec(&format!("tail -n 1 {log}"))).await;
    assert_eq!(tail.output, "300000\n", "{tail:?}");
    // A small omission keeps the short note.
    let r = run(&sw, exec("seq 1 30000")).await;
    if r.output_omitted_bytes > 0 {
        let note = r.notes.iter().find(|n| n.contains("left out")).unwrap();
        assert!(note.contains("process_output"), "{note}");
        assert!(!note.contains("grep"), "{note}");
    }
    sw.shutdown().await;
}

/// A background start that fails at once (a server whose port is taken) is answered in the same call with its exit
/// code and error text; one that keeps running is returned running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_start_that_fails_at_once_says_so() {
    let mark = new_mark();
    let sw = instance(&mark);
    let bg = |command: &str| ExecuteArgs::new(command).background(true);
    let r = sw
        .without_session()
        .execute(
            bg("echo 'error: address 127.0.0.1:8080 already in use' >&2; exit 1"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.running && !r.success, "{r:?}");
    assert_eq!(r.exit_code, Some(1));
    assert!(r.output.contains("already in use"), "{r:?}");
    assert!(
        r.notes.iter().any(|n| n.contains("start-up")),
        "{:?}",
        r.notes
    );
    let r = run(&sw, bg("sleep 30")).await;
    assert!(r.running && r.background_process_id.is_some(), "{r:?}");
    // Its log path is announced at start, before it prints anything.
    let log = r.log_path.as_deref().expect("a log path at start");
    assert!(std::path::Path::new(log).is_file(), "{log}");
    assert!(r.wall_duration_ms < 5_000, "{r:?}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// What a model reads over MCP: header lines and the output as plain text (quotes and newlines as printed), not
/// escaped JSON; and how much smaller it is than the pretty JSON it replaces, for typical results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_rendered_as_text_for_a_model() {
    use shellward::tools::{ToolCall, ToolOutput};
    let mark = new_mark();
    let sw = instance(&mark);
    for (label, command) in [
        ("echo hello", "echo hello"),
        (
            "failing build",
            "for i in $(seq 1 40); do echo \"   Compiling crate$i v0.1.0\"; done; \
             echo 'error[E0425]: cannot find value `x` in this scope' >&2; \
             echo '  --> src/main.rs:2:5' >&2; exit 101",
        ),
        ("15 MB seq", "seq 1 2000000"),
    ] {
        let call =
            ToolCall::parse("execute", json!({"command": command, "timeout": "1m"})).unwrap();
        let output = sw
            .without_session()
            .call_tool(call, ExecuteOptions::new())
            .await
            .unwrap();
        let text = output.model_text();
        let value = output.to_json();
        let json_text = serde_json::to_string_pretty(&value).unwrap();
        println!(
            "{label}: text {} bytes, pretty JSON {} bytes",
            text.len(),
            json_text.len()
        );
        assert!(text.len() < json_text.len(), "{label}");
        let first = text.lines().next().unwrap();
        assert!(first.starts_with("exit code "), "{label}: {text}");
        if label == "failing build" {
            assert!(first.starts_with("exit code 101"), "{text}");
            assert!(
                text.contains("error[E0425]: cannot find value `x` in this scope\n"),
                "raw output, not escaped: {text}"
            );
        }
        if label == "15 MB seq" {
            assert!(text.contains("bytes of output left out"), "{text}");
        }
    }
    let call = ToolCall::parse("execute", json!({"command": "rm -rf /"})).unwrap();
    let denied = sw
        .without_session()
        .call_tool(call, ExecuteOptions::new())
        .await
        .unwrap();
    assert!(!denied.success());
    assert!(denied.model_text().starts_with("denied: guard[rm-root]"));
    // The process tools: a running process's cursor, the list, a signal's outcome.
    let call = ToolCall::parse(
        "execute",
        json!({"command": "echo ready; sleep 30", "run_in_background": true}),
    )
    .unwrap();
    let ToolOutput::Execute(started) = sw
        .without_session()
        .call_tool(call, ExecuteOptions::new())
        .await
        .unwrap()
    else {
        panic!("execute answers with an execute result");
    };
    let id = started.background_process_id.expect("a background process");
    let read = ToolCall::parse("process_output", json!({"process_id": id, "cursor": 0})).unwrap();
    let read = sw
        .without_session()
        .call_tool(read, ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(read.tool(), ToolName::ProcessOutput);
    let text = read.model_text();
    assert!(
        text.starts_with(&format!("running as {id}\nnext cursor: ")),
        "{text}"
    );
    assert!(text.ends_with("---\nready\n"), "{text}");
    let list = sw
        .without_session()
        .call_tool(
            ToolCall::parse("process_list", Value::Null).unwrap(),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(
        list.model_text()
            .contains(&format!("{id}  running  echo ready; sleep 30")),
        "{}",
        list.model_text()
    );
    let stop = ToolCall::parse(
        "process_signal",
        json!({"process_id": id, "signal": "kill"}),
    )
    .unwrap();
    let stopped = sw
        .without_session()
        .call_tool(stop, ExecuteOptions::new())
        .await
        .unwrap();
    assert!(stopped.success());
    assert!(
        stopped
            .model_text()
            .starts_with("killed by SIGKILL\nnote: "),
        "{}",
        stopped.model_text()
    );
    let unknown = ToolCall::parse("process_kill", json!({})).unwrap_err();
    assert_eq!(unknown.kind, ToolErrorKind::UnknownTool);
    assert!(
        unknown
            .model_text()
            .starts_with("error: unknown tool \"process_kill\"")
    );
    sw.shutdown().await;
}

/// Polling a quiet process returns once its output has gone quiet (default 1 s), not after the 10 s wait; an
/// explicit `wait` still waits for the process (or new output).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_returns_when_output_goes_quiet() {
    let mark = new_mark();
    let sw = instance(&mark);
    let r = sw
        .without_session()
        .execute(
            ExecuteArgs::new("echo 'Listening on :3000'; sleep 30").background(true),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    let id = r.background_process_id.unwrap();
    let started = std::time::Instant::now();
    let out = sw
        .without_session()
        .call(
            "process_output",
            json!({"process_id": id}),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    let quick = started.elapsed();
    assert_eq!(out["running"], true);
    assert!(
        out["output"]
            .as_str()
            .unwrap()
            .contains("Listening on :3000"),
        "{out}"
    );
    assert!(
        quick < Duration::from_secs(5),
        "a quiet poll took {quick:?}"
    );
    let started = std::time::Instant::now();
    let out = sw
        .without_session()
        .call(
            "process_output",
            json!({"process_id": id, "wait": "3s"}),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(out["running"], true);
    assert!(
        started.elapsed() >= Duration::from_millis(2500),
        "an explicit wait is honoured: {:?}",
        started.elapsed()
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A policy decides interactivity too: `tty` and `interactive` reach it, and a policy that turns them off gets a
/// command with stdin on /dev/null (no terminal), run as the plan says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_may_turn_interactive_and_tty_off() {
    let mark = new_mark();
    let engine = shellward::PolicyEngine::new(shellward::SandboxConfig::default()).unwrap();
    let refuse = engine
        .load_file(
            std::path::Path::new(shellward_policy::embedded::guests::SCRIPTED_POLICY),
            "no-interactive",
        )
        .unwrap();
    let mut executor = shellward::exec::ExecutorConfig::default();
    executor.env.set_var(MARK, mark.clone());
    let sw = Shellward::builder()
        .policy_chain(shellward::PolicyChain::new(
            vec![refuse],
            shellward_policy::FaultMode::Deny,
        ))
        .executor_config(executor)
        .build()
        .unwrap();
    let mut args = exec("tty -s; echo status=$?");
    args.tty = Some(true);
    let r = run(&sw, args).await;
    assert_eq!(r.output, "status=1\n", "{r:?}");
    assert!(!r.running, "{r:?}");
    // Through the default chain the same request gets its terminal.
    let sw2 = Shellward::builder().build().unwrap();
    let mut args = exec("tty -s; echo status=$?");
    args.tty = Some(true);
    let r = run(&sw2, args).await;
    assert!(r.output.contains("status=0"), "{r:?}");
    sw.shutdown().await;
    sw2.shutdown().await;
    assert!(survivors(&mark).is_empty());
}
