//! Coder's at-most-once tool calls (`agent/agenttoolcall`) against `serve`, driven as Coder's chat drives its agent:
//! every request of a tool call carries the chat and the tool call's identity; a repeat after a lost answer gets the
//! recorded answer byte for byte; a cancel before the start, after it (within and past the run-age bound), a stale
//! message, a restarted agent and a changed request are answered with Coder's statuses, headers and bodies.

use super::*;
use base64::Engine;

/// Go's `url.PathEscape`: everything but unreserved characters and `$&+,;=:@` escaped as `%XX`.
fn go_path_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `workspacesdk.ToolCallUUID`, computed as Coder computes it.
fn tool_call_uuid(chat: &str, message: i64, id: &str) -> String {
    let ns = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        b"https://coder.com/workspace-agent/tool-call",
    );
    assert_eq!(ns.to_string(), "c5773f4c-0b3f-57bc-9147-36daf7921a1b");
    let mut name = uuid::Uuid::parse_str(chat).unwrap().as_bytes().to_vec();
    name.extend_from_slice(&(message as u64).to_be_bytes());
    name.extend_from_slice(id.as_bytes());
    uuid::Uuid::new_v5(&ns, &name).to_string()
}

/// The chat's agent connection for one tool call: `Coder-Chat-Id` and the three tool call headers
/// (`ToolCall.SetHeaders`).
fn for_call(server: &Server, chat: &str, message: i64, id: &str, age_ms: u64) -> Coder {
    let mut c = Coder::chat(server, chat, &[]);
    c.headers
        .push(("Coder-Tool-Call-Message-Id".into(), message.to_string()));
    c.headers
        .push(("Coder-Tool-Call-Id".into(), go_path_escape(id)));
    c.headers
        .push(("Coder-Tool-Call-Age-Ms".into(), age_ms.to_string()));
    c
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k == &name.to_ascii_lowercase())
        .map(|(_, v)| v.as_str())
}

/// A 409 `workspacesdk.ToolCallError`: its code (the message is Coder's).
fn refusal(r: &Response) -> String {
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        r.body
    );
    assert!(
        header(r, "Coder-Tool-Call-Run-Age-Ms").is_none(),
        "a refusal has no run"
    );
    r.body["code"].as_str().unwrap().to_string()
}

fn cancel(c: &Coder, uuid: &str, stop_below_ms: i64) -> Response {
    c.request(
        "POST",
        &format!("/api/v0/tool-calls/{uuid}/cancel"),
        Some(&format!(
            "{{\"stop_if_run_age_below_ms\":{stop_below_ms}}}\n"
        )),
    )
}

