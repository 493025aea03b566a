//! The input digest of Coder's tracked starts (`workspacesdk.StartProcessDigest`): SHA-256, in hex, of the start
//! request as Go's `encoding/json` marshals it with its identity zeroed. Reproducing it byte for byte means writing
//! JSON as Go does: fields in the struct's order, `omitempty` as Go applies it (never to a UUID, an array, or a
//! `time.Time`, a struct), map keys sorted, HTML characters and U+2028/U+2029 escaped, times in RFC 3339 with
//! nanoseconds trimmed, in UTC (the digest normalises the zone).

use chrono::{DateTime, Datelike, Timelike, Utc};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The nil UUID as Go's `uuid.UUID` marshals it.
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// What a tracked start asks to run (the fields the digest covers).
pub struct StartInput<'a> {
    /// The command (`command`).
    pub command: &'a str,
    /// The working directory (`workdir`, omitted when empty).
    pub workdir: &'a str,
    /// Extra environment (`env`, omitted when empty; Go sorts the keys).
    pub env: &'a BTreeMap<String, String>,
    /// `background` (omitted when false).
    pub background: bool,
    /// `deadline`, an instant; `None` is Go's zero time.
    pub deadline: Option<DateTime<Utc>>,
}

/// `StartProcessDigest`: the hex SHA-256 of the request marshalled with `process_id`, `agent_instance_id` nil and
/// `input_digest` empty.
pub fn start_digest(input: &StartInput<'_>) -> String {
    let json = start_json(input);
    Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The request as Go marshals it for the digest.
fn start_json(input: &StartInput<'_>) -> String {
    let mut out = String::from("{\"command\":");
    push_string(&mut out, input.command);
    if !input.workdir.is_empty() {
        out.push_str(",\"workdir\":");
        push_string(&mut out, input.workdir);
    }
    if !input.env.is_empty() {
        out.push_str(",\"env\":{");
        for (i, (k, v)) in input.env.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_string(&mut out, k);
            out.push(':');
            push_string(&mut out, v);
        }
        out.push('}');
    }
    if input.background {
        out.push_str(",\"background\":true");
    }
    out.push_str(",\"process_id\":\"");
    out.push_str(NIL_UUID);
    out.push_str("\",\"agent_instance_id\":\"");
    out.push_str(NIL_UUID);
    out.push_str("\",\"deadline\":");
    push_string(&mut out, &go_time(input.deadline));
    out.push('}');
    out
}

/// A time as Go's `time.Time` marshals it in UTC: RFC 3339 with the nanoseconds' trailing zeros trimmed, `Z`; the zero
/// time is `0001-01-01T00:00:00Z`.
pub fn go_time(t: Option<DateTime<Utc>>) -> String {
    match t {
        None => "0001-01-01T00:00:00Z".to_string(),
        Some(t) => {
            let mut s = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            );
            let nanos = t.nanosecond() % 1_000_000_000;
            if nanos != 0 {
                s.push('.');
                s.push_str(format!("{nanos:09}").trim_end_matches('0'));
            }
            s.push('Z');
            s
        }
    }
}

/// A string as Go's `encoding/json` writes it (with `SetEscapeHTML(true)`, the default).
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(command: &'a str, env: &'a BTreeMap<String, String>) -> StartInput<'a> {
        StartInput {
            command,
            workdir: "",
            env,
            background: false,
            deadline: None,
        }
    }

    /// The bytes Go writes, as its rules give them: UUIDs and the zero time are never omitted, empty strings, maps
    /// and false are; keys sorted; HTML and line separators escaped.
    #[test]
    fn the_request_is_marshalled_as_go_marshals_it() {
        let none = BTreeMap::new();
        assert_eq!(
            start_json(&input("echo hi", &none)),
            "{\"command\":\"echo hi\",\"process_id\":\"00000000-0000-0000-0000-000000000000\",\
             \"agent_instance_id\":\"00000000-0000-0000-0000-000000000000\",\"deadline\":\"0001-01-01T00:00:00Z\"}"
        );
        let env: BTreeMap<String, String> = [("Z", "1"), ("A", "x<y>&z")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let deadline = DateTime::parse_from_rfc3339("2026-12-04T13:00:00.250-08:00")
            .unwrap()
            .with_timezone(&Utc);
        let full = StartInput {
            command: "printf '%s\\n' \"a\tb\" \u{1} \u{2028}",
            workdir: "/w",
            env: &env,
            background: true,
            deadline: Some(deadline),
        };
        assert_eq!(
            start_json(&full),
            "{\"command\":\"printf '%s\\\\n' \\\"a\\tb\\\" \\u0001 \\u2028\",\"workdir\":\"/w\",\
             \"env\":{\"A\":\"x\\u003cy\\u003e\\u0026z\",\"Z\":\"1\"},\"background\":true,\
             \"process_id\":\"00000000-0000-0000-0000-000000000000\",\
             \"agent_instance_id\":\"00000000-0000-0000-0000-000000000000\",\"deadline\":\"2026-12-04T21:00:00.25Z\"}"
        );
        // Whole seconds carry no fraction; nanoseconds are kept to the last non-zero digit.
        let whole = DateTime::parse_from_rfc3339("2026-12-04T21:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(go_time(Some(whole)), "2026-12-04T21:00:00Z");
        let nanos = DateTime::parse_from_rfc3339("2026-12-04T21:00:00.000000123Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(go_time(Some(nanos)), "2026-12-04T21:00:00.000000123Z");
        // The digest is the hex SHA-256 of those bytes.
        let d = start_digest(&input("echo hi", &none));
        assert_eq!(d.len(), 64);
        assert_eq!(
            d,
            Sha256::digest(start_json(&input("echo hi", &none)).as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
    }
}
