//! A POSIX shell tokenizer and a view of a command line as simple commands.
//!
//! Policies must never decide on a command by looking at its text with `ends_with("&")` or a regular expression:
//! `echo "x &"`, `cmd 2>&1` and a here-document whose body holds `&` all end in `&` as text and none of them starts
//! a background job. [`tokenize`] splits a command line the way `sh` does:
//!
//! - quoting: `'…'`, `"…"` (with `\`-escapes and nested `$(…)`, `${…}`, `` `…` ``), `$'…'`, and `\x` outside quotes;
//! - line continuations (`\` newline) and comments (`#` at the start of a word, to the end of the line);
//! - control operators `&&`, `||`, `;`, `;;`, `&`, `|`, `|&`, `(`, `)` and newlines;
//! - redirections `<`, `>`, `>>`, `>|`, `<>`, `<&`, `>&`, `&>`, `&>>`, `<<`, `<<-`, `<<<`, with an optional io number
//!   (`2>&1`); the body of each here-document is skipped and reported as a [`HereDoc`];
//! - command substitution `$(…)` (recursively tokenized so quotes and parentheses inside it are respected),
//!   arithmetic `$((…))`, parameter expansion `${…}` and backquotes, all kept inside the word they belong to.
//!
//! Every token keeps its byte span in the source so that a policy can rewrite a command by cutting the source, never
//! by re-quoting words. [`Script::simple_commands`] then groups the tokens into simple commands (assignments, words,
//! the operators around them, the subshell depth) for pattern matching.

use std::borrow::Cow;
use std::fmt;

/// A control or redirection operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `&&`
    AndIf,
    /// `||`
    OrIf,
    /// `;`
    Semi,
    /// `;;`, `;&` or `;;&` (case item terminators)
    CaseEnd,
    /// `&`: run the preceding and-or list asynchronously.
    Amp,
    /// `|`
    Pipe,
    /// `|&` (bash: pipe stdout and stderr)
    PipeAmp,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// A redirection operator.
    Redirect(Redirect),
}

impl Op {
    /// Whether this operator ends a simple command (everything but redirections).
    pub fn is_control(self) -> bool {
        !matches!(self, Op::Redirect(_))
    }
}

/// A redirection operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    /// `<`
    In,
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `<&`
    DupIn,
    /// `>&`
    DupOut,
    /// `&>` (bash: stdout and stderr to a file)
    OutErr,
    /// `&>>` (bash: append stdout and stderr to a file)
    AppendOutErr,
    /// `<<`
    HereDoc,
    /// `<<-` (here-document with leading tabs stripped)
    HereDocStripTabs,
    /// `<<<` (bash here-string)
    HereString,
}

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A word (command name, argument, assignment, redirection target).
    Word,
    /// The digits directly before a redirection operator, as in `2>&1`.
    IoNumber,
    /// An operator.
    Op(Op),
    /// An unquoted newline (a command separator).
    Newline,
}

/// One token, with its span in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token<'a> {
    /// What the token is.
    pub kind: TokenKind,
    /// Byte offset of the token's first byte in the source.
    pub start: usize,
    /// Byte offset just past the token's last byte in the source.
    pub end: usize,
    /// For words: the value after quote removal (expansions such as `$(…)` are kept as written). For operators: the
    /// operator text. Borrowed from the source when quote removal changed nothing.
    pub text: Cow<'a, str>,
    /// Whether any part of a word was quoted or escaped.
    pub quoted: bool,
    /// Subshell nesting depth: 0 at top level, 1 inside one `( … )`. A `(` carries the depth outside it.
    pub depth: u32,
}

/// The body of a here-document, skipped by the tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HereDoc {
    /// The delimiter after quote removal.
    pub delimiter: String,
    /// Byte offset where the body starts (just after the newline that ends the line of the `<<`).
    pub start: usize,
    /// Byte offset just past the delimiter line (or the end of the source when the delimiter is missing).
    pub end: usize,
}

/// Why a command line could not be tokenized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset where the unterminated construct starts.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
    /// The line nests expansions (`$(…)`, `${…}`, quotes inside them) deeper than [`MAX_NESTING`]: it is refused
    /// rather than followed, so a hostile line cannot exhaust the stack.
    pub too_deep: bool,
}

