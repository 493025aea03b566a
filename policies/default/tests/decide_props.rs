//! Property tests of the default policy's decision on hostile input: it never panics, and whether a trailing `&`
//! sends a command to the background does not depend on the whitespace around it.

use proptest::prelude::*;
use shellward_default_policy::decide::{Outcome, Request, evaluate};
use shellward_default_policy::settings::Settings;

fn words() -> impl Strategy<Value = String> {
    prop::collection::vec("[a-z][a-z0-9._/-]{0,8}", 1..5).prop_map(|w| w.join(" "))
}

fn background(command: &str) -> Option<bool> {
    match evaluate(
        &Settings::default(),
        &Request {
            command: command.into(),
            ..Default::default()
        },
    ) {
        Outcome::Run(p) => Some(p.background),
        Outcome::Deny { .. } => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn deciding_never_panics(src in ".{0,300}") {
        let _ = background(&src);
    }

    #[test]
    fn a_trailing_ampersand_is_seen_whatever_the_whitespace(
        cmd in words(),
        before in "[ \t]{0,3}",
        after in "[ \t\n]{0,3}",
    ) {
        let plain = background(&format!("{cmd} &"));
        let spaced = background(&format!("{cmd}{before}&{after}"));
        prop_assert_eq!(plain, Some(true));
        prop_assert_eq!(spaced, plain);
    }
}
