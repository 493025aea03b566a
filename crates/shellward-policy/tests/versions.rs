//! Contract versions: a policy built against `shellward:policy@0.1.0` (the default policy as released with 0.1, kept
//! as a fixture) still loads and decides through the host's adapter; policies of the current `0.2.0` see and may
//! change `interactive` and `tty`.

use shellward_policy::embedded::guests::SCRIPTED_POLICY;
use shellward_policy::{InstanceMode, Outcome, Plan, PolicyEngine, Request, SandboxConfig};

/// The default policy as built for 0.1.0 (before `interactive`/`tty` existed).
const V0_1_DEFAULT: &[u8] = include_bytes!("fixtures/default-policy-v0.1.wasm");

fn engine(mode: InstanceMode) -> PolicyEngine {
    PolicyEngine::new(SandboxConfig {
        instance_mode: mode,
        cache_dir: Some(env!("CARGO_TARGET_TMPDIR").into()),
        ..Default::default()
    })
    .unwrap()
}

fn plan(outcome: Outcome) -> Plan {
    match outcome {
        Outcome::Run(p) => p,
        Outcome::Deny(r) => panic!("unexpected deny: {r}"),
    }
}

fn interactive(command: &str, tty: bool) -> Request {
    let mut r = Request::new(command);
    r.interactive = true;
    r.tty = tty;
    r
}

#[test]
fn a_v0_1_policy_loads_through_the_adapter_and_still_decides() {
    for mode in [InstanceMode::Reuse, InstanceMode::Fresh] {
        let e = engine(mode);
        let info = e.inspect("default-0.1.wasm", V0_1_DEFAULT).unwrap();
        assert_eq!(info.wit_version.as_deref(), Some("0.1.0"));
        assert!(info.adapted_from_v0_1());
        assert!(
            info.imports
                .iter()
                .any(|i| i == "shellward:policy/host@0.1.0"),
            "{:?}",
            info.imports
        );
        let policy = e
            .load_bytes(
                "default-0.1.wasm",
                V0_1_DEFAULT,
                r#"{"default_timeout": "20s"}"#,
            )
            .unwrap();
        // Its own decisions, as in 0.1: a trailing `&` becomes a background run, settings apply.
        let p = plan(policy.evaluate(&Request::new("npm run dev &")).unwrap());
        assert_eq!((p.command.as_str(), p.background), ("npm run dev", true));
        assert!(!p.notes.is_empty());
        let p = plan(policy.evaluate(&Request::new("make")).unwrap());
        assert_eq!(p.timeout_ms, Some(20_000));
        // What it cannot see passes through as the caller asked.
        for tty in [false, true] {
            let p = plan(policy.evaluate(&interactive("python3 -i", tty)).unwrap());
            assert!(p.interactive, "{mode:?}");
            assert_eq!(p.tty, tty, "{mode:?}");
        }
        let p = plan(policy.evaluate(&Request::new("ls")).unwrap());
        assert!(!p.interactive && !p.tty);
    }
}

#[test]
fn current_policies_see_and_may_change_interactive_and_tty() {
    let e = engine(InstanceMode::Reuse);
    let default = e.load_default("").unwrap();
    assert!(!default.info().adapted_from_v0_1());
    let p = plan(default.evaluate(&interactive("python3 -i", true)).unwrap());
    assert!(p.interactive && p.tty);
    let echo = e.load_file(SCRIPTED_POLICY.as_ref(), "echo").unwrap();
    let p = plan(echo.evaluate(&interactive("cat", false)).unwrap());
    assert!(p.interactive && !p.tty);
    let refuse = e
        .load_file(SCRIPTED_POLICY.as_ref(), "no-interactive")
        .unwrap();
    let p = plan(refuse.evaluate(&interactive("python3 -i", true)).unwrap());
    assert!(!p.interactive && !p.tty);
}

#[test]
fn a_chain_of_both_versions_carries_the_flags_through() {
    let e = engine(InstanceMode::Reuse);
    let old = e.load_bytes("default-0.1.wasm", V0_1_DEFAULT, "").unwrap();
    let new = e.load_default("").unwrap();
    let chain =
        shellward_policy::PolicyChain::new(vec![old, new], shellward_policy::FaultMode::Deny);
    let d = chain.evaluate(&interactive("python3 -i -q", true));
    match d.outcome {
        Outcome::Run(p) => assert!(p.interactive && p.tty, "{p:?}"),
        Outcome::Deny(r) => panic!("{r}"),
    }
}
