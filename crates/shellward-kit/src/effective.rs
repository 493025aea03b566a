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

impl Reader<'_> {
    /// Whether reading is over: the command bound was reached or the callback stopped it.
    fn full(&mut self) -> bool {
        if self.emitted >= MAX_COMMANDS {
            self.out.truncated = true;
        }
        self.out.truncated || self.out.stopped
    }

    /// Reads a nested command line (a shell string).
    fn line(&mut self, line: &str, ctx: &Context, via: &str) {
        if ctx.depth >= MAX_SHELL_DEPTH {
            self.out.too_deep = true;
            return;
        }
        let Ok(script) = tokenize(line) else {
            return;
        };
        let mut inner = ctx.with(via);
        inner.depth += 1;
        self.commands(&script, &script.simple_commands(), &inner);
    }

    /// Reads the simple commands of a script (`commands` are its [`Script::simple_commands`]).
    fn commands(&mut self, script: &Script<'_>, commands: &[SimpleCommand], ctx: &Context) {
        // Here-document bodies belong to the `<<` operators in order; commands and their tokens are visited in
        // source order, so a running count numbers them.
        let mut next_doc = 0;
        // What the previous simple command prints, when it is known statically (for `echo LINE | bash`).
        let mut printed: Option<String> = None;
        for (k, cmd) in commands.iter().enumerate() {
            if self.full() {
                return;
            }
            let piped = matches!(cmd.preceded_by, Some(TokenKind::Op(Op::Pipe | Op::PipeAmp)));
            let printed_here = if piped { printed.take() } else { None };
            let mut stdin: Option<(&str, &str)> = printed_here.as_deref().map(|p| (p, "|"));
            let mut writes: Vec<&str> = Vec::new();
            // Reserved words leading the command (`if`, `!`, `{`…) are not its program.
            let lead = cmd
                .words
                .iter()
                .position(|&i| script.tokens[i].quoted || !is_reserved(&script.tokens[i].text))
                .unwrap_or(cmd.words.len());
            // The command's words (from `lead`), gathered in the same pass over its tokens that reads substitutions
            // and redirections, so each word's bytes are scanned once.
            let mut words = WordBuf::new();
            let mut next_word = lead;
            let mut assignments = WordBuf::new();
            let mut next_assignment = 0;
            let tokens = script.tokens.iter().enumerate();
            for (i, t) in tokens.take(cmd.last_token + 1).skip(cmd.first_token) {
                if t.kind == TokenKind::Word {
                    let raw = script.raw(i);
                    let expands = may_expand(raw);
                    if expands {
                        for inner in substitutions(raw) {
                            self.line(inner, ctx, "$(…)");
                        }
                    }
                    let word = Word {
                        text: &t.text,
                        dynamic: expands && is_dynamic(raw),
                    };
                    if cmd.words.get(next_word) == Some(&i) {
                        words.push(word);
                        next_word += 1;
                    } else if cmd.assignments.get(next_assignment) == Some(&i) {
                        assignments.push(word);
                        next_assignment += 1;
                    }
                    continue;
                }
                let TokenKind::Op(Op::Redirect(r)) = t.kind else {
                    continue;
                };
                let target = script
                    .tokens
                    .get(i + 1)
                    .filter(|n| n.kind == TokenKind::Word);
                match r {
                    Redirect::Out
                    | Redirect::Append
                    | Redirect::Clobber
                    | Redirect::ReadWrite
                    | Redirect::OutErr
                    | Redirect::AppendOutErr
                    | Redirect::DupOut => {
                        if let Some(n) = target {
                            writes.push(&n.text);
                        }
                    }
                    Redirect::HereString => {
                        if let Some(n) = target {
                            stdin = Some((&n.text, "<<<"));
                        }
                    }
                    Redirect::HereDoc | Redirect::HereDocStripTabs => {
                        if let Some(text) = heredoc_text(script, next_doc) {
                            stdin = Some((text, "<<"));
                        }
                        next_doc += 1;
                    }
                    Redirect::In => stdin = None,
                    _ => {}
                }
            }
            debug_assert_eq!(
                next_word,
                cmd.words.len(),
                "every word of the command was read"
            );
            let words = words.as_slice();
            // Only a command piped into the next one has its output read.
            let next_piped = commands.get(k + 1).is_some_and(|n| {
                matches!(n.preceded_by, Some(TokenKind::Op(Op::Pipe | Op::PipeAmp)))
            });
            if next_piped {
                printed = prints(words, stdin.map(|(s, _)| s));
            }
            let found = Found {
                written: words,
                writes: &writes,
                assignments: assignments.as_slice(),
                stdin,
            };
            if words.is_empty() {
                // Redirections or assignments alone (`> /dev/sda`, `X=/`) still matter: yielded with no words.
                self.emit(words, ctx, &found);
            } else {
                self.unwrap(words, ctx.clone(), &found);
            }
        }
    }

    /// Strips wrappers from a simple command's words and records what remains.
    fn unwrap(&mut self, mut words: &[Word<'_>], mut ctx: Context, found: &Found<'_>) {
        loop {
            if self.full() {
                return;
            }
            let Some((first, rest)) = words.split_first() else {
                return;
            };
            if first.dynamic {
                return self.emit(words, &ctx, found);
            }
            let name = base_name(first.text);
            if let Some((_, values)) = PLAIN_WRAPPERS.iter().find(|(n, _)| *n == name) {
                let r = skip_options(rest, values);
                if r.is_empty() {
                    return self.emit(words, &ctx, found);
                }
                ctx.via.push(name.to_string());
                words = r;
                continue;
            }
            let step = match name {
                "nohup" | "builtin" | "command" | "exec" | "time" | "nice" | "setsid"
                | "stdbuf" | "timeout" | "busybox" | "chroot" => {
                    self.unwrap_simple(name, words, rest, &mut ctx, found)
                }
                "env" => self.unwrap_env(name, words, rest, &mut ctx, found),
                "su" | "runuser" => self.unwrap_su(name, words, rest, &mut ctx, found),
                "xargs" => self.unwrap_xargs(name, words, rest, &mut ctx, found),
                "ionice" | "chrt" | "taskset" | "flock" => {
                    self.unwrap_scheduler(name, words, rest, &mut ctx, found)
                }
                "watch" | "parallel" => self.unwrap_repeater(name, words, rest, &mut ctx, found),
                "strace" | "ltrace" | "script" => {
                    self.unwrap_tracer(name, words, rest, &mut ctx, found)
                }
                "eval" => return self.line(&join(rest), &ctx, "eval"),
                "find" => return self.find(words, &ctx, found),
                _ if is_shell(name) => return self.shell(words, &ctx, found),
                _ => return self.emit(words, &ctx, found),
            };
            let Step::Next(next) = step else {
                return;
            };
            if next.is_empty() {
                // A wrapper with no command (`exec 3>/dev/sda`, `nohup`) is itself the command.
                return self.emit(words, &ctx, found);
            }
            ctx.via.push(name.to_string());
            words = next;
        }
    }

    /// [`Walker::emit`], ending a wrapper's step.
    fn done_emit<'w, 's>(
        &mut self,
        words: &[Word<'_>],
        ctx: &Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        self.emit(words, ctx, found);
        Step::Done
    }

    /// Wrappers that are their options, then the command (`nohup`, `command`, `exec`, `time`, `nice`, `setsid`,
    /// `stdbuf`, `timeout`, `busybox`, `chroot`).
    fn unwrap_simple<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "nohup" | "builtin" => skip_options(rest, &[]),
            "command" => {
                // `command -v NAME` looks a program up; it does not run it.
                if rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| cluster_has(w.text, 'v') || cluster_has(w.text, 'V'))
                {
                    return self.done_emit(words, ctx, found);
                }
                skip_options(rest, &[])
            }
            "exec" => skip_options(rest, &["-a"]),
            "time" => skip_options(rest, &["-f", "-o", "--format", "--output"]),
            "nice" => skip_options(rest, &["-n", "--adjustment"]),
            "setsid" => skip_options(rest, &[]),
            "stdbuf" => skip_options(rest, &["-i", "-o", "-e", "--input", "--output", "--error"]),
            "timeout" => {
                let r = skip_options(rest, &["-s", "-k", "--signal", "--kill-after"]);
                r.get(1..).unwrap_or(&[])
            }
            "busybox" => {
                if rest.is_empty() || is_option(rest[0].text) {
                    return self.done_emit(words, ctx, found);
                }
                rest
            }
            "chroot" => {
                // `chroot [--userspec U:G] [--groups G] NEWROOT [COMMAND…]`; without a command it runs a shell.
                let r = skip_options(rest, &["--userspec", "--groups"]);
                match r.get(1..) {
                    Some(cmd) if !cmd.is_empty() => cmd,
                    _ => return self.done_emit(words, ctx, found),
                }
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// `env [options] [NAME=value]… COMMAND`, and `env -S LINE`.
    fn unwrap_env<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "env" => {
                let mut r = rest;
                let mut split: Option<&str> = None;
                while let Some((w, tail)) = r.split_first() {
                    let t = w.text;
                    if t == "--" {
                        r = tail;
                        break;
                    }
                    if !is_option(t) {
                        break;
                    }
                    if t == "-S" || t == "--split-string" {
                        split = tail.first().map(|s| s.text);
                        r = tail.get(1..).unwrap_or(&[]);
                        break;
                    } else if let Some(s) = t.strip_prefix("--split-string=") {
                        split = Some(s);
                        r = tail;
                        break;
                    } else if let Some(s) = t.strip_prefix("-S") {
                        split = Some(s);
                        r = tail;
                        break;
                    }
                    r = if ["-u", "-C", "--unset", "--chdir"].contains(&t) && !tail.is_empty() {
                        &tail[1..]
                    } else {
                        tail
                    };
                }
                while r
                    .first()
                    .is_some_and(|w| w.text.contains('=') && !w.text.starts_with('=') && !w.dynamic)
                {
                    r = &r[1..];
                }
                if let Some(s) = split {
                    let mut line = s.to_string();
                    for w in r {
                        line.push(' ');
                        line.push_str(w.text);
                    }
                    {
                        self.line(&line, &ctx.with("env"), "env -S");
                        return Step::Done;
                    }
                }
                r
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// `su [options] [user] -c LINE`; `runuser -u USER -- COMMAND…`.
    fn unwrap_su<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "su" | "runuser" => {
                // `su [options] [user] -c LINE`; `runuser -u USER -- CMD…`.
                if let Some(at) = rest.iter().position(|w| {
                    w.text == "-c" || w.text == "--command" || w.text.starts_with("--command=")
                }) {
                    let line = match rest[at].text.strip_prefix("--command=") {
                        Some(l) => Some(l.to_string()),
                        None => rest.get(at + 1).map(|w| w.text.to_string()),
                    };
                    if let Some(line) = line {
                        self.line(&line, &ctx.with(name), &format!("{name} -c"));
                    }
                    return self.done_emit(words, ctx, found);
                }
                if name == "runuser"
                    && let Some(at) = rest.iter().position(|w| w.text == "--")
                    && at + 1 < rest.len()
                {
                    &rest[at + 1..]
                } else {
                    return self.done_emit(words, ctx, found);
                }
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// `xargs [options] COMMAND`: with a known standard input, the command with the arguments it would get.
    fn unwrap_xargs<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "xargs" => {
                let r = skip_options(
                    rest,
                    &[
                        "-a",
                        "-d",
                        "-E",
                        "-I",
                        "-L",
                        "-n",
                        "-P",
                        "-s",
                        "--arg-file",
                        "--delimiter",
                        "--eof",
                        "--replace",
                        "--max-lines",
                        "--max-args",
                        "--max-procs",
                        "--max-chars",
                        "--process-slot-var",
                    ],
                );
                if r.is_empty() {
                    return self.done_emit(words, ctx, found);
                }
                // Arguments read from a known standard input (`echo / | xargs rm -rf`) are known too.
                let options = &rest[..rest.len() - r.len()];
                if let Some((input, _)) = found.stdin
                    && let Some(mode) = xargs_input(options)
                {
                    {
                        self.xargs(r, input, mode, ctx, found);
                        return Step::Done;
                    }
                }
                ctx.more_args = true;
                r
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// Schedulers and locks that run a command: `ionice`, `chrt`, `taskset`, `flock` (and `flock -c LINE`).
    fn unwrap_scheduler<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "ionice" => {
                if rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| ["-p", "-P", "-u", "--pid", "--pgid", "--uid"].contains(&w.text))
                {
                    return self.done_emit(words, ctx, found);
                }
                skip_options(rest, &["-c", "-n", "--class", "--classdata"])
            }
            "chrt" => {
                if rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| w.text == "--pid" || cluster_has(w.text, 'p'))
                {
                    return self.done_emit(words, ctx, found);
                }
                let r = skip_options(
                    rest,
                    &[
                        "-T",
                        "-P",
                        "-D",
                        "--sched-runtime",
                        "--sched-period",
                        "--sched-deadline",
                    ],
                );
                r.get(1..).unwrap_or(&[])
            }
            "taskset" => {
                if rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| w.text == "--pid" || cluster_has(w.text, 'p'))
                {
                    return self.done_emit(words, ctx, found);
                }
                let r = skip_options(rest, &[]);
                r.get(1..).unwrap_or(&[])
            }
            "flock" => {
                let r = skip_options(
                    rest,
                    &["-w", "-E", "--timeout", "--wait", "--conflict-exit-code"],
                );
                let r = r.get(1..).unwrap_or(&[]);
                if let Some((c, tail)) = r.split_first()
                    && (c.text == "-c" || c.text == "--command")
                {
                    if let Some(line) = tail.first() {
                        self.line(line.text, &ctx.with("flock"), "flock -c");
                    }
                    return Step::Done;
                }
                if r.is_empty() {
                    return self.done_emit(words, ctx, found);
                }
                r
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// Commands that run a line again or in parallel: `watch`, `parallel`.
    fn unwrap_repeater<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "watch" => {
                let exec = rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| w.text == "--exec" || cluster_has(w.text, 'x'));
                let r = skip_options(rest, &["-n", "-d", "--interval", "-q", "--equexit"]);
                if r.is_empty() {
                    return self.done_emit(words, ctx, found);
                }
                if !exec {
                    {
                        self.line(&join(r), ctx, "watch");
                        return Step::Done;
                    }
                }
                r
            }
            "parallel" => {
                let r = skip_options(
                    rest,
                    &[
                        "-j",
                        "-S",
                        "-I",
                        "-n",
                        "-N",
                        "-L",
                        "-d",
                        "-E",
                        "-a",
                        "--jobs",
                        "--sshlogin",
                        "--colsep",
                        "--delimiter",
                        "--arg-file",
                        "--joblog",
                        "--results",
                        "--timeout",
                        "--retries",
                        "--tmpdir",
                        "--workdir",
                        "--max-args",
                        "--max-lines",
                    ],
                );
                let end = r
                    .iter()
                    .position(|w| w.text.starts_with(":::"))
                    .unwrap_or(r.len());
                if end == 0 {
                    return self.done_emit(words, ctx, found);
                }
                let mut inner = ctx.clone();
                inner.more_args = true;
                {
                    self.line(&join(&r[..end]), &inner, "parallel");
                    return Step::Done;
                }
            }
            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// Tracers and recorders: `strace`/`ltrace` (not when attached to a running process), `script -c LINE`.
    fn unwrap_tracer<'w, 's>(
        &mut self,
        name: &str,
        words: &'w [Word<'s>],
        rest: &'w [Word<'s>],
        ctx: &mut Context,
        found: &Found<'_>,
    ) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match name {
            "strace" | "ltrace" => {
                // Attached to a running process (`-p PID`), it runs nothing.
                if rest
                    .iter()
                    .take_while(|w| is_option(w.text))
                    .any(|w| w.text == "--attach" || w.text.starts_with("-p"))
                {
                    return self.done_emit(words, ctx, found);
                }
                let r = skip_options(
                    rest,
                    &[
                        "-o", "-e", "-s", "-E", "-u", "-a", "-b", "-I", "-O", "-S", "-X", "-P",
                        "-n", "-l",
                    ],
                );
                if r.is_empty() {
                    return self.done_emit(words, ctx, found);
                }
                r
            }
            "script" => {
                // `script -c LINE [FILE]` runs LINE in a shell (an agent's way to get a terminal).
                if let Some(at) = rest.iter().position(|w| {
                    w.text == "--command"
                        || w.text.starts_with("--command=")
                        || cluster_has(w.text, 'c')
                }) {
                    let w = rest[at].text;
                    let line = if let Some(l) = w.strip_prefix("--command=") {
                        Some(l)
                    } else if w.starts_with("--") {
                        rest.get(at + 1).map(|w| w.text)
                    } else {
                        // `-qc LINE`, or `-cLINE`: the value follows the `c`.
                        let tail = &w[w.find('c').map_or(w.len(), |i| i + 1)..];
                        if tail.is_empty() {
                            rest.get(at + 1).map(|w| w.text)
                        } else {
                            Some(tail)
                        }
                    };
                    if let Some(line) = line {
                        self.line(line, &ctx.with("script"), "script -c");
                    }
                    return Step::Done;
                }
                return self.done_emit(words, ctx, found);
            }

            _ => return self.done_emit(words, ctx, found),
        };
        Step::Next(next)
    }

    /// `xargs COMMAND` fed a known `input`: the command with the arguments it would get (each line in place of the
    /// marker, with `-I`), standard input consumed.
    fn xargs(
        &mut self,
        command: &[Word<'_>],
        input: &str,
        mode: XargsInput<'_>,
        ctx: &Context,
        found: &Found<'_>,
    ) {
        let mut inner = ctx.with("xargs");
        inner.more_args = false;
        let consumed = Found {
            stdin: None,
            ..*found
        };
        match mode {
            XargsInput::Append => {
                let mut all: Vec<Word<'_>> = command.to_vec();
                all.extend(
                    input
                        .split_whitespace()
                        .take(MAX_XARGS_INPUT)
                        .map(|text| Word {
                            text,
                            dynamic: false,
                        }),
                );
                self.unwrap(&all, inner, &consumed);
            }
            XargsInput::Replace(marker) => {
                let lines = input.lines().map(str::trim_start);
                for line in lines.filter(|l| !l.is_empty()).take(MAX_XARGS_INPUT) {
                    let replaced: Vec<String> = command
                        .iter()
                        .map(|w| w.text.replace(marker, line))
                        .collect();
                    let all: Vec<Word<'_>> = replaced
                        .iter()
                        .zip(command)
                        .map(|(text, w)| Word {
                            text,
                            dynamic: w.dynamic,
                        })
                        .collect();
                    self.unwrap(&all, inner.clone(), &consumed);
                }
            }
        }
    }

    /// A shell: its `-c` string, its standard input when that is known, or the shell itself running a script file.
    fn shell(&mut self, words: &[Word<'_>], ctx: &Context, found: &Found<'_>) {
        let name = base_name(words[0].text);
        let mut rest = &words[1..];
        let mut with_c = false;
        let mut reads_stdin = false;
        while let Some((w, tail)) = rest.split_first() {
            let t = w.text;
            if t == "--" || t == "-" {
                rest = tail;
                break;
            }
            if !(is_option(t) || (t.starts_with('+') && t.len() > 1)) {
                break;
            }
            rest = tail;
            if t.starts_with("--") {
                if ["--rcfile", "--init-file"].contains(&t) && !rest.is_empty() {
                    rest = &rest[1..];
                }
                continue;
            }
            let letters = &t[1..];
            if t.starts_with('-') && letters.contains('c') {
                with_c = true;
            }
            if t.starts_with('-') && letters.contains('s') {
                reads_stdin = true;
            }
            // `-o NAME`, `+o NAME`, `-O NAME`: the option's name follows.
            if (letters.ends_with('o') || letters.ends_with('O')) && !rest.is_empty() {
                rest = &rest[1..];
            }
        }
        if with_c {
            if let Some(line) = rest.first() {
                let via = format!("{name} -c");
                self.line(line.text, ctx, &via);
            }
            return;
        }
        if rest.is_empty() || reads_stdin {
            if let Some((text, how)) = found.stdin {
                let via = if how == "|" {
                    format!("| {name}")
                } else {
                    format!("{name} {how}")
                };
                self.line(text, ctx, &via);
            }
            if rest.is_empty() {
                return;
            }
        }
        self.emit(words, ctx, found);
    }

    /// `find`: the find itself, and every command its `-exec`, `-execdir`, `-ok`, `-okdir` actions run.
    fn find(&mut self, words: &[Word<'_>], ctx: &Context, found: &Found<'_>) {
        self.emit(words, ctx, found);
        let mut i = 1;
        while i < words.len() {
            if matches!(words[i].text, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let start = i + 1;
                let mut end = start;
                while end < words.len() && !matches!(words[end].text, ";" | "+") {
                    end += 1;
                }
                let mut inner = ctx.with("find -exec");
                inner.more_args = true;
                let none = Found {
                    written: found.written,
                    writes: &[],
                    assignments: &[],
                    stdin: None,
                };
                self.unwrap(&words[start..end], inner, &none);
                i = end;
            }
            i += 1;
        }
    }

    fn emit(&mut self, words: &[Word<'_>], ctx: &Context, found: &Found<'_>) {
        if (words.is_empty() && found.writes.is_empty() && found.assignments.is_empty())
            || self.full()
        {
            return;
        }
        self.emitted += 1;
        let view = CommandView {
            words,
            via: &ctx.via,
            more_args: ctx.more_args,
            writes: found.writes,
            written: found.written,
            assignments: found.assignments,
            depth: ctx.depth,
        };
        if (self.visit)(&view).is_break() {
            self.out.stopped = true;
        }
    }
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
mod tests {
    use super::*;

    /// Each effective command as `via… => words`.
    fn read(line: &str) -> Vec<String> {
        effective_commands(line)
            .unwrap()
            .commands
            .iter()
            .map(|c| {
                if c.via.is_empty() {
                    c.words.join(" ")
                } else {
                    format!("{} => {}", c.via.join(", "), c.words.join(" "))
                }
            })
            .collect()
    }

    /// Bash runs `$((cmd) …)` as a command substitution (a subshell first), and keeps `$((…))` arithmetic only when
    /// the second parenthesis closes right before the last one.
    #[test]
    fn a_double_parenthesis_that_is_a_command_substitution_is_read() {
        for line in [
            "echo $((rm -rf /) )",
            "echo \"$((rm -rf /); true)\"",
            "x=$((rm -rf /)|cat)",
        ] {
            let commands = read(line);
            assert!(
                commands.iter().any(|c| c.ends_with("=> rm -rf /")),
                "{line}: {commands:?}"
            );
        }
        for line in [
            "echo $(( (1+2) * 3 ))",
            "echo $((1+(2)))",
            "echo $(( (x) ))",
        ] {
            assert_eq!(read(line).len(), 1, "{line}: {:?}", read(line));
        }
    }

    #[test]
    fn wrappers_are_stripped_with_their_options() {
        for (line, want) in [
            ("timeout 5 kill -9 -1", "timeout => kill -9 -1"),
            (
                "timeout -s KILL -k 2 5s kill -9 -1",
                "timeout => kill -9 -1",
            ),
            ("nice -n 10 pkill node", "nice => pkill node"),
            ("nice -5 pkill node", "nice => pkill node"),
            ("env -i FOO=1 PATH=/bin rm -rf /", "env => rm -rf /"),
            ("env -u HOME -C /tmp kill -9 -1", "env => kill -9 -1"),
            ("sudo -u root -E reboot", "sudo => reboot"),
            ("doas -u root reboot", "doas => reboot"),
            ("busybox kill -9 -1", "busybox => kill -9 -1"),
            ("command kill -9 -1", "command => kill -9 -1"),
            ("builtin kill -9 -1", "builtin => kill -9 -1"),
            ("exec -a x kill -9 -1", "exec => kill -9 -1"),
            ("time kill -9 -1", "kill -9 -1"),
            ("/usr/bin/time -f %e kill -9 -1", "time => kill -9 -1"),
            ("nohup setsid pkill node", "nohup, setsid => pkill node"),
            ("stdbuf -oL -e 0 pkill node", "stdbuf => pkill node"),
            ("ionice -c 3 -n 7 pkill node", "ionice => pkill node"),
            ("chrt -f 10 pkill node", "chrt => pkill node"),
            ("taskset -c 0,1 pkill node", "taskset => pkill node"),
            ("taskset 0x3 pkill node", "taskset => pkill node"),
            ("flock /tmp/l pkill node", "flock => pkill node"),
            (
                "flock -w 5 /tmp/l -c 'pkill node'",
                "flock, flock -c => pkill node",
            ),
            ("watch -n 1 pkill node", "watch => pkill node"),
            ("watch -x pkill node", "watch => pkill node"),
            ("xargs -0 -n1 pkill", "xargs => pkill"),
            ("! sudo id", "sudo => id"),
            ("nohup", "nohup"),
            ("exec 3>/dev/sda", "exec"),
            ("chroot / rm -rf /", "chroot => rm -rf /"),
            (
                "chroot --userspec 1:1 /srv kill -9 -1",
                "chroot => kill -9 -1",
            ),
            ("unshare -r -m rm -rf /", "unshare => rm -rf /"),
            ("nsenter -t 1 -m -p kill -9 -1", "nsenter => kill -9 -1"),
            ("strace -f -o /tmp/t rm -rf /", "strace => rm -rf /"),
            ("unbuffer pkill node", "unbuffer => pkill node"),
            (
                "systemd-run --user -p MemoryMax=1G pkill node",
                "systemd-run => pkill node",
            ),
            (
                "script -qc 'pkill node' /dev/null",
                "script, script -c => pkill node",
            ),
            (
                "script --command='kill -9 -1'",
                "script, script -c => kill -9 -1",
            ),
        ] {
            assert_eq!(read(line), [want], "{line}");
        }
    }

    #[test]
    fn shell_strings_are_read() {
        for (line, want) in [
            ("bash -lc 'kill -9 -1'", "bash -c => kill -9 -1"),
            ("bash -ec 'kill -9 -1'", "bash -c => kill -9 -1"),
            ("sh -o pipefail -xc 'pkill x'", "sh -c => pkill x"),
            ("zsh -c \"sudo id\"", "zsh -c, sudo => id"),
            ("eval 'kill -9 -1'", "eval => kill -9 -1"),
            ("echo 'kill -9 -1' | bash", "| bash => kill -9 -1"),
            ("printf 'pkill node' | sh -s", "| sh => pkill node"),
            ("bash <<< 'pkill node'", "bash <<< => pkill node"),
            ("bash <<EOF\npkill node\nEOF\n", "bash << => pkill node"),
            ("cat <<'EOF' | sh\nkill -9 -1\nEOF", "| sh => kill -9 -1"),
            ("su -c 'kill -9 -1'", "su, su -c => kill -9 -1"),
            ("env -S 'kill -9 -1'", "env, env -S => kill -9 -1"),
            (
                "timeout 5 bash -c 'timeout 3 pkill x'",
                "timeout, bash -c, timeout => pkill x",
            ),
        ] {
            let got = read(line);
            assert!(got.contains(&want.to_string()), "{line}: {got:?}");
        }
        assert_eq!(
            read("echo $(pkill node)"),
            ["$(…) => pkill node", "echo $(pkill node)"]
        );
        assert_eq!(read("X=`sudo id` true"), ["$(…), sudo => id", "true"]);
        // A script file, not a string.
        assert_eq!(read("bash ./deploy.sh"), ["bash ./deploy.sh"]);
        assert_eq!(read("cat notes | bash"), ["cat notes"]);
    }

    #[test]
    fn find_and_parallel_run_commands() {
        assert_eq!(
            read("find / -exec rm -rf {} +"),
            ["find / -exec rm -rf {} +", "find -exec => rm -rf {}"]
        );
        let r = effective_commands("find . -name x -execdir pkill {} ;").unwrap();
        assert!(r.commands[1].more_args);
        assert_eq!(r.commands[1].words, ["pkill", "{}"]);
        assert_eq!(
            read("parallel -j4 'kill -9 {}' ::: 1 2"),
            ["parallel => kill -9 {}"]
        );
    }

    #[test]
    fn dynamic_words_are_marked() {
        let r = effective_commands("$k -9 -1; \"$CC\" main.c; '$x' y; $(which kill) -1").unwrap();
        let known: Vec<bool> = r.commands.iter().map(|c| c.program_known()).collect();
        assert_eq!(known, [false, false, true, true, false]);
        assert!(r.commands[0].dynamic.iter().skip(1).all(|d| !d));
    }

    #[test]
    fn look_alikes_are_not_commands() {
        assert_eq!(read("echo 'kill -9 -1'"), ["echo kill -9 -1"]);
        assert_eq!(read("command -v pkill"), ["command -v pkill"]);
        assert_eq!(read("ionice -p 42"), ["ionice -p 42"]);
        assert_eq!(read("grep -r 'bash -c' ."), ["grep -r bash -c ."]);
        assert_eq!(read("timeout 5 cargo test"), ["timeout => cargo test"]);
    }

    #[test]
    fn redirections_and_written_words_are_kept() {
        let r = effective_commands("sudo tee /dev/sda > /dev/sdb").unwrap();
        let c = &r.commands[0];
        assert_eq!(c.words, ["tee", "/dev/sda"]);
        assert_eq!(c.writes, ["/dev/sdb"]);
        assert_eq!(c.written, ["sudo", "tee", "/dev/sda"]);
        assert!(c.via("sudo"));
    }

    #[test]
    fn static_output_is_what_echo_and_printf_print() {
        assert_eq!(static_output("echo /").as_deref(), Some("/"));
        assert_eq!(static_output("echo -n '~'").as_deref(), Some("~"));
        assert_eq!(static_output("printf '/\\n'").as_deref(), Some("/"));
        assert_eq!(static_output(" echo a  b ").as_deref(), Some("a b"));
        for line in [
            "echo $X",
            "echo /; ls",
            "echo / > f",
            "ls /",
            "X=1 echo /",
            "echo $(pwd)",
            "",
            "echo '",
        ] {
            assert_eq!(static_output(line), None, "{line}");
        }
    }

    #[test]
    fn xargs_fed_a_known_input_gets_known_arguments() {
        for (line, want) in [
            ("echo / | xargs rm -rf", "xargs => rm -rf /"),
            ("printf 'a b' | xargs -n1 rm -f", "xargs => rm -f a b"),
            ("echo / | xargs -I{} rm -rf {}/", "xargs => rm -rf //"),
            ("xargs rm -rf <<< '~'", "xargs => rm -rf ~"),
            // Where the input is not read as blank-separated words, its arguments stay unknown.
            ("echo /tmp | xargs -0 rm -rf", "xargs => rm -rf"),
            ("find ~ -type f | xargs rm -rf", "xargs => rm -rf ~/*"),
            ("find / | xargs -I{} rm -rf {}", "xargs => rm -rf /*"),
            ("ls | xargs rm -rf", "xargs => rm -rf"),
        ] {
            let got = read(line);
            assert_eq!(
                got.last().map(String::as_str),
                Some(want),
                "{line}: {got:?}"
            );
        }
        let r = effective_commands("echo a | xargs rm; ls | xargs rm").unwrap();
        assert!(!r.commands[1].more_args, "known arguments");
        assert!(r.commands[3].more_args, "arguments only known at run time");
    }

    #[test]
    fn assignments_are_kept_and_alone_are_commands_without_words() {
        let r = effective_commands("X=/ Y=\"$Z\"; X=1 timeout 5 rm -rf $X").unwrap();
        assert_eq!(r.commands.len(), 2);
        assert!(r.commands[0].words.is_empty());
        assert_eq!(r.commands[0].assignments, ["X=/", "Y=$Z"]);
        assert_eq!(r.commands[1].words, ["rm", "-rf", "$X"]);
        assert_eq!(r.commands[1].assignments, ["X=1"]);
    }

    #[test]
    fn redirections_alone_are_commands_without_words() {
        for line in ["> /dev/sda", "bash -c '>/dev/sda'", "true; >>/dev/sdb"] {
            let r = effective_commands(line).unwrap();
            let c = r.commands.iter().find(|c| c.words.is_empty()).expect(line);
            assert!(c.writes[0].starts_with("/dev/sd"), "{line}: {c:?}");
        }
        // Nothing to run and nothing written: nothing yielded.
        assert!(effective_commands("< in").unwrap().commands.is_empty());
    }

    #[test]
    fn a_visit_stops_where_its_callback_does() {
        let script = tokenize("a; timeout 5 b; c; d").unwrap();
        let mut seen = Vec::new();
        let visit = visit_effective_commands(&script, &script.simple_commands(), |c| {
            seen.push(c.line());
            if c.via("timeout") {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(seen, ["a", "b"]);
        assert!(visit.stopped && !visit.truncated && !visit.too_deep);
        // Nothing more is read once stopped, not even shell strings in later words.
        let script = tokenize("a $(b) $(c)").unwrap();
        let mut seen = Vec::new();
        let visit = visit_effective_commands(&script, &script.simple_commands(), |c| {
            seen.push(c.line());
            ControlFlow::Break(())
        });
        assert_eq!(seen, ["b"]);
        assert!(visit.stopped);
    }

    #[test]
    fn words_after_assignments_and_redirections_are_the_command() {
        let line = "A=$(sudo id) B=1 cmd -x > \"$(pkill x)\" 2>err arg 'q $y'";
        assert_eq!(
            read(line),
            ["$(…), sudo => id", "$(…) => pkill x", "cmd -x arg q $y"]
        );
        let r = effective_commands(line).unwrap();
        let c = &r.commands[2];
        assert_eq!(c.writes, ["$(pkill x)", "err"]);
        assert_eq!(c.dynamic, [false, false, false, false]);
        assert_eq!(c.written, c.words);
    }

    #[test]
    fn long_commands_keep_every_word() {
        // More words than the reader keeps on its stack.
        let line = "if timeout 5 make -j4 a b c d e f g h i j; then echo $x 1 2 3 4 5 6 7 8 9; fi";
        assert_eq!(
            read(line),
            [
                "timeout => make -j4 a b c d e f g h i j",
                "echo $x 1 2 3 4 5 6 7 8 9"
            ]
        );
        let r = effective_commands(line).unwrap();
        assert_eq!(r.commands[0].written.len(), 14);
        assert_eq!(r.commands[1].dynamic.iter().filter(|d| **d).count(), 1);
    }

    #[test]
    fn each_here_document_feeds_its_own_command() {
        let line = "cat <<A > notes; bash <<B\nhello\nA\npkill node\nB\n";
        assert_eq!(read(line), ["cat", "bash << => pkill node"]);
        let c = &effective_commands(line).unwrap().commands[0];
        assert_eq!(c.writes, ["notes"]);
    }

    #[test]
    fn hostile_lines_cost_bounded_work() {
        let line = format!("{}pkill x", "eval ".repeat(20));
        let r = effective_commands(&line).unwrap();
        assert!(r.too_deep);
        assert!(!r.complete());
        let wide = "true;".repeat(MAX_COMMANDS + 10);
        let r = effective_commands(&wide).unwrap();
        assert!(r.truncated);
        assert_eq!(r.commands.len(), MAX_COMMANDS);
    }
}
