//! The tokenizer's and parser's tests.

use super::*;

fn kinds(src: &str) -> Vec<String> {
    tokenize(src)
        .unwrap()
        .tokens
        .iter()
        .map(|t| match t.kind {
            TokenKind::Word => format!("W({})", t.text),
            TokenKind::IoNumber => format!("N({})", t.text),
            TokenKind::Op(_) => format!("O({})", t.text),
            TokenKind::Newline => "NL".to_string(),
        })
        .collect()
}

#[test]
fn words_and_operators() {
    assert_eq!(
        kinds("a && b || c; d & e | f |& g"),
        [
            "W(a)", "O(&&)", "W(b)", "O(||)", "W(c)", "O(;)", "W(d)", "O(&)", "W(e)", "O(|)",
            "W(f)", "O(|&)", "W(g)"
        ]
    );
}

#[test]
fn quotes_remove_meaning() {
    assert_eq!(
        kinds(r#"echo "x &" 'y;z' w\&"#),
        ["W(echo)", "W(x &)", "W(y;z)", "W(w&)"]
    );
    assert_eq!(
        kinds(r#"echo "a \"b\" \$c \x""#),
        ["W(echo)", r#"W(a "b" $c \x)"#]
    );
    assert_eq!(kinds("echo $'a\\'b' c"), ["W(echo)", "W(a\\'b)", "W(c)"]);
}

#[test]
fn redirections_and_io_numbers() {
    assert_eq!(
        kinds("cmd 2>&1 >out &>all &>>app >|clob <>rw <&3"),
        [
            "W(cmd)", "N(2)", "O(>&)", "W(1)", "O(>)", "W(out)", "O(&>)", "W(all)", "O(&>>)",
            "W(app)", "O(>|)", "W(clob)", "O(<>)", "W(rw)", "O(<&)", "W(3)"
        ]
    );
    // A quoted number is an argument, not an io number.
    assert_eq!(kinds("echo '2'>x"), ["W(echo)", "W(2)", "O(>)", "W(x)"]);
}

#[test]
fn comments_and_continuations() {
    assert_eq!(kinds("a & # bg it &\nb"), ["W(a)", "O(&)", "NL", "W(b)"]);
    assert_eq!(kinds("echo a#b"), ["W(echo)", "W(a#b)"]);
    assert_eq!(kinds("echo a \\\n  b"), ["W(echo)", "W(a)", "W(b)"]);
}

#[test]
fn substitutions_stay_inside_words() {
    assert_eq!(
        kinds("echo $(a & b) `c &` ${x:-&} $((1&2))"),
        [
            "W(echo)",
            "W($(a & b))",
            "W(`c &`)",
            "W(${x:-&})",
            "W($((1&2)))"
        ]
    );
    assert_eq!(
        kinds(r#"x="$(echo ")")" &"#),
        [r#"W(x=$(echo ")"))"#, "O(&)"]
    );
    assert_eq!(kinds("echo $(echo (a) )"), ["W(echo)", "W($(echo (a) ))"]);
}

#[test]
fn heredoc_bodies_are_skipped() {
    let src = "cat <<EOF > f\na & b\nEOF\necho done";
    let s = tokenize(src).unwrap();
    assert_eq!(
        kinds(src),
        [
            "W(cat)", "O(<<)", "W(EOF)", "O(>)", "W(f)", "NL", "W(echo)", "W(done)"
        ]
    );
    assert_eq!(s.heredocs.len(), 1);
    assert_eq!(&src[s.heredocs[0].start..s.heredocs[0].end], "a & b\nEOF\n");
    // Quoted delimiter and tab stripping.
    let src = "cat <<-'END'\n\tx &\n\tEND\n";
    assert_eq!(kinds(src), ["W(cat)", "O(<<-)", "W(END)", "NL"]);
    // Missing delimiter: the body runs to the end.
    let s = tokenize("cat <<EOF\nx &").unwrap();
    assert_eq!(s.heredocs[0].end, 13);
}

#[test]
fn subshell_depth() {
    let s = tokenize("(cd a && (b &)) &").unwrap();
    let depths: Vec<(String, u32)> = s
        .tokens
        .iter()
        .map(|t| (t.text.to_string(), t.depth))
        .collect();
    assert_eq!(
        depths,
        [
            ("(".into(), 0),
            ("cd".into(), 1),
            ("a".into(), 1),
            ("&&".into(), 1),
            ("(".into(), 1),
            ("b".into(), 2),
            ("&".into(), 2),
            (")".into(), 1),
            (")".into(), 0),
            ("&".into(), 0),
        ]
    );
}

#[test]
fn unterminated_constructs_are_errors() {
    for bad in [
        "echo 'a",
        "echo \"a",
        "echo `a",
        "echo $(a",
        "echo ${a",
        "echo $((1",
    ] {
        assert!(tokenize(bad).is_err(), "{bad}");
    }
}

#[test]
fn deep_nesting_is_refused_not_followed() {
    for (open, close) in [("$(echo ", ")"), ("\"${x:-", "}\""), ("`", "`")] {
        let deep = format!("echo {}x{}", open.repeat(1000), close.repeat(1000));
        match tokenize(&deep) {
            Err(e) => assert!(e.too_deep || open == "`", "{open}: {e}"),
            Ok(_) => assert_eq!(open, "`", "backquotes do not nest without escapes"),
        }
    }
    let deep = format!("echo {}x{}", "$(echo ".repeat(1000), ")".repeat(1000));
    let e = tokenize(&deep).unwrap_err();
    assert!(
        e.to_string().contains("nested too deeply (limit 64)"),
        "{e}"
    );
    let ok = format!("echo {}x{}", "$(echo ".repeat(60), ")".repeat(60));
    assert!(tokenize(&ok).is_ok());
}

#[test]
fn utf8_is_preserved() {
    assert_eq!(
        kinds("echo héllo \"wörld\" \\ü"),
        ["W(echo)", "W(héllo)", "W(wörld)", "W(ü)"]
    );
}

#[test]
fn plain_words_are_borrowed_and_mixed_words_keep_every_part() {
    let s = tokenize("ls -la src/main.rs ünï pre\"mid\"post a\\ b x'y'$HOME\"z\"tail").unwrap();
    let texts: Vec<&str> = s.tokens.iter().map(|t| &*t.text).collect();
    assert_eq!(
        texts,
        [
            "ls",
            "-la",
            "src/main.rs",
            "ünï",
            "premidpost",
            "a b",
            "xy$HOMEztail"
        ]
    );
    for t in &s.tokens[..4] {
        assert!(
            matches!(t.text, Cow::Borrowed(_)),
            "{:?} was copied",
            t.text
        );
        assert!(!t.quoted);
    }
    assert!(s.tokens[4..].iter().all(|t| t.quoted));
}

#[test]
fn simple_commands_split_assignments_words_and_redirections() {
    let s = tokenize("FOO=1 BAR=\"x y\" npm run dev > log 2>&1 && cd x; (make)").unwrap();
    let cmds = s.simple_commands();
    assert_eq!(cmds.len(), 3);
    assert_eq!(cmds[0].assignments.len(), 2);
    assert_eq!(cmds[0].word_texts(&s), ["npm", "run", "dev"]);
    assert_eq!(cmds[0].followed_by, Some(TokenKind::Op(Op::AndIf)));
    assert_eq!(cmds[1].word_texts(&s), ["cd", "x"]);
    assert_eq!(cmds[2].word_texts(&s), ["make"]);
    assert_eq!(cmds[2].depth, 1);
    // A quoted assignment is a word.
    let s = tokenize("'A=1' cmd").unwrap();
    assert_eq!(s.simple_commands()[0].word_texts(&s), ["A=1", "cmd"]);
}
