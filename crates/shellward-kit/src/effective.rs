//! The *effective* simple commands of a command line: what actually runs, wrappers and nested shells seen through.
//!
//! A policy that judges `words[0]` of each simple command is fooled by ordinary indirection: `timeout 5 kill -9 -1`,
//! `bash -lc 'pkill node'`, `echo 'kill -9 -1' | bash`, `find / -exec rm -rf {} +`, `xargs pkill`. [`effective_commands`]
//! reads a command line the way the shell and those wrappers would and yields every command that would run:
//!
//! - **wrappers are stripped with their own options and operands**: `timeout [-s SIG] [-k D] DURATION`,
//!   `nice [-n N | -N]`, `env [-i] [-u NAME] [-C DIR] [NAME=value]…` (and `env -S 'LINE'`), `sudo [-u USER] [-E]…`,
//!   `doas`, `pkexec`, `runuser`, `su … -c LINE`, `xargs [options]` (its arguments appended from a standard input
//!   known statically, `echo / | xargs rm -rf`, or put in place of `-I`'s marker), `busybox APPLET`, `command`,
//!   `builtin`, `exec`,
//!   `time`, `nohup`, `setsid`, `stdbuf -oL`, `ionice`, `chrt PRIORITY`, `taskset MASK`, `flock FILE` (and
//!   `flock FILE -c LINE`), `watch`, `parallel … :::`, `chroot NEWROOT`, `unshare`, `nsenter`, `strace`, `ltrace`,
//!   `unbuffer`, `systemd-run`, and the reserved words `!`, `if`, `then`, `do`, `{`…;
//!   each stripped wrapper is recorded in [`EffectiveCommand::via`];
//! - **`find` runs commands**: `find … -exec CMD … {} ;` / `+`, `-execdir`, `-ok`, `-okdir` yield `CMD …` (with
//!   [`EffectiveCommand::more_args`] set), and the `find` itself is yielded too (its `-delete` matters);
//! - **shell strings are read recursively**: `sh|bash|dash|zsh|ksh|ash -c LINE` with any option cluster holding `c`
//!   (`-lc`, `-ec`, `-xc`, `-o pipefail -c`), `eval WORDS`, `$(…)` and backquotes in any word (assignments and
//!   redirection targets included), `watch LINE`, `parallel LINE`, `script -c LINE`, and a shell reading its standard input from a
//!   here-string (`bash <<< LINE`), a here-document, or a pipe from `echo`/`printf`/`cat <<EOF`
//!   (`echo LINE | sh`);
//! - **a command of redirections or assignments alone** (`> /dev/sda`, `X=/`) is yielded with no words, so its
//!   [`EffectiveCommand::writes`] and [`EffectiveCommand::assignments`] are seen;
//! - **words that cannot be known statically are marked**: [`EffectiveCommand::dynamic`] says which words hold a
//!   parameter expansion or a substitution outside single quotes (`$k -9 -1`: the program is unknown).
//!
//! Reading stops [`MAX_SHELL_DEPTH`] shell strings deep (then [`Reading::too_deep`] is set) and after
//! [`MAX_COMMANDS`] commands (then [`Reading::truncated`] is set), so a hostile line costs bounded work. A shell
//! string that does not tokenize is skipped: the shell refuses it too.

use crate::pattern::base_name;
use crate::shell::{Op, Redirect, Script, SimpleCommand, TokenKind, tokenize};
use std::ops::ControlFlow;

pub use crate::shell::ParseError;

/// How many shell strings deep (`bash -c 'eval "$(…)"'` is three) the reading follows.
pub const MAX_SHELL_DEPTH: u32 = 8;

/// At most this many effective commands are read from one command line.
pub const MAX_COMMANDS: usize = 4096;

mod reader;