/// How deep expansions may nest (`$(` inside `$(`, `${` inside `"…"` inside `${`, …) before tokenizing stops with a
/// [`ParseError`] whose `too_deep` is set. Real command lines stay far below it.
pub const MAX_NESTING: u32 = 64;

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// A tokenized command line.
#[derive(Debug, Clone)]
pub struct Script<'a> {
    /// The source text.
    pub src: &'a str,
    /// Its tokens, in order. Comments and here-document bodies are not tokens.
    pub tokens: Vec<Token<'a>>,
    /// The here-document bodies, in order.
    pub heredocs: Vec<HereDoc>,
}

/// A simple command: optional assignments, then words, delimited by control operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Indices (into [`Script::tokens`]) of the leading `NAME=value` assignments.
    pub assignments: Vec<usize>,
    /// Indices of the words: the command name first, then its arguments. Redirections and their targets are not
    /// included.
    pub words: Vec<usize>,
    /// Index of the first token of the command (assignment, word or redirection).
    pub first_token: usize,
    /// Index of the last token of the command.
    pub last_token: usize,
    /// Subshell depth of the command.
    pub depth: u32,
    /// The control operator (or newline) before the command, if any.
    pub preceded_by: Option<TokenKind>,
    /// The control operator (or newline) after the command, if any.
    pub followed_by: Option<TokenKind>,
}

impl SimpleCommand {
    /// The words' values (command name first).
    pub fn word_texts<'s>(&self, script: &'s Script<'_>) -> Vec<&'s str> {
        self.words
            .iter()
            .map(|&i| &*script.tokens[i].text)
            .collect()
    }
}

/// Tokenizes a command line. Fails only on unterminated quotes, substitutions or expansions.
pub fn tokenize(src: &str) -> Result<Script<'_>, ParseError> {
    let mut lexer = Lexer {
        src,
        b: src.as_bytes(),
        i: 0,
        depth: 0,
        nest: 0,
        // About one token per four bytes of a typical command line: one allocation instead of several regrowths.
        tokens: Vec::with_capacity(src.len() / 4 + 4),
        heredocs: Vec::new(),
    };
    lexer.run(false)?;
    Ok(Script {
        src,
        tokens: lexer.tokens,
        heredocs: lexer.heredocs,
    })
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// Expansions open around the current position (bounded by [`MAX_NESTING`]).
    nest: u32,
    tokens: Vec<Token<'a>>,
    heredocs: Vec<HereDoc>,
}

const fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

/// Bytes with a meaning inside a word: escapes, quotes and expansions.
const fn is_word_special(c: u8) -> bool {
    matches!(c, b'\\' | b'\'' | b'"' | b'$' | b'`')
}

/// Bytes that stand for themselves in a word: neither [`is_meta`] nor [`is_word_special`].
const PLAIN: [bool; 256] = {
    let mut table = [true; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        table[c] = !is_meta(b) && !is_word_special(b);
        c += 1;
    }
    table
};

fn char_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// How bash reads a `$((` (see [`double_paren`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DoubleParen {
    /// An arithmetic expansion ending just before this byte offset.
    Arithmetic(usize),
    /// A command substitution whose commands start with a subshell: `$((cmd) …)`.
    Command,
    /// No closing parenthesis.
    Unterminated,
}

/// How bash reads the `$((` at byte `at` of `b`: arithmetic when the parenthesis opened second closes with a `)`
/// right after it (`$((1+(2)))`, `$(( (1) ))`), else a command substitution starting with a subshell (`$((echo a)
/// )`, `$((rm -rf /); true)`), which bash runs.
pub(crate) fn double_paren(b: &[u8], at: usize) -> DoubleParen {
    let mut j = at + 3;
    let mut parens = 2u32;
    while parens > 0 {
        match b.get(j) {
            None => return DoubleParen::Unterminated,
            Some(b'(') => parens += 1,
            Some(b')') => {
                parens -= 1;
                if parens == 1 && b.get(j + 1) != Some(&b')') {
                    return DoubleParen::Command;
                }
            }
            _ => {}
        }
        j += 1;
    }
    DoubleParen::Arithmetic(j)
}

