//! What a person is shown: every command, policy question, note, rule and policy name that reaches a person's screen
//! (an MCP elicitation, an HTTP pending approval, the terminal prompt of `run`, a reviewer's request, an audit record)
//! passes through here first, so no byte the model chose is ever interpreted by the person's terminal or viewer.
//!
//! Control characters (C0, DEL, C1, and so every escape sequence's ESC), bidirectional controls, zero-width and
//! other format characters, tag characters, variation selectors, invisible fillers, separators other than the plain
//! space, private-use and unassigned code points are written as visible escapes (`\x1b`, `\r`, `\u{202e}`): a
//! person sees exactly which characters are there, never what they would do. Visible text, confusable or not, is left
//! as it is. A command is shown line by line, each line behind a gutter (`│`), so an embedded newline cannot forge a
//! line of the surrounding question; a command too long for a surface is cut in the middle with the cut stated,
//! never silently, and its head and tail (where a dangerous part is usually hidden) stay in view.
//!
//! Which code points count as invisible is the Unicode general category (the `unicode-general-category` tables,
//! already in the dependency tree through wasmtime's WIT parser), plus the few invisible characters filed under
//! visible categories (variation selectors, Hangul fillers, the braille blank, the combining grapheme joiner).

use unicode_general_category::{GeneralCategory, get_general_category};

/// The gutter before every line of a shown command or question.
const GUTTER: &str = "  │ ";

/// Whether `c` is shown escaped: it is invisible, moves the cursor, reorders text, or may not render as itself.
pub fn is_hidden(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    match get_general_category(c) {
        GeneralCategory::Control
        | GeneralCategory::Format
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator
        | GeneralCategory::SpaceSeparator
        | GeneralCategory::PrivateUse
        | GeneralCategory::Surrogate
        | GeneralCategory::Unassigned => true,
        _ => matches!(
            c,
            // Combining grapheme joiner; Mongolian free variation selectors; variation selectors.
            '\u{034f}'
                | '\u{180b}'..='\u{180f}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{e0100}'..='\u{e01ef}'
                // Hangul fillers and the braille blank: letters and symbols that draw nothing.
                | '\u{115f}'
                | '\u{1160}'
                | '\u{3164}'
                | '\u{ffa0}'
                | '\u{2800}'
        ),
    }
}

/// The visible escape of a hidden character: `\t`, `\r`, `\n`, `\x1b` for ASCII controls, `\u{202e}` otherwise.
fn escape_char(c: char, out: &mut String) {
    match c {
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// `text` on one line for a person: every hidden character (newlines too) escaped. For names and short labels (a
/// rule, a policy, a working directory).
pub fn line(text: &str) -> String {
    escaped(text, false).0
}

/// `text` for a person with its line breaks kept and every other hidden character escaped: for a note, a reason or a
/// policy's question printed on a terminal.
pub fn text(text: &str) -> String {
    escaped(text, true).0
}

/// `text` escaped, newlines kept as line breaks when `keep_newlines`; with how many characters were escaped.
fn escaped(text: &str, keep_newlines: bool) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    for c in text.chars() {
        if keep_newlines && c == '\n' {
            out.push('\n');
        } else if is_hidden(c) {
            escape_char(c, &mut out);
            count += 1;
        } else {
            out.push(c);
        }
    }
    (out, count)
}

/// A command (or a policy's question) made ready for a person: its lines escaped and behind a gutter, with what was
/// escaped or left out stated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shown {
    /// The lines as shown, each behind the gutter, joined with newlines; a cut is a line of its own saying so.
    pub text: String,
    /// How many characters of the whole text are hidden ones, shown escaped (those in a cut part too).
    pub escaped: usize,
    /// How many characters were left out (cut from the middle); 0 when shown whole.
    pub cut: usize,
    /// How many lines the whole text has.
    pub lines: usize,
    /// How many characters the whole text has.
    pub chars: usize,
}

impl Shown {
    /// `text` shown whole.
    pub fn whole(text: &str) -> Shown {
        Shown::at_most(text, usize::MAX)
    }

    /// `text` shown whole when it has at most `limit` characters; otherwise its first and last `limit / 2`
    /// characters, with a line between them saying how many characters (and lines) were left out.
    pub fn at_most(text: &str, limit: usize) -> Shown {
        let chars = text.chars().count();
        let lines = text.split('\n').count();
        let escaped = text.chars().filter(|&c| c != '\n' && is_hidden(c)).count();
        let (head, cut, tail) = if chars > limit {
            let keep = (limit / 2).max(1);
            let head_end = byte_at(text, keep);
            let tail_start = byte_at(text, chars - keep);
            (
                &text[..head_end],
                &text[head_end..tail_start],
                Some(&text[tail_start..]),
            )
        } else {
            (text, "", None)
        };
        let mut out = gutter(&escaped_keep(head));
        if let Some(tail) = tail {
            let cut_chars = cut.chars().count();
            let cut_lines = cut.matches('\n').count();
            let lines_note = match cut_lines {
                0 => String::new(),
                1 => " and 1 line break".to_string(),
                n => format!(" and {n} line breaks"),
            };
            out.push_str(&format!(
                "\n  … {} more characters{lines_note} not shown here (the command has {} in all) …\n",
                thousands(cut_chars),
                thousands(chars)
            ));
            out.push_str(&gutter(&escaped_keep(tail)));
        }
        Shown {
            text: out,
            escaped,
            cut: if tail.is_some() {
                cut.chars().count()
            } else {
                0
            },
            lines,
            chars,
        }
    }