/// One command that would run, wrappers stripped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EffectiveCommand {
    /// The program and its arguments after quote removal (expansions kept as written), wrappers stripped; empty
    /// only for a command of redirections or assignments alone (then [`writes`](Self::writes) or
    /// [`assignments`](Self::assignments) is not).
    pub words: Vec<String>,
    /// Per word of [`words`](Self::words): whether its value is only known at run time (it holds `$NAME`, `${…}`,
    /// `$(…)` or a backquote outside single quotes).
    pub dynamic: Vec<bool>,
    /// How the command was reached, outermost first: stripped wrappers by name (`timeout`, `sudo`, `xargs`,
    /// `find -exec`) and the shell strings it came from (`bash -c`, `eval`, `$(…)`, `bash <<<`, `| bash`).
    pub via: Vec<String>,
    /// The command gets further arguments only known at run time (`xargs`, `find -exec`, `parallel`).
    pub more_args: bool,
    /// Targets of the command's output redirections (`>`, `>>`, `&>`, `>|`, `<>`, `>&FILE`).
    pub writes: Vec<String>,
    /// The simple command as written (reserved words dropped, wrappers kept), for patterns that name a wrapper.
    pub written: Vec<String>,
    /// The simple command's leading `NAME=value` assignments, after quote removal. A command of assignments alone
    /// (`X=/`) is yielded with no words: it sets shell variables the later commands of its line may expand.
    pub assignments: Vec<String>,
    /// How many shell strings deep the command was found (0: in the command line itself).
    pub depth: u32,
}

impl EffectiveCommand {
    /// The program as written (may be a path), if any.
    pub fn program(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }

    /// The program's base name (`/usr/bin/kill` → `kill`), if any.
    pub fn name(&self) -> Option<&str> {
        self.program().map(base_name)
    }

    /// Whether the program is known statically (not `$k`, `$(which kill)`, `` `echo rm` ``).
    pub fn program_known(&self) -> bool {
        !self.dynamic.first().copied().unwrap_or(false)
    }

    /// The arguments (every word after the program).
    pub fn args(&self) -> &[String] {
        self.words.get(1..).unwrap_or(&[])
    }

    /// Whether a wrapper of this name was stripped on the way to the command.
    pub fn via(&self, wrapper: &str) -> bool {
        self.via.iter().any(|v| v == wrapper)
    }
}

/// The effective commands of a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Every command that would run, in source order (outer before inner).
    pub commands: Vec<EffectiveCommand>,
    /// Shell strings nested deeper than [`MAX_SHELL_DEPTH`] were not read.
    pub too_deep: bool,
    /// More than [`MAX_COMMANDS`] commands: the rest were not read.
    pub truncated: bool,
}

impl Reading {
    /// Whether the whole line was read (neither too deep nor truncated).
    pub fn complete(&self) -> bool {
        !self.too_deep && !self.truncated
    }
}

/// What a command line prints when that is known statically: one `echo` or `printf` of words without expansions and
/// without redirections (`echo /` prints `/`), trailing newlines removed as a command substitution removes them; for
/// `find ROOT…`, `ROOT/*` stands for the paths it prints. `None` for anything else.
pub fn static_output(line: &str) -> Option<String> {
    let script = tokenize(line).ok()?;
    let commands = script.simple_commands();
    let [command] = commands.as_slice() else {
        return None;
    };
    let tokens = &script.tokens[command.first_token..=command.last_token];
    if !command.assignments.is_empty() || tokens.iter().any(|t| t.kind != TokenKind::Word) {
        return None;
    }
    let mut words = Vec::with_capacity(command.words.len());
    for &i in &command.words {
        let raw = script.raw(i);
        if may_expand(raw) && is_dynamic(raw) {
            return None;
        }
        words.push(Word {
            text: &script.tokens[i].text,
            dynamic: false,
        });
    }
    let mut out = prints(&words, None)?;
    out.truncate(out.trim_end_matches('\n').len());
    Some(out)
}

/// Reads the effective commands of a command line. Fails only when the line itself does not tokenize (nested shell
/// strings that do not tokenize are skipped).
pub fn effective_commands(line: &str) -> Result<Reading, ParseError> {
    let script = tokenize(line)?;
    Ok(effective_commands_of(&script))
}

