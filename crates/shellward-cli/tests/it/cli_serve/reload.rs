//! `serve` over time: policy reloads (the watched directory, SIGHUP), the audit log, metrics, interactive processes, what an agent learns at once, a session's directory and tokens, listening, sessions kept apart.

use super::*;

#[test]
fn a_policy_dropped_into_the_watched_directory_takes_effect_and_a_broken_replacement_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let drop_in = dir.path().join("policies.d");
    std::fs::create_dir(&drop_in).unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[policies]\ndir = \"policies.d\"\n",
    );
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--config", config.to_str().unwrap()], &log);
    let b = server.base.clone();
    let echo = || post(&b, "/v1/tools/execute", None, json!({"command": "echo hi"}));

    let (status, r) = echo();
    assert_eq!((status, &r["output"]), (200, &json!("hi\n")), "{r}");
    let (_, p) = get(&b, "/v1/policies", None);
    let names: Vec<&str> = p["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "guard"], "{p}");

    // Drop in a guard that denies `echo`: settings beside it, then the component.
    std::fs::write(
        drop_in.join("50-no-echo.toml"),
        "[settings]\ndeny = [\"echo\"]\n",
    )
    .unwrap();
    let guard = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/components/shellward_guard_policy.wasm");
    std::fs::copy(&guard, drop_in.join("50-no-echo.wasm")).unwrap();
    let denied = within(Duration::from_secs(2), || {
        let (_, r) = echo();
        r.to_string().contains("deny-pattern")
    });
    assert!(
        denied,
        "the dropped-in policy did not take effect within 2 s: {:?}",
        std::fs::read_to_string(&log)
    );
    let (_, p) = get(&b, "/v1/policies", None);
    let policies = p["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 3, "{p}");
    assert!(
        policies[2]["source"]
            .as_str()
            .unwrap()
            .ends_with("50-no-echo.wasm")
    );
    assert!(
        policies[2]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(policies[2]["wit_version"], shellward_policy::WIT_VERSION);
    // `policy list --server` asks the running server.
    let listed = Command::new(bin())
        .args(["policy", "list", "--server", &b])
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        out.contains("3. ") && out.contains("50-no-echo.wasm"),
        "{out}"
    );

    // Replacing the policy with a broken file keeps the chain in force, and the log names the file.
    std::fs::write(drop_in.join("50-no-echo.wasm"), b"not a component").unwrap();
    let logged = within(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("50-no-echo.wasm"))
    });
    assert!(logged, "{:?}", std::fs::read_to_string(&log));
    let (_, r) = echo();
    assert!(
        r.to_string().contains("deny-pattern"),
        "the old chain must stay: {r}"
    );
    a_broken_policy_is_reported_as_failed_beside_the_stale_one(&b);
    // Fixed: removing the broken file brings the plain chain back.
    std::fs::remove_file(drop_in.join("50-no-echo.wasm")).unwrap();
    let back = within(Duration::from_secs(3), || echo().1["output"] == "hi\n");
    assert!(back, "{:?}", std::fs::read_to_string(&log));
    let (_, p) = get(&b, "/v1/policies", None);
    assert_eq!(
        (
            p["last_attempt_ok"].clone(),
            p["failed"].as_array().map(Vec::len)
        ),
        (json!(true), Some(0)),
        "{p}"
    );
    server.stop();
}

/// The status says so: the previous version keeps serving (`stale`), the broken file `failed`, with its error, in `/v1/policies`, `policy list --server` and `/metrics`.
fn a_broken_policy_is_reported_as_failed_beside_the_stale_one(b: &str) {
    // The status says so: the previous version keeps serving (`stale`), the broken file `failed`, with its error, in
    // `/v1/policies`, `policy list --server` and `/metrics`.
    let (_, p) = get(b, "/v1/policies", None);
    let policies = p["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 3, "{p}");
    assert_eq!(policies[2]["state"], "stale", "{p}");
    assert_eq!(policies[0]["state"], "loaded", "{p}");
    assert_eq!(p["last_attempt_ok"], false, "{p}");
    assert!(p["last_attempt"].as_u64().unwrap() > 0, "{p}");
    let failed = p["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{p}");
    assert!(
        failed[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("50-no-echo.wasm"),
        "{p}"
    );
    assert!(!failed[0]["error"].as_str().unwrap().is_empty(), "{p}");
    let listed = Command::new(bin())
        .args(["policy", "list", "--server", b])
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(out.contains("[stale]") && out.contains("FAILED "), "{out}");
    let (_, metrics) = get(b, "/metrics", None);
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("shellward_policy_load_failed{")
                && l.contains("50-no-echo.wasm")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}

#[test]
fn sighup_reloads_the_policies_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--policy", "default", "--policy", "guard"], &log);
    crate::cli::signal(&server.child, Signal::SIGHUP);
    let reloaded = within(Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("SIGHUP: reloaded the policy chain (2 policies)"))
    });
    assert!(reloaded, "{:?}", std::fs::read_to_string(&log));
    let (status, r) = post(
        &server.base,
        "/v1/tools/execute",
        None,
        json!({"command": "echo still"}),
    );
    assert_eq!((status, &r["output"]), (200, &json!("still\n")), "{r}");
    server.stop();
}