impl<'a> Lexer<'a> {
    fn err<T>(&self, offset: usize, message: &str) -> Result<T, ParseError> {
        Err(ParseError {
            offset,
            message: message.to_string(),
            too_deep: false,
        })
    }

    fn peek(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    /// Tokenizes until the end of input, or (when `nested`) until the `)` closing a `$(`; returns with `self.i`
    /// just past that `)`.
    fn run(&mut self, nested: bool) -> Result<(), ParseError> {
        let mut pending: Vec<(String, bool)> = Vec::new();
        let mut expect_heredoc_word: Option<bool> = None;
        let open = self.i;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek(0) else {
                if nested {
                    return self.err(
                        open.saturating_sub(2),
                        "unterminated command substitution $(",
                    );
                }
                return Ok(());
            };
            let start = self.i;
            let op = |lexer: &mut Lexer, len: usize, op: Op| {
                lexer.i += len;
                lexer.push(
                    TokenKind::Op(op),
                    start,
                    Cow::Borrowed(&lexer.src[start..start + len]),
                    false,
                );
            };
            match c {
                b'\n' => {
                    self.i += 1;
                    self.push(TokenKind::Newline, start, Cow::Borrowed("\n"), false);
                    for (delimiter, strip) in pending.drain(..) {
                        let doc = self.heredoc_body(delimiter, strip);
                        self.heredocs.push(doc);
                    }
                }
                b'#' => {
                    self.i = self.src[self.i..]
                        .find('\n')
                        .map_or(self.b.len(), |n| self.i + n);
                }
                b';' => match (self.peek(1), self.peek(2)) {
                    (Some(b';'), Some(b'&')) => op(self, 3, Op::CaseEnd),
                    (Some(b';'), _) | (Some(b'&'), _) => op(self, 2, Op::CaseEnd),
                    _ => op(self, 1, Op::Semi),
                },
                b'&' => match (self.peek(1), self.peek(2)) {
                    (Some(b'&'), _) => op(self, 2, Op::AndIf),
                    (Some(b'>'), Some(b'>')) => op(self, 3, Op::Redirect(Redirect::AppendOutErr)),
                    (Some(b'>'), _) => op(self, 2, Op::Redirect(Redirect::OutErr)),
                    _ => op(self, 1, Op::Amp),
                },
                b'|' => match self.peek(1) {
                    Some(b'|') => op(self, 2, Op::OrIf),
                    Some(b'&') => op(self, 2, Op::PipeAmp),
                    _ => op(self, 1, Op::Pipe),
                },
                b'(' => {
                    op(self, 1, Op::LParen);
                    self.depth += 1;
                }
                b')' => {
                    if nested && self.depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                    self.depth = self.depth.saturating_sub(1);
                    op(self, 1, Op::RParen);
                }
                b'<' => match (self.peek(1), self.peek(2)) {
                    (Some(b'<'), Some(b'<')) => op(self, 3, Op::Redirect(Redirect::HereString)),
                    (Some(b'<'), Some(b'-')) => {
                        op(self, 3, Op::Redirect(Redirect::HereDocStripTabs));
                        expect_heredoc_word = Some(true);
                        continue;
                    }
                    (Some(b'<'), _) => {
                        op(self, 2, Op::Redirect(Redirect::HereDoc));
                        expect_heredoc_word = Some(false);
                        continue;
                    }
                    (Some(b'&'), _) => op(self, 2, Op::Redirect(Redirect::DupIn)),
                    (Some(b'>'), _) => op(self, 2, Op::Redirect(Redirect::ReadWrite)),
                    _ => op(self, 1, Op::Redirect(Redirect::In)),
                },
                b'>' => match self.peek(1) {
                    Some(b'>') => op(self, 2, Op::Redirect(Redirect::Append)),
                    Some(b'&') => op(self, 2, Op::Redirect(Redirect::DupOut)),
                    Some(b'|') => op(self, 2, Op::Redirect(Redirect::Clobber)),
                    _ => op(self, 1, Op::Redirect(Redirect::Out)),
                },
                _ => self.word_token(start, expect_heredoc_word, &mut pending)?,
            }
            expect_heredoc_word = None;
        }
    }