/// [`effective_commands`] of a line already tokenized.
pub fn effective_commands_of(script: &Script<'_>) -> Reading {
    let mut commands = Vec::new();
    let visit = visit_effective_commands(script, &script.simple_commands(), |c| {
        commands.push(c.to_owned());
        ControlFlow::Continue(())
    });
    Reading {
        commands,
        too_deep: visit.too_deep,
        truncated: visit.truncated,
    }
}

/// Hands every effective command of a tokenized line to `visit`, in the order of [`effective_commands`], borrowed
/// rather than copied: a policy that looks for one match stops at it (`ControlFlow::Break`) and allocates nothing
/// per command. `commands` are the script's [`Script::simple_commands`], for a caller that has grouped them already.
///
/// The same bounds apply as for [`effective_commands`]: at most [`MAX_COMMANDS`] commands are handed over and shell
/// strings are followed [`MAX_SHELL_DEPTH`] deep; [`Visit`] says whether either cut the reading short.
pub fn visit_effective_commands<F>(
    script: &Script<'_>,
    commands: &[SimpleCommand],
    mut visit: F,
) -> Visit
where
    F: FnMut(&CommandView<'_>) -> ControlFlow<()>,
{
    debug_assert!(
        commands == script.simple_commands().as_slice(),
        "visit_effective_commands: `commands` must be the script's simple_commands()"
    );
    let mut reader = Reader {
        visit: &mut visit,
        emitted: 0,
        out: Visit::default(),
    };
    reader.commands(script, commands, &Context::default());
    reader.out
}

/// How a [`visit_effective_commands`] ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Visit {
    /// Shell strings nested deeper than [`MAX_SHELL_DEPTH`] were not read.
    pub too_deep: bool,
    /// More than [`MAX_COMMANDS`] commands: the rest were not read.
    pub truncated: bool,
    /// The callback stopped the reading (`ControlFlow::Break`).
    pub stopped: bool,
}

/// A word of an effective command, borrowed from the line being read: its value and whether that is known statically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word<'a> {
    /// The value after quote removal (expansions kept as written).
    pub text: &'a str,
    /// Whether the value is only known at run time (see [`EffectiveCommand::dynamic`]).
    pub dynamic: bool,
}

impl AsRef<str> for Word<'_> {
    fn as_ref(&self) -> &str {
        self.text
    }
}

/// One effective command as [`visit_effective_commands`] finds it, borrowed from the line being read; the fields mean
/// what [`EffectiveCommand`]'s do, and [`CommandView::to_owned`] makes one.
#[derive(Debug, Clone, Copy)]
pub struct CommandView<'a> {
    /// The program and its arguments, wrappers stripped.
    pub words: &'a [Word<'a>],
    /// How the command was reached, outermost first.
    pub via: &'a [String],
    /// The command gets further arguments only known at run time.
    pub more_args: bool,
    /// Targets of the command's output redirections.
    pub writes: &'a [&'a str],
    /// The simple command as written (reserved words dropped, wrappers kept).
    pub written: &'a [Word<'a>],
    /// The simple command's leading `NAME=value` assignments (see [`EffectiveCommand::assignments`]).
    pub assignments: &'a [Word<'a>],
    /// How many shell strings deep the command was found.
    pub depth: u32,
}

