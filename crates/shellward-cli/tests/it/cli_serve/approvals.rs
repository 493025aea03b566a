//! `serve`'s approvals over HTTP, and commands kept out of the server that runs them: pending approvals answered once, shown as text, as root and as a normal user.

use super::*;

/// A command the guard asks about, over HTTP: the call answers at once with a pending approval (nothing ran);
/// `GET /v1/approvals` lists it for its session only; `POST /v1/approvals/{id}` approve runs it and answers with the
/// result, deny refuses it; a decided, foreign or expired id is a 404 and runs nothing; a bad body is a 400.
#[test]
fn approvals_over_http_pend_then_run_or_refuse_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[approvals]\nexpiry = \"2s\"\n",
    );
    let server = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
    ]);
    let b = server.base.clone();

    // Pending, listed for its own session only, then approved: it runs once.
    let (path, command) = crate::cli::victim(dir.path(), "approved");
    let id = ask_over_http(&b, "s1", &command);
    assert!(path.exists(), "nothing runs before the answer");
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(listed["pending"][0]["id"], id.as_str(), "{listed}");
    assert!(
        listed["pending"][0]["shown"]["prompt"]
            .as_str()
            .unwrap()
            .contains("A preview (nothing applied) shows it delete 1 path"),
        "{listed}"
    );
    assert_eq!(
        listed["pending"][0]["command"],
        command.as_str(),
        "{listed}"
    );
    let (_, other) = get(&b, "/v1/approvals", Some("s2"));
    assert_eq!(other["pending"], json!([]), "{other}");
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s2"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "another session cannot answer: {r}");
    assert!(path.exists());
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "maybe"}),
    );
    assert_eq!(status, 400, "{r}");
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve", "remember": "session"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["success"].clone(), r["exit_code"].clone()),
        (json!(true), json!(0)),
        "{r}"
    );
    assert!(!path.exists(), "approved: it ran");
    let (status, _) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "a decided id is spent");
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(listed["remembered"], json!([command]), "{listed}");

    // Denied: nothing runs, and the reason says the user declined.
    let (path, command) = crate::cli::victim(dir.path(), "denied");
    let id = ask_over_http(&b, "s1", &command);
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "deny", "reason": "not now"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["denied"], true, "{r}");
    assert!(
        r["deny_reason"].as_str().unwrap().contains("not now"),
        "{r}"
    );
    assert!(path.exists());

    // Expired: refused afterwards, and the command never ran.
    let (path, command) = crate::cli::victim(dir.path(), "expired");
    let id = ask_over_http(&b, "s1", &command);
    std::thread::sleep(Duration::from_millis(2500));
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "{r}");
    assert!(path.exists(), "an expired approval never runs");
    let (status, _) = post(
        &b,
        "/v1/approvals/ap-00000000000000000000000000000000",
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404);
}

/// Sends `command` (one the guard asks about) in `session`: the pending approval's id.
fn ask_over_http(b: &str, session: &str, command: &str) -> String {
    let (status, r) = post(
        b,
        "/v1/tools/execute",
        Some(session),
        json!({"command": command}),
    );
    assert_eq!(status, 200, "{r}");
    let pending = r["pending_approval"].clone();
    assert!(pending["id"].as_str().unwrap().starts_with("ap-"), "{r}");
    assert!(
        pending["question"]
            .as_str()
            .unwrap()
            .contains("guard[shred]"),
        "{r}"
    );
    assert_eq!(r["success"], false, "{r}");
    // Previewed before the question: the file it would delete is named, and it is still there.
    let victim = command.strip_prefix("shred -u ").unwrap();
    let changes = pending["changes"].as_str().unwrap();
    let name = std::path::Path::new(victim)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    // The path is shown relative to where the command runs (the server's directory) when it is beneath it.
    assert!(changes.starts_with("would delete 1 path ("), "{r}");
    assert!(
        changes.contains(&format!("{name}), modify 0, create 0\ndeleted ")),
        "{r}"
    );
    assert!(std::path::Path::new(victim).exists());
    pending["id"].as_str().unwrap().to_string()
}

