//! Coder's tracked-process protocol (the newer agent's client-chosen ids, deadlines, cancels) against `serve`, as Coder's Go client drives it.

use super::*;

/// Go's `json.Marshal` of a string: what the client's encoder writes, and HTML characters escaped as Marshal does.
fn go_marshal_string(s: &str) -> String {
    go_string(s)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// A tracked start as Go writes it. `process_id`, `agent_instance_id` and `deadline` are never omitted (a UUID is an
/// array, a `time.Time` a struct: `omitempty` keeps both); `input_digest` is when empty. `marshal` is the string
/// writer (the request's encoder, or `json.Marshal` for the digest).
struct Tracked<'a> {
    command: &'a str,
    env: &'a [(&'a str, &'a str)],
    background: bool,
    deadline: &'a str,
}

impl Tracked<'_> {
    fn json(&self, marshal: fn(&str) -> String, pid: &str, instance: &str, digest: &str) -> String {
        let mut s = format!("{{\"command\":{}", marshal(self.command));
        if !self.env.is_empty() {
            let mut env = self.env.to_vec();
            env.sort();
            let pairs: Vec<String> = env
                .iter()
                .map(|(k, v)| format!("{}:{}", marshal(k), marshal(v)))
                .collect();
            s += &format!(",\"env\":{{{}}}", pairs.join(","));
        }
        if self.background {
            s += ",\"background\":true";
        }
        s += &format!(
            ",\"process_id\":\"{pid}\",\"agent_instance_id\":\"{instance}\",\"deadline\":{}",
            marshal(self.deadline)
        );
        if !digest.is_empty() {
            s += &format!(",\"input_digest\":\"{digest}\"");
        }
        s + "}"
    }

    /// `StartProcessDigest`: identity zeroed, the deadline in UTC, hashed.
    fn digest(&self) -> String {
        use sha2::Digest;
        let utc = if self.deadline == "0001-01-01T00:00:00Z" {
            self.deadline.to_string()
        } else {
            let t = chrono::DateTime::parse_from_rfc3339(self.deadline)
                .unwrap()
                .with_timezone(&chrono::Utc);
            t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
        };
        let normalized = Tracked {
            deadline: &utc,
            ..*self
        };
        let bytes = normalized.json(go_marshal_string, NIL_UUID, NIL_UUID, "");
        sha2::Sha256::digest(bytes.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The request body the client sends.
    fn body(&self, pid: &str, instance: &str) -> String {
        self.json(go_string, pid, instance, &self.digest()) + "\n"
    }
}

const NO_DEADLINE: &str = "0001-01-01T00:00:00Z";

/// A deadline `secs` from now, written as a Go client in UTC+02:00 writes it (whole seconds).
fn deadline_in(secs: i64) -> String {
    let t = chrono::Utc::now() + chrono::Duration::seconds(secs);
    t.with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap())
        .format("%Y-%m-%dT%H:%M:%S+02:00")
        .to_string()
}

impl Coder {
    fn start_tracked(&self, t: &Tracked<'_>, pid: &str, instance: &str) -> Response {
        self.request(
            "POST",
            "/api/v0/processes/start-tracked",
            Some(&t.body(pid, instance)),
        )
    }

    fn cancel_tracked(&self, t: &Tracked<'_>, pid: &str, instance: &str, wait_ms: i64) -> Response {
        let mut body = format!(
            "{{\"process_id\":\"{pid}\",\"agent_instance_id\":\"{instance}\",\"input_digest\":\"{}\",\"deadline\":{}",
            t.digest(),
            go_string(t.deadline)
        );
        if wait_ms != 0 {
            body += &format!(",\"wait_ms\":{wait_ms}");
        }
        body += "}\n";
        self.request("POST", "/api/v0/processes/cancel-tracked", Some(&body))
    }