    /// Skips blanks and line continuations (on a local index, as in `skip_plain`).
    #[inline]
    fn skip_blanks(&mut self) {
        let (b, mut i) = (self.b, self.i);
        while let Some(&c) = b.get(i) {
            if c == b' ' || c == b'\t' {
                i += 1;
            } else if c == b'\\' && b.get(i + 1) == Some(&b'\n') {
                i += 2;
            } else {
                break;
            }
        }
        self.i = i;
    }

    /// A word starting at `start` (or an io number before a redirection); after `<<` it is a here-document's
    /// delimiter, whose body is read at the next newline (`pending`).
    #[inline]
    fn word_token(
        &mut self,
        start: usize,
        expect_heredoc_word: Option<bool>,
        pending: &mut Vec<(String, bool)>,
    ) -> Result<(), ParseError> {
        let (text, quoted) = self.word()?;
        // The redirection test first: it settles almost every word with one byte.
        let io_number = matches!(self.peek(0), Some(b'<' | b'>'))
            && !quoted
            && !text.is_empty()
            && text.bytes().all(|c| c.is_ascii_digit());
        let kind = if io_number {
            TokenKind::IoNumber
        } else {
            TokenKind::Word
        };
        if let (Some(strip), TokenKind::Word) = (expect_heredoc_word, kind) {
            pending.push((text.to_string(), strip));
        }
        // Unquoted words without escapes are their own source text: no allocation.
        let text = match text {
            Cow::Owned(t) if !quoted && t.len() == self.i - start => {
                Cow::Borrowed(&self.src[start..self.i])
            }
            text => text,
        };
        self.push(kind, start, text, quoted);
        Ok(())
    }

    fn push(&mut self, kind: TokenKind, start: usize, text: Cow<'a, str>, quoted: bool) {
        let depth = self.depth;
        self.tokens.push(Token {
            kind,
            start,
            end: self.i,
            text,
            quoted,
            depth,
        });
    }

    /// Skips one here-document body starting at `self.i`.
    fn heredoc_body(&mut self, delimiter: String, strip_tabs: bool) -> HereDoc {
        let start = self.i;
        while self.i < self.b.len() {
            let line_end = self.src[self.i..]
                .find('\n')
                .map_or(self.b.len(), |n| self.i + n);
            let mut line = &self.src[self.i..line_end];
            if strip_tabs {
                line = line.trim_start_matches('\t');
            }
            self.i = (line_end + 1).min(self.b.len());
            if line == delimiter {
                break;
            }
        }
        HereDoc {
            delimiter,
            start,
            end: self.i,
        }
    }

    /// Advances over bytes that stand for themselves in a word (not metacharacters, quotes, escapes or expansions).
    fn skip_plain(&mut self) {
        // One table lookup per byte (every byte of a command line passes here), on a local index: in a component
        // `self` lives in linear memory, and updating `self.i` per byte was a store per byte.
        let (b, mut i) = (self.b, self.i);
        while i < b.len() && PLAIN[b[i] as usize] {
            i += 1;
        }
        self.i = i;
    }

    /// Scans one word starting at `self.i`; returns its value after quote removal and whether it was quoted.
    ///
    /// Most words are plain (`ls`, `-la`, `src/main.rs`): they are borrowed from the source without allocating.
    fn word(&mut self) -> Result<(Cow<'a, str>, bool), ParseError> {
        let start = self.i;
        self.skip_plain();
        if self.peek(0).is_none_or(is_meta) {
            return Ok((Cow::Borrowed(&self.src[start..self.i]), false));
        }
        self.quoted_word(start)
    }

