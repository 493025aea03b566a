//! Human durations: `500ms`, `30s`, `5m`, `1m30s`, `2h`, `1h30m15s`, and the forms people write or say: `2 s`,
//! `5 seconds`, `1 minute 30 seconds`, `1.5s`, `2 hours`, `100 msec`.
//!
//! The accepted grammar is one or more `<number><unit>` groups, optionally separated by spaces, with units (any case)
//! `h` (`hr`, `hrs`, `hour`, `hours`), `m` (`min`, `mins`, `minute`, `minutes`), `s` (`sec`, `secs`, `second`,
//! `seconds`), `ms` (`msec`, `millisecond`, `milliseconds`) in decreasing order, each unit at most once. A number may
//! have a fraction (`1.5s`, `0.25h`) that comes out to whole milliseconds. A bare number is refused (is `30` seconds
//! or milliseconds?) so callers get an error that names the accepted forms instead of a silently wrong timeout.

use std::fmt;

/// Text naming the accepted duration forms, for error messages.
pub const ACCEPTED_FORMS: &str = "a number followed by a unit, e.g. 500ms, 30s, 5m, 1m30s or 2h (units: h, m, s, ms; \
     also written out, as in \"5 seconds\" or \"1 minute 30 seconds\")";

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    /// The text that was refused.
    pub input: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: {}; use {}",
            self.input, self.problem, ACCEPTED_FORMS
        )
    }
}

impl std::error::Error for DurationError {}

/// A unit's rank (h=0 … ms=3: units must strictly increase) and milliseconds, by any of its names.
fn unit(name: &str) -> Option<(u8, u64)> {
    Some(match name.to_ascii_lowercase().as_str() {
        "h" | "hr" | "hrs" | "hour" | "hours" => (0, 3_600_000),
        "m" | "min" | "mins" | "minute" | "minutes" => (1, 60_000),
        "s" | "sec" | "secs" | "second" | "seconds" => (2, 1_000),
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => (3, 1),
        _ => return None,
    })
}

/// Parses a duration string into milliseconds.
///
/// Zero (`0s`) parses to `0`: whether zero is acceptable is the caller's decision. Negative values, bare numbers,
/// unknown units, repeated or out-of-order units, fractions finer than a millisecond and overflow are errors.
pub fn parse_millis(input: &str) -> Result<u64, DurationError> {
    let err = |problem: &str| DurationError {
        input: input.to_string(),
        problem: problem.to_string(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("it is empty"));
    }
    if s.starts_with('-') {
        return Err(err("it is negative"));
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total: u64 = 0;
    let mut last_rank: Option<u8> = None;
    let skip_spaces = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i] == b' ' {
            *i += 1;
        }
    };
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(err("expected a number"));
        }
        let whole: u64 = s[start..i]
            .parse()
            .map_err(|_| err("the number is too large"))?;
        // An optional fraction: its digits and how many there are.
        let mut fraction = (0u64, 0u32);
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            let f = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if f == i || i - f > 9 {
                return Err(err("a fraction needs 1 to 9 digits after the point"));
            }
            fraction = (
                s[f..i].parse().map_err(|_| err("bad fraction"))?,
                (i - f) as u32,
            );
        }
        skip_spaces(&mut i);
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let (rank, factor) = match &s[unit_start..i] {
            "" => return Err(err("a number has no unit")),
            name => unit(name).ok_or_else(|| err(&format!("unknown unit {name:?}")))?,
        };
        if last_rank.is_some_and(|r| r >= rank) {
            return Err(err("units must appear once each, largest first"));
        }
        last_rank = Some(rank);
        let scale = 10u64.pow(fraction.1);
        let part = fraction.0 * factor;
        if !part.is_multiple_of(scale) {
            return Err(err("the fraction is finer than a millisecond"));
        }
        total = whole
            .checked_mul(factor)
            .and_then(|v| v.checked_add(part / scale))
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| err("the duration is too large"))?;
        skip_spaces(&mut i);
    }
    Ok(total)
}

/// Formats milliseconds compactly in the same grammar [`parse_millis`] accepts (`90000` → `1m30s`).
pub fn format_millis(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, factor) in [("h", 3_600_000u64), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        let n = rest / factor;
        if n > 0 {
            out.push_str(&n.to_string());
            out.push_str(unit);
            rest %= factor;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_unit_and_combinations() {
        assert_eq!(parse_millis("500ms"), Ok(500));
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("5m"), Ok(300_000));
        assert_eq!(parse_millis("1m30s"), Ok(90_000));
        assert_eq!(parse_millis("2h"), Ok(7_200_000));
        assert_eq!(parse_millis("1h2m3s4ms"), Ok(3_723_004));
        assert_eq!(parse_millis(" 10s "), Ok(10_000));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn parses_the_forms_people_write_and_say() {
        assert_eq!(parse_millis("2 s"), Ok(2_000));
        assert_eq!(parse_millis("5 seconds"), Ok(5_000));
        assert_eq!(parse_millis("1 minute 30 seconds"), Ok(90_000));
        assert_eq!(parse_millis("1m 30s"), Ok(90_000));
        assert_eq!(parse_millis("2 hours"), Ok(7_200_000));
        assert_eq!(parse_millis("1 hr 5 min"), Ok(3_900_000));
        assert_eq!(parse_millis("100 msec"), Ok(100));
        assert_eq!(parse_millis("1.5s"), Ok(1_500));
        assert_eq!(parse_millis("0.25h"), Ok(900_000));
        assert_eq!(parse_millis("5S"), Ok(5_000));
        assert_eq!(parse_millis("1 Second"), Ok(1_000));
    }

    #[test]
    fn refuses_malformed_input_with_the_accepted_forms() {
        for bad in [
            "",
            "30",
            "-5s",
            "5x",
            "s",
            "1s1m",
            "1s1s",
            "1.5",
            "1.s",
            "0.0005s",
            "5 sec onds",
            "99999999999999999999h",
        ] {
            let e = parse_millis(bad).expect_err(bad);
            assert!(e.to_string().contains("500ms, 30s"), "{bad}: {e}");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [1, 999, 1_000, 90_000, 3_723_004, 7_200_000] {
            assert_eq!(parse_millis(&format_millis(ms)), Ok(ms));
        }
        assert_eq!(format_millis(90_000), "1m30s");
        assert_eq!(format_millis(0), "0s");
    }
}
