//! The facade's limits and handles end to end: the process limit, a `Process` read, written and signalled, calls dropped mid-run, a decider alone, shutdown's end records, a session handle kept to its session.

use super::*;

/// A command that reaches its process limit is not reported as a success, and the model is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaching_the_process_limit_is_reported_to_the_model() {
    let mark = new_mark();
    let mut config = Config::default();
    config.executor.grace = Duration::from_millis(300);
    config.executor.env.set_var(MARK, &mark);
    config.executor.limits.max_processes = Some(16);
    let sw = Shellward::builder().config(config).build().expect("build");
    // Proven confined first: the limit is enforced on this host (CI's is); otherwise forking 40 processes is refused.
    let probe = run(&sw, exec("true")).await;
    assert!(probe.success, "{probe:?}");
    assert!(
        sw.process_limit().is_some(),
        "no writable pids cgroup here: this test needs the process limit (run as root, as CI does)"
    );
    let r = sw
        .without_session()
        .execute(
            exec("for i in $(seq 40); do sleep 3 & done 2>/dev/null; wait; exit 0"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.process_limit_hit, "{r:?}");
    assert!(!r.success, "{r:?}");
    assert!(
        r.notes.iter().any(|n| n.contains("limit of processes")),
        "{:?}",
        r.notes
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A host that streams a process itself gets a `Process` handle from `SessionHandle::start`: it reads from a cursor, writes
/// to the input and ends it, and its signal is counted in the metrics like the `process_signal` tool's; a deny is an
/// error, and a handle of a process that is not kept answers `UnknownProcess`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_handle_reads_writes_and_signals_through_the_facade() {
    use shellward::{ReadOptions, SignalKind};
    let mark = new_mark();
    let sw = instance(&mark);
    let s1 = sw.session("s1");
    let decided = s1
        .decide(
            &ExecuteArgs::new("read line; echo \"got $line\"; sleep 30").interactive(true),
            &[],
            &[],
        )
        .unwrap();
    // A decision runs in the session that made it: another session's handle refuses it and runs nothing.
    let elsewhere = sw
        .session("s2")
        .start(decided.clone(), ExecuteOptions::new())
        .await
        .unwrap_err();
    assert_eq!(
        elsewhere.kind,
        ToolErrorKind::InvalidArguments,
        "{elsewhere:?}"
    );
    assert!(
        elsewhere.message.contains("session \"s1\""),
        "{}",
        elsewhere.message
    );
    assert!(sw.session("s2").processes().processes.is_empty());
    assert!(s1.processes().processes.is_empty());
    let process = s1.start(decided, ExecuteOptions::new()).await.unwrap();
    assert_eq!(process.session().map(|s| s.as_str()), Some("s1"));
    assert!(process.view().unwrap().running);
    process
        .write(b"hello\n", Duration::from_secs(5))
        .await
        .unwrap();
    let mut text = String::new();
    let mut cursor = 0;
    for _ in 0..50 {
        let read = process
            .read(&ReadOptions::after(cursor).wait(Duration::from_millis(200)))
            .await
            .unwrap();
        let chunk = read.chunk.expect("a read from a cursor returns a chunk");
        text.push_str(&chunk.text);
        cursor = chunk.next_cursor;
        if text.contains("got hello") {
            break;
        }
    }
    assert_eq!(text, "got hello\n");
    // Another session's handle of the same id sees nothing.
    let other = sw.session("s2").process(process.id().as_str());
    assert_eq!(
        other.view().unwrap_err().kind,
        ToolErrorKind::UnknownProcess
    );
    let before = sw.metrics_text();
    let outcome = process.signal(SignalKind::Kill).await.unwrap();
    assert_eq!(outcome.survivors, 0);
    assert!(!process.wait().await.unwrap().running);
    let after = sw.metrics_text();
    let kills = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("shellward_signals_total{signal=\"kill\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert_eq!(kills(&after), kills(&before) + 1, "{after}");
    assert_eq!(
        process.signal(SignalKind::Kill).await.unwrap_err().kind,
        ToolErrorKind::NotAlive
    );
    let denied = sw
        .without_session()
        .decide(&exec("rm -rf /"), &[], &[])
        .unwrap();
    let e = sw
        .without_session()
        .start(denied, ExecuteOptions::new())
        .await
        .unwrap_err();
    assert!(e.message.starts_with("denied by guard"), "{}", e.message);
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A call dropped while its foreground command runs (a cancelled MCP call, a client gone): the whole tree is stopped,
/// and the audit log has the decision (marked `cancelled`, with the process id) and a `cancel` record, though the
/// run never returned a result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_stops_its_command_and_the_audit_log_says_so() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut config = shellward::Config::default();
    config.executor.grace = std::time::Duration::from_millis(300);
    config.executor.env.set_var(MARK, &mark);
    config.audit = Some(shellward::AuditConfig::to(&log));
    let sw = Shellward::builder().config(config).build().expect("build");
    let call = tokio::spawn({
        let sw = sw.clone();
        async move {
            sw.session("s")
                .execute(
                    exec("sleep 300 | sleep 301").timeout("10m"),
                    ExecuteOptions::new(),
                )
                .await
        }
    });
    let started = std::time::Instant::now();
    while shellward_test_support::with_env(&format!("{MARK}={mark}")).len() < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(survivors(&mark).is_empty(), "the tree outlived the call");
    sw.shutdown().await;
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decision = records
        .iter()
        .find(|r| r["type"] == "decision")
        .unwrap_or_else(|| panic!("{records:?}"));
    assert_eq!(decision["cancelled"], true, "{decision}");
    let id = decision["process_id"].as_str().expect("the process id");
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "cancel" && r["process_id"] == id && r["session"] == "s"),
        "{records:?}"
    );
}