#[test]
fn the_audit_log_records_decisions_and_ends_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[audit]\npath = \"audit.jsonl\"\n",
    );
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--config", config.to_str().unwrap()], &log);
    let b = server.base.clone();
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "printf 'sec%s' ret-output"}),
    );
    assert_eq!(r["output"], "secret-output", "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "rm -rf /"}),
    );
    assert_eq!(r["denied"], true, "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "sleep 0.3; exit 4", "run_in_background": true}),
    );
    let bg = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("s1"),
        json!({"process_id": bg, "wait": "10s"}),
    );
    assert_eq!(r["running"], false, "{r}");
    server.stop();

    let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        !text.contains("secret-output"),
        "output is not logged by default: {text}"
    );
    let of = |kind: &str| -> Vec<&Value> { records.iter().filter(|r| r["type"] == kind).collect() };
    let decisions = of("decision");
    assert_eq!(decisions.len(), 3, "{text}");
    assert_eq!(decisions[0]["command"], "printf 'sec%s' ret-output");
    assert_eq!(decisions[0]["outcome"], "run");
    assert_eq!(decisions[0]["surface"], "serve");
    assert_eq!(decisions[0]["session"], "s1");
    assert_eq!(decisions[0]["plan"]["mode"], "foreground");
    assert_eq!(decisions[0]["policies"].as_array().unwrap().len(), 2);
    assert!(decisions[0]["time"].as_f64().unwrap() > 1.0e9);
    assert_eq!(decisions[1]["outcome"], "deny");
    assert_eq!(decisions[1]["denied_by"], "guard");
    assert!(decisions[1]["reason"].as_str().unwrap().contains("rm-root"));
    assert_eq!(decisions[2]["plan"]["mode"], "background");
    let ends = of("end");
    assert_eq!(ends.len(), 2, "{text}");
    let first = ends
        .iter()
        .find(|e| e["process_id"] == decisions[0]["process_id"])
        .unwrap();
    assert_eq!(first["exit_code"], 0);
    assert_eq!(first["output_bytes"], 13);
    let last = ends
        .iter()
        .find(|e| e["process_id"] == bg.as_str())
        .unwrap();
    assert_eq!(last["exit_code"], 4, "{text}");
    assert!(last["duration_ms"].as_u64().unwrap() >= 250, "{text}");
    // The file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn metrics_count_real_traffic() {
    let server = Server::start(&[]);
    let b = server.base.clone();
    let run = |body: Value| post(&b, "/v1/tools/execute", None, body).1;
    assert_eq!(run(json!({"command": "echo hi"}))["exit_code"], 0);
    assert_eq!(run(json!({"command": "rm -rf /"}))["denied"], true);
    let r = run(json!({"command": "sleep 5", "timeout": "500ms", "on_timeout": "kill"}));
    assert_eq!(r["timed_out"], true, "{r}");
    let r = run(json!({"command": "sleep 30", "run_in_background": true}));
    let id = r["process_id"].as_str().unwrap().to_string();
    let (status, _) = post(
        &b,
        "/v1/tools/process_signal",
        None,
        json!({"process_id": id, "signal": "kill"}),
    );
    assert_eq!(status, 200);

    let mut response = agent().get(&format!("{b}/metrics")).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.body_mut().read_to_string().unwrap();
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{series} missing from:\n{text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(
        value(r#"shellward_decisions_total{outcome="run",policy=""}"#),
        3.0
    );
    assert_eq!(
        value(r#"shellward_decisions_total{outcome="deny",policy="guard"}"#),
        1.0
    );
    assert_eq!(value(r#"shellward_executes_total{mode="foreground"}"#), 2.0);
    assert_eq!(value(r#"shellward_executes_total{mode="background"}"#), 1.0);
    assert_eq!(value("shellward_timeouts_total"), 1.0);
    assert_eq!(value(r#"shellward_signals_total{signal="kill"}"#), 1.0);
    assert_eq!(value("shellward_running_processes"), 0.0);
    assert_eq!(value("shellward_spawn_seconds_count"), 3.0);
    assert_eq!(value("shellward_policy_chain_seconds_count"), 4.0);
    assert!(value("shellward_policy_chain_seconds_sum") > 0.0);
    server.stop();
}

/// Interactive processes over HTTP: `execute` with `interactive`/`tty`, answers through `process_input`, end of input,
/// and the status codes of input errors.
#[test]
fn interactive_processes_over_http() {
    let server = Server::start(&[]);
    let b = server.base.clone();
    for mode in [json!({"interactive": true}), json!({"tty": true})] {
        let mut args = json!({"command": "python3 -i -q"});
        args.as_object_mut()
            .unwrap()
            .extend(mode.as_object().unwrap().clone());
        let (status, r) = post(&b, "/v1/tools/execute", Some("ia"), args);
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["running"], true, "{r}");
        let id = r["process_id"].as_str().unwrap().to_string();
        let (status, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "text": "print(6*7)\n"}),
        );
        assert_eq!(status, 200, "{r}");
        assert!(r["output"].as_str().unwrap().contains("42"), "{mode}: {r}");
        // Another session cannot write to it.
        let (status, _) = post(
            &b,
            "/v1/tools/process_input",
            Some("other"),
            json!({"process_id": id, "text": "print(1)\n"}),
        );
        assert_eq!(status, 404);
        let (_, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "close_stdin": true, "wait": "10s"}),
        );
        assert_eq!(
            (r["running"].clone(), r["exit_code"].clone()),
            (json!(false), json!(0)),
            "{r}"
        );
        // Closed: 409.
        let (status, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "text": "x"}),
        );
        assert_eq!(status, 409, "{r}");
    }
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "tty -s", "tty": true}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "tty -s", "interactive": true}),
    );
    let id = r["process_id"].as_str().unwrap_or_default().to_string();
    if r["running"] == true {
        post(
            &b,
            "/v1/tools/process_input",
            None,
            json!({"process_id": id, "close_stdin": true}),
        );
    }
    // Bad input: 400 with what to do.
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "true", "rows": 10}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("tty: true"), "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "sleep 60", "run_in_background": true}),
    );
    let plain = r["background_process_id"].as_str().unwrap().to_string();
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain, "text": "x"}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("interactive"), "{r}");
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain}),
    );
    assert_eq!(status, 400, "{r}");
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain, "bytes_base64": "***"}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("base64"), "{r}");
    server.stop();
}