/// The commands a server runs cannot call that server: over TCP its port is closed to them (another loopback port
/// stays open), over a unix socket the socket is hidden in their sandbox (another socket stays reachable). So no
/// command can list a pending approval's id or answer it, though the pending approval is there for the client.
#[test]
fn commands_cannot_reach_the_server_that_runs_them() {
    commands_cannot_reach_their_server();
}

/// Set in the rerun of the approval tests as an unprivileged user.
const AS_USER: &str = "SHELLWARD_TEST_SERVE_APPROVALS_AS_USER";

/// [`commands_cannot_reach_the_server_that_runs_them`] and
/// [`pending_approvals_over_http_show_every_character_as_text`] as an unprivileged user (the server, its sandbox
/// in a user namespace of its own, and the person reading).
#[test]
fn a_normal_users_server_is_out_of_its_commands_reach_and_shows_them_as_text() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "a_normal_users_server_is_out_of_its_commands_reach_and_shows_them_as_text"
        ),
        AS_USER,
    ) {
        return;
    }
    commands_cannot_reach_their_server();
    pending_approvals_shown_as_text();
}

fn commands_cannot_reach_their_server() {
    let dir = tempfile::tempdir().unwrap();
    // TCP: the server's port closed, a port of the test's open.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let accepting = std::thread::spawn(move || {
        let _ = other.accept();
    });
    let server = Server::start(&[]);
    let b = server.base.clone();
    let port = b.rsplit(':').next().unwrap().to_string();
    let (path, command) = crate::cli::victim(dir.path(), "tcp");
    let id = ask_over_http(&b, "s1", &command);
    let connect = |port: &str, says: &str| {
        format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('{says}')\" \
             2>/dev/null"
        )
    };
    let probe = format!(
        "{}; {}",
        connect(&port, "SERVER-REACHED"),
        connect(&other_port.to_string(), "OTHER-REACHED")
    );
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": probe}),
    );
    assert_eq!(status, 200, "{r}");
    reached_only_the_other(&r);
    accepting.join().unwrap();
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(
        listed["pending"][0]["id"],
        id.as_str(),
        "still the client's to answer"
    );
    assert!(path.exists());
    server.stop();

    // A unix socket: hidden from commands, another socket reachable.
    let sock = dir.path().join("sw.sock");
    let other_sock = dir.path().join("other.sock");
    let other = std::os::unix::net::UnixListener::bind(&other_sock).unwrap();
    let accepting = std::thread::spawn(move || {
        let _ = other.accept();
    });
    let server = Server::start(&["--listen", &format!("unix:{}", sock.display())]);
    let connect = |p: &std::path::Path, says: &str| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('{says}')\" \
             2>/dev/null",
            p.display()
        )
    };
    let probe = format!(
        "{}; {}",
        connect(&sock, "SERVER-REACHED"),
        connect(&other_sock, "OTHER-REACHED")
    );
    let reply = unix_post(&sock, &json!({"command": probe}).to_string());
    let r: Value = serde_json::from_str(reply.split_once("\r\n\r\n").unwrap().1).unwrap();
    reached_only_the_other(&r);
    accepting.join().unwrap();
    server.stop();
}

/// Over HTTP a person reading the pending approvals (with `curl`) sees a hostile command's every character as
/// text: the body carries no raw control, bidirectional or invisible character; the parsed `command` is the raw one
/// for machines; `shown` is the rendered question, escapes counted.
#[test]
fn pending_approvals_over_http_show_every_character_as_text() {
    pending_approvals_shown_as_text();
}

/// A probe's result: it reached the other listener, and not the server.
fn reached_only_the_other(r: &Value) {
    let output = r["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("OTHER-REACHED"),
        "the other listener is reachable: {r}"
    );
    assert!(
        !output.contains("SERVER-REACHED"),
        "a command reached its server: {r}"
    );
}