impl<'a> CommandView<'a> {
    /// The program as written (may be a path), if any.
    pub fn program(&self) -> Option<&'a str> {
        self.words.first().map(|w| w.text)
    }

    /// The program's base name (`/usr/bin/kill` → `kill`), if any.
    pub fn name(&self) -> Option<&'a str> {
        self.program().map(base_name)
    }

    /// Whether the program is known statically (not `$k`, `$(which kill)`, `` `echo rm` ``).
    pub fn program_known(&self) -> bool {
        !self.words.first().is_some_and(|w| w.dynamic)
    }

    /// The arguments (every word after the program).
    pub fn args(&self) -> &'a [Word<'a>] {
        self.words.get(1..).unwrap_or(&[])
    }

    /// Whether a wrapper of this name was stripped on the way to the command.
    pub fn via(&self, wrapper: &str) -> bool {
        self.via.iter().any(|v| v == wrapper)
    }

    /// The words joined by single spaces (`npm run dev`).
    pub fn line(&self) -> String {
        join(self.words)
    }

    /// The owned form of this command.
    pub fn to_owned(&self) -> EffectiveCommand {
        EffectiveCommand {
            words: self.words.iter().map(|w| w.text.to_string()).collect(),
            dynamic: self.words.iter().map(|w| w.dynamic).collect(),
            via: self.via.to_vec(),
            more_args: self.more_args,
            writes: self.writes.iter().map(|w| w.to_string()).collect(),
            written: self.written.iter().map(|w| w.text.to_string()).collect(),
            assignments: self
                .assignments
                .iter()
                .map(|w| w.text.to_string())
                .collect(),
            depth: self.depth,
        }
    }
}

/// What the commands being read inherit from where they were found.
#[derive(Debug, Clone, Default)]
struct Context {
    via: Vec<String>,
    more_args: bool,
    depth: u32,
}

impl Context {
    fn with(&self, via: &str) -> Context {
        let mut c = self.clone();
        c.via.push(via.to_string());
        c
    }
}

/// How many words of a command [`WordBuf`] holds without allocating.
const INLINE_WORDS: usize = 8;

/// A simple command's words: on the stack for the usual handful, on the heap beyond [`INLINE_WORDS`] (one allocation
/// less per command read).
struct WordBuf<'s> {
    inline: [Word<'s>; INLINE_WORDS],
    len: usize,
    heap: Vec<Word<'s>>,
}

impl<'s> WordBuf<'s> {
    fn new() -> WordBuf<'s> {
        WordBuf {
            inline: [Word {
                text: "",
                dynamic: false,
            }; INLINE_WORDS],
            len: 0,
            heap: Vec::new(),
        }
    }

    fn push(&mut self, word: Word<'s>) {
        if self.heap.is_empty() && self.len < INLINE_WORDS {
            self.inline[self.len] = word;
            self.len += 1;
            return;
        }
        if self.heap.is_empty() {
            self.heap.extend_from_slice(&self.inline[..self.len]);
        }
        self.heap.push(word);
    }

    fn as_slice(&self) -> &[Word<'s>] {
        if self.heap.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

/// Reads commands and hands each effective one to `visit`.
struct Reader<'v> {
    visit: &'v mut dyn FnMut(&CommandView<'_>) -> ControlFlow<()>,
    /// Commands handed over so far (bounded by [`MAX_COMMANDS`]).
    emitted: usize,
    out: Visit,
}

/// Shells whose `-c` operand (or standard input) is a command line.
fn is_shell(name: &str) -> bool {
    // A `matches!` rather than a list searched in a loop: it compiles to length and byte comparisons, and this runs
    // for every command read.
    matches!(
        name,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh" | "yash"
    )
}

/// Words that may start a simple command without being its program.
fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "{" | "}"
            | "!"
            | "if"
            | "then"
            | "else"
            | "elif"
            | "fi"
            | "do"
            | "done"
            | "while"
            | "until"
            | "time"
    )
}

/// Whether a raw word holds a `$` or a backquote at all: without one it neither expands nor substitutes, and the
/// quote-tracking scans below are skipped (most words of a command line are plain).
fn may_expand(raw: &str) -> bool {
    raw.bytes().any(|b| b == b'$' || b == b'`')
}

