//! MCP's long-running calls over raw JSON-RPC: tasks that are polled, cancelled and answered (an interactive task
//! takes its input), and approvals on the 2026 wire as a multi-round-trip request.

use super::*;

/// Polls `tasks/get` (through `call`) until the task is no longer `working` (15 s at most); returns that answer.
fn poll_to_end(client: &mut RawClient, task: &str) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let got = client.call("tasks/get", serde_json::json!({"taskId": task}));
        if got["result"]["status"] != "working" {
            return got;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{got}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A raw 2026-07-28 client: each request carries the `_meta` of the era with the client's capabilities.
struct RawClient {
    raw: Raw,
    next_id: u64,
    /// The capabilities [`RawClient::call`] declares.
    capabilities: serde_json::Value,
}

impl RawClient {
    fn start(tag: &str, capabilities: serde_json::Value) -> RawClient {
        RawClient {
            raw: Raw::start(tag),
            next_id: 0,
            capabilities,
        }
    }

    /// Sends `method` with `params`, declaring the client's capabilities, and returns its reply.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let capabilities = self.capabilities.clone();
        self.call_declaring(&capabilities, method, params)
    }

    /// [`RawClient::call`] declaring `capabilities` instead.
    fn call_declaring(
        &mut self,
        capabilities: &serde_json::Value,
        method: &str,
        mut params: serde_json::Value,
    ) -> serde_json::Value {
        self.next_id += 1;
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let message = serde_json::json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.raw.send(message.to_string());
        loop {
            let reply = self.raw.reply();
            if reply["id"] == self.next_id {
                return reply;
            }
        }
    }

    /// `execute` with `arguments`, as a task when the server makes it one: the task's id.
    fn task(&mut self, arguments: serde_json::Value) -> String {
        let created = self.call(
            "tools/call",
            serde_json::json!({"name": "execute", "arguments": arguments}),
        );
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"].as_str().unwrap().to_string()
    }
}

/// MCP tasks on the 2026-07-28 wire, for a client that declares the extension in each request's `_meta`: the server
/// lists it in `server/discover`; an `execute` still running after a second is answered with a task; `tasks/get`
/// says how it goes and, once done, carries the very result `execute` returns; `tasks/cancel` stops a task's whole
/// tree (proven from /proc); `tasks/update` writes to an interactive command's input; an unknown task is an error.
#[test]
fn long_calls_become_tasks_that_can_be_polled_cancelled_and_answered() {
    let mut client = RawClient::start(
        "mcp-tasks",
        serde_json::json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let discover = client.call("server/discover", serde_json::json!({}));
    assert!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discover}"
    );
    // A quick call is answered as always (on a machine so loaded that it took over a second, as a task whose result
    // is the same).
    let mut quick = client.call(
        "tools/call",
        serde_json::json!({"name": "execute", "arguments": {"command": "echo quick"}}),
    );
    if quick["result"]["resultType"] == "task" {
        let task = quick["result"]["taskId"].as_str().unwrap().to_string();
        let done = poll_to_end(&mut client, &task);
        quick = serde_json::json!({"result": done["result"]["result"].clone()});
    }
    assert_eq!(
        quick["result"]["structuredContent"]["output"], "quick\n",
        "{quick}"
    );
    // A long one becomes a task, polled to its result.
    let task = client.task(serde_json::json!({"command": "echo one; sleep 2; echo two"}));
    let working = client.call("tasks/get", serde_json::json!({"taskId": task}));
    assert_eq!(working["result"]["status"], "working", "{working}");
    assert!(
        working["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("running for"),
        "{working}"
    );
    let done = poll_to_end(&mut client, &task);
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["structuredContent"]["output"], "one\ntwo\n",
        "{done}"
    );
    a_cancelled_task_stops_its_tree(&mut client);
    an_interactive_task_takes_its_input(&mut client);
    let unknown = client.call("tasks/get", serde_json::json!({"taskId": "task-nope"}));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no task"),
        "{unknown}"
    );
    let status = client.raw.close();
    assert!(status.success(), "{status}");
    kill_marked(&client.raw.mark);
}

