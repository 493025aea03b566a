//! Shell variables a line sets before it uses them: `X=/; rm -rf $X`, `for d in / ~; do rm -rf "$d"; done`.
//!
//! `$PWD` and `$(pwd)` are the working directory (`~+` to the paths module).
//!
//! The guard follows the assignments a line makes (`NAME=value` alone, `export`/`declare`/`local`/`readonly`,
//! `for NAME in WORDS`, `unset`) and expands `$NAME`, `${NAME}` and the default forms `${NAME:-WORD}`/`${NAME-WORD}`
//! in the words of later commands, so the rules judge what would run. A variable the line did not set is not known
//! (`$HOME` is left as written: the paths module reads it as the home directory); a word holding a command
//! substitution or a special parameter (`$1`, `$@`) is not expanded. Alternatives (a `for` list, a default) are each
//! judged, at most [`MAX_ALTERNATIVES`] per word. A command substitution whose output is known statically
//! (`$(echo /)`, `` `printf ~` ``, see `shellward_kit::effective::static_output`) is replaced by that output, each of
//! its blank-separated fields a value.

use shellward_kit::effective::static_output;

/// At most this many values are kept for one word or variable.
pub const MAX_ALTERNATIVES: usize = 16;

/// The variables a line has set so far: each with the values it may hold.
#[derive(Debug, Clone, Default)]
pub struct Vars(Vec<(String, Vec<String>)>);

impl Vars {
    fn get(&self, name: &str) -> Option<&[String]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    fn set(&mut self, name: &str, values: Option<Vec<String>>) {
        self.0.retain(|(n, _)| n != name);
        if let Some(values) = values {
            self.0.push((name.to_string(), values));
        }
    }

    /// Records `NAME=value` (a word as the kit gives it: after quote removal, `dynamic` when it holds expansions).
    pub fn assign(&mut self, word: &str, dynamic: bool) {
        let Some((name, value)) = word.split_once('=') else {
            return;
        };
        let name = name.strip_suffix('+').unwrap_or(name);
        if !is_name(name) {
            return;
        }
        let values = if dynamic {
            self.expand(value)
        } else {
            Some(vec![value.to_string()])
        };
        self.set(name, values);
    }

    /// Follows a command that sets or clears variables (`export`, `declare`, `local`, `readonly`, `typeset`,
    /// `for NAME in …`, `unset`, `read`); other commands change nothing. `words` are (text, dynamic).
    pub fn follow(&mut self, words: &[(&str, bool)]) {
        let Some(((program, _), args)) = words.split_first() else {
            return;
        };
        match *program {
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for &(a, dynamic) in args.iter().filter(|(a, _)| !a.starts_with('-')) {
                    self.assign(a, dynamic);
                }
            }
            "for" => {
                if let [(name, _), ("in", _), list @ ..] = args
                    && is_name(name)
                {
                    let mut values = Vec::new();
                    for &(w, dynamic) in list {
                        if dynamic {
                            values.extend(self.expand(w).unwrap_or_default());
                        } else {
                            values.push(w.to_string());
                        }
                    }
                    values.truncate(MAX_ALTERNATIVES);
                    self.set(name, Some(values));
                }
            }
            "unset" | "read" => {
                for &(a, _) in args.iter().filter(|(a, _)| !a.starts_with('-')) {
                    self.set(a, None);
                }
            }
            _ => {}
        }
    }

    /// The values a word may take once the line's variables are expanded; `None` when it holds something not known
    /// (a variable the line did not set, a command substitution, a special parameter).
    pub fn expand(&self, word: &str) -> Option<Vec<String>> {
        let mut out = vec![String::new()];
        let bytes = word.as_bytes();
        let mut i = 0;
        let mut literal_from = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'`' => {
                    push_all(&mut out, &word[literal_from..i]);
                    let close = i + 1 + word[i + 1..].find('`')?;
                    out = product(&out, &substitution(&word[i + 1..close])?);
                    i = close + 1;
                    literal_from = i;
                }
                b'$' if bytes.get(i + 1) == Some(&b'(') => {
                    push_all(&mut out, &word[literal_from..i]);
                    let close = closing_paren(word, i + 1)?;
                    out = product(&out, &substitution(&word[i + 2..close])?);
                    i = close + 1;
                    literal_from = i;
                }
                b'$' => {
                    push_all(&mut out, &word[literal_from..i]);
                    let (values, end) = self.parameter(word, i)?;
                    out = product(&out, &values);
                    i = end;
                    literal_from = end;
                }
                _ => i += 1,
            }
        }
        push_all(&mut out, &word[literal_from..]);
        Some(out)
    }

    /// The values of the parameter expansion starting at `word[at]` (a `$`) and where it ends.
    fn parameter(&self, word: &str, at: usize) -> Option<(Vec<String>, usize)> {
        let rest = &word[at + 1..];
        let (name, default, end) = if let Some(inner) = rest.strip_prefix('{') {
            let close = inner.find('}')?;
            let body = &inner[..close];
            let end = at + 2 + close + 1;
            match body.find([':', '-']) {
                Some(p) => {
                    let (name, op) = body.split_at(p);
                    // `${X:?msg}` is X (or an error); `${X:-WORD}` may be WORD.
                    let default = match op.strip_prefix(":?").or_else(|| op.strip_prefix('?')) {
                        Some(_) => None,
                        None => Some(op.strip_prefix(":-").or_else(|| op.strip_prefix('-'))?),
                    };
                    (name, default, end)
                }
                None => (body, None, end),
            }
        } else {
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            (&rest[..len], None, at + 1 + len)
        };
        if !is_name(name) {
            return None;
        }
        let values = match (self.get(name), default) {
            (Some(v), _) => v.to_vec(),
            // `${X:-/}` with X not set by the line: the default is what it may well be.
            (None, Some(d)) if !d.contains(['$', '`']) => vec![d.to_string()],
            // Left for the paths module: the home directory, the working directory.
            (None, None) if name == "HOME" => vec!["$HOME".to_string()],
            (None, None) if name == "PWD" => vec!["~+".to_string()],
            _ => return None,
        };
        Some((values, end))
    }
}

