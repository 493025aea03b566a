//! `shellward audit show | tail`: an audit log read as a person reads it — one line per record, the model's text
//! escaped, filters by session, type, decision and age, `--json`, and `tail --follow` printing records as they come.

#![cfg(unix)]

use std::io::{BufRead, Write};

/// A log with a run, a deny and a command full of control and bidirectional characters, written by `shellward run`.
fn a_log(dir: &std::path::Path) -> std::path::PathBuf {
    let config = crate::cli::write_file(dir, "sw.toml", "[audit]\npath = \"audit.jsonl\"\n");
    for command in ["echo hi", "rm -rf /", "echo '\u{1b}[2Jgone\u{202e}txt.exe'"] {
        let o =
            crate::cli::shellward(&["run", "--config", config.to_str().unwrap(), "--", command])
                .current_dir(dir)
                .output()
                .unwrap();
        assert!(o.status.code().is_some(), "{}", crate::cli::stderr(&o));
    }
    dir.join("audit.jsonl")
}

fn audit(args: &[&str]) -> (i32, String, String) {
    let o = crate::cli::output(&[&["audit"][..], args].concat());
    (
        o.status.code().unwrap_or(-1),
        crate::cli::stdout(&o),
        crate::cli::stderr(&o),
    )
}

#[test]
fn the_audit_log_reads_as_lines_filtered_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let log = a_log(dir.path());
    let file = log.to_str().unwrap();
    let (code, out, err) = audit(&["show", file]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "two runs with their ends, one deny:\n{out}");
    assert!(lines[0].contains("decision run   echo hi"), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("decision deny  rm -rf /") && l.contains("by guard")),
        "{out}"
    );
    // The model's text is shown, never interpreted by the terminal.
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    assert!(
        out.contains("\\x1b[2Jgone") && out.contains("\\u{202e}"),
        "{out}"
    );
    let (_, denies, _) = audit(&["show", file, "--decision", "deny"]);
    assert_eq!(denies.lines().count(), 1, "{denies}");
    let (_, ends, _) = audit(&["show", file, "--type", "end"]);
    assert_eq!(ends.lines().count(), 2, "{ends}");
    assert!(
        ends.lines()
            .all(|l| l.contains(" end ") && l.contains("exit 0")),
        "{ends}"
    );
    let (_, other, _) = audit(&["show", file, "--session", "agent-a"]);
    assert!(other.is_empty(), "no record of that session: {other}");
    let (_, json, _) = audit(&["show", file, "--json"]);
    assert_eq!(json.lines().count(), 5);
    for l in json.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["type"].is_string(), "{v}");
        assert!(!l.contains('\u{202e}'), "{l:?}");
    }
    // An old record is left out by --since; the last one alone by tail -n 1.
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(
        f,
        r#"{{"type":"cancel","time":1000.0,"process_id":"p9-old","action":"stopped"}}"#
    )
    .unwrap();
    let (_, recent, _) = audit(&["show", file, "--since", "1h"]);
    assert_eq!(recent.lines().count(), 5, "{recent}");
    let (_, last, _) = audit(&["tail", file, "-n", "1"]);
    assert_eq!(last.lines().count(), 1, "{last}");
    assert!(last.contains("cancel") && last.contains("p9-old"), "{last}");
    // Undo records: what was put back, or why not; `--type undo` finds them.
    writeln!(
        f,
        r#"{{"type":"undo","time":2000.0,"process_id":"p3-x","command":"rm -rf src","restored":3,"removed":1,"forced":false}}"#
    )
    .unwrap();
    writeln!(
        f,
        r#"{{"type":"undo","time":2001.0,"process_id":"p3-x","refused":"cannot undo: p3-x was already undone"}}"#
    )
    .unwrap();
    let (_, undos, _) = audit(&["show", file, "--type", "undo"]);
    let undos: Vec<&str> = undos.lines().collect();
    assert_eq!(undos.len(), 2, "{undos:?}");
    assert!(
        undos[0].contains("undo     p3-x restored 3, removed 1: rm -rf src"),
        "{undos:?}"
    );
    assert!(
        undos[1].contains("refused: cannot undo: p3-x was already undone"),
        "{undos:?}"
    );
    // Bad input: said, with what to give.
    let (code, _, err) = audit(&["show", file, "--since", "soon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--since") && err.contains("30s"), "{err}");
    let (code, _, err) = audit(&["show", "/nonexistent/audit.jsonl"]);
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/audit.jsonl"), "{err}");
}

#[test]
fn tail_follow_prints_records_as_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    let mut child = crate::cli::shellward(&[
        "audit",
        "tail",
        log.to_str().unwrap(),
        "--follow",
        "--type",
        "end",
    ])
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(
        f,
        r#"{{"type":"decision","time":2000.0,"outcome":"run","command":"skip me"}}"#
    )
    .unwrap();
    // Written in two parts: a record is printed once whole.
    write!(f, r#"{{"type":"end","time":2000.0,"process_id":"p1-"#).unwrap();
    f.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    writeln!(f, r#"new","exit_code":3,"duration_ms":5}}"#).unwrap();
    let line = rx.recv_timeout(std::time::Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("the new record was printed");
    assert!(
        line.contains("end") && line.contains("p1-new") && line.contains("exit 3"),
        "{line}"
    );
    assert!(rx.try_recv().is_err(), "the decision was not asked for");
}

/// An end record names the Unix sockets the sandbox refused the command, escaped like every text of the model's.
#[test]
fn an_end_record_shows_the_refused_unix_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::write(
        &log,
        "{\"type\":\"end\",\"time\":1000.0,\"session\":\"s\",\"process_id\":\"p1-x\",\"exit_code\":1,\
         \"duration_ms\":12,\"refused_sockets\":[\"/run/docker.sock\",\"/tmp/a\\u001b[2J.sock\"],\
         \"refused_writes\":[\"/etc/motd\"],\"refused_network\":[\"203.0.113.7:443\"]}\n",
    )
    .unwrap();
    let (code, out, err) = audit(&["show", log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("refused Unix sockets: /run/docker.sock, /tmp/a\\x1b[2J.sock"),
        "{out}"
    );
    assert!(
        out.contains("refused writes: /etc/motd; refused network: 203.0.113.7:443"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "{out:?}");
}
