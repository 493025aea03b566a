//! Contract versions: policies built against `shellward:policy@0.1.0` and `0.2.0` (the default policy as released
//! with each, kept as fixtures) still load and decide through the host's adapters, passing through what they cannot
//! see; policies of the current `0.3.0` see and may change `interactive`, `tty`, the confinement (within the
//! operator's ceiling) and the start-up wait, and name their rules.

use crate::common::{engine, plan};

use shellward_policy::embedded::guests::SCRIPTED_POLICY;
use shellward_policy::{
    Confinement, FaultMode, InstanceMode, Network, Outcome, PolicyChain, PolicyEngine, Request,
};

/// The default policy as built for 0.1.0 (before `interactive`/`tty` existed).
const V0_1_DEFAULT: &[u8] = include_bytes!("../fixtures/default-policy-v0.1.wasm");
/// The default policy as built for 0.2.0 (before confinement, start-up waits and rule ids existed).
const V0_2_DEFAULT: &[u8] = include_bytes!("../fixtures/default-policy-v0.2.wasm");
/// The default policy as built for 0.3.0 (before the `ask` outcome existed).
const V0_3_DEFAULT: &[u8] = include_bytes!("../fixtures/default-policy-v0.3.wasm");

/// A request with the operator's confinement and ceiling set.
fn confined(command: &str, confinement: Confinement, ceiling: Confinement) -> Request {
    let mut r = Request::new(command);
    r.confinement = confinement;
    r.ceiling = ceiling;
    r.startup_wait_ms = Some(1234);
    r
}

