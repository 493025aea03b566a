//! Misbehaving policies are contained: faults are reported within the deadline, the host keeps serving, the next
//! evaluation works, and incompatible components are refused with a precise error.

use shellward_policy::embedded::guests::{FUTURE_POLICY, SCRIPTED_POLICY};
use shellward_policy::{
    FaultKind, FaultMode, InstanceMode, Outcome, Policy, PolicyChain, PolicyEngine, PolicyError,
    Request, SandboxConfig,
};
use std::time::{Duration, Instant};

fn engine_with(mode: InstanceMode) -> PolicyEngine {
    PolicyEngine::new(
        SandboxConfig::default()
            .deadline(Duration::from_millis(100))
            .memory_limit(32 << 20)
            .instance_mode(mode)
            .cache_dir(Some(env!("CARGO_TARGET_TMPDIR").into())),
    )
    .unwrap()
}

fn scripted(engine: &PolicyEngine, settings: &str) -> Policy {
    engine
        .load_file(SCRIPTED_POLICY.as_ref(), settings)
        .unwrap()
}

fn notes(outcome: Outcome) -> Vec<String> {
    match outcome {
        Outcome::Run(p) => p.notes,
        other => panic!("expected a run: {other:?}"),
    }
}

#[track_caller]
fn expect_fault(result: Result<Outcome, PolicyError>, kind: FaultKind, text: &str) {
    match result {
        Err(PolicyError::Fault {
            kind: k,
            detail,
            name,
            ..
        }) => {
            assert_eq!(k, kind, "{detail}");
            assert!(detail.contains(text), "{detail}");
            assert!(name.ends_with(".wasm"), "{name}");
        }
        other => panic!("expected a {kind:?} fault, got {other:?}"),
    }
}

#[test]
fn every_fault_is_contained_and_the_policy_recovers() {
    for mode in [InstanceMode::Reuse, InstanceMode::Fresh] {
        let engine = engine_with(mode);
        let policy = scripted(&engine, "");
        for (command, kind, text) in [
            ("loop", FaultKind::Deadline, "deadline of 100 ms"),
            ("alloc", FaultKind::Memory, "memory limit of 32 MiB"),
            ("trap", FaultKind::Trap, "evaluate trapped on purpose"),
            ("stack", FaultKind::Stack, "stack"),
            ("sleep", FaultKind::Trap, "trapped"),
        ] {
            let started = Instant::now();
            expect_fault(policy.evaluate(&Request::new(command)), kind, text);
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{command} took {:?}",
                started.elapsed()
            );
            // The next evaluation works, on a new instance.
            assert_eq!(
                notes(policy.evaluate(&Request::new("echo ok")).unwrap()),
                ["calls=1"],
                "{command} {mode:?}"
            );
        }
    }
}

/// An outcome larger than the host reads (a 10 MiB note, deny reason or command) is the policy's invalid output, told
/// with the host's budget; a host function's refusal (a blocking sleep) is a trap, not invalid output.
#[test]
fn oversized_outcomes_are_invalid_output_and_host_refusals_are_traps() {
    let engine = engine_with(InstanceMode::Reuse);
    let policy = scripted(&engine, "");
    for command in ["huge-note", "huge-deny", "huge-command"] {
        expect_fault(
            policy.evaluate(&Request::new(command)),
            FaultKind::InvalidOutput,
            "bytes in all for the command, notes, deny reason and variables",
        );
    }
    expect_fault(
        policy.evaluate(&Request::new("sleep")),
        FaultKind::Trap,
        "policies may not block",
    );
    assert_eq!(
        notes(policy.evaluate(&Request::new("echo ok")).unwrap()),
        ["calls=1"]
    );
}

#[test]
fn reuse_keeps_one_instance_and_fresh_mode_does_not() {
    let reuse = scripted(&engine_with(InstanceMode::Reuse), "");
    assert_eq!(
        notes(reuse.evaluate(&Request::new("a")).unwrap()),
        ["calls=1"]
    );
    assert_eq!(
        notes(reuse.evaluate(&Request::new("b")).unwrap()),
        ["calls=2"]
    );
    let fresh = scripted(&engine_with(InstanceMode::Fresh), "");
    assert_eq!(
        notes(fresh.evaluate(&Request::new("a")).unwrap()),
        ["calls=1"]
    );
    assert_eq!(
        notes(fresh.evaluate(&Request::new("b")).unwrap()),
        ["calls=1"]
    );
}

#[test]
fn log_import_works() {
    let policy = scripted(&engine_with(InstanceMode::Reuse), "");
    assert_eq!(
        notes(policy.evaluate(&Request::new("log")).unwrap()),
        ["calls=1"]
    );
}

