//! `shellward policy test | bench | inspect` end to end: every example policy passes its case file, a wrong case
//! fails with a diff, and inspect explains compatibility. (A Python component is built and tested by
//! `cli_policy_new`'s Python scaffold.)

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{root, text};

use shellward_policy::embedded::guests;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `shellward ARGS` to its end, in the workspace's root.
fn shellward(args: &[&str]) -> Output {
    crate::cli::shellward(args)
        .current_dir(root())
        .output()
        .expect("run shellward")
}

/// The (passed, failed) counts of the summary line.
fn summary(o: &Output) -> (usize, usize) {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("no summary in:\n{}", text(o)));
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

fn all_pass(o: &Output) -> usize {
    let (passed, failed) = summary(o);
    assert!(
        o.status.success() && failed == 0 && passed > 0,
        "{}",
        text(o)
    );
    passed
}

/// A scratch directory holding `name` with `contents` (kept while the directory lives), and the file's path.
/// A case file of `tests/fixtures/cases`.
fn case_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cases")
        .join(name)
}

fn scratch_file(name: &str, contents: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::cli::write_file(dir.path(), name, contents);
    (dir, path)
}

#[test]
fn the_default_policy_passes_its_discovered_case_file() {
    let o = shellward(&["policy", "test", "default"]);
    let passed = all_pass(&o);
    let cases = std::fs::read_to_string(root().join("policies/default/cases.toml")).unwrap();
    assert_eq!(passed, cases.matches("[[case]]").count(), "every case ran");
}

#[test]
fn the_rust_guard_passes_its_case_file() {
    let o = shellward(&["policy", "test", guests::GUARD_POLICY]);
    all_pass(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("policies/guard/cases.toml"));
}

/// The guard's Windows reading: `cmd` and PowerShell lines (and any line on Windows) against the Windows case file,
/// every case run.
#[test]
fn the_guard_reads_windows_lines() {
    let path = "policies/guard/cases-windows.toml";
    let o = shellward(&["policy", "test", "guard", path]);
    let passed = all_pass(&o);
    let cases = std::fs::read_to_string(root().join(path)).unwrap();
    assert_eq!(passed, cases.matches("[[case]]").count(), "every case ran");
}

/// `component` with a custom section appended that makes it `size` bytes or more: a large component (as a Python
/// policy is) that compiles in milliseconds, because custom sections hold no code.
fn padded(component: &Path, size: usize, out: &Path) -> PathBuf {
    fn leb128(mut n: usize, to: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                to.push(byte);
                return;
            }
            to.push(byte | 0x80);
        }
    }
    let mut bytes = std::fs::read(component).unwrap();
    let name = b"shellward-test-padding";
    let payload = size.saturating_sub(bytes.len());
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name);
    body.resize(body.len() + payload, 0);
    bytes.push(0); // a custom section
    leb128(body.len(), &mut bytes);
    bytes.extend_from_slice(&body);
    crate::cli::write_file(out, "padded.wasm", &bytes)
}