/// The values of a command substitution whose output is known statically: its blank-separated fields (one empty
/// value when it prints nothing).
fn substitution(line: &str) -> Option<Vec<String>> {
    if matches!(line.trim(), "pwd" | "pwd -P" | "pwd -L") {
        return Some(vec!["~+".to_string()]);
    }
    let output = static_output(line)?;
    let mut fields: Vec<String> = output
        .split_whitespace()
        .take(MAX_ALTERNATIVES)
        .map(str::to_string)
        .collect();
    if fields.is_empty() {
        fields.push(String::new());
    }
    Some(fields)
}

/// The index of the `)` closing the `(` at `open`, skipping quoted text; `None` when it is not closed.
fn closing_paren(word: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    for (i, &b) in word.as_bytes().iter().enumerate().skip(open) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'(') => depth += 1,
            (None, b')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn push_all(out: &mut [String], text: &str) {
    for o in out {
        o.push_str(text);
    }
}

fn product(prefixes: &[String], values: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for p in prefixes {
        for v in values {
            if out.len() == MAX_ALTERNATIVES {
                return out;
            }
            out.push(format!("{p}{v}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_and_loops_are_followed() {
        let mut v = Vars::default();
        v.assign("X=/", false);
        v.assign("Y=$X/usr", true);
        v.assign("Z=$(ls)", true);
        assert_eq!(v.expand("$X").unwrap(), ["/"]);
        assert_eq!(v.expand("${Y}/").unwrap(), ["//usr/"]);
        assert_eq!(v.expand("$Z"), None);
        assert_eq!(v.expand("$UNSET"), None);
        assert_eq!(v.expand("${UNSET:-/}").unwrap(), ["/"]);
        assert_eq!(v.expand("${UNSET-~}").unwrap(), ["~"]);
        assert_eq!(v.expand("$HOME/x").unwrap(), ["$HOME/x"]);
        assert_eq!(v.expand("${HOME:?}/x").unwrap(), ["$HOME/x"]);
        assert_eq!(v.expand("$PWD/x").unwrap(), ["~+/x"]);
        assert_eq!(v.expand("$(pwd)").unwrap(), ["~+"]);
        assert_eq!(v.expand("${X:?unset}").unwrap(), ["/"]);
        assert_eq!(v.expand("$1"), None);
        assert_eq!(v.expand("`pwd`").unwrap(), ["~+"]);
        assert_eq!(v.expand("`ls`"), None);
        assert_eq!(v.expand("$(echo /)").unwrap(), ["/"]);
        assert_eq!(v.expand("`echo ~`/x").unwrap(), ["~/x"]);
        assert_eq!(v.expand("$(printf '/ /usr')").unwrap(), ["/", "/usr"]);
        assert_eq!(v.expand("/$(echo)").unwrap(), ["/"]);
        assert_eq!(v.expand("$(echo \"(\")").unwrap(), ["("]);
        assert_eq!(v.expand("$(ls)"), None);
        assert_eq!(v.expand("$(echo /"), None);
        v.follow(&[
            ("for", false),
            ("d", false),
            ("in", false),
            ("/tmp", false),
            ("$X", true),
        ]);
        assert_eq!(v.expand("$d").unwrap(), ["/tmp", "/"]);
        v.follow(&[("export", false), ("-n", false), ("W=~", false)]);
        assert_eq!(v.expand("$W").unwrap(), ["~"]);
        v.follow(&[("unset", false), ("W", false)]);
        assert_eq!(v.expand("$W"), None);
        v.assign("HOME=/", false);
        assert_eq!(v.expand("$HOME").unwrap(), ["/"]);
    }

    #[test]
    fn alternatives_are_bounded() {
        let mut v = Vars::default();
        let list: Vec<(&str, bool)> = [("for", false), ("a", false), ("in", false)]
            .into_iter()
            .chain(std::iter::repeat_n(("x", false), 40))
            .collect();
        v.follow(&list);
        assert_eq!(v.expand("$a$a$a$a").unwrap().len(), MAX_ALTERNATIVES);
    }
}
