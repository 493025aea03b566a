//! The profile generator's tests: one golden profile per shape of confinement (rewrite them with
//! `SHELLWARD_UPDATE_GOLDEN=1` after a deliberate change, and read the diff), hostile paths, refusals, and the order
//! that keeps the host's files protected.

use super::*;
use crate::plan::DEFAULT_DENIED_SYSCALLS;

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

/// The executor's files as a Mac install has them.
fn host() -> Protected {
    Protected::new()
        .read_only(paths(&[
            "/Users/dev/.config/shellward/shellward.toml",
            "/Users/dev/Library/Caches/shellward",
        ]))
        .hidden(paths(&[
            "/Users/dev/.ssh",
            "/private/var/folders/xy/T/shellward-logs-1",
        ]))
        .proxy_port(40123)
}

/// Compares `profile` with `golden/<name>.sb`, or writes it there with `SHELLWARD_UPDATE_GOLDEN=1`.
fn golden(name: &str, profile: &Profile) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/seatbelt/golden")
        .join(format!("{name}.sb"));
    if std::env::var_os("SHELLWARD_UPDATE_GOLDEN").is_some() {
        std::fs::write(&file, &profile.text).unwrap();
    }
    let want = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with SHELLWARD_UPDATE_GOLDEN=1",
            file.display()
        )
    });
    assert_eq!(profile.text, want, "{name}: the profile changed");
    assert_balanced(&profile.text);
}

