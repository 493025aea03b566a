//! Property tests of the tokenizer and the effective-command reading on hostile input: they never panic, every span lies inside the source on
//! character boundaries, and nesting is bounded (a deep line is an error, never a stack overflow). Case counts are
//! bounded so the suite stays fast; raise `PROPTEST_CASES` locally to fuzz longer.

use proptest::prelude::*;
use shellward_kit::effective::{MAX_COMMANDS, MAX_SHELL_DEPTH, effective_commands};
use shellward_kit::shell::tokenize;

/// Strings biased towards shell syntax: quotes, expansions, operators, here-docs, and arbitrary characters.
fn shellish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("$(".to_string()),
        Just(")".to_string()),
        Just("(".to_string()),
        Just("${".to_string()),
        Just("}".to_string()),
        Just("`".to_string()),
        Just("\\".to_string()),
        Just("&".to_string()),
        Just(" & ".to_string()),
        Just("&&".to_string()),
        Just("|".to_string()),
        Just(";".to_string()),
        Just("\n".to_string()),
        Just("<<EOF\n".to_string()),
        Just("<<-'X'\n".to_string()),
        Just("$((".to_string()),
        Just("$'".to_string()),
        Just(" ".to_string()),
        Just("#".to_string()),
        "[a-z]{1,6}",
        Just("bash -lc ".to_string()),
        Just("eval ".to_string()),
        Just("timeout 5 ".to_string()),
        Just("sudo -u ".to_string()),
        Just("xargs -n1 ".to_string()),
        Just("find / -exec ".to_string()),
        Just(" <<< ".to_string()),
        Just("| sh".to_string()),
        Just("$k ".to_string()),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn tokenizing_never_panics_and_spans_stay_in_bounds(src in shellish()) {
        if let Ok(script) = tokenize(&src) {
            for t in &script.tokens {
                prop_assert!(t.start <= t.end && t.end <= src.len(), "{t:?} in {src:?}");
                prop_assert!(src.is_char_boundary(t.start) && src.is_char_boundary(t.end));
            }
            for c in script.simple_commands() {
                let _ = c.word_texts(&script);
            }
        }
    }

    #[test]
    fn effective_reading_never_panics_and_stays_bounded(src in shellish()) {
        if let Ok(reading) = effective_commands(&src) {
            prop_assert!(reading.commands.len() <= MAX_COMMANDS);
            for c in &reading.commands {
                prop_assert!(!c.words.is_empty() || !c.writes.is_empty() || !c.assignments.is_empty());
                prop_assert_eq!(c.words.len(), c.dynamic.len());
                prop_assert!(c.depth <= MAX_SHELL_DEPTH);
            }
        }
    }

    /// The invariant the guard's `unreadable` rule stands on: `rm -rf /` hidden behind many commands and any mix of
    /// nested shell strings (`sh -c`, `eval`, `bash <<<`, `$(…)`, `$((cmd) )`) is either found in the reading, or the
    /// reading says it is incomplete — never a complete reading that misses it.
    #[test]
    fn a_hidden_command_is_read_or_the_reading_is_incomplete(
        before in 0usize..5000,
        layers in prop::collection::vec(0usize..5, 0..12),
    ) {
        let mut line = "rm -rf /".to_string();
        for kind in layers {
            line = match kind {
                0 => format!("sh -c '{}'", line.replace('\'', "'\\''")),
                1 => format!("eval '{}'", line.replace('\'', "'\\''")),
                2 => format!("bash <<< '{}'", line.replace('\'', "'\\''")),
                3 => format!("echo $({line})"),
                _ => format!("echo $(({line}) )"),
            };
        }
        let line = format!("{}{line}", "true;".repeat(before));
        match effective_commands(&line) {
            Ok(reading) => prop_assert!(
                !reading.complete()
                    || reading.commands.iter().any(|c| c.words == ["rm", "-rf", "/"]),
                "a complete reading of {} bytes missed the command", line.len()
            ),
            Err(e) => prop_assert!(e.too_deep, "{e}"),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(src in ".{0,200}") {
        let _ = tokenize(&src);
    }

    #[test]
    fn any_nesting_depth_is_an_answer_not_a_crash(depth in 0usize..3000, kind in 0usize..3) {
        let (open, close) = [("$(", ")"), ("\"${x:-", "}\""), ("(", ")")][kind];
        let src = format!("echo {}x{}", open.repeat(depth), close.repeat(depth));
        match tokenize(&src) {
            Ok(_) => prop_assert!(depth <= 64 || kind == 2, "depth {depth} accepted"),
            Err(e) => prop_assert!(e.too_deep, "{e}"),
        }
    }
}