    /// The rest of a word that holds quotes, escapes or expansions, from `start` (kept out of line: the plain words
    /// of [`Lexer::word`] are the common case, and the tokenizer loop stays small).
    #[inline(never)]
    fn quoted_word(&mut self, start: usize) -> Result<(Cow<'a, str>, bool), ParseError> {
        let mut out = String::from(&self.src[start..self.i]);
        let mut quoted = false;
        while let Some(c) = self.peek(0) {
            if is_meta(c) {
                break;
            }
            match c {
                b'\\' => {
                    quoted = true;
                    match self.peek(1) {
                        Some(b'\n') => self.i += 2,
                        Some(n) => {
                            let len = char_len(n);
                            out.push_str(&self.src[self.i + 1..self.i + 1 + len]);
                            self.i += 1 + len;
                        }
                        None => {
                            out.push('\\');
                            self.i += 1;
                        }
                    }
                }
                b'\'' => {
                    quoted = true;
                    let start = self.i;
                    let Some(close) = self.src[self.i + 1..].find('\'') else {
                        return self.err(start, "unterminated single quote");
                    };
                    out.push_str(&self.src[self.i + 1..self.i + 1 + close]);
                    self.i += close + 2;
                }
                b'"' => {
                    quoted = true;
                    self.double_quoted(&mut out)?;
                }
                b'$' if self.peek(1) == Some(b'\'') => {
                    quoted = true;
                    self.ansi_c_quoted(&mut out)?;
                }
                b'$' | b'`' => self.push_expansion(&mut out)?,
                _ => {
                    let from = self.i;
                    self.skip_plain();
                    out.push_str(&self.src[from..self.i]);
                }
            }
        }
        Ok((Cow::Owned(out), quoted))
    }

    /// Copies the expansion starting at `self.i` (`$…` or a backquote) into `out` as written.
    fn push_expansion(&mut self, out: &mut String) -> Result<(), ParseError> {
        let start = self.i;
        self.expansion()?;
        out.push_str(&self.src[start..self.i]);
        Ok(())
    }

    /// Copies the character starting at `self.i` (first byte `c`) into `out`.
    fn push_char(&mut self, out: &mut String, c: u8) {
        let len = char_len(c);
        out.push_str(&self.src[self.i..self.i + len]);
        self.i += len;
    }

    /// Scans `"…"` starting at the opening quote.
    fn double_quoted(&mut self, out: &mut String) -> Result<(), ParseError> {
        let open = self.i;
        self.i += 1;
        loop {
            let Some(c) = self.peek(0) else {
                return self.err(open, "unterminated double quote");
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => match self.peek(1) {
                    Some(b'\n') => self.i += 2,
                    Some(n @ (b'$' | b'`' | b'"' | b'\\')) => {
                        out.push(n as char);
                        self.i += 2;
                    }
                    _ => {
                        out.push('\\');
                        self.i += 1;
                    }
                },
                b'$' | b'`' => self.push_expansion(out)?,
                _ => self.push_char(out, c),
            }
        }
    }