    /// What a person should know before reading it: its size, and whether anything was escaped or cut, as a
    /// sentence (empty for a short one-line text with nothing escaped).
    pub fn summary(&self, what: &str) -> String {
        let mut parts = Vec::new();
        if self.escaped > 0 {
            parts.push(format!(
                "this {what} contains {} invisible or control character{}, shown escaped (\\x1b, \\u{{202e}}, …)",
                thousands(self.escaped),
                if self.escaped == 1 { "" } else { "s" }
            ));
        }
        if self.lines > 1 {
            parts.push(format!(
                "it has {} lines, each shown after │",
                thousands(self.lines)
            ));
        }
        if self.cut > 0 {
            parts.push(format!(
                "it is {} characters long and only its start and end are shown: read it whole before you approve, \
                 or deny",
                thousands(self.chars)
            ));
        }
        match parts.split_first() {
            None => String::new(),
            Some((first, rest)) => {
                let mut s = capitalize(first);
                for p in rest {
                    s.push_str("; ");
                    s.push_str(p);
                }
                s.push('.');
                s
            }
        }
    }
}

/// `text` escaped with its newlines kept.
fn escaped_keep(text: &str) -> String {
    escaped(text, true).0
}

/// Every line of `text` behind the gutter.
fn gutter(text: &str) -> String {
    text.split('\n')
        .map(|l| format!("{GUTTER}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The byte offset of the `n`th character of `text` (its length past the end).
fn byte_at(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// `n` with thousands separators (`4,812`).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// One approval question as a person reads it: who asks and why (the policy's question), then the command that runs
/// if they approve, where, and what was escaped or cut. `limit` bounds the command's characters shown (`None`: whole).
pub fn approval_question(
    policy: &str,
    rule: Option<&str>,
    question: &str,
    command: &str,
    workdir: Option<&str>,
    limit: Option<usize>,
) -> String {
    let mut text = String::new();
    let asker = match rule {
        Some(r) => format!("The policy {} (rule {}) asks:", line(policy), line(r)),
        None => format!("The policy {} asks:", line(policy)),
    };
    text.push_str(&asker);
    text.push('\n');
    let q = Shown::at_most(question, 2_000);
    text.push_str(&q.text);
    let summary = q.summary("question");
    if !summary.is_empty() {
        text.push_str(&format!("\n  ({summary})"));
    }
    let c = Shown::at_most(command, limit.unwrap_or(usize::MAX));
    text.push_str("\n\nCommand that runs if you approve:\n");
    text.push_str(&c.text);
    let summary = c.summary("command");
    if !summary.is_empty() {
        text.push('\n');
        text.push_str(&summary);
    }
    if let Some(w) = workdir {
        text.push_str(&format!("\nIn: {}", line(w)));
    }
    text
}

/// `value` as compact JSON in which every hidden character is a `\uXXXX` escape: the same value for any parser, and
/// nothing a terminal or viewer would interpret for a person reading it (`cat` of the audit log, `curl` of the
/// pending approvals). serde_json escapes C0 controls itself; DEL, C1, bidirectional and invisible characters it
/// writes raw, which this formatter does not.
pub fn json(value: &serde_json::Value) -> String {
    use serde::Serialize;
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SafeFormatter);
    // Writing a Value to memory cannot fail.
    if value.serialize(&mut ser).is_err() {
        return value.to_string();
    }
    // Only whole characters and ASCII escapes were written: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| value.to_string())
}

/// serde_json's compact formatter, escaping hidden characters in strings.
struct SafeFormatter;

impl serde_json::ser::Formatter for SafeFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // Printable ASCII (nearly every record) is written as it is.
        if fragment.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return writer.write_all(fragment.as_bytes());
        }
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_hidden(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{u:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_raw_hidden(text: &str) {
        for c in text.chars() {
            assert!(
                c == '\n' || !is_hidden(c),
                "{c:?} reached the text: {text:?}"
            );
        }
    }

    #[test]
    fn escape_sequences_bidi_and_zero_width_are_shown_as_escapes() {
        let cmd = "git reset --hard \x1b[2K\x1b[1G\u{202e}echo safe\u{200b}\u{feff}\r\x7f\u{85}";
        let s = Shown::whole(cmd);
        no_raw_hidden(&s.text);
        assert_eq!(
            s.text,
            "  │ git reset --hard \\x1b[2K\\x1b[1G\\u{202e}echo safe\\u{200b}\\u{feff}\\r\\x7f\\u{85}"
        );
        assert_eq!(s.escaped, 8);
        assert!(
            s.summary("command").starts_with(
                "This command contains 8 invisible or control characters, shown escaped"
            ),
            "{}",
            s.summary("command")
        );
    }

    #[test]
    fn every_listed_invisible_is_escaped() {
        let hidden = [
            '\u{0}',
            '\u{7}',
            '\u{1b}',
            '\u{7f}',
            '\u{9b}',
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{202e}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{61c}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{2028}',
            '\u{2029}',
            '\u{a0}',
            '\u{3000}',
            '\u{ad}',
            '\u{fe0f}',
            '\u{e0100}',
            '\u{3164}',
            '\u{115f}',
            '\u{2800}',
            '\u{e000}',
            '\u{10ffff}',
        ];
        for c in hidden {
            assert!(is_hidden(c), "{c:?}");
            let shown = line(&format!("a{c}b"));
            no_raw_hidden(&shown);
            assert_eq!(
                shown,
                format!("a{}b", {
                    let mut e = String::new();
                    escape_char(c, &mut e);
                    e
                })
            );
        }
    }

    #[test]
    fn visible_text_and_confusables_are_left_as_they_are() {
        // Cyrillic letters that look Latin, a Greek question mark, full-width letters, emoji, accents: visible.
        let text = "gіt рush ; ｌｓ é ñ 日本 🚀 a\u{301} \\x1b";
        assert_eq!(line(text), text);
        let s = Shown::whole(text);
        assert_eq!(s.escaped, 0);
        assert_eq!(s.summary("command"), "");
    }

    #[test]
    fn each_line_of_a_multi_line_command_sits_behind_the_gutter() {
        let s = Shown::whole("echo one\n\nCommand that runs if you approve:\n  │ echo safe\r");
        assert_eq!(s.lines, 4);
        for l in s.text.lines() {
            assert!(l.starts_with(GUTTER), "{l:?}");
        }
        assert!(s.text.ends_with("echo safe\\r"));
        assert!(
            s.summary("command").contains("it has 4 lines"),
            "{}",
            s.summary("command")
        );
    }

    #[test]
    fn a_long_command_keeps_its_head_and_tail_and_states_the_cut() {
        let cmd = format!("echo {}; rm -rf ~/x\u{202e}", "a".repeat(100_000));
        let s = Shown::at_most(&cmd, 4_000);
        assert!(s.text.contains("rm -rf ~/x\\u{202e}"), "the tail is shown");
        assert!(s.text.starts_with("  │ echo aaa"));
        assert_eq!(s.cut, cmd.chars().count() - 4_000);
        assert!(
            s.text.contains(
                "… 96,018 more characters not shown here (the command has 100,018 in all) …"
            ),
            "{}",
            &s.text[1990..2200]
        );
        assert!(
            s.summary("command")
                .contains("only its start and end are shown")
        );
        assert_eq!(s.escaped, 1, "escapes count the whole command");
        assert!(s.text.chars().count() < 4_300);
    }

    #[test]
    fn a_cut_never_splits_a_character_and_counts_line_breaks() {
        let cmd = "é\n".repeat(50);
        let s = Shown::at_most(&cmd, 10);
        assert!(
            s.text
                .contains("more characters and 45 line breaks not shown"),
            "{}",
            s.text
        );
        assert_eq!(s.cut, 90);
    }

    #[test]
    fn the_question_names_the_policy_and_escapes_what_it_quotes() {
        let q = approval_question(
            "guard\x1b]0;x\x07",
            Some("git-reset\u{202e}"),
            "Discard changes?\nCommand that runs if you approve:\n  │ echo safe",
            "git reset --hard\x1b[2K",
            Some("/tmp/a\rb"),
            None,
        );
        no_raw_hidden(&q.replace('\n', ""));
        assert!(
            q.starts_with("The policy guard\\x1b]0;x\\x07 (rule git-reset\\u{202e}) asks:\n"),
            "{q}"
        );
        // The question's own lines sit behind the gutter: it cannot forge the command's heading.
        assert_eq!(
            q.matches("\nCommand that runs if you approve:\n").count(),
            1,
            "{q}"
        );
        assert!(q.contains("\n  │ git reset --hard\\x1b[2K\n"), "{q}");
        assert!(q.ends_with("\nIn: /tmp/a\\rb"), "{q}");
    }

    #[test]
    fn json_escapes_what_a_terminal_would_interpret_and_parses_back_the_same() {
        let value = serde_json::json!({
            "command": "git reset --hard \x1b[2K\u{202e}echo safe\u{200b}\x7f\u{85}\u{e0041}",
            "plain": "ls -la é 日本",
            "n": 3,
        });
        let text = json(&value);
        assert!(text.is_ascii() || !text.chars().any(is_hidden), "{text}");
        assert!(
            text.contains("\\u001b[2K\\u202eecho safe\\u200b\\u007f\\u0085\\udb40\\udc41"),
            "{text}"
        );
        assert!(text.contains("ls -la é 日本"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn thousands_separate() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(4812), "4,812");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