/// With `[tools] on_cancel = "background"`, a dropped call's foreground command keeps running as a tracked
/// background process: `process_list` lists it, the session's next answer says so (once), and the audit log's cancel
/// record says it was kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_may_keep_a_cancelled_command_in_the_background() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let file = dir.path().join("shellward.toml");
    std::fs::write(
        &file,
        format!(
            "[tools]\non_cancel = \"background\"\n[executor]\ngrace = \"300ms\"\n[env.set]\n{MARK} = \"{mark}\"\n\
             [audit]\npath = \"{}\"\n",
            log.display()
        ),
    )
    .unwrap();
    let config = Config::load(&file).expect("config");
    assert_eq!(config.tools.on_cancel, shellward::OnCancel::Background);
    let sw = Shellward::builder().config(config).build().expect("build");
    let call = tokio::spawn({
        let sw = sw.clone();
        async move {
            sw.session("s")
                .execute(exec("sleep 300"), ExecuteOptions::new())
                .await
        }
    });
    let started = std::time::Instant::now();
    while shellward_test_support::with_env(&format!("{MARK}={mark}")).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    // Past the grace period it still runs, listed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!shellward_test_support::with_env(&format!("{MARK}={mark}")).is_empty());
    let listed = sw
        .session("s")
        .process_list(ProcessListArgs::default())
        .await
        .unwrap();
    let kept = listed
        .processes
        .iter()
        .find(|p| p.command.contains("sleep 300") && p.running)
        .unwrap_or_else(|| panic!("{listed:?}"))
        .process_id
        .clone();
    // The next answer in the session says so, once.
    let next = run_in(&sw, "s", exec("true")).await;
    assert!(
        next.notes
            .iter()
            .any(|n| n.contains(&kept) && n.contains("keeps running")),
        "{:?}",
        next.notes
    );
    let again = run_in(&sw, "s", exec("true")).await;
    assert!(
        !again.notes.iter().any(|n| n.contains(&kept)),
        "{:?}",
        again.notes
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
    let cancel = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["type"] == "cancel")
        .expect("a cancel record");
    assert_eq!(cancel["process_id"], kept.as_str());
    assert!(
        cancel["action"].as_str().unwrap().starts_with("kept"),
        "{cancel}"
    );
}