fn pending_approvals_shown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[]);
    let b = server.base.clone();
    let (path, victim) = crate::cli::victim(dir.path(), "hostile");
    let hostile = format!("{victim} \x1b[2K\x1b[1G\r\u{202e}echo safe\u{200b}");
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": hostile}),
    );
    assert_eq!(status, 200, "{r}");
    assert!(r["pending_approval"]["id"].is_string(), "{r}");
    let reply = raw_http(
        &b,
        "GET /v1/approvals HTTP/1.1\r\nHost: x\r\nX-Shellward-Session: s1\r\nConnection: close\r\n\r\n",
    );
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    assert!(
        !body
            .chars()
            .any(|c| c != '\n' && c != '\r' && shellward::shown::is_hidden(c))
            && !body.contains('\r'),
        "{body:?}"
    );
    let listed: Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    let pending = &listed["pending"][0];
    assert_eq!(pending["command"], hostile.as_str());
    let prompt = pending["shown"]["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("\\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}")
            && prompt.contains("contains 5 invisible or control characters, shown escaped"),
        "{prompt}"
    );
    assert_eq!(pending["shown"]["command_escaped"], 5);
    assert!(path.exists());
    server.stop();
}

/// The operator's views of a running server from the command line, with its token: `shellward ps` lists every
/// session's processes (a token bound to sessions may not; no token is a 401 saying what to give), `approvals list`
/// shows a session's pending approvals with their questions, `approvals approve ID` runs the command asked about and
/// prints its result, `approvals deny ID` runs nothing; a decided id is refused.
#[test]
fn the_operator_lists_processes_and_answers_approvals_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "sw.toml",
        "[[auth]]\ntoken = \"bound-token\"\nsessions = [\"agent-a\"]\n",
    );
    let server = Server::start(&["--token", "s3cret", "--config", config.to_str().unwrap()]);
    let b = server.base.clone();
    let (status, r) = send(
        "POST",
        &format!("{b}/v1/tools/execute"),
        Some("agent-a"),
        Some("s3cret"),
        Some(&json!({"command": "sleep 30", "run_in_background": true}).to_string()),
    );
    assert_eq!(status, 200, "{r}");
    let cli = |args: &[&str], token: Option<&str>| {
        let mut c = crate::cli::shellward(args);
        c.args(["--server", &b]);
        if let Some(t) = token {
            c.env("SHELLWARD_TOKEN", t);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            crate::cli::stdout(&o),
            crate::cli::stderr(&o),
        )
    };
    let (code, out, err) = cli(&["ps"], Some("s3cret"));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("SESSION"), "{out}");
    let row = out
        .lines()
        .find(|l| l.contains("sleep 30"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.starts_with("agent-a") && row.contains("running"),
        "{row}"
    );
    let (code, _, err) = cli(&["ps"], None);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("401") && err.contains("SHELLWARD_TOKEN"),
        "{err}"
    );
    let (code, _, err) = cli(&["ps"], Some("bound-token"));
    assert_ne!(code, Some(0));
    assert!(err.contains("403"), "{err}");
    let (code, out, err) = cli(&["ps", "--json"], Some("s3cret"));
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["session"] == "agent-a"),
        "{v}"
    );

    // Approvals: deny one, approve another (the guard asks before `shred -u`).
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "data").unwrap();
    let shred = format!("shred -u {}", victim.display());
    let ask = || {
        let (status, r) = send(
            "POST",
            &format!("{b}/v1/tools/execute"),
            Some("agent-b"),
            Some("s3cret"),
            Some(&json!({"command": shred}).to_string()),
        );
        assert_eq!(status, 200, "{r}");
        r["pending_approval"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_string()
    };
    let first = ask();
    let (code, out, err) = cli(
        &["approvals", "list", "--session", "agent-b"],
        Some("s3cret"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&first) && out.contains("guard[shred]"),
        "{out}"
    );
    let (code, out, err) = cli(
        &["approvals", "deny", &first, "--session", "agent-b"],
        Some("s3cret"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("denied; nothing ran"), "{out}");
    assert!(victim.exists(), "a denied command ran");
    let (code, _, err) = cli(
        &["approvals", "approve", &first, "--session", "agent-b"],
        Some("s3cret"),
    );
    assert_ne!(code, Some(0), "a decided approval was answered again");
    assert!(err.contains("404"), "{err}");
    let second = ask();
    let (code, out, err) = cli(
        &["approvals", "approve", &second, "--session", "agent-b"],
        Some("s3cret"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("approved; it ran: exit 0"), "{out}");
    assert!(!victim.exists(), "the approved command did not run");
    let (_, out, _) = cli(
        &["approvals", "list", "--session", "agent-b"],
        Some("s3cret"),
    );
    assert!(out.contains("no approval is pending"), "{out}");
    server.stop();
}