#[test]
fn faults_and_refusals_during_configure_fail_the_load() {
    let engine = engine_with(InstanceMode::Reuse);
    let load = |settings: &str| engine.load_file(SCRIPTED_POLICY.as_ref(), settings);
    match load("reject") {
        Err(PolicyError::Settings { message, .. }) => {
            assert!(message.contains("`mode`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let started = Instant::now();
    match load("configure-loop") {
        Err(PolicyError::Fault {
            kind: FaultKind::Deadline,
            during: "configuring",
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    match load("configure-trap") {
        Err(
            e @ PolicyError::Fault {
                kind: FaultKind::Trap,
                ..
            },
        ) => {
            assert!(
                e.to_string().contains("configure trapped on purpose"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn incompatible_and_malformed_components_are_refused_with_a_precise_error() {
    let engine = engine_with(InstanceMode::Reuse);
    let err = engine.load_file(FUTURE_POLICY.as_ref(), "").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PolicyError::Incompatible { .. }), "{err:?}");
    assert!(
        text.contains("shellward:policy/policy@1.0.0")
            && text.contains("shellward:policy/policy@0.4.0"),
        "{text}"
    );
    assert!(text.contains(FUTURE_POLICY), "{text}");

    let empty = wat::parse_str("(component)").unwrap();
    let err = engine.load_bytes("empty.wasm", &empty, "").unwrap_err();
    assert!(matches!(err, PolicyError::MissingExport { .. }), "{err:?}");
    assert!(
        err.to_string().contains("empty.wasm") && err.to_string().contains("exports: nothing"),
        "{err}"
    );

    let core = wat::parse_str("(module)").unwrap();
    let err = engine.load_bytes("core.wasm", &core, "").unwrap_err();
    assert!(matches!(err, PolicyError::CoreModule { .. }), "{err:?}");

    let err = engine
        .load_bytes("notes.txt", b"hello, world", "")
        .unwrap_err();
    assert!(matches!(err, PolicyError::NotWasm { .. }), "{err:?}");

    let mut truncated = std::fs::read(SCRIPTED_POLICY).unwrap();
    truncated.truncate(truncated.len() / 2);
    let err = engine.load_bytes("half.wasm", &truncated, "").unwrap_err();
    assert!(matches!(err, PolicyError::Compile { .. }), "{err:?}");

    let err = engine
        .load_file("/no/such/policy.wasm".as_ref(), "")
        .unwrap_err();
    assert!(err.to_string().contains("/no/such/policy.wasm"), "{err}");

    let imports_http =
        wat::parse_str(r#"(component (import "wasi:http/outgoing-handler@0.2.0" (instance)))"#)
            .unwrap();
    assert!(engine.load_bytes("http.wasm", &imports_http, "").is_err());
}

#[test]
fn chain_passes_plans_along_and_merges_notes() {
    let engine = engine_with(InstanceMode::Reuse);
    let chain = PolicyChain::new(
        vec![
            scripted(&engine, "append: --one"),
            scripted(&engine, "append: --two"),
            engine.load_default("").unwrap(),
        ],
        FaultMode::Deny,
    );
    let d = chain.evaluate(&Request::new("npm run dev"));
    let Outcome::Run(plan) = d.outcome else {
        panic!("{d:?}")
    };
    assert_eq!(plan.command, "npm run dev --one --two");
    assert!(
        plan.background,
        "the default policy sees the rewritten command and promotes it"
    );
    assert_eq!(plan.notes.len(), 3, "{:?}", plan.notes);
    assert_eq!(&plan.notes[..2], ["calls=1", "calls=1"]);
    assert!(d.faults.is_empty() && d.denied_by.is_none());
}

#[test]
fn first_deny_stops_the_chain() {
    let engine = engine_with(InstanceMode::Reuse);
    let chain = PolicyChain::new(
        vec![scripted(&engine, "deny:no thanks"), scripted(&engine, "")],
        FaultMode::Deny,
    );
    // `loop` would fault in the second policy if it ran.
    let d = chain.evaluate(&Request::new("loop-not-reached"));
    assert_eq!(
        d.outcome,
        Outcome::Deny(shellward_policy::Denial::new("no thanks").with_rule("scripted-deny"))
    );
    assert!(d.denied_by.unwrap().ends_with(".wasm"));
    let after = chain.policies()[1].evaluate(&Request::new("x")).unwrap();
    assert_eq!(notes(after), ["calls=1"], "the second policy never ran");
}

#[test]
fn faults_fail_closed_by_default_and_open_when_configured() {
    let engine = engine_with(InstanceMode::Reuse);
    let closed = PolicyChain::new(
        vec![scripted(&engine, ""), engine.load_default("").unwrap()],
        FaultMode::Deny,
    );
    let d = closed.evaluate(&Request::new("trap"));
    assert!(
        matches!(&d.outcome, Outcome::Deny(r) if r.reason.contains("fail closed") && r.reason.contains("trapped")),
        "{d:?}"
    );
    assert_eq!(d.faults.len(), 1);
    // One typed record per fault: the policy, its kind, the error.
    let f = &d.faults[0];
    assert_eq!(
        (f.kind, f.kind_name()),
        (Some(shellward_policy::FaultKind::Trap), "trap")
    );
    assert!(
        f.policy.contains("scripted") && f.message.contains("trapped"),
        "{f:?}"
    );

    let open = PolicyChain::new(
        vec![scripted(&engine, ""), engine.load_default("").unwrap()],
        FaultMode::Skip,
    );
    let d = open.evaluate(&Request::new("trap"));
    let Outcome::Run(plan) = &d.outcome else {
        panic!("{d:?}")
    };
    assert_eq!(
        plan.timeout_ms,
        Some(10_000),
        "the default policy still ran"
    );
    assert_eq!(d.faults.len(), 1);
    // The host keeps serving afterwards.
    assert!(matches!(
        open.evaluate(&Request::new("ls")).outcome,
        Outcome::Run(_)
    ));
}

#[test]
fn empty_chain_passes_the_request_through() {
    let d = PolicyChain::new(Vec::new(), FaultMode::Deny).evaluate(&Request::new("ls"));
    let Outcome::Run(plan) = d.outcome else {
        panic!()
    };
    assert_eq!(
        (plan.command.as_str(), plan.background, plan.timeout_ms),
        ("ls", false, None)
    );
}

#[test]
fn policies_serve_concurrent_callers() {
    let engine = engine_with(InstanceMode::Reuse);
    let policy = engine.load_default("").unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let policy = &policy;
            s.spawn(move || {
                for i in 0..200 {
                    let cmd = format!("./server-{t}-{i} &");
                    let Outcome::Run(p) = policy.evaluate(&Request::new(cmd.as_str())).unwrap()
                    else {
                        panic!()
                    };
                    assert_eq!(p.command, format!("./server-{t}-{i}"));
                }
            });
        }
    });
}

/// Evaluations of one policy do not queue behind each other: while several callers loop until their deadline, a
/// benign evaluation gets an instance of its own and finishes first.
#[test]
fn a_looping_caller_does_not_stall_the_others() {
    let engine = engine_with(InstanceMode::Reuse);
    let policy = std::sync::Arc::new(scripted(&engine, ""));
    let done = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut loopers = Vec::new();
    for i in 0..3 {
        let (policy, done) = (policy.clone(), done.clone());
        loopers.push(std::thread::spawn(move || {
            let r = policy.evaluate(&Request::new("loop"));
            assert!(r.is_err());
            done.lock().unwrap().push(format!("loop{i}"));
        }));
    }
    std::thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    let benign = policy.evaluate(&Request::new("echo hi")).unwrap();
    done.lock().unwrap().push("benign".into());
    println!(
        "benign evaluation while 3 callers loop to their deadline: {:?}",
        started.elapsed()
    );
    assert!(matches!(benign, Outcome::Run(_)));
    for l in loopers {
        l.join().unwrap();
    }
    let order = done.lock().unwrap().clone();
    // Serialized evaluations would put it after at least the first looping call (each runs to its deadline).
    assert_eq!(
        order[0], "benign",
        "the benign call waited for a looping one: {order:?}"
    );
}

/// More concurrent callers than a policy keeps instances: every evaluation still succeeds (callers past the cap wait
/// for an instance instead of exhausting the engine's pool).
#[test]
fn many_concurrent_callers_share_a_bounded_pool() {
    let engine = engine_with(InstanceMode::Reuse);
    let policy = engine.load_default("").unwrap();
    std::thread::scope(|s| {
        for t in 0..32 {
            let policy = &policy;
            s.spawn(move || {
                for i in 0..20 {
                    let r = policy.evaluate(&Request::new(format!("echo {t}-{i}").as_str()));
                    assert!(matches!(r, Ok(Outcome::Run(_))), "{r:?}");
                }
            });
        }
    });
}

/// A component file is judged by its first bytes and its size before it is read: a 4 GiB sparse file of anything,
/// or a file over the limit, costs no memory; a FIFO is refused without blocking.
#[test]
fn component_files_are_bounded_and_judged_by_their_header_first() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.wasm");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let err = shellward_policy::read_component(&big).unwrap_err();
    assert!(
        err.to_string().contains("over the limit of 64 MiB"),
        "{err}"
    );
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, b"hello, world").unwrap();
    let err = shellward_policy::read_component(&text).unwrap_err();
    assert!(matches!(err, PolicyError::NotWasm { .. }), "{err:?}");
    let mut sparse_core = std::fs::File::create(dir.path().join("core.wasm")).unwrap();
    std::io::Write::write_all(&mut sparse_core, b"\0asm\x01\0\0\0").unwrap();
    sparse_core.set_len(60 << 20).unwrap();
    let err = shellward_policy::read_component(&dir.path().join("core.wasm")).unwrap_err();
    assert!(matches!(err, PolicyError::CoreModule { .. }), "{err:?}");
    let ok = shellward_policy::read_component(std::path::Path::new(SCRIPTED_POLICY)).unwrap();
    assert_eq!(ok, std::fs::read(SCRIPTED_POLICY).unwrap());
    let err = shellward_policy::read_component(dir.path()).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    let fifo = dir.path().join("fifo.wasm");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = shellward_policy::read_component(&fifo).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}