    /// Scans bash's `$'…'` starting at the `$`.
    fn ansi_c_quoted(&mut self, out: &mut String) -> Result<(), ParseError> {
        let open = self.i;
        self.i += 2;
        loop {
            match self.peek(0) {
                None => return self.err(open, "unterminated $'…' quote"),
                Some(b'\'') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') if self.peek(1).is_some() => {
                    let len = char_len(self.b[self.i + 1]);
                    out.push_str(&self.src[self.i..self.i + 1 + len]);
                    self.i += 1 + len;
                }
                Some(c) => {
                    let len = char_len(c);
                    out.push_str(&self.src[self.i..self.i + len]);
                    self.i += len;
                }
            }
        }
    }

    /// Skips an expansion starting at `$` or a backquote: `$(…)`, `$((…))`, `${…}`, `` `…` ``, or a plain `$`.
    fn expansion(&mut self) -> Result<(), ParseError> {
        if self.nest >= MAX_NESTING {
            return Err(ParseError {
                offset: self.i,
                message: format!("nested too deeply (limit {MAX_NESTING})"),
                too_deep: true,
            });
        }
        self.nest += 1;
        let r = self.expansion_inner();
        self.nest -= 1;
        r
    }

    /// `$(…)` at `self.i`: its commands are lexed (and belong to the line's reading) up to the closing `)`.
    fn command_substitution(&mut self) -> Result<(), ParseError> {
        let mut inner = Lexer {
            src: self.src,
            b: self.b,
            i: self.i + 2,
            depth: 0,
            nest: self.nest,
            tokens: Vec::new(),
            heredocs: Vec::new(),
        };
        inner.run(true)?;
        self.i = inner.i;
        Ok(())
    }

    fn expansion_inner(&mut self) -> Result<(), ParseError> {
        let open = self.i;
        if self.peek(0) == Some(b'`') {
            self.i += 1;
            loop {
                match self.peek(0) {
                    None => return self.err(open, "unterminated backquote"),
                    Some(b'\\') => self.i += 2,
                    Some(b'`') => {
                        self.i += 1;
                        return Ok(());
                    }
                    Some(_) => self.i += 1,
                }
            }
        }
        match self.peek(1) {
            Some(b'(') if self.peek(2) == Some(b'(') => {
                // Arithmetic: balanced parentheses until the closing `))` — unless the parenthesis opened second
                // closes without a `)` right after it. Bash then reads `$((cmd) …)` as a command substitution that
                // starts with a subshell (`echo $((rm -rf /) )` runs `rm`), and so must this reading.
                match double_paren(self.b, self.i) {
                    DoubleParen::Arithmetic(end) => {
                        self.i = end;
                        Ok(())
                    }
                    DoubleParen::Command => self.command_substitution(),
                    DoubleParen::Unterminated => {
                        self.err(open, "unterminated arithmetic expansion $((")
                    }
                }
            }
            Some(b'(') => self.command_substitution(),
            Some(b'{') => {
                self.i += 2;
                let mut braces = 1u32;
                while braces > 0 {
                    match self.peek(0) {
                        None => return self.err(open, "unterminated parameter expansion ${"),
                        Some(b'\\') => self.i += 1,
                        Some(b'{') => braces += 1,
                        Some(b'}') => braces -= 1,
                        Some(b'\'') => {
                            let Some(close) = self.src[self.i + 1..].find('\'') else {
                                return self.err(self.i, "unterminated single quote");
                            };
                            self.i += close + 1;
                        }
                        Some(b'"') => {
                            let mut scratch = String::new();
                            self.double_quoted(&mut scratch)?;
                            continue;
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                Ok(())
            }
            _ => {
                self.i += 1;
                Ok(())
            }
        }
    }
}

/// Whether a raw word is an assignment `NAME=value` (an unquoted valid name before the `=`).
fn is_assignment(raw: &str) -> bool {
    let Some(eq) = raw.bytes().position(|b| b == b'=') else {
        return false;
    };
    let name = &raw[..eq];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

impl<'a> Script<'a> {
    /// The raw source text of token `i`.
    pub fn raw(&self, i: usize) -> &'a str {
        &self.src[self.tokens[i].start..self.tokens[i].end]
    }

    /// Index of the last token that is not a newline, if any.
    pub fn last_significant(&self) -> Option<usize> {
        self.tokens
            .iter()
            .rposition(|t| t.kind != TokenKind::Newline)
    }

    /// Groups the tokens into simple commands, in source order. Commands inside subshells are included with their
    /// depth; words inside command substitutions are not (they are part of the enclosing word).
    pub fn simple_commands(&self) -> Vec<SimpleCommand> {
        let mut out = Vec::with_capacity(4);
        let mut current: Option<SimpleCommand> = None;
        let mut before: Option<TokenKind> = None;
        let mut redirect_target = false;
        for (i, t) in self.tokens.iter().enumerate() {
            let control = match t.kind {
                TokenKind::Newline => true,
                TokenKind::Op(op) => op.is_control(),
                _ => false,
            };
            if control {
                if let Some(mut c) = current.take() {
                    c.followed_by = Some(t.kind);
                    out.push(c);
                }
                before = Some(t.kind);
                redirect_target = false;
                continue;
            }
            let cmd = current.get_or_insert_with(|| SimpleCommand {
                assignments: Vec::new(),
                // Most commands have a handful of words: one allocation, no regrowth.
                words: Vec::with_capacity(8),
                first_token: i,
                last_token: i,
                depth: t.depth,
                preceded_by: before,
                followed_by: None,
            });
            cmd.last_token = i;
            match t.kind {
                TokenKind::Op(_) => redirect_target = true,
                TokenKind::IoNumber => {}
                TokenKind::Word if redirect_target => redirect_target = false,
                TokenKind::Word if cmd.words.is_empty() && is_assignment(self.raw(i)) => {
                    cmd.assignments.push(i)
                }
                TokenKind::Word => cmd.words.push(i),
                TokenKind::Newline => {}
            }
        }
        if let Some(c) = current {
            out.push(c);
        }
        out
    }
}

#[cfg(test)]
mod tests;