    fn output_tracked(
        &self,
        pid: &str,
        instance: &str,
        digest: &str,
        wait_ms: Option<u64>,
    ) -> Response {
        let mut path =
            format!("/api/v0/processes/{pid}/output-tracked?agent_instance_id={instance}");
        if !digest.is_empty() {
            path += &format!("&input_digest={digest}");
        }
        if let Some(ms) = wait_ms {
            path += &format!("&wait=true&wait_ms={ms}");
        }
        self.request("GET", &path, None)
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

#[test]
fn tracked_processes_follow_coders_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shellward.toml");
    // Exited processes are kept 2 s, so the test sees output become unavailable.
    std::fs::write(&config, "[executor]\nretention = \"2s\"\n").unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    let coder = Coder::new(&server);
    let listed = ok(
        coder.request("GET", "/api/v0/processes/list", None),
        &list_processes_response(),
    );
    assert_eq!(listed["protocol_version"], 1, "{listed}");
    let instance = listed["agent_instance_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&instance).is_ok(), "{listed}");
    let env = [("A", "x<y>&z"), ("B", "1")];
    let t = Tracked {
        command: "echo \"$A\"; sleep 0.3",
        env: &env,
        background: false,
        deadline: NO_DEADLINE,
    };
    let other = Tracked {
        command: "echo other",
        ..t
    };
    let pid = tracked_start_attaches_by_identity(&coder, &instance, &t);
    tracked_identities_are_checked(&coder, &instance, &t, &other, &pid);
    tracked_deadlines_end_the_tree(&coder, &instance);
    tracked_cancels_fence_or_kill(&coder, &instance);
    tracked_identities_stay_in_their_chat(&server, &instance);
    tracked_output_after_reaping_is_gone(&coder, &instance, &t, &other, &pid);
    server.stop();
}

/// A start by identity; a retry of it attaches, and only one process runs; its output by identity. Returns its id.
fn tracked_start_attaches_by_identity(coder: &Coder, instance: &str, t: &Tracked<'_>) -> String {
    let pid = new_id();
    let v = ok(
        coder.start_tracked(t, &pid, instance),
        &start_process_response(),
    );
    assert_eq!(
        (v["id"].as_str(), v["started"].as_bool()),
        (Some(pid.as_str()), Some(true)),
        "{v}"
    );
    let v = ok(
        coder.start_tracked(t, &pid, instance),
        &start_process_response(),
    );
    assert_eq!(v["id"], pid.as_str(), "{v}");
    let ids: Vec<String> = coder
        .list()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.iter().filter(|i| **i == pid).count(), 1, "{ids:?}");
    assert_eq!(ids.len(), 1, "{ids:?}");
    // Its output, by identity.
    let out = ok(
        coder.output_tracked(&pid, instance, &t.digest(), Some(10_000)),
        &process_output_response(),
    );
    assert_eq!(
        (out["output"].as_str(), out["exit_code"].as_i64()),
        (Some("x<y>&z\n"), Some(0)),
        "{out}"
    );
    // The plain routes take the identity too.
    ok(coder.output(&pid, false), &process_output_response());

    pid
}

/// Another request under the same identity, another instance, a bad digest or identity: refused.
fn tracked_identities_are_checked(
    coder: &Coder,
    instance: &str,
    t: &Tracked<'_>,
    other: &Tracked<'_>,
    pid: &str,
) {
    let (_, detail) = coder_error(&coder.start_tracked(other, pid, instance), 409);
    assert_eq!(detail, "tracked process identity conflicts");
    coder_error(&coder.start_tracked(t, &new_id(), &new_id()), 409);
    let mut bad = t.body(&new_id(), instance);
    bad = bad.replace(&t.digest(), &"0".repeat(64));
    let (_, detail) = coder_error(
        &coder.request("POST", "/api/v0/processes/start-tracked", Some(&bad)),
        400,
    );
    assert_eq!(detail, "invalid tracked process identity");
    let untracked = start_request("echo hi", "", &[], false);
    coder_error(
        &coder.request("POST", "/api/v0/processes/start-tracked", Some(&untracked)),
        400,
    );
    coder_error(&coder.output_tracked(pid, &new_id(), "", None), 409);
    coder_error(
        &coder.output_tracked(pid, instance, &other.digest(), None),
        409,
    );
}

/// A deadline ends the whole tree; one already past is refused.
fn tracked_deadlines_end_the_tree(coder: &Coder, instance: &str) {
    let deadline = deadline_in(2);
    let slow = Tracked {
        command: "sleep 60 & sleep 60",
        env: &[],
        background: true,
        deadline: &deadline,
    };
    let slow_pid = new_id();
    ok(
        coder.start_tracked(&slow, &slow_pid, instance),
        &start_process_response(),
    );
    let started = Instant::now();
    let out = ok(
        coder.output_tracked(&slow_pid, instance, &slow.digest(), Some(20_000)),
        &process_output_response(),
    );
    assert_eq!(out["running"], false, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the deadline did not stop it"
    );
    let past = deadline_in(-5);
    let late = Tracked {
        command: "echo late",
        env: &[],
        background: false,
        deadline: &past,
    };
    let (_, detail) = coder_error(&coder.start_tracked(&late, &new_id(), instance), 410);
    assert_eq!(detail, "tracked process history expired");
}

/// Cancel before the start fences the identity (a delayed start of it never runs); cancel of a running one kills it.
fn tracked_cancels_fence_or_kill(coder: &Coder, instance: &str) {
    // Cancel before the start fences the identity: a delayed start of it never runs.
    let fenced_pid = new_id();
    let never = Tracked {
        command: "echo never",
        env: &[],
        background: false,
        deadline: NO_DEADLINE,
    };
    let v = ok(
        coder.cancel_tracked(&never, &fenced_pid, instance, 0),
        &cancel_process_response(),
    );
    assert_eq!(
        (v["fenced"].as_bool(), v.get("process")),
        (Some(true), None),
        "{v}"
    );
    coder_error(&coder.start_tracked(&never, &fenced_pid, instance), 409);
    // Cancel of a running one kills it and reports its end.
    let running = Tracked {
        command: "sleep 60",
        env: &[],
        background: true,
        deadline: NO_DEADLINE,
    };
    let running_pid = new_id();
    ok(
        coder.start_tracked(&running, &running_pid, instance),
        &start_process_response(),
    );
    let v = ok(
        coder.cancel_tracked(&running, &running_pid, instance, 10_000),
        &cancel_process_response(),
    );
    assert_eq!(v["fenced"], false, "{v}");
    assert_eq!(
        (
            v["process"]["id"].as_str(),
            v["process"]["running"].as_bool()
        ),
        (Some(running_pid.as_str()), Some(false)),
        "{v}"
    );
}

/// Another chat does not see a chat's identity.
fn tracked_identities_stay_in_their_chat(server: &Server, instance: &str) {
    let chat_a = Coder::chat(server, CHAT_A, &[]);
    let chat_b = Coder::chat(server, CHAT_B, &[]);
    let mine = Tracked {
        command: "echo mine",
        env: &[],
        background: false,
        deadline: NO_DEADLINE,
    };
    let mine_pid = new_id();
    ok(
        chat_a.start_tracked(&mine, &mine_pid, instance),
        &start_process_response(),
    );
    coder_error(&chat_b.output_tracked(&mine_pid, instance, "", None), 404);
    coder_error(&chat_b.start_tracked(&mine, &mine_pid, instance), 409);
}

/// Once the process is no longer kept: 410 with its final state, and a retried start is 410 too.
fn tracked_output_after_reaping_is_gone(
    coder: &Coder,
    instance: &str,
    t: &Tracked<'_>,
    other: &Tracked<'_>,
    pid: &str,
) {
    let t_pid = pid.to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let gone = loop {
        let r = coder.output_tracked(&t_pid, instance, &t.digest(), None);
        if r.status == 410 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(gone.status, 410, "{}", gone.body);
    go_decode(&gone.body, &output_unavailable(), "").unwrap();
    assert_eq!(gone.body["output_unavailable"], true);
    assert_eq!(
        (
            gone.body["process"]["id"].as_str(),
            gone.body["process"]["exit_code"].as_i64()
        ),
        (Some(t_pid.as_str()), Some(0))
    );
    assert_eq!(
        gone.body["process"]["command"], "",
        "the command is not kept"
    );
    coder_error(&coder.start_tracked(t, &t_pid, instance), 410);
    coder_error(
        &coder.output_tracked(&t_pid, instance, &other.digest(), None),
        409,
    );
}

/// Identities are never recycled within an instance: past 16,384 receipts a new identity is 429, and the ones kept
/// still answer.
#[test]
fn tracked_identities_are_capped_at_coders_limit() {
    let server = Server::start(&[]);
    let coder = Coder::new(&server);
    let listed = ok(
        coder.request("GET", "/api/v0/processes/list", None),
        &list_processes_response(),
    );
    let instance = listed["agent_instance_id"].as_str().unwrap().to_string();
    // Fences are the cheapest identities; a keep-alive client sends them quickly.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let never = Tracked {
        command: "echo never",
        env: &[],
        background: false,
        deadline: NO_DEADLINE,
    };
    let digest = never.digest();
    let fence = |pid: &str| {
        let body = format!(
            "{{\"process_id\":\"{pid}\",\"agent_instance_id\":\"{instance}\",\"input_digest\":\"{digest}\",\"deadline\":\"{NO_DEADLINE}\"}}"
        );
        agent
            .post(&format!("{}/api/v0/processes/cancel-tracked", server.base))
            .send(body)
            .unwrap()
            .status()
            .as_u16()
    };
    let first = new_id();
    assert_eq!(fence(&first), 200);
    for _ in 1..16_384 {
        assert_eq!(fence(&new_id()), 200);
    }
    assert_eq!(fence(&new_id()), 429);
    // A known identity still answers (the same fence again is not a new receipt).
    assert_eq!(fence(&first), 200);
    let (_, detail) = coder_error(&coder.start_tracked(&never, &new_id(), &instance), 429);
    assert_eq!(detail, "tracked process identity capacity reached");
    server.stop();
}
