//! The built default-policy component, loaded through the host, decides the documented cases.

use crate::common::{engine, plan};

use shellward_policy::{InstanceMode, OnTimeout, Outcome, PolicyEngine, PolicyError, Request};

/// (command, expected background, expected command)
const CASES: &[(&str, bool, &str)] = &[
    ("npm run dev &", true, "npm run dev"),
    ("npm run dev &   # start the server", true, "npm run dev"),
    ("make && ./server &", true, "make && ./server"),
    (
        "nohup ./server > log 2>&1 &",
        true,
        "nohup ./server > log 2>&1",
    ),
    ("(cd app && npm start) &", true, "(cd app && npm start)"),
    ("a && b", false, "a && b"),
    ("echo \"x &\"", false, "echo \"x &\""),
    ("echo x \\&", false, "echo x \\&"),
    ("cmd 2>&1", false, "cmd 2>&1"),
    ("cmd &> out.log", false, "cmd &> out.log"),
    (
        "cat <<EOF\nbody & more &\nEOF",
        false,
        "cat <<EOF\nbody & more &\nEOF",
    ),
    (
        "sleep 5 & echo started",
        true,
        "sleep 5 & echo started\nwait",
    ),
    ("./server & disown", true, "./server"),
    ("setsid ./server", true, "./server"),
    ("npm run dev", true, "npm run dev"),
    (
        "cd web && PORT=3000 yarn dev",
        true,
        "cd web && PORT=3000 yarn dev",
    ),
    ("tail -f app.log", true, "tail -f app.log"),
    ("docker compose up", true, "docker compose up"),
    ("docker compose up -d", false, "docker compose up -d"),
    (
        "python3 -m http.server 8080",
        true,
        "python3 -m http.server 8080",
    ),
    ("ls -la", false, "ls -la"),
];

fn check_cases(engine: &PolicyEngine) {
    let policy = engine.load_default("").unwrap();
    for (command, background, expected) in CASES {
        let p = plan(policy.evaluate(&Request::new(*command)).unwrap());
        assert_eq!(p.background, *background, "{command:?}");
        assert_eq!(p.command, *expected, "{command:?}");
        if *background {
            assert_eq!(p.timeout_ms, None, "{command:?}");
            assert!(
                !p.notes.is_empty(),
                "{command:?}: a rewrite or promotion needs a note"
            );
        } else {
            assert_eq!(p.timeout_ms, Some(10_000), "{command:?}");
            assert!(p.notes.is_empty(), "{command:?}: {:?}", p.notes);
        }
        assert_eq!(p.on_timeout, OnTimeout::Background, "{command:?}");
    }
}

#[test]
fn documented_cases_with_a_reused_instance() {
    check_cases(&engine(InstanceMode::Reuse));
}

#[test]
fn documented_cases_with_fresh_instances() {
    check_cases(&engine(InstanceMode::Fresh));
}

#[test]
fn background_request_with_trailing_ampersand_is_stripped() {
    let policy = engine(InstanceMode::Reuse).load_default("{}").unwrap();
    let mut req = Request::new("./server &");
    req.background = Some(true);
    let p = plan(policy.evaluate(&req).unwrap());
    assert_eq!((p.command.as_str(), p.background), ("./server", true));
}

#[test]
fn timeouts_are_defaulted_clamped_and_zero_is_denied() {
    let policy = engine(InstanceMode::Reuse)
        .load_default(r#"{"max_timeout":"1m"}"#)
        .unwrap();
    let mut req = Request::new("make");
    req.timeout_ms = Some(600_000);
    let p = plan(policy.evaluate(&req).unwrap());
    assert_eq!(p.timeout_ms, Some(60_000));
    assert!(
        p.notes[0].contains("10m") && p.notes[0].contains("1m"),
        "{:?}",
        p.notes
    );
    req.timeout_ms = Some(0);
    match policy.evaluate(&req).unwrap() {
        Outcome::Deny(d) => assert!(d.reason.contains("zero"), "{d}"),
        other => panic!("zero timeout ran: {other:?}"),
    }
}

#[test]
fn settings_are_applied_and_invalid_settings_fail_at_load_naming_the_field() {
    let e = engine(InstanceMode::Reuse);
    let policy = e.load_default(r#"{"default_timeout":"3s","on_timeout":"kill","extra_promote_patterns":["./serve.sh"]}"#).unwrap();
    let p = plan(policy.evaluate(&Request::new("make")).unwrap());
    assert_eq!((p.timeout_ms, p.on_timeout), (Some(3_000), OnTimeout::Kill));
    assert!(
        plan(
            policy
                .evaluate(&Request::new("./serve.sh --port 1"))
                .unwrap()
        )
        .background
    );
    for (settings, field) in [
        (r#"{"default_timeout":"fast"}"#, "default_timeout"),
        (r#"{"on_timeout":"explode"}"#, "on_timeout"),
        (r#"{"promote_patterns":["!x"]}"#, "promote_patterns"),
        (r#"{"no_such_setting":1}"#, "no_such_setting"),
        ("not json", "JSON"),
    ] {
        match e.load_default(settings) {
            Err(PolicyError::Settings { name, message }) => {
                assert_eq!(name, "default");
                assert!(message.contains(field), "{settings}: {message}");
            }
            other => panic!("{settings}: expected a settings error, got {other:?}"),
        }
    }
}

#[test]
fn env_workdir_and_context_pass_through() {
    let policy = engine(InstanceMode::Reuse).load_default("").unwrap();
    let mut req = Request::new("env");
    req.workdir = Some("/tmp".into());
    req.env = vec![("A".into(), "1".into())];
    req.context = vec![("session-id".into(), "s1".into())];
    let p = plan(policy.evaluate(&req).unwrap());
    assert_eq!(p.workdir.as_deref(), Some("/tmp"));
    assert_eq!(p.env, vec![("A".to_string(), "1".to_string())]);
}

#[test]
fn the_embedded_policy_is_compatible_and_declares_its_contract() {
    let e = engine(InstanceMode::Reuse);
    let info = e
        .inspect("default", shellward_policy::embedded::DEFAULT_POLICY_WASM)
        .unwrap();
    assert_eq!(
        info.wit_version.as_deref(),
        Some(shellward_policy::WIT_VERSION)
    );
    assert!(
        info.imports
            .iter()
            .any(|i| i.starts_with("shellward:policy/host@")),
        "{:?}",
        info.imports
    );
    info.check("default").unwrap();
}