/// The profile's strings (decoded) and that its parentheses balance outside them: a path cannot close a rule or
/// start one.
fn assert_balanced(text: &str) -> Vec<String> {
    let mut depth = 0i32;
    let mut strings = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next().expect("an unterminated string") {
                        '\\' => s.push(chars.next().expect("an escape at the end")),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                strings.push(s);
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                assert!(depth >= 0, "a rule closed that was never opened:\n{text}");
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced:\n{text}");
    strings
}

/// `text` with every string literal emptied: the rules alone.
fn without_strings(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '"' {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        out.push('"');
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

#[test]
fn each_shape_of_confinement_has_its_golden_profile() {
    let none = profile(&Confinement::none(), &Protected::new()).unwrap();
    assert!(none.gaps.is_empty());
    golden("unconfined", &none);

    let workspace = Confinement::new(
        Some(paths(&["/Users/dev/project", "/private/tmp"])),
        Network::None,
    );
    let p = profile(&workspace, &host()).unwrap();
    assert!(p.gaps.is_empty(), "{:?}", p.gaps);
    golden("workspace-no-network", &p);

    let read_only = Confinement::new(Some(Vec::new()), Network::Host);
    golden(
        "read-only-host-network",
        &profile(&read_only, &host()).unwrap(),
    );

    let loopback = Confinement::new(Some(paths(&["/Users/dev/project"])), Network::Loopback)
        .deny_syscalls(DEFAULT_DENIED_SYSCALLS.iter().copied());
    let p = profile(&loopback, &host()).unwrap();
    assert_eq!(p.gaps, [Gap::SharedLoopback, Gap::SystemCallFilter]);
    golden("loopback", &p);

    let allow = Confinement::new(Some(paths(&["/Users/dev/project"])), Network::Host)
        .allow_only(["crates.io", "*.github.com:443"]);
    let p = profile(&allow, &host()).unwrap();
    assert!(p.gaps.is_empty(), "{:?}", p.gaps);
    golden("allow-list", &p);
}

#[test]
fn hostile_paths_are_quoted_or_refused() {
    // Quotes, parentheses, backslashes and a would-be rule: quoted, so each stays one string and no rule is added.
    let nasty = [
        r#"/Users/dev/a "quoted" dir"#,
        r#"/Users/dev/x") (allow file-write* (subpath "/etc"#,
        r"/Users/dev/back\slash\",
        "/Users/dev/(parens) and ;semicolons",
        "/Users/dev/ünïcödé",
    ];
    let c = Confinement::new(Some(paths(&nasty)), Network::None);
    let p = profile(&c, &Protected::new()).unwrap();
    let strings = assert_balanced(&p.text);
    for path in nasty {
        assert!(
            strings.iter().any(|s| s == path),
            "{path:?} not kept whole:\n{}",
            p.text
        );
    }
    let rules = without_strings(&p.text);
    assert_eq!(rules.matches("(allow file-write*").count(), 2, "{}", p.text);
    assert_eq!(
        rules.matches("(subpath \"\")").count(),
        nasty.len(),
        "{}",
        p.text
    );

    // A newline, a NUL or another control character cannot be written safely: refused, naming the list.
    for bad in [
        "/Users/dev/new\nline",
        "/Users/dev/tab\there",
        "/Users/dev/esc\u{1b}[0m",
    ] {
        let c = Confinement::new(Some(paths(&[bad])), Network::None);
        let e = profile(&c, &Protected::new()).unwrap_err();
        assert!(
            matches!(
                e,
                SeatbeltError::Unprintable {
                    what: "writable path",
                    ..
                }
            ),
            "{e:?}"
        );
        let e = profile(
            &Confinement::none(),
            &Protected::new().hidden(paths(&[bad])),
        )
        .unwrap_err();
        assert!(e.to_string().contains("hidden path"), "{e}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let raw = PathBuf::from(std::ffi::OsStr::from_bytes(b"/Users/dev/\xff"));
        let e = profile(&Confinement::none(), &Protected::new().read_only([raw])).unwrap_err();
        assert!(matches!(e, SeatbeltError::Unprintable { .. }), "{e:?}");
    }
}

#[test]
fn paths_are_absolute_and_normalised() {
    let c = Confinement::new(Some(paths(&["project"])), Network::Host);
    let e = profile(&c, &Protected::new()).unwrap_err();
    assert!(matches!(e, SeatbeltError::Relative { .. }), "{e:?}");
    assert!(e.to_string().contains("not absolute"), "{e}");
    // `..` is applied, never above the root: a protected path written with `..` still protects the real one.
    let p = profile(
        &Confinement::none(),
        &Protected::new()
            .hidden(paths(&["/Users/dev/project/../.ssh/./keys"]))
            .read_only(paths(&["/../../etc"])),
    )
    .unwrap();
    let strings = assert_balanced(&p.text);
    assert!(
        strings.contains(&"/Users/dev/.ssh/keys".to_string()),
        "{strings:?}"
    );
    assert!(strings.contains(&"/etc".to_string()), "{strings:?}");
    assert!(!p.text.contains(".."), "{}", p.text);
}

#[test]
fn the_hosts_files_are_protected_after_every_allow() {
    // A writable path that contains (or is) a protected one: the deny comes later, so it wins.
    let c = Confinement::new(Some(paths(&["/Users/dev"])), Network::Host);
    let p = profile(&c, &host()).unwrap();
    let allow = p
        .text
        .find("(allow file-write*\n    (subpath \"/Users/dev\")")
        .unwrap();
    let read_only = p
        .text
        .find("(deny file-write*\n    (subpath \"/Users/dev/.config")
        .unwrap();
    let hidden = p.text.find("(deny file-read* file-write*").unwrap();
    assert!(allow < read_only && read_only < hidden, "{}", p.text);
    assert!(p.text.ends_with(")\n"));
    // Signals: denied, then only within the sandbox.
    assert!(
        p.text
            .contains("(deny signal)\n(allow signal (target same-sandbox))")
    );
}

#[test]
fn an_allow_list_without_a_proxy_is_refused() {
    let c = Confinement::new(None, Network::Host).allow_only(["crates.io"]);
    let e = profile(&c, &Protected::new()).unwrap_err();
    assert_eq!(e, SeatbeltError::NoProxy);
    assert!(e.to_string().contains("refused"), "{e}");
}