/// Whether a raw word holds an expansion or substitution outside single quotes.
fn is_dynamic(raw: &str) -> bool {
    let b = raw.as_bytes();
    let mut single = false;
    let mut double = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'`' if !single => return true,
            b'$' if !single => {
                if let Some(&n) = b.get(i + 1)
                    && (n.is_ascii_alphanumeric() || b"_{(@*#?$!-".contains(&n))
                {
                    return true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// The command lines inside `$(…)` and backquotes of a raw word (single-quoted text excluded; `$((…))` is
/// arithmetic, not a command — unless bash reads it as a command substitution starting with a subshell, see
/// [`crate::shell`]'s `double_paren`).
fn substitutions(raw: &str) -> Vec<&str> {
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut single = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && !single {
            i += 2;
            continue;
        }
        if c == b'\'' {
            single = !single;
        } else if !single
            && c == b'$'
            && b.get(i + 1) == Some(&b'(')
            && (b.get(i + 2) != Some(&b'(')
                || crate::shell::double_paren(b, i) == crate::shell::DoubleParen::Command)
        {
            let start = i + 2;
            let mut depth = 0usize;
            let mut j = i + 1;
            let mut quote = 0u8;
            while j < b.len() {
                match b[j] {
                    b'\\' if quote != b'\'' => j += 1,
                    q @ (b'\'' | b'"') if quote == 0 => quote = q,
                    q if q == quote => quote = 0,
                    b'(' if quote == 0 => depth += 1,
                    b')' if quote == 0 => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            out.push(&raw[start..j.min(b.len())]);
            i = j;
        } else if !single && c == b'`' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'`' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            out.push(&raw[start..j.min(b.len())]);
            i = j;
        }
        i += 1;
    }
    out
}

/// The text of a here-document body, without its delimiter line.
fn heredoc_text<'s>(script: &Script<'s>, index: usize) -> Option<&'s str> {
    let doc = script.heredocs.get(index)?;
    let body = script.src.get(doc.start..doc.end)?;
    let trimmed = body.strip_suffix('\n').unwrap_or(body);
    Some(match trimmed.rfind('\n') {
        Some(nl) if trimmed[nl + 1..].trim_start_matches('\t') == doc.delimiter => &trimmed[..nl],
        None if trimmed.trim_start_matches('\t') == doc.delimiter => "",
        _ => trimmed,
    })
}

/// Wrappers that are their options, then the command they run (nothing left: they are the command), with the options
/// that take a value.
const PLAIN_WRAPPERS: &[(&str, &[&str])] = &[
    (
        "sudo",
        &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "-R",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--close-from",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--chroot",
        ],
    ),
    ("doas", &["-u", "-C"]),
    ("pkexec", &["--user"]),
    ("unshare", NAMESPACE_VALUES),
    ("nsenter", NAMESPACE_VALUES),
    ("unbuffer", &[]),
    (
        "systemd-run",
        &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "-E",
            "--setenv",
            "--uid",
            "--gid",
            "-M",
            "--machine",
            "-H",
            "--host",
            "--description",
            "--slice",
            "--working-directory",
            "--nice",
            "--on-active",
            "--on-calendar",
            "--timer-property",
            "--path-property",
            "--socket-property",
        ],
    ),
];

/// The options of `unshare` and `nsenter` that take a value.
const NAMESPACE_VALUES: &[&str] = &[
    "-t",
    "--target",
    "-S",
    "--setuid",
    "-G",
    "--setgid",
    "-R",
    "--root",
    "-w",
    "--wd",
    "--map-user",
    "--map-group",
    "--propagation",
    "--setgroups",
];

/// At most this many arguments (or, with `-I`, lines) are read from a known standard input of `xargs`.
const MAX_XARGS_INPUT: usize = 64;

/// How `xargs` turns its standard input into arguments.
#[derive(Clone, Copy)]
enum XargsInput<'w> {
    /// Blank-separated words appended to the command.
    Append,
    /// Each line replaces this marker (`-I {}`).
    Replace(&'w str),
}

/// How `xargs` with these options reads its input; `None` where a guess could be wrong (`-0`, `-d`, `-a FILE`,
/// `-E EOF`, an empty marker).
fn xargs_input<'w>(options: &[Word<'w>]) -> Option<XargsInput<'w>> {
    let mut mode = XargsInput::Append;
    for (i, w) in options.iter().enumerate() {
        let t = w.text;
        mode = match t {
            "-0" | "--null" | "-d" | "--delimiter" | "-a" | "--arg-file" | "-E" | "--eof" => {
                return None;
            }
            "-I" => XargsInput::Replace(options.get(i + 1)?.text),
            "-i" | "--replace" => XargsInput::Replace("{}"),
            _ if t.starts_with("--replace=") => XargsInput::Replace(&t["--replace=".len()..]),
            _ if t.starts_with("-I") => XargsInput::Replace(&t[2..]),
            _ if t.starts_with("--delimiter=")
                || t.starts_with("--arg-file=")
                || t.starts_with("-d") =>
            {
                return None;
            }
            _ => mode,
        };
    }
    match mode {
        XargsInput::Replace("") => None,
        mode => Some(mode),
    }
}