fn strict_default() -> Confinement {
    Confinement::new(Network::Loopback, Some(vec!["/work".into(), "/tmp".into()]))
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
        assert_eq!(info.adapted_from(), Some("0.1.0"));
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
    assert_eq!(default.info().adapted_from(), None);
    assert_eq!(default.info().wit_version.as_deref(), Some("0.4.0"));
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
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_v0_2_policy_loads_through_the_adapter_and_passes_the_confinement_through() {
    for mode in [InstanceMode::Reuse, InstanceMode::Fresh] {
        let e = engine(mode);
        let info = e.inspect("default-0.2.wasm", V0_2_DEFAULT).unwrap();
        assert_eq!(info.wit_version.as_deref(), Some("0.2.0"));
        assert_eq!(info.adapted_from(), Some("0.2.0"));
        let policy = e
            .load_bytes(
                "default-0.2.wasm",
                V0_2_DEFAULT,
                r#"{"default_timeout": "20s"}"#,
            )
            .unwrap();
        assert!(
            policy.rules().unwrap().is_empty(),
            "a 0.2 policy names no rules"
        );
        let r = confined("npm run dev &", strict_default(), strict_default());
        let p = plan(policy.evaluate(&r).unwrap());
        assert_eq!((p.command.as_str(), p.background), ("npm run dev", true));
        assert_eq!(p.confinement, strict_default(), "{mode:?}");
        assert_eq!(p.startup_wait_ms, Some(1234));
        assert!(p.rules.is_empty());
        // Interactive flags are its own to see and change, as in 0.2.
        let p = plan(policy.evaluate(&interactive("python3 -i", true)).unwrap());
        assert!(p.interactive && p.tty);
    }
}

#[test]
fn current_policies_name_their_rules_and_may_narrow_the_confinement() {
    let e = engine(InstanceMode::Reuse);
    let default = e.load_default("").unwrap();
    let rules: Vec<String> = default.rules().unwrap().into_iter().map(|r| r.id).collect();
    for id in ["trailing-ampersand", "promotion", "timeout-cap", "network"] {
        assert!(rules.iter().any(|r| r == id), "{id} in {rules:?}");
    }
    let p = plan(default.evaluate(&Request::new("npm run dev &")).unwrap());
    assert!(
        p.rules.iter().any(|r| r == "trailing-ampersand"),
        "{:?}",
        p.rules
    );
    match default.evaluate(&{
        let mut r = Request::new("make");
        r.timeout_ms = Some(0);
        r
    }) {
        Ok(Outcome::Deny(d)) => assert_eq!(d.rule.as_deref(), Some("timeout-zero")),
        other => panic!("{other:?}"),
    }
    // The strict profile: no network, except package installs, which keep the operator's.
    let strict = e.load_default(r#"{"profile": "strict"}"#).unwrap();
    let host = Confinement::new(Network::Host, Some(vec!["/work".into()]));
    let p = plan(
        strict
            .evaluate(&confined("curl example.com", host.clone(), host.clone()))
            .unwrap(),
    );
    assert_eq!(p.confinement.network, Network::None);
    assert_eq!(p.confinement.writable, host.writable, "writes unchanged");
    let p = plan(
        strict
            .evaluate(&confined(
                "cd app && npm install",
                host.clone(),
                host.clone(),
            ))
            .unwrap(),
    );
    assert_eq!(p.confinement.network, Network::Host);
    assert!(p.rules.iter().any(|r| r == "network-exception"));
    // A promoted server gets the configured start-up wait; other commands keep the request's.
    let waits = e
        .load_default(r#"{"promoted_startup_wait": "20s"}"#)
        .unwrap();
    let p = plan(
        waits
            .evaluate(&confined("npm run dev", host.clone(), host.clone()))
            .unwrap(),
    );
    assert_eq!(p.startup_wait_ms, Some(20_000));
    let p = plan(
        waits
            .evaluate(&confined("make", host.clone(), host.clone()))
            .unwrap(),
    );
    assert_eq!(p.startup_wait_ms, Some(1234));
}

#[test]
fn a_plan_beyond_the_ceiling_is_the_policys_fault_and_denies_the_command() {
    let e = engine(InstanceMode::Reuse);
    let scripted = e.load_file(SCRIPTED_POLICY.as_ref(), "echo").unwrap();
    let chain = PolicyChain::new(
        vec![e.load_file(SCRIPTED_POLICY.as_ref(), "echo").unwrap()],
        FaultMode::Skip,
    );
    let ceiling = strict_default();
    // Narrowing is always allowed.
    for command in ["net:none", "write:/work/app", "net:loopback"] {
        let p = plan(
            scripted
                .evaluate(&confined(command, strict_default(), ceiling.clone()))
                .unwrap(),
        );
        assert!(p.confinement.beyond(&ceiling).is_none(), "{command}: {p:?}");
    }
    // Widening beyond the ceiling: the policy's fault, named, and never skipped (that would also drop what it
    // narrowed): the chain denies even in fail-open mode.
    for (command, needle) in [
        ("net:host", "max_network"),
        ("net:allow=pypi.org", "max_network"),
        ("write:/etc", "max_writable"),
        ("write:any", "max_writable"),
        ("write:/work/../etc", "writable"),
        ("write:relative", "writable"),
    ] {
        let err = scripted
            .evaluate(&confined(command, strict_default(), ceiling.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(needle) && err.contains("scripted"),
            "{command}: {err}"
        );
        let d = chain.evaluate(&confined(command, strict_default(), ceiling.clone()));
        match (needle, &d.outcome) {
            // Beyond the ceiling: denied, whatever the fault mode.
            (n, Outcome::Deny(_)) if n.starts_with("max_") => {}
            // A malformed path is invalid output: fail open skips the policy, so the command keeps the request's
            // confinement (never the malformed one).
            ("writable", Outcome::Run(p)) => {
                assert_eq!(p.confinement, strict_default(), "{command}")
            }
            _ => panic!("{command}: {:?}", d.outcome),
        }
    }
    // Within a wider ceiling the same widening is fine.
    let wide = Confinement::new(Network::Host, Some(vec!["/".into()]));
    let p = plan(
        scripted
            .evaluate(&confined("write:/etc", strict_default(), wide.clone()))
            .unwrap(),
    );
    assert_eq!(p.confinement.writable, Some(vec!["/etc".to_string()]));
    // The chain names the policy that set the confinement.
    let d = chain.evaluate(&confined("net:none", strict_default(), wide));
    assert!(d.confinement_by.is_some_and(|n| n.contains("scripted")));
}

#[test]
fn invalid_rule_ids_are_the_policys_fault() {
    let e = engine(InstanceMode::Reuse);
    let good = e.load_file(SCRIPTED_POLICY.as_ref(), "echo").unwrap();
    let ids: Vec<String> = good.rules().unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["scripted-deny", "scripted-ask", "echo"]);
    let bad = e.load_file(SCRIPTED_POLICY.as_ref(), "bad-rules").unwrap();
    let err = bad.rules().unwrap_err().to_string();
    assert!(
        err.contains("rule") && err.contains("not a valid id"),
        "{err}"
    );
    let err = good
        .evaluate(&Request::new("rule:has space"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("rule"), "{err}");
    let p = plan(good.evaluate(&Request::new("rule:my-rule")).unwrap());
    assert_eq!(p.rules, ["my-rule"]);
}

#[test]
fn a_v0_2_policy_in_a_chain_keeps_the_confinement_a_current_one_set() {
    let e = engine(InstanceMode::Reuse);
    let strict = e.load_default(r#"{"profile": "strict"}"#).unwrap();
    let old = e.load_bytes("default-0.2.wasm", V0_2_DEFAULT, "").unwrap();
    let chain = PolicyChain::new(vec![strict, old], FaultMode::Deny);
    let host = Confinement::new(Network::Host, None);
    let d = chain.evaluate(&confined("curl example.com", host.clone(), host));
    match d.outcome {
        Outcome::Run(p) => assert_eq!(p.confinement.network, Network::None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_v0_3_policy_loads_through_the_adapter_and_decides_as_before() {
    for mode in [InstanceMode::Reuse, InstanceMode::Fresh] {
        let e = engine(mode);
        let info = e.inspect("default-0.3.wasm", V0_3_DEFAULT).unwrap();
        assert_eq!(info.wit_version.as_deref(), Some("0.3.0"));
        assert_eq!(info.adapted_from(), Some("0.3.0"));
        let policy = e.load_bytes("default-0.3.wasm", V0_3_DEFAULT, "").unwrap();
        let rules: Vec<String> = policy.rules().unwrap().into_iter().map(|r| r.id).collect();
        assert!(rules.iter().any(|r| r == "trailing-ampersand"), "{rules:?}");
        let p = plan(policy.evaluate(&Request::new("npm run dev &")).unwrap());
        assert_eq!((p.command.as_str(), p.background), ("npm run dev", true));
        assert!(
            p.rules.iter().any(|r| r == "trailing-ampersand"),
            "{mode:?}"
        );
    }
}

/// A chain's policies in order, each with its settings; the default policy is `default`, the scripted one by its
/// settings.
fn chain(e: &PolicyEngine, members: &[(&str, &str)]) -> PolicyChain {
    let policies = members
        .iter()
        .map(|(which, settings)| match *which {
            "default" => e.load_default(settings).unwrap(),
            _ => e.load_file(SCRIPTED_POLICY.as_ref(), settings).unwrap(),
        })
        .collect();
    PolicyChain::new(policies, FaultMode::Deny)
}

#[test]
fn an_ask_holds_through_the_chain_and_only_a_deny_beats_it() {
    let e = engine(InstanceMode::Reuse);
    // Ask first: the default policy after it still rewrites the plan (the trailing `&`), but cannot make it a run.
    let d = chain(
        &e,
        &[("scripted", "ask:Run the dev server?"), ("default", "")],
    )
    .evaluate(&Request::new("npm run dev &"));
    let Outcome::Ask(ask) = &d.outcome else {
        panic!("expected an ask: {d:?}");
    };
    assert_eq!(ask.question, "Run the dev server?");
    assert_eq!(ask.rule.as_deref(), Some("scripted-ask"));
    assert_eq!(
        (ask.plan.command.as_str(), ask.plan.background),
        ("npm run dev", true)
    );
    assert!(
        ask.plan.rules.iter().any(|r| r == "trailing-ampersand"),
        "{:?}",
        ask.plan.rules
    );
    assert!(
        d.asked_by
            .as_deref()
            .is_some_and(|by| by.contains("scripted")),
        "{d:?}"
    );
    assert_eq!(d.denied_by, None);
    // Ask last: the earlier plan is what is asked about.
    let d = chain(&e, &[("default", ""), ("scripted", "ask:Sure?")])
        .evaluate(&Request::new("sleep 1 &"));
    let ask = d.outcome.ask().expect("an ask");
    assert_eq!(
        (ask.plan.command.as_str(), ask.plan.background),
        ("sleep 1", true)
    );
    // Two policies ask: the person sees both questions, in chain order.
    let d = chain(
        &e,
        &[("scripted", "ask:First?"), ("scripted", "ask:Second?")],
    )
    .evaluate(&Request::new("ls"));
    assert_eq!(d.outcome.ask().expect("an ask").question, "First?\nSecond?");
    // A deny after an ask wins, and nothing is asked.
    let d = chain(&e, &[("scripted", "ask:First?"), ("scripted", "deny:no")])
        .evaluate(&Request::new("ls"));
    assert_eq!(d.outcome.denial().map(|x| x.reason.as_str()), Some("no"));
    assert_eq!(d.asked_by, None);
    assert!(d.denied_by.is_some_and(|by| by.contains("scripted")));
    // An ask's plan is checked like a run's: beyond the ceiling is the policy's fault.
    let mut r = confined("ls", strict_default(), strict_default());
    r.confinement.network = Network::Host;
    let d = chain(&e, &[("scripted", "ask:Widen?")]).evaluate(&r);
    assert!(d.outcome.denial().is_some(), "{d:?}");
    let kinds: Vec<&str> = d.faults.iter().map(|f| f.kind_name()).collect();
    assert_eq!(kinds, ["beyond_ceiling"]);
}