/// What an agent learns at once over the HTTP tool routes: a server ready (naming its port), a start-up failure with
/// its exit and error, a quiet command at the start-up limit, a REPL's answer when it waits for input (and a sleeping
/// process not reported waiting), the session's working directory, and a retried start that starts nothing.
#[test]
fn an_agent_knows_at_once_over_http() {
    use std::time::Instant;
    let server = Server::start(&[]);
    let b = server.base.clone();
    let exec = |session: &str, args: Value| {
        let (status, r) = post(&b, "/v1/tools/execute", Some(session), args);
        assert_eq!(status, 200, "{r}");
        r
    };
    let kill = |session: &str, id: &str| {
        post(
            &b,
            "/v1/tools/process_signal",
            Some(session),
            json!({"process_id": id, "signal": "kill"}),
        )
    };

    // Ready: listens after 1.5 s, answered within about 2 s naming the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let began = Instant::now();
    let r = exec(
        "a",
        json!({"command": format!("sleep 1.5; exec python3 -m http.server --bind 127.0.0.1 {port}"),
               "run_in_background": true}),
    );
    let took = began.elapsed();
    assert_eq!(r["running"], true, "{r}");
    assert_eq!(
        r["listening"],
        json!([format!("tcp 127.0.0.1:{port}")]),
        "{r}"
    );
    assert!(took < Duration::from_millis(2900), "{took:?}");
    kill("a", r["process_id"].as_str().unwrap());

    // Failed during start-up: the exit code and the error text, from the start call.
    let r = exec(
        "a",
        json!({"command": "sleep 1.2; echo 'port already in use' >&2; exit 1", "run_in_background": true}),
    );
    assert_eq!(
        (r["running"].clone(), r["exit_code"].clone()),
        (json!(false), json!(1)),
        "{r}"
    );
    assert!(
        r["output"].as_str().unwrap().contains("already in use"),
        "{r}"
    );

    // Quiet and not listening: answered at the start-up limit (3 s), running.
    let began = Instant::now();
    let r = exec(
        "a",
        json!({"command": "sleep 30", "run_in_background": true}),
    );
    assert_eq!(r["running"], true, "{r}");
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "{:?}",
        began.elapsed()
    );
    kill("a", r["process_id"].as_str().unwrap());

    // A REPL's answer within 0.4 s of the input, reported waiting for input.
    let r = exec(
        "a",
        json!({"command": "python3 -q -i", "interactive": true}),
    );
    let repl = r["process_id"].as_str().unwrap().to_string();
    let began = Instant::now();
    let (_, r) = post(
        &b,
        "/v1/tools/process_input",
        Some("a"),
        json!({"process_id": repl, "text": "print(6*7)\n"}),
    );
    let took = began.elapsed();
    assert!(r["output"].as_str().unwrap().contains("42"), "{r}");
    assert_eq!(r["waiting_for_input"], true, "{r}");
    assert!(took < Duration::from_millis(400), "{took:?}");
    kill("a", &repl);
    // Blocked on read: waiting; asleep with its stdin open: not.
    let r = exec(
        "a",
        json!({"command": "read line; echo got $line", "interactive": true}),
    );
    let reader = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("a"),
        json!({"process_id": reader, "wait": "2s"}),
    );
    assert_eq!(r["waiting_for_input"], true, "{r}");
    let r = exec("a", json!({"command": "sleep 30", "interactive": true}));
    let sleeper = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("a"),
        json!({"process_id": sleeper, "wait": "1s"}),
    );
    assert_ne!(r["waiting_for_input"], true, "{r}");
    kill("a", &reader);
    kill("a", &sleeper);

    the_session_keeps_its_directory_and_its_client_tokens(&b);
    server.stop();
}