/// A decider alone (what `policy check` uses) decides every kind of call exactly as an instance built from the same
/// configuration does, and a host's own chain is the one it decides with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decider_alone_decides_as_the_instance_does() {
    let config = Config::default();
    let decider = shellward::Decider::from_config(&config).unwrap();
    let sw = Shellward::builder().config(config).build().unwrap();
    let calls = [
        exec("echo hi"),
        exec("npm run dev &"),
        exec("sleep 1").interactive(true),
        exec("sudo apt-get install -y jq"),
        exec("rm -rf /"),
        exec("git reset --hard"),
    ];
    let mut kinds = Vec::new();
    for call in &calls {
        let alone = decider
            .decide(Some(&shellward::Session::from("s1")), call, &[])
            .unwrap();
        let within = sw.session("s1").decide(call, &[], &[]).unwrap();
        assert_eq!(alone.decision.outcome, within.decision.outcome, "{call:?}");
        let (a, w) = (alone.plan(), within.plan());
        assert_eq!(a.map(|p| &p.command), w.map(|p| &p.command));
        assert_eq!(a.map(|p| p.background), w.map(|p| p.background));
        assert_eq!(a.map(|p| p.timeout), w.map(|p| p.timeout));
        assert_eq!(a.map(|p| &p.stdin), w.map(|p| &p.stdin));
        kinds.push(alone.decision.outcome.kind());
    }
    assert_eq!(kinds, ["run", "run", "run", "ask", "deny", "ask"]);
    // Bad arguments are refused before any policy runs, with the same message.
    let empty = decider.decide(None, &exec("  "), &[]).unwrap_err();
    assert_eq!(
        empty.message,
        sw.without_session()
            .decide(&exec("  "), &[], &[])
            .unwrap_err()
            .message
    );
    sw.shutdown().await;

    let given = shellward::Decider::with_chain(&Config::default(), scripted_chain());
    let decided = given.decide(None, &exec("echo given"), &[]).unwrap();
    assert!(
        decided
            .decision
            .outcome
            .planned()
            .unwrap()
            .notes
            .iter()
            .any(|n| n.starts_with("calls=")),
        "the scripted chain decided: {:?}",
        decided.decision
    );
}

/// Shutdown stops the background processes still running and waits for their end records before it closes the
/// audit log: every started process has its end in the log, with how it was stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_writes_the_end_of_every_process_it_stops() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut config = shellward::Config::default();
    config.executor.grace = std::time::Duration::from_millis(200);
    config.executor.env.set_var(MARK, &mark);
    config.tools.startup_wait = std::time::Duration::from_millis(50);
    let mut audit = shellward::AuditConfig::to(&log);
    // The waiters then read each process's output too: more for them to do after the process is gone.
    audit.include_output = true;
    config.audit = Some(audit);
    let sw = Shellward::builder().config(config).build().expect("build");
    let mut ids = Vec::new();
    for n in 0..4 {
        let r = run_in(
            &sw,
            "s",
            exec(&format!("seq 1 20000; sleep {}", 300 + n)).background(true),
        )
        .await;
        assert!(r.running, "{r:?}");
        ids.push(r.process_id.unwrap());
    }
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in &ids {
        let end = records
            .iter()
            .find(|r| r["type"] == "end" && r["process_id"] == id.as_str())
            .unwrap_or_else(|| panic!("no end record for {id}: {records:?}"));
        assert!(end["signal"].is_string(), "stopped by a signal: {end}");
        assert!(
            end["output"].as_str().unwrap().starts_with("1\n2\n"),
            "{end}"
        );
    }
}

/// A session's handle runs its tools and finds its processes without the session's name at every call: another
/// session's handle (or none) cannot see or signal them, and what one handle started the same session's handle does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_handle_keeps_to_its_session() {
    let mark = new_mark();
    let sw = instance(&mark);
    let (mine, theirs, nobody) = (sw.session("s1"), sw.session("s2"), sw.without_session());
    assert_eq!(mine.id().map(|s| s.as_str()), Some("s1"));
    assert!(nobody.id().is_none());
    let r = mine
        .execute(exec("sleep 30").background(true), ExecuteOptions::new())
        .await
        .unwrap();
    let id = shellward::ProcessId::from(r.background_process_id.clone().unwrap());
    assert!(mine.processes().processes.iter().any(|p| p.id == id));
    assert!(theirs.processes().processes.is_empty());
    for other in [&theirs, &nobody] {
        let e = other.process(&id).view().unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::UnknownProcess, "{e:?}");
        let e = other
            .call(
                "process_signal",
                json!({"process_id": id.as_str(), "signal": "kill"}),
                ExecuteOptions::new(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::UnknownProcess, "{e:?}");
    }
    // The same session through the wire form sees it too.
    assert!(
        sw.session("s1")
            .process(id.as_str())
            .view()
            .unwrap()
            .running
    );
    let listed = mine
        .call("process_list", json!({}), ExecuteOptions::new())
        .await
        .unwrap();
    assert!(listed.to_string().contains(id.as_str()), "{listed}");
    mine.process(&id)
        .signal(shellward::SignalKind::Kill)
        .await
        .unwrap();
    let ended = mine.process(&id).wait().await.unwrap();
    assert!(!ended.running);
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}