/// Whether a word is an option (`-x`, `--long`), not `-` (standard input) or a negative number used as an operand.
/// Whether any of the options that lead `words` (up to the first word that is not one) is one `pred` accepts.
fn any_option(words: &[Word<'_>], pred: impl Fn(&str) -> bool) -> bool {
    words
        .iter()
        .take_while(|w| is_option(w.text))
        .any(|w| pred(w.text))
}

fn is_option(w: &str) -> bool {
    w.len() > 1 && w.starts_with('-')
}

/// Skips a wrapper's options: `--` ends them; an option in `with_value` (exact, or a long one without `=`) takes the
/// next word; a short option in `with_value` followed by more characters (`-n5`, `-oL`) carries its value.
fn skip_options<'w, 's>(mut words: &'w [Word<'s>], with_value: &[&str]) -> &'w [Word<'s>] {
    while let Some((w, rest)) = words.split_first() {
        let w = w.text;
        if w == "--" {
            return rest;
        }
        if !is_option(w) {
            break;
        }
        words = if with_value.contains(&w) && !rest.is_empty() {
            &rest[1..]
        } else {
            rest
        };
    }
    words
}

/// Whether an option cluster (`-abc`) holds the letter `c`.
fn cluster_has(w: &str, letter: char) -> bool {
    w.starts_with('-') && !w.starts_with("--") && w[1..].contains(letter)
}

/// What one wrapper's step left: the words it runs next, or nothing more to read (the command was recorded).
enum Step<'w, 's> {
    Next(&'w [Word<'s>]),
    Done,
}

/// Where a simple command was found: its words as written, its output redirections and its known standard input.
struct Found<'a> {
    written: &'a [Word<'a>],
    writes: &'a [&'a str],
    assignments: &'a [Word<'a>],
    /// The text on standard input and how it got there (`|`, `<<<`, `<<`).
    stdin: Option<(&'a str, &'a str)>,
}

fn join(words: &[Word<'_>]) -> String {
    let mut line = String::with_capacity(words.iter().map(|w| w.text.len() + 1).sum());
    for (k, w) in words.iter().enumerate() {
        if k > 0 {
            line.push(' ');
        }
        line.push_str(w.text);
    }
    line
}

/// What a simple command prints when that is known statically: `echo WORDS`, `printf WORDS`, `cat` of a
/// here-string or here-document.
fn prints(words: &[Word<'_>], stdin: Option<&str>) -> Option<String> {
    let (program, args) = words.split_first()?;
    match base_name(program.text) {
        "echo" => {
            let start = args
                .iter()
                .position(|w| !matches!(w.text, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .unwrap_or(args.len());
            Some(join(&args[start..]))
        }
        "printf" => Some(join(args).replace("\\n", "\n")),
        // Paths under each starting point: `ROOT/*` stands for them (`find ~ | xargs rm -rf`).
        "find" => {
            let roots: Vec<&str> = args
                .iter()
                .map(|w| w.text)
                .skip_while(|a| matches!(*a, "-H" | "-L" | "-P"))
                .take_while(|a| !a.starts_with('-') && !matches!(*a, "(" | "!" | ","))
                .collect();
            let roots = if roots.is_empty() { vec!["."] } else { roots };
            let under: Vec<String> = roots
                .iter()
                .map(|r| format!("{}/*", r.trim_end_matches('/')))
                .collect();
            Some(under.join(" "))
        }
        "cat" if args.is_empty() || args.iter().all(|w| w.text == "-") => stdin.map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