/// `tasks/cancel` stops the task's whole tree.
fn a_cancelled_task_stops_its_tree(client: &mut RawClient) {
    use std::time::{Duration, Instant};
    let task =
        client.task(serde_json::json!({"command": "sleep 300 | sleep 301", "timeout": "10m"}));
    assert!(
        client.raw.commands().len() >= 2,
        "{:?}",
        client.raw.commands()
    );
    let cancelled_at = Instant::now();
    let ack = client.call("tasks/cancel", serde_json::json!({"taskId": task}));
    assert!(ack["result"].is_object(), "{ack}");
    while !client.raw.commands().is_empty() && cancelled_at.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        client.raw.commands().is_empty(),
        "alive after tasks/cancel: {:?}",
        client.raw.commands()
    );
    let got = client.call("tasks/get", serde_json::json!({"taskId": task}));
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
}

/// `tasks/update` writes to an interactive task's input.
fn an_interactive_task_takes_its_input(client: &mut RawClient) {
    let task = client.task(serde_json::json!({
        "command": "for i in 1 2 3; do echo tick $i; sleep 0.6; done; read line; echo got:$line",
        "interactive": true,
    }));
    let done = poll_to_end(client, &task);
    let id = done["result"]["result"]["structuredContent"]["process_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{done}"))
        .to_string();
    let ack = client.call(
        "tasks/update",
        serde_json::json!({"taskId": task, "inputResponses": {"stdin": "hello\n"}}),
    );
    assert!(ack["result"].is_object(), "{ack}");
    let out = client.call(
        "tools/call",
        serde_json::json!({"name": "process_output", "arguments": {"process_id": id, "wait": "5s"}}),
    );
    assert!(
        out["result"]["structuredContent"]["output"]
            .as_str()
            .unwrap_or_default()
            .contains("got:hello"),
        "{out}"
    );
}