/// `cd` persists within a session, not across sessions; a retried execute with a client token starts nothing new.
fn the_session_keeps_its_directory_and_its_client_tokens(b: &str) {
    let exec = |session: &str, args: Value| {
        let (status, r) = post(b, "/v1/tools/execute", Some(session), args);
        assert_eq!(status, 200, "{r}");
        r
    };
    // `cd` persists within a session, not across sessions.
    let dir = tempfile::tempdir().unwrap();
    let there = dir.path().canonicalize().unwrap();
    exec("a", json!({"command": format!("cd {}", there.display())}));
    let r = exec("a", json!({"command": "pwd"}));
    assert_eq!(r["output"], format!("{}\n", there.display()), "{r}");
    let r = exec("b", json!({"command": "pwd"}));
    assert_ne!(r["output"], format!("{}\n", there.display()), "{r}");

    // A retried execute with a client token starts nothing new; the token with another command is a 409.
    let tally = there.join("tally");
    let call = json!({"command": format!("echo run >> {}; echo ok", tally.display()), "client_token": "c-1"});
    let first = exec("a", call.clone());
    let again = exec("a", call);
    assert_eq!(again["attached"], true, "{again}");
    assert_eq!(again["process_id"], first["process_id"]);
    assert_eq!(std::fs::read_to_string(&tally).unwrap(), "run\n");
    let (status, r) = post(
        b,
        "/v1/tools/execute",
        Some("a"),
        json!({"command": "echo other", "client_token": "c-1"}),
    );
    assert_eq!(status, 409, "{r}");
    assert_eq!(r["error_kind"], "conflict", "{r}");
}

/// A newcomer's first commands: `--listen localhost:PORT` works (a name resolving to loopback), and the server's log
/// written to a file or pipe carries no colour codes.
#[test]
fn listen_takes_a_host_name_and_a_piped_log_has_no_colour() {
    use std::io::Read;
    let mark = new_mark("serve-localhost");
    let (mut child, base) = start_serve(&["--listen", "localhost:0"], &[], &mark, Stdio::piped());
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let (status, _) = get(&base, "/v1/tools", None);
    assert_eq!(status, 200);
    crate::cli::signal(&child, Signal::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("no token:"), "the warning is logged: {log}");
    // It names the ways to give a token that do not show it in /proc, not --token.
    assert!(
        log.contains("--token-file")
            && log.contains("SHELLWARD_TOKEN")
            && !log.contains("set --token"),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a piped log: {log:?}"
    );
    kill_marked(&mark);
    assert!(survivors(&mark).is_empty());
}

/// The attack run's route to another session's output, through `serve`: session B reads session A's log file (the
/// `log_path` A's result names) and searches every log it can find; it finds nothing of A's, while A reads its own.
#[test]
fn a_session_cannot_read_another_sessions_output() {
    let server = Server::start(&[]);
    let secret = format!("secret-of-a-{}", std::process::id());
    let (status, a) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-a"),
        json!({"command": format!("echo {secret}")}),
    );
    assert_eq!(status, 200, "{a}");
    let log = a["log_path"].as_str().expect("a log path").to_string();
    let (_, own) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-a"),
        json!({"command": format!("cat {log}")}),
    );
    assert!(own["output"].as_str().unwrap().contains(&secret), "{own}");
    let root = std::path::Path::new(&log)
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    let search = format!(
        "cat {log}; grep -rs {secret} {} {}/.shellward-logs-* 2>/dev/null | head -3; echo searched",
        root.display(),
        root.parent().unwrap().display()
    );
    let (_, b) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-b"),
        json!({"command": search, "timeout": "60s", "on_timeout": "kill"}),
    );
    let seen = b["output"].as_str().unwrap();
    assert!(seen.contains("searched") && !seen.contains(&secret), "{b}");
    server.stop();
}