fn runs(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Waits until the server has run longer than a fresh tool call's age plus Coder's 2 s margin (an agent younger than
/// that cannot prove it never received one).
fn settled(started: Instant) {
    let left = Duration::from_millis(2300).saturating_sub(started.elapsed());
    std::thread::sleep(left);
}

/// A scratch directory, a server on loopback past its first two seconds (see [`settled`]), and a new chat's id.
fn settled_chat() -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().unwrap();
    let up = Instant::now();
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    settled(up);
    (dir, server, uuid::Uuid::new_v4().to_string())
}

#[test]
fn a_tool_call_runs_once_and_its_repeats_replay_the_recorded_answer() {
    let (dir, server, chat) = settled_chat();
    let log = dir.path().join("runs");
    let call = "toolu_01/a b";
    let uuid = tool_call_uuid(&chat, 1, call);
    let c = for_call(&server, &chat, 1, call, 0);
    let body = start_request(&format!("echo run >> {}", log.display()), "", &[], false);

    let first = c.start(&body);
    let v = ok(first.clone(), &start_process_response());
    assert_eq!(
        v["id"],
        uuid.as_str(),
        "the process id is the tool call's UUID"
    );
    assert_eq!(v["started"], true);
    let age: u64 = header(&first, "Coder-Tool-Call-Run-Age-Ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!(age < 5_000, "{age}");
    // The process answers to its UUID (output, list).
    let out = c.output_ok(&uuid, true);
    assert_eq!(out["running"], false, "{out}");
    assert!(c.list().iter().any(|p| p["id"] == uuid.as_str()));
    // The answer was lost: the repeat gets the same bytes and runs nothing.
    std::thread::sleep(Duration::from_millis(50));
    let again = c.start(&body);
    assert_eq!(again.status, 200);
    assert_eq!(again.raw, first.raw, "replayed byte for byte");
    assert_eq!(again.content_type, first.content_type);
    let later: u64 = header(&again, "Coder-Tool-Call-Run-Age-Ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!(later >= 50, "the run age grows: {later}");
    assert_eq!(runs(&log), 1);
    // The same tool call with another request is refused.
    let other = c.start(&start_request(
        &format!("echo run >> {}", log.display()),
        "",
        &[],
        true,
    ));
    assert_eq!(refusal(&other), "input_mismatch");
    // A start without tool call headers is unchanged: it runs each time.
    let plain = Coder::chat(&server, &chat, &[]);
    let a = plain.start_ok("true", "", &[], false);
    let b = plain.start_ok("true", "", &[], false);
    assert_ne!(a, b);
    assert_eq!(runs(&log), 1);
    server.stop();
}

#[test]
fn cancels_follow_coders_rules() {
    let (dir, server, chat) = settled_chat();
    let log = dir.path().join("runs");

    // Cancelled before the agent received the start: answered not started, and the start in transit does nothing.
    let early = for_call(&server, &chat, 1, "early", 0);
    let early_id = tool_call_uuid(&chat, 1, "early");
    let r = cancel(&early, &early_id, 10_000);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, serde_json::json!({"started": false}));
    let late = early.start(&start_request(
        &format!("echo run >> {}", log.display()),
        "",
        &[],
        false,
    ));
    assert_eq!(refusal(&late), "tool_call_canceled");
    assert_eq!(runs(&log), 0);

    // A foreground command interrupted within its timeout: killed, its recorded start and its state answered.
    let fg = for_call(&server, &chat, 1, "fg", 0);
    let fg_id = tool_call_uuid(&chat, 1, "fg");
    let started = fg.start(&start_request("echo before; sleep 300", "", &[], false));
    assert_eq!(started.status, 200, "{}", started.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fg.output_ok(&fg_id, false)["output"] != "before\n" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = cancel(&fg, &fg_id, 600_000);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["started"], true);
    assert_eq!(r.body["status_code"], 200);
    assert!(
        r.body["content_type"]
            .as_str()
            .unwrap()
            .starts_with("application/json")
    );
    let recorded = base64::engine::general_purpose::STANDARD
        .decode(r.body["body"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        recorded, started.raw,
        "the body is the recorded start, as Go encodes bytes"
    );
    let p = &r.body["process"];
    assert_eq!(p["running"], false, "{p}");
    assert_eq!(p["canceled"], true, "{p}");
    assert_eq!(p["output"], "before\n");
    assert_ne!(p["exit_code"], 0, "{p}");
    assert!(p["run_age_ms"].as_u64().is_some(), "{p}");
    assert!(header(&r, "Coder-Tool-Call-Run-Age-Ms").is_some());
    // A repeated cancel still says it was canceled.
    let again = cancel(&fg, &fg_id, 600_000);
    assert_eq!(again.body["process"]["canceled"], true, "{}", again.body);

    // A background command (the chat sends 0: never stop) keeps running.
    let bg = for_call(&server, &chat, 1, "bg", 0);
    let bg_id = tool_call_uuid(&chat, 1, "bg");
    assert_eq!(
        bg.start(&start_request("sleep 300", "", &[], true)).status,
        200
    );
    let r = cancel(&bg, &bg_id, 0);
    assert_eq!(r.body["process"]["running"], true, "{}", r.body);
    assert_eq!(r.body["process"]["canceled"], false);
    assert_eq!(bg.signal(&bg_id, "kill").status, 200);

    // The path names another tool call than the headers: refused.
    let wrong = cancel(&bg, &fg_id, 0);
    assert_eq!(wrong.status, 400, "{}", wrong.body);
    // Another chat cannot address this chat's tool call, and the same ids there are another tool call.
    let other_chat = uuid::Uuid::new_v4().to_string();
    let other = for_call(&server, &other_chat, 1, "fg", 0);
    assert_eq!(cancel(&other, &fg_id, 0).status, 400);
    let theirs = cancel(&other, &tool_call_uuid(&other_chat, 1, "fg"), 0);
    assert_eq!(theirs.body, serde_json::json!({"started": false}));
    server.stop();
}

#[test]
fn stale_messages_bad_headers_and_a_restarted_agent_are_refused() {
    let up = Instant::now();
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    // A freshly started agent cannot tell whether an earlier one received a committed tool call.
    let chat = uuid::Uuid::new_v4().to_string();
    let old = for_call(&server, &chat, 1, "committed-before", 60_000);
    assert_eq!(
        refusal(&old.start(&start_request("true", "", &[], false))),
        "agent_started_after_tool_call"
    );
    assert_eq!(
        refusal(&cancel(
            &old,
            &tool_call_uuid(&chat, 1, "committed-before"),
            0
        )),
        "agent_started_after_tool_call"
    );
    settled(up);
    // A newer message makes the older one stale, for starts and cancels.
    let newer = for_call(&server, &chat, 2, "m2", 0);
    assert_eq!(
        newer.start(&start_request("true", "", &[], false)).status,
        200
    );
    let stale = for_call(&server, &chat, 1, "m1", 0);
    assert_eq!(
        refusal(&stale.start(&start_request("true", "", &[], false))),
        "stale_tool_call"
    );
    assert_eq!(
        refusal(&cancel(&stale, &tool_call_uuid(&chat, 1, "m1"), 0)),
        "stale_tool_call"
    );
    // Headers: all three or none, well formed, and with a chat.
    let mut partial = Coder::chat(&server, &chat, &[]);
    partial
        .headers
        .push(("Coder-Tool-Call-Message-Id".into(), "3".into()));
    let (message, detail) =
        coder_error(&partial.start(&start_request("true", "", &[], false)), 400);
    assert_eq!(message, "Invalid tool call headers.");
    assert!(
        detail.contains("missing Coder-Tool-Call-Id, Coder-Tool-Call-Age-Ms"),
        "{detail}"
    );
    let mut negative = for_call(&server, &chat, 3, "x", 0);
    negative
        .headers
        .retain(|(k, _)| k != "Coder-Tool-Call-Age-Ms");
    negative
        .headers
        .push(("Coder-Tool-Call-Age-Ms".into(), "-1".into()));
    coder_error(&negative.start(&start_request("true", "", &[], false)), 400);
    let mut no_chat = for_call(&server, &chat, 3, "x", 0);
    no_chat.headers.retain(|(k, _)| k != "Coder-Chat-Id");
    let (message, _) = coder_error(&no_chat.start(&start_request("true", "", &[], false)), 400);
    assert!(message.contains("Coder-Chat-Id"), "{message}");
    let plain = Coder::chat(&server, &chat, &[]);
    let (message, _) = coder_error(&cancel(&plain, &tool_call_uuid(&chat, 3, "x"), 0), 400);
    assert!(message.contains("requires tool call headers"), "{message}");
    // Nothing was recorded by the refused requests: the valid one runs.
    let valid = for_call(&server, &chat, 3, "x", 0);
    assert_eq!(
        valid.start(&start_request("true", "", &[], false)).status,
        200
    );
    server.stop();
}

#[test]
fn concurrent_requests_of_one_tool_call_start_one_process() {
    let (dir, server, chat) = settled_chat();
    let log = dir.path().join("runs");
    let uuid = tool_call_uuid(&chat, 1, "call");
    let body = start_request(
        &format!("sleep 0.3; echo run >> {}", log.display()),
        "",
        &[],
        false,
    );
    let answers: Vec<Response> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let c = for_call(&server, &chat, 1, "call", 0);
                let body = body.clone();
                s.spawn(move || c.start(&body))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for a in &answers {
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.body["id"], uuid.as_str());
        assert_eq!(a.raw, answers[0].raw);
    }
    let c = for_call(&server, &chat, 1, "call", 0);
    c.output_ok(&uuid, true);
    assert_eq!(runs(&log), 1, "eight requests, one run");
    server.stop();
}