/// Approvals on the 2026-07-28 wire (no server-to-client requests): a call the guard asks about answers
/// `input_required` with an elicitation form and a `requestState`; the same call repeated with the form's answer runs
/// it (approve) or refuses it (decline); a retry with other arguments, a spent or made-up state is refused and runs
/// nothing; a client that declares no elicitation gets the deny with its reason, at once.
#[test]
fn approvals_on_the_2026_wire_are_a_multi_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = RawClient::start("mcp-mrtr", serde_json::json!({"elicitation": {"form": {}}}));
    let approve = serde_json::json!({"action": "accept", "content": {"decision": "approve"}});

    // Approved on the retry: it runs, and the retry gets its result.
    let (path, command) = crate::cli::victim(dir.path(), "approved");
    let state = ask_over_mrtr(&mut client, &command);
    assert!(path.exists(), "nothing runs before the answer");
    // The form showed what a preview of it would change (Linux: where a preview can run).
    #[cfg(target_os = "linux")]
    {
        let first = client.call(
            "tools/call",
            serde_json::json!({"name": "execute", "arguments": {"command": command}}),
        );
        let message = form_message(&first);
        assert!(
            message.contains("A preview (nothing applied) shows it delete 1 path")
                && message.contains("deleted ")
                && message.contains("approved"),
            "{message}"
        );
        assert!(path.exists(), "the preview deleted nothing");
    }
    // A retry with other arguments does not use (nor spend) the approval.
    let r = client.call(
        "tools/call",
        mrtr_retry("echo other", &state, approve.clone()),
    );
    assert!(r["error"].is_object(), "{r}");
    let r = client.call("tools/call", mrtr_retry(&command, &state, approve.clone()));
    assert_eq!(r["result"]["structuredContent"]["success"], true, "{r}");
    assert!(!path.exists(), "approved: it ran");
    // The state is spent.
    std::fs::write(&path, "again\n").unwrap();
    let r = client.call("tools/call", mrtr_retry(&command, &state, approve.clone()));
    assert!(r["error"].is_object(), "{r}");
    assert!(path.exists());

    // Declined: nothing runs, and the model is told.
    let (path, command) = crate::cli::victim(dir.path(), "declined");
    let state = ask_over_mrtr(&mut client, &command);
    let r = client.call(
        "tools/call",
        mrtr_retry(&command, &state, serde_json::json!({"action": "decline"})),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["structuredContent"]["deny_reason"]
            .as_str()
            .unwrap()
            .contains("declined"),
        "{r}"
    );
    assert!(path.exists());

    // Another connection (another session) cannot answer this one's approval with its requestState, nor spend it.
    let (path, command) = crate::cli::victim(dir.path(), "foreign");
    let state = ask_over_mrtr(&mut client, &command);
    let mut other = RawClient::start(
        "mcp-mrtr-other",
        serde_json::json!({"elicitation": {"form": {}}}),
    );
    let r = other.call("tools/call", mrtr_retry(&command, &state, approve.clone()));
    assert!(r["error"].is_object(), "{r}");
    assert!(path.exists(), "another connection's answer ran nothing");
    assert!(other.raw.close().success());
    let r = client.call(
        "tools/call",
        mrtr_retry(&command, &state, serde_json::json!({"action": "decline"})),
    );
    assert_eq!(
        r["result"]["isError"], true,
        "still this connection's to answer: {r}"
    );
    assert!(path.exists());

    // The form shows a hostile command's every character escaped and counted, nothing raw; a 100 KB one keeps its
    // dangerous end in view and says what was cut.
    let (path, victim) = crate::cli::victim(dir.path(), "hostile");
    let hostile = format!("{victim} \x1b[2K\x1b[1G\r\u{202e}echo safe\u{200b}");
    let r = client.call(
        "tools/call",
        serde_json::json!({"name": "execute", "arguments": {"command": hostile}}),
    );
    let message = form_message(&r);
    assert!(
        !message
            .chars()
            .any(|c| c != '\n' && shellward::shown::is_hidden(c)),
        "{message:?}"
    );
    assert!(
        message.contains("\\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}")
            && message.contains("contains 5 invisible or control characters, shown escaped"),
        "{message}"
    );
    let long = format!("echo {}; {victim}", "a".repeat(100_000));
    let r = client.call(
        "tools/call",
        serde_json::json!({"name": "execute", "arguments": {"command": long}}),
    );
    let message = form_message(&r);
    assert!(
        message.contains(&victim)
            && message.contains("more characters not shown here")
            && message.len() < 10_000,
        "{}",
        &message[message.len().saturating_sub(600)..]
    );
    assert!(path.exists());

    // A made-up state.
    let r = client.call(
        "tools/call",
        mrtr_retry(&command, "ap-00000000000000000000000000000000", approve),
    );
    assert!(r["error"].is_object(), "{r}");

    // No elicitation declared: the deny, with what to do.
    let r = client.call_declaring(
        &serde_json::json!({}),
        "tools/call",
        serde_json::json!({"name": "execute", "arguments": {"command": command}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["structuredContent"]["deny_reason"]
            .as_str()
            .unwrap()
            .contains("Ask your user"),
        "{r}"
    );
    assert!(path.exists());
    let status = client.raw.close();
    assert!(status.success(), "{status:?}");
}

/// Calls `execute` with `command` (one the guard asks about) through the client's elicitation: the request state the
/// answer must carry.
fn ask_over_mrtr(client: &mut RawClient, command: &str) -> String {
    let r = client.call(
        "tools/call",
        serde_json::json!({"name": "execute", "arguments": {"command": command}}),
    );
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let form = &r["result"]["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create", "{r}");
    assert!(
        form["params"]["message"]
            .as_str()
            .unwrap()
            .contains(command),
        "{r}"
    );
    r["result"]["requestState"].as_str().unwrap().to_string()
}

/// The message of the approval form an `input_required` answer carries.
fn form_message(r: &serde_json::Value) -> String {
    r["result"]["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

/// The retry of `execute` with `command` that answers the approval asked under `state`.
fn mrtr_retry(command: &str, state: &str, answer: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "name": "execute",
        "arguments": {"command": command},
        "requestState": state,
        "inputResponses": {"approval": answer},
    })
}
