//! Tests of the case files: parsing, comparing decisions, discovery.

use super::*;
use crate::types::{Denial, Plan};

fn plan(command: &str) -> Plan {
    let mut p = Plan::from_request(&Request::new(command));
    p.background = true;
    p.on_timeout = OnTimeout::Background;
    p.notes = vec!["Removed the trailing `&`".into()];
    p.rules = vec!["trailing-ampersand".into()];
    p
}

#[test]
fn parse_and_compare() {
    let file = CaseFile::parse(
        r#"
        [[case]]
        name = "amp"
        command = "x &"
        expect = { decision = "run", command = "x", background = true, timeout = "none", notes_contain = "trailing" }
        "#,
    )
    .unwrap();
    let case = &file.cases[0];
    assert!(compare(&case.expect, &Outcome::Run(plan("x"))).is_empty());
    let m = compare(&case.expect, &Outcome::Run(plan("x &")));
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].field, "command");
    assert_eq!(m[0].expected, "\"x\"");
    assert_eq!(m[0].actual, "\"x &\"");
    let m = compare(&case.expect, &Outcome::deny("no"));
    assert_eq!(m[0].field, "decision");
}

#[test]
fn confinement_rules_and_start_up_wait_are_compared() {
    let file = CaseFile::parse(
        r#"
        [[case]]
        name = "strict"
        command = "x"
        network = "host"
        writable = ["/w", "/tmp"]
        max_network = "host"
        expect = { decision = "run", network = "none", writable = ["/w"], startup_wait = "none", rules = "trailing-ampersand" }

        [[case]]
        name = "refused"
        command = "sudo x"
        expect = { decision = "deny", rule = "sudo" }
        "#,
    )
    .unwrap();
    let case = &file.cases[0];
    let request = case.request();
    assert_eq!(
        request.confinement.writable,
        Some(vec!["/w".to_string(), "/tmp".to_string()])
    );
    assert_eq!(
        request.ceiling, request.confinement,
        "the ceiling defaults to the defaults"
    );
    let mut p = plan("x");
    let m = compare(&case.expect, &Outcome::Run(p.clone()));
    let fields: Vec<&str> = m.iter().map(|m| m.field.as_str()).collect();
    assert_eq!(fields, ["network", "writable"], "{m:?}");
    p.confinement = Confinement::new(Network::None, Some(vec!["/w".into()]));
    assert!(compare(&case.expect, &Outcome::Run(p.clone())).is_empty());
    p.rules.clear();
    assert_eq!(compare(&case.expect, &Outcome::Run(p)).len(), 1);
    let deny = &file.cases[1].expect;
    assert!(compare(deny, &Outcome::Deny(Denial::new("no").with_rule("sudo"))).is_empty());
    assert_eq!(compare(deny, &Outcome::deny("no"))[0].field, "rule");
    assert_eq!(
        outcome_kinds(&Request::new("x &"), &Outcome::Run(plan("x"))),
        ["run", "rewrite", "background", "note"]
    );
    for (text, needle) in [
        ("network = \"wide\"", "network"),
        ("writable = \"all\"", "writable"),
        ("startup_wait = \"soon\"", "startup_wait"),
    ] {
        let e = CaseFile::parse(&format!(
            "[[case]]\nname = \"a\"\ncommand = \"x\"\n{text}\nexpect = {{ decision = \"run\" }}\n"
        ))
        .unwrap_err();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn an_ask_is_compared_by_its_question_rule_and_plan() {
    let file = CaseFile::parse(
        r#"
        [[case]]
        name = "reset"
        command = "git reset --hard"
        expect = { decision = "ask", question_contains = ["uncommitted", "reset"], rule = "git-discard", command = "git reset --hard" }
        "#,
    )
    .unwrap();
    let expect = &file.cases[0].expect;
    let ask = |q: &str, rule: &str, command: &str| {
        Outcome::Ask(crate::types::Ask::new(plan(command), q).with_rule(rule))
    };
    let q = "Discard uncommitted changes (git reset)?";
    assert!(compare(expect, &ask(q, "git-discard", "git reset --hard")).is_empty());
    let m = compare(expect, &ask("Sure?", "other", "git reset"));
    let fields: Vec<&str> = m.iter().map(|m| m.field.as_str()).collect();
    assert_eq!(fields, ["question", "question", "rule", "command"], "{m:?}");
    let m = compare(expect, &Outcome::Run(plan("git reset --hard")));
    assert_eq!(
        (m[0].field.as_str(), m[0].expected.as_str()),
        ("decision", "ask")
    );
    let m = compare(expect, &Outcome::deny("no"));
    assert_eq!(m[0].actual, "deny: \"no\"");
    // A run expectation shows an ask as what it got.
    let run = CaseFile::parse(
        "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"run\" }\n",
    )
    .unwrap();
    let m = compare(&run.cases[0].expect, &ask("Sure?", "r", "x"));
    assert_eq!(m[0].actual, "ask: \"Sure?\"");
    assert_eq!(
        outcome_kinds(&Request::new("x &"), &ask("Sure?", "r", "x")),
        ["ask", "rewrite", "background", "note"]
    );
}

#[test]
fn bad_files_say_what_is_wrong() {
    for (text, needle) in [
        ("", "no [[case]]"),
        ("[[case]]\nname = \"a\"\ncommand = \"x\"\n", "expect"),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"maybe\" }\n",
            "maybe",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\ntimeout = \"soon\"\nexpect = { decision = \"run\" }\n",
            "timeout",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"deny\", command = \"y\" }\n",
            "reason_contains",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"ask\", reason_contains = \"y\" }\n",
            "question_contains",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"run\", question_contains = \"y\" }\n",
            "question_contains",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\nexpect = { decision = \"run\" }\n[[case]]\nname = \"a\"\ncommand = \"y\"\nexpect = { decision = \"run\" }\n",
            "twice",
        ),
        (
            "[[case]]\nname = \"a\"\ncommand = \"x\"\ncolour = 1\nexpect = { decision = \"run\" }\n",
            "colour",
        ),
    ] {
        let e = CaseFile::parse(text).unwrap_err();
        assert!(e.contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn settings_per_policy() {
    let file = CaseFile::parse(
        r#"
        settings = [{ a = 1 }, "raw"]
        [[case]]
        name = "a"
        command = "x"
        expect = { decision = "run" }
        "#,
    )
    .unwrap();
    let s = file.settings.unwrap();
    assert_eq!(s.for_policy(0).unwrap(), r#"{"a":1}"#);
    assert_eq!(s.for_policy(1).unwrap(), "raw");
    assert_eq!(s.for_policy(2).unwrap(), "");
}