/// A first use of a large component (over 1 MB, as a Python policy is: seconds of compiling) says, in one line, that
/// it compiles once and is cached; a second use is quiet. The notice depends on the size alone, so a Rust guard
/// padded past it stands in for the Python one and the test compiles nothing heavy of its own.
#[test]
fn the_first_use_of_a_large_component_says_it_compiles_once() {
    let scratch = tempfile::tempdir().unwrap();
    let large = padded(Path::new(guests::GUARD_POLICY), 3 << 20, scratch.path());
    let large = large.to_str().unwrap();
    // The padding changes nothing the policy decides.
    let cases = shellward(&["policy", "test", large, "policies/guard/cases.toml"]);
    assert!(all_pass(&cases) > 0);
    let cache = tempfile::tempdir().unwrap();
    let cold = |args: &[&str]| {
        Command::new(crate::cli::bin())
            .args(args)
            .current_dir(root())
            .env("SHELLWARD_CACHE_DIR", cache.path())
            .env_remove("SHELLWARD_LOG")
            .output()
            .unwrap()
    };
    let first = cold(&[
        "policy",
        "test",
        large,
        "policies/guard/cases.toml",
        "--filter",
        "fork bomb",
    ]);
    assert_eq!(all_pass(&first), 2);
    let notice = String::from_utf8_lossy(&first.stderr);
    assert_eq!(
        notice.lines().filter(|l| l.contains("compiling a")).count(),
        1,
        "{notice}"
    );
    assert!(notice.contains("compiling a 3.1 MB policy"), "{notice}");
    assert!(notice.contains("cached in"), "{notice}");
    // A second use is quiet, and so is the unpadded guard, under the size: each runs its cases with no notice.
    let quiet = |component: &str| {
        let o = cold(&[
            "policy",
            "test",
            component,
            "policies/guard/cases.toml",
            "--filter",
            "fork bomb",
        ]);
        assert_eq!(all_pass(&o), 2);
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("compiling a"),
            "{component}: {}",
            text(&o)
        );
    };
    quiet(large);
    quiet(guests::GUARD_POLICY);
}

#[test]
fn a_wrong_case_fails_with_a_diff() {
    let cases = case_fixture("wrong.toml");
    let path = cases.to_str().unwrap();
    let o = shellward(&["policy", "test", "default", path]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(summary(&o), (1, 2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("  ok    right"), "{out}");
    assert!(out.contains("  FAIL  deliberately wrong"), "{out}");
    for line in [
        "command:",
        "expected: \"npm run dev &\"",
        "actual:   \"npm run dev\"",
        "mode:",
        "expected: foreground",
        "actual:   background",
        "timeout:",
        "expected: 1m",
        "actual:   none",
        "decision:",
        "expected: deny",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }

    // --filter and --json.
    let o = shellward(&[
        "policy", "test", "default", path, "--filter", "wrong", "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["passed"], 0);
    assert_eq!(v["failed"], 2);
    assert_eq!(v["cases"][0]["name"], "deliberately wrong");
    assert_eq!(v["cases"][0]["mismatches"][0]["field"], "command");
}

#[test]
fn bad_case_files_are_errors_that_say_where() {
    let (_dir, cases) = scratch_file(
        "bad.toml",
        "[[case]]\nname = \"x\"\ncommand = \"ls\"\nexpect = { decision = \"perhaps\" }\n",
    );
    let o = shellward(&["policy", "test", "default", cases.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml") && err.contains("perhaps"), "{err}");
}

#[test]
fn a_chain_is_tested_in_order() {
    let cases = case_fixture("chain.toml");
    let o = shellward(&[
        "policy",
        "test",
        "--policy",
        "default",
        "--policy",
        guests::GUARD_POLICY,
        cases.to_str().unwrap(),
    ]);
    assert_eq!(all_pass(&o), 4);
}

#[test]
fn inspect_explains_compatibility() {
    let o = shellward(&["policy", "inspect", "default", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["package"],
        format!("shellward:policy@{}", shellward_policy::WIT_VERSION)
    );
    assert_eq!(v["compatible"], true);
    assert_eq!(v["adapted"], false);
    assert!(v["size_bytes"].as_u64().unwrap() > 1000);
    assert!(
        v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| *e == format!("shellward:policy/policy@{}", shellward_policy::WIT_VERSION))
    );
    // A policy built for 0.2: through the 0.2 adapter, which says what it does not see.
    let v02 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/tests/fixtures/default-policy-v0.2.wasm");
    let o = shellward(&["policy", "inspect", v02.to_str().unwrap()]);
    let out = text(&o);
    assert!(
        out.contains("through the 0.2 adapter") && out.contains("confinement"),
        "{out}"
    );

    // A policy built for 0.1: still compatible, through the adapter, and said so.
    let old = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/tests/fixtures/default-policy-v0.1.wasm");
    let o = shellward(&["policy", "inspect", old.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["package"], "shellward:policy@0.1.0");
    assert_eq!(
        (v["compatible"].clone(), v["adapted"].clone()),
        (true.into(), true.into())
    );
    let o = shellward(&["policy", "inspect", old.to_str().unwrap()]);
    let out = text(&o);
    assert!(out.contains("built for:   shellward:policy@0.1.0"), "{out}");
    assert!(out.contains("through the 0.1 adapter"), "{out}");
    // And it runs: `policy check` through it.
    let o = shellward(&[
        "policy",
        "check",
        "--policy",
        old.to_str().unwrap(),
        "--",
        "npm run dev &",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("background"), "{}", text(&o));

    let o = shellward(&["policy", "inspect", guests::FUTURE_POLICY]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("compatible:  no")
            && out.contains("1.0.0")
            && out.contains(&shellward_policy::supported_ranges()),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let junk = crate::cli::write_file(dir.path(), "junk.wasm", b"not wasm at all");
    let o = shellward(&["policy", "inspect", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("junk.wasm"));
}

#[test]
fn bench_reports_latency_and_load_times() {
    let o = shellward(&[
        "policy",
        "bench",
        "default",
        "--iterations",
        "300",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for mode in ["reused_instance", "fresh_instance"] {
        let m = &v[mode];
        let (min, median, p99) = (
            m["min_ns"].as_u64().unwrap(),
            m["median_ns"].as_u64().unwrap(),
            m["p99_ns"].as_u64().unwrap(),
        );
        assert!(0 < min && min <= median && median <= p99, "{mode}: {m}");
    }
    assert_eq!(v["reused_instance"]["evaluations"], 300);
    assert!(v["load_cold_cache_ms"].as_f64().unwrap() > 0.0);
    assert!(v["load_warm_cache_ms"].as_f64().unwrap() > 0.0);
    assert!(
        v["requests"].as_u64().unwrap() > 10,
        "requests come from the discovered case file"
    );
}

/// CI formats: JUnit XML (well-formed, one testcase per case, a failure with expected and actual, hostile names
/// escaped) and TAP 13 (a plan line, ok / not ok, a YAML block), both exiting non-zero on a failure.
#[test]
fn test_results_come_as_junit_and_tap_for_ci() {
    let (_dir, cases) = scratch_file(
        "cases.toml",
        "[[case]]\nname = \"ls runs\"\ncommand = \"ls\"\nexpect = { decision = \"run\" }\n\n\
         [[case]]\nname = \"a <wrong> & \\\"quoted\\\" case # not a directive\"\ncommand = \"ls\"\nexpect = { decision = \"deny\" }\n",
    );
    let cases = cases.to_str().unwrap();
    let o = shellward(&["policy", "test", "default", cases, "--format", "junit"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let xml = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
    assert!(xml.contains("expected deny, got run"), "{xml}");
    // Well-formed, as a CI dashboard's parser reads it.
    let python = shellward_test_support::python::python().unwrap_or_else(|e| panic!("{e}"));
    let mut parse = Command::new(&python)
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; r = E.parse(sys.stdin).getroot(); \
             print(len(r.findall('.//testcase')), r.find('.//failure').get('message'))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    parse
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let parsed = parse.wait_with_output().unwrap();
    assert!(parsed.status.success(), "not well-formed XML:\n{xml}");
    assert!(String::from_utf8_lossy(&parsed.stdout).starts_with("2 decision: expected deny"));
    let o = shellward(&["policy", "test", "default", cases, "--format", "tap"]);
    assert_eq!(o.status.code(), Some(1));
    let tap = String::from_utf8_lossy(&o.stdout).to_string();
    let lines: Vec<&str> = tap.lines().collect();
    assert_eq!(&lines[..2], ["TAP version 13", "1..2"], "{tap}");
    assert!(
        lines[2].starts_with("ok 1 - ") && lines[3].starts_with("not ok 2 - "),
        "{tap}"
    );
    assert!(lines[3].contains("\\# not a directive"), "{tap}");
    assert!(
        tap.contains("  ---\n") && tap.contains("expected: \"deny\"") && tap.contains("  ...\n"),
        "{tap}"
    );
    // All passing: exit 0.
    let o = shellward(&["policy", "test", "default", "--format", "junit"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("<failure"));
}

/// `--coverage` lists the policy's rules with how many cases hit each, and `--min-coverage` fails a run that leaves
/// too many untested; for a policy that names no rules (built against 0.2), the outcome kinds are counted instead.
#[test]
fn coverage_names_the_rules_no_case_exercised() {
    let (dir, cases) = scratch_file(
        "cases.toml",
        "[[case]]\nname = \"amp\"\ncommand = \"npm run dev &\"\n\
         expect = { decision = \"run\", background = true, rules = \"trailing-ampersand\" }\n\n\
         [[case]]\nname = \"zero\"\ncommand = \"make\"\ntimeout = \"0s\"\nexpect = { decision = \"deny\", rule = \"timeout-zero\" }\n",
    );
    let cases = cases.to_str().unwrap();
    let o = shellward(&["policy", "test", "default", cases, "--coverage"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("coverage: "), "{out}");
    let line = |id: &str| {
        out.lines()
            .find(|l| l.split_whitespace().any(|w| w == id))
            .unwrap_or_else(|| panic!("{id} missing:\n{out}"))
            .to_string()
    };
    assert!(line("trailing-ampersand").contains("1 case"), "{out}");
    assert!(line("timeout-zero").contains("1 case"), "{out}");
    assert!(line("promotion").contains("never"), "{out}");
    // A threshold the two cases do not reach fails the run and names what to add.
    let o = shellward(&["policy", "test", "default", cases, "--min-coverage", "90"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains("below --min-coverage 90") && err.contains("promotion"),
        "{err}"
    );
    // JSON carries the same report; JUnit keeps stdout XML and reports coverage on stderr.
    let coverage_as = |format| {
        shellward(&[
            "policy",
            "test",
            "default",
            cases,
            "--coverage",
            "--format",
            format,
        ])
    };
    let o = coverage_as("json");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["coverage"]["basis"], "rules");
    assert!(missed(&v).contains(&"promotion"), "{v}");
    let o = coverage_as("junit");
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("<?xml"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("coverage: "));
    // A 0.2 policy names no rules: the outcome kinds are the basis.
    let old = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/tests/fixtures/default-policy-v0.2.wasm");
    let plain = crate::cli::write_file(
        dir.path(),
        "plain.toml",
        "[[case]]\nname = \"amp\"\ncommand = \"npm run dev &\"\nexpect = { decision = \"run\", background = true }\n",
    );
    let o = shellward(&[
        "policy",
        "test",
        old.to_str().unwrap(),
        plain.to_str().unwrap(),
        "--coverage",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["coverage"]["basis"], "outcomes");
    let missed = missed(&v);
    assert!(
        missed.contains(&"deny") && !missed.contains(&"rewrite"),
        "{missed:?}"
    );
}

/// The guard names its rules: a case file reduced to one of them leaves the others reported as never hit, and a
/// threshold fails the run naming them.
#[test]
fn coverage_names_the_guard_rules_a_reduced_case_file_never_hits() {
    let (_dir, cases) = scratch_file(
        "reduced.toml",
        "[[case]]\nname = \"sudo\"\ncommand = \"sudo ls\"\nexpect = { decision = \"ask\", rule = \"privilege\" }\n",
    );
    let o = shellward(&[
        "policy",
        "test",
        guests::GUARD_POLICY,
        cases.to_str().unwrap(),
        "--coverage",
        "--min-coverage",
        "50",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"], 0, "{v}");
    let missed = missed(&v);
    assert!(
        missed.contains(&"fork-bomb")
            && missed.contains(&"rm-root")
            && !missed.contains(&"privilege"),
        "{missed:?}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("fork-bomb"),
        "{}",
        text(&o)
    );
}

/// The rule ids (or outcome kinds) a coverage report in JSON names as missed.
fn missed(report: &serde_json::Value) -> Vec<&str> {
    report["coverage"]["missed"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m.as_str()).collect())
        .unwrap_or_default()
}
