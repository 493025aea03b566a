//! Word patterns matched against a tokenized simple command.
//!
//! A pattern is a list of words separated by blanks, e.g. `docker compose up !-d !--detach` or `tail -*f*`:
//!
//! - the first word names the program. Without a `/` it matches the program's base name, so `vite` matches
//!   `./node_modules/.bin/vite`; with a `/` it must match the command word exactly;
//! - every further plain word must appear among the arguments, in this order (other arguments may come between);
//! - a word starting with `!` must not appear among the arguments at all;
//! - `*` inside a word matches any run of characters (`--port=*`, `-*f*`).
//!
//! Matching is done on word values after quote removal, so `"npm" run dev` matches `npm run dev`, while
//! `echo "npm run dev"` does not (its program is `echo`).

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

/// One word of a pattern: its byte range in the pattern's text (after the `!` of an exclusion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word {
    start: u32,
    end: u32,
    forbidden: bool,
    /// The word holds a `*` (matched by [`glob`]; otherwise by equality).
    star: bool,
}

/// A parsed word pattern.
///
/// It keeps its text (blanks normalized) and the byte ranges of its words, nothing else: parsing allocates once at
/// most, and a built-in pattern ([`Pattern::parse_static`], [`PatternSet::from_builtin`]) borrows its text. A
/// policy configured for every evaluation (fresh instances) sets up its whole pattern list each time, so this is on
/// the decision path: a built-in list's patterns are split into words only when a command's program first matches
/// theirs.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: Cow<'static, str>,
    /// Every word, the program first (split on first use for a built-in from [`PatternSet::from_builtin`]).
    words: OnceLock<Vec<Word>>,
    /// Where the program word ends in `text`.
    program_end: u32,
    /// The program word holds a `*` or a `/` (matched by glob or as a path, not looked up by name).
    globbed: bool,
    /// The program word holds a `/`: it is matched against the command word itself, not its base name.
    path: bool,
    /// Length of the program word's text before its first `*` (all of it when there is none).
    lead: u32,
}

/// Two patterns are equal when their (normalized) texts are: the words follow from the text.
impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern text.
    pub pattern: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid pattern {:?}: {}", self.pattern, self.problem)
    }
}

impl std::error::Error for PatternError {}

/// Whether `text` is already in normal form: words separated by single spaces, no blanks around them. One pass over
/// the bytes; text with non-ASCII characters is checked for Unicode blanks as well.
fn is_normal(text: &str) -> bool {
    let b = text.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    if first == b' ' || last == b' ' {
        return false;
    }
    let mut prev_space = false;
    let mut ascii = true;
    for &c in b {
        if c == b' ' {
            if prev_space {
                return false;
            }
            prev_space = true;
            continue;
        }
        prev_space = false;
        if c.is_ascii_whitespace() {
            return false;
        }
        ascii &= c.is_ascii();
    }
    ascii || !text.chars().any(|c| c.is_whitespace() && !c.is_ascii())
}

/// The words of normalized text, or what is wrong with it. Bytes, not chars: the separator is an ASCII space, so
/// every cut falls on a character boundary.
fn split_words(bytes: &[u8]) -> Result<Vec<Word>, &'static str> {
    if bytes.is_empty() {
        return Err("it is empty; give at least a program name");
    }
    let mut words = Vec::with_capacity(bytes.iter().filter(|&&b| b == b' ').count() + 1);
    let mut start = 0usize;
    for w in bytes.split(|&b| b == b' ') {
        let end = start + w.len();
        let word = match w.strip_prefix(b"!") {
            Some(_) if words.is_empty() => {
                return Err("the first word must be a program name, not a `!` exclusion");
            }
            Some(b"") => return Err("a lone `!` excludes nothing; write `!WORD`"),
            Some(_) => Word {
                start: (start + 1) as u32,
                end: end as u32,
                forbidden: true,
                star: w.contains(&b'*'),
            },
            None => Word {
                start: start as u32,
                end: end as u32,
                forbidden: false,
                star: w.contains(&b'*'),
            },
        };
        words.push(word);
        start = end + 1;
    }
    Ok(words)
}

/// Length of the program word of normalized pattern text (up to the first space).
const fn program_len(bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() && bytes[i] != b' ' {
        i += 1;
    }
    i
}

/// Whether the program word (`bytes[..end]`) is a glob or a path.
const fn is_globbed(bytes: &[u8], end: usize) -> bool {
    let mut i = 0;
    while i < end {
        if bytes[i] == b'*' || bytes[i] == b'/' {
            return true;
        }
        i += 1;
    }
    false
}

/// Orders pattern texts by their program words' [`program_key`], then length, then bytes: the index's order (usable
/// at compile time), which groups each key's programs into one bucket.
const fn program_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (la, lb) = (program_len(a), program_len(b));
    let (ka, kb) = (program_key(a.split_at(la).0), program_key(b.split_at(lb).0));
    if ka != kb {
        return if ka < kb { Less } else { Greater };
    }
    if la != lb {
        return if la < lb { Less } else { Greater };
    }
    let mut i = 0;
    while i < la {
        if a[i] != b[i] {
            return if a[i] < b[i] { Less } else { Greater };
        }
        i += 1;
    }
    Equal
}

/// Most patterns a built-in list ordered by [`program_order`] may hold.
pub const MAX_BUILTIN_PATTERNS: usize = 512;

/// The index of a built-in pattern list, computed at compile time by [`program_order`] so that a policy's
/// `configure` neither parses, scans nor sorts the list (a fresh instance per evaluation runs `configure` every time):
/// the numbers of the patterns named by a plain program (not a glob or a path) ordered by program length, then
/// program, then number; the numbers of the globbed ones; each pattern's program word; and the program filter. Pass
/// it with the list to [`PatternSet::from_builtin`]:
///
/// ```
/// use shellward_kit::pattern::{BuiltinIndex, PatternSet, program_order};
/// const LIST: &[&str] = &["npm run dev", "python* -m http.server", "nodemon"];
/// const INDEX: BuiltinIndex = program_order(LIST);
/// let set = PatternSet::from_builtin(LIST, &INDEX);
/// assert_eq!(set.find(&["nodemon", "app.js"]).map(|p| p.as_str()), Some("nodemon"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BuiltinIndex {
    /// Length of the list the index was computed for.
    len: usize,
    /// Numbers of the plain-program patterns, in index order; `named` of them.
    order: [u16; MAX_BUILTIN_PATTERNS],
    named: usize,
    /// Numbers of the globbed patterns, in list order; `globbed_len` of them.
    globbed: [u16; MAX_BUILTIN_PATTERNS],
    globbed_len: usize,
    /// Per pattern: where its program word ends, the length of the program's text before a `*`, and
    /// [`GLOBBED`]/[`PATH`] flags.
    program_end: [u16; MAX_BUILTIN_PATTERNS],
    lead: [u16; MAX_BUILTIN_PATTERNS],
    flags: [u8; MAX_BUILTIN_PATTERNS],
    /// Where each [`program_key`]'s bucket starts in `order` (see [`PatternSet`]).
    starts: [u16; KEYS + 1],
}

/// [`BuiltinIndex::flags`]: the program word holds a `*` or a `/`.
const GLOBBED: u8 = 1;
/// [`BuiltinIndex::flags`]: the program word holds a `/`.
const PATH: u8 = 2;

/// What a pattern's program word is: where it ends, the length of its text before a `*`, and whether it is a glob
/// or a path. One definition for parsed patterns and for [`program_order`]'s compile-time index.
struct ProgramWord {
    end: usize,
    lead: usize,
    globbed: bool,
    path: bool,
}

/// The [`ProgramWord`] of normalized pattern text. Only a globbed program (a few of a list) is scanned twice.
const fn program_word(text: &[u8]) -> ProgramWord {
    let end = program_len(text);
    let mut w = ProgramWord {
        end,
        lead: end,
        globbed: is_globbed(text, end),
        path: false,
    };
    if w.globbed {
        let mut k = end;
        while k > 0 {
            k -= 1;
            if text[k] == b'/' {
                w.path = true;
            }
            if text[k] == b'*' {
                w.lead = k;
            }
        }
    }
    w
}

/// Computes the [`BuiltinIndex`] of a built-in list at compile time.
///
/// Compilation fails (a panic in constant evaluation) when the list holds more than [`MAX_BUILTIN_PATTERNS`] or a
/// pattern longer than 65,535 bytes.
pub const fn program_order(list: &[&str]) -> BuiltinIndex {
    assert!(
        list.len() <= MAX_BUILTIN_PATTERNS,
        "too many built-in patterns for program_order"
    );
    let mut index = BuiltinIndex {
        len: list.len(),
        order: [0; MAX_BUILTIN_PATTERNS],
        named: 0,
        globbed: [0; MAX_BUILTIN_PATTERNS],
        globbed_len: 0,
        program_end: [0; MAX_BUILTIN_PATTERNS],
        lead: [0; MAX_BUILTIN_PATTERNS],
        flags: [0; MAX_BUILTIN_PATTERNS],
        starts: [0; KEYS + 1],
    };
    let mut i = 0;
    while i < list.len() {
        let text = list[i].as_bytes();
        assert!(
            text.len() <= u16::MAX as usize,
            "a built-in pattern is too long"
        );
        let w = program_word(text);
        let end = w.end;
        index.program_end[i] = end as u16;
        index.lead[i] = w.lead as u16;
        if w.globbed {
            index.flags[i] = GLOBBED | if w.path { PATH } else { 0 };
            index.globbed[index.globbed_len] = i as u16;
            index.globbed_len += 1;
        } else {
            let key = program_key(text.split_at(end).0) as usize;
            // Every bucket after this key's starts one later.
            let mut k = key + 1;
            while k <= KEYS {
                index.starts[k] += 1;
                k += 1;
            }
            // Insertion sort; equal programs keep their numbers' order.
            let mut at = index.named;
            while at > 0 {
                let prev = list[index.order[at - 1] as usize].as_bytes();
                if matches!(program_cmp(prev, text), std::cmp::Ordering::Greater) {
                    index.order[at] = index.order[at - 1];
                    at -= 1;
                } else {
                    break;
                }
            }
            index.order[at] = i as u16;
            index.named += 1;
        }
        i += 1;
    }
    index
}

impl Pattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let normal = if is_normal(text) {
            text.to_string()
        } else {
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        Pattern::from_normal(Cow::Owned(normal), text)
    }

    /// Parses a pattern whose text lives for the whole program (a built-in list): in normal form it is borrowed,
    /// not copied.
    pub fn parse_static(text: &'static str) -> Result<Pattern, PatternError> {
        if is_normal(text) {
            Pattern::from_normal(Cow::Borrowed(text), text)
        } else {
            Pattern::parse(text)
        }
    }

    /// Splits normalized text into words; `original` is quoted in errors.
    fn from_normal(text: Cow<'static, str>, original: &str) -> Result<Pattern, PatternError> {
        let err = |problem: &str| PatternError {
            pattern: original.to_string(),
            problem: problem.to_string(),
        };
        let words = split_words(text.as_bytes()).map_err(err)?;
        let mut p = Pattern::unsplit(text);
        p.words = OnceLock::from(words);
        Ok(p)
    }

    /// A pattern whose words are split on first use; `text` must be in normal form and valid (the built-in lists
    /// are checked by their crates' tests through [`Pattern::parse_static`]).
    fn unsplit(text: Cow<'static, str>) -> Pattern {
        let bytes = text.as_bytes();
        let w = program_word(bytes);
        Pattern {
            text,
            words: OnceLock::new(),
            program_end: w.end as u32,
            globbed: w.globbed,
            path: w.path,
            lead: w.lead as u32,
        }
    }

    /// The words, split now if this is their first use.
    fn words(&self) -> &[Word] {
        // A built-in is valid (tested); should one not be, it matches by its program alone rather than panic.
        self.words
            .get_or_init(|| split_words(self.text.as_bytes()).unwrap_or_default())
    }

    /// The program word as bytes (for ordering the index: no character-boundary checks).
    #[inline]
    fn program_bytes(&self) -> &[u8] {
        &self.text.as_bytes()[..self.program_end as usize]
    }

    fn word(&self, w: &Word) -> &str {
        &self.text[w.start as usize..w.end as usize]
    }

    /// Whether an argument matches a pattern word: by equality unless the word holds a `*` (most do not, and the
    /// lengths settle most comparisons).
    fn word_matches(&self, w: &Word, arg: &str) -> bool {
        if w.star {
            glob(self.word(w), arg)
        } else {
            same(self.word(w).as_bytes(), arg.as_bytes())
        }
    }

    /// The pattern's first word: the program it matches.
    pub fn program(&self) -> &str {
        &self.text[..self.program_end as usize]
    }

    /// The pattern as written (blanks normalized).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the command words (program first) match this pattern.
    pub fn matches<S: AsRef<str>>(&self, words: &[S]) -> bool {
        let Some((program, args)) = words.split_first() else {
            return false;
        };
        let program = program.as_ref();
        self.matches_program(program, base_name(program)) && self.matches_args(args)
    }

    /// Whether the program word (`program`, with base name `base`) matches the pattern's first word.
    fn matches_program(&self, program: &str, base: &str) -> bool {
        let own = self.program();
        let name = if self.path { program } else { base };
        let lead = self.lead as usize;
        if lead == own.len() {
            return same(own.as_bytes(), name.as_bytes());
        }
        // The literal text before the `*` settles most programs (`python*` against `npm`): first byte, then the rest.
        let (own_bytes, name_bytes) = (own.as_bytes(), name.as_bytes());
        if lead > 0 && name_bytes.first() != own_bytes.first() {
            return false;
        }
        glob(own, name)
    }

    /// Whether the arguments (program excluded) satisfy the required and forbidden words.
    fn matches_args<S: AsRef<str>>(&self, args: &[S]) -> bool {
        let rest = self.words().get(1..).unwrap_or(&[]);
        if rest
            .iter()
            .filter(|w| w.forbidden)
            .any(|f| args.iter().any(|a| self.word_matches(f, a.as_ref())))
        {
            return false;
        }
        let mut args = args.iter();
        rest.iter()
            .filter(|w| !w.forbidden)
            .all(|r| args.any(|a| self.word_matches(r, a.as_ref())))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Glob match where `*` matches any run of characters and everything else matches itself.
///
/// Works on bytes: `*` is ASCII and every other pattern byte must match literally, so matching UTF-8 text byte-wise
/// gives the same answer as matching characters, without allocating.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let Some(first_star) = p.iter().position(|&c| c == b'*') else {
        return same(p, t);
    };
    // The literal text before the first `*` settles most mismatches (`python*` against `npm`) without the loop.
    if !t.starts_with(&p[..first_star]) {
        return false;
    }
    let (mut pi, mut ti) = (first_star, first_star);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The last `/`-separated component of a program word (`vite` for `./node_modules/.bin/vite`).
pub fn base_name(program: &str) -> &str {
    match program.as_bytes().iter().rposition(|&b| b == b'/') {
        Some(i) => &program[i + 1..],
        None => program,
    }
}

/// Whether two words are equal. A byte loop rather than `==`: words are short, and in a policy component `==` calls
/// the C library's `memcmp` (a byte loop behind a call, ~80 instructions per comparison measured with callgrind),
/// which was a tenth of the default policy's pattern matching.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A set of patterns indexed by program name, so matching a command checks only the patterns for its program (plus
/// those whose program is a glob or a path).
///
/// The index is a list of pattern numbers grouped into buckets by a key (a program's length and first and
/// last bytes): a lookup compares the command's program with the few programs of its bucket, and most commands
/// (`ls`, `cargo`, `git`) find their bucket empty. No hashing of whole words and no allocation per program: this
/// runs on every decision of a policy component, and a fresh instance builds the set for every decision.
#[derive(Debug, Clone)]
pub struct PatternSet {
    patterns: Vec<Pattern>,
    /// Numbers of the patterns named by a plain program, sorted by [`program_key`], then program (length, then
    /// bytes), then the order added: each key's programs form one bucket, and equal programs keep their order.
    by_program: Vec<usize>,
    /// Where each key's bucket starts in `by_program` (bucket `k` is `starts[k]..starts[k + 1]`).
    starts: [u32; KEYS + 1],
    /// Numbers of the patterns whose program is a glob or a path, in the order added.
    globbed: Vec<usize>,
    /// The first bytes the globbed patterns' programs can match (all 256 when one starts with `*`): a command whose
    /// program starts otherwise skips them.
    globbed_first: [u64; 4],
}

impl Default for PatternSet {
    fn default() -> PatternSet {
        PatternSet {
            patterns: Vec::new(),
            by_program: Vec::new(),
            starts: [0; KEYS + 1],
            globbed: Vec::new(),
            globbed_first: [0; 4],
        }
    }
}

/// How many [`program_key`]s (buckets) the index has.
const KEYS: usize = 128;

/// A program's bucket (0..[`KEYS`]) in [`PatternSet`]'s index, from its length and first and last bytes (no hashing of the whole
/// word: it runs on every command a policy reads).
const fn program_key(program: &[u8]) -> u32 {
    let (Some(&first), Some(&last)) = (program.first(), program.last()) else {
        return 0;
    };
    let mix = (program.len() as u32)
        .wrapping_mul(31)
        .wrapping_add((first as u32).wrapping_mul(7))
        .wrapping_add(last as u32);
    mix % KEYS as u32
}

impl PatternSet {
    /// Builds a set from patterns.
    pub fn new(patterns: Vec<Pattern>) -> PatternSet {
        let mut set = PatternSet {
            by_program: Vec::with_capacity(patterns.len()),
            patterns,
            ..PatternSet::default()
        };
        for i in 0..set.patterns.len() {
            if set.is_globbed(i) {
                set.globbed.push(i);
                set.note_globbed(i);
            } else {
                set.by_program.push(i);
                // Counted per key here, summed into bucket starts below: one pass, not one per pattern.
                set.starts[program_key(set.patterns[i].program_bytes()) as usize + 1] += 1;
            }
        }
        for k in 1..=KEYS {
            set.starts[k] += set.starts[k - 1];
        }
        // Patterns of the same program stay in the order added (ties broken by number: no merge buffer needed).
        let patterns = &set.patterns;
        set.by_program.sort_unstable_by(|&a, &b| {
            program_cmp(patterns[a].program_bytes(), patterns[b].program_bytes()).then(a.cmp(&b))
        });
        set
    }

    /// A set of built-in patterns (static text in normal form, each valid: check them in a test with
    /// [`Pattern::parse_static`]) with the [`BuiltinIndex`] computed for exactly this list at compile time. Nothing is
    /// parsed, scanned or sorted here; a pattern is split into words when a command's program first matches it. An
    /// index computed for a list of another length is not used: the list is then indexed here, as [`PatternSet::new`]
    /// does.
    pub fn from_builtin(list: &'static [&'static str], index: &BuiltinIndex) -> PatternSet {
        if index.len != list.len() {
            return PatternSet::new(
                list.iter()
                    .map(|t| Pattern::unsplit(Cow::Borrowed(t)))
                    .collect(),
            );
        }
        let patterns: Vec<Pattern> = list
            .iter()
            .enumerate()
            .map(|(i, t)| Pattern {
                text: Cow::Borrowed(t),
                words: OnceLock::new(),
                program_end: u32::from(index.program_end[i]),
                globbed: index.flags[i] & GLOBBED != 0,
                path: index.flags[i] & PATH != 0,
                lead: u32::from(index.lead[i]),
            })
            .collect();
        let mut set = PatternSet {
            patterns,
            by_program: index.order[..index.named]
                .iter()
                .map(|&i| usize::from(i))
                .collect(),
            globbed: index.globbed[..index.globbed_len]
                .iter()
                .map(|&i| usize::from(i))
                .collect(),
            starts: index.starts.map(u32::from),
            globbed_first: [0; 4],
        };
        for k in 0..set.globbed.len() {
            set.note_globbed(set.globbed[k]);
        }
        set
    }

    fn is_globbed(&self, i: usize) -> bool {
        self.patterns[i].globbed
    }

    /// Adds pattern `i` (globbed) to the first-byte filter.
    fn note_globbed(&mut self, i: usize) {
        let p = &self.patterns[i];
        match p.program_bytes().first() {
            Some(&b) if p.lead > 0 => self.globbed_first[usize::from(b >> 6)] |= 1 << (b & 63),
            _ => self.globbed_first = [u64::MAX; 4],
        }
    }

    /// Whether a program or base name starting with these bytes may match a globbed pattern.
    fn may_match_globbed(&self, program: &[u8], base: &[u8]) -> bool {
        let has = |b: Option<&u8>| {
            b.is_some_and(|&b| self.globbed_first[usize::from(b >> 6)] & (1 << (b & 63)) != 0)
        };
        has(program.first()) || has(base.first())
    }

    /// Adds a pattern.
    pub fn push(&mut self, p: Pattern) {
        let i = self.patterns.len();
        self.patterns.push(p);
        if self.is_globbed(i) {
            self.globbed.push(i);
            self.note_globbed(i);
        } else {
            let patterns = &self.patterns;
            let program = patterns[i].program_bytes();
            let key = program_key(program) as usize;
            // In its bucket, after every pattern of the same program: the order added is kept.
            let bucket = &self.by_program[self.starts[key] as usize..self.starts[key + 1] as usize];
            let at = self.starts[key] as usize
                + bucket.partition_point(|&j| {
                    program_cmp(patterns[j].program_bytes(), program) != std::cmp::Ordering::Greater
                });
            self.by_program.insert(at, i);
            self.starts[key + 1..].iter_mut().for_each(|s| *s += 1);
        }
    }

    /// The patterns, in the order added.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The first pattern (in the order added) matching the command words.
    pub fn find<S: AsRef<str>>(&self, words: &[S]) -> Option<&Pattern> {
        let program = words.first()?.as_ref();
        let base = base_name(program);
        let args = &words[1..];
        let patterns = &self.patterns;
        let mut best = None;
        let key = program_key(base.as_bytes()) as usize;
        let bucket = &self.by_program[self.starts[key] as usize..self.starts[key + 1] as usize];
        // Patterns indexed under the base name already match the program: only their arguments are checked. The
        // bucket's programs are in order, so the first match is the first added.
        for &i in bucket {
            if same(patterns[i].program_bytes(), base.as_bytes()) && patterns[i].matches_args(args)
            {
                best = Some(i);
                break;
            }
        }
        if !self.may_match_globbed(program.as_bytes(), base.as_bytes()) {
            return best.map(|i| &patterns[i]);
        }
        for &i in &self.globbed {
            if best.is_some_and(|b| b < i) {
                break;
            }
            let p = &patterns[i];
            if p.matches_program(program, base) && p.matches_args(args) {
                best = Some(i);
                break;
            }
        }
        best.map(|i| &patterns[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, cmd: &str) -> bool {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        Pattern::parse(p).unwrap().matches(&words)
    }

    #[test]
    fn program_and_ordered_arguments() {
        assert!(m("npm run dev", "npm run dev"));
        assert!(m("npm run dev", "npm run dev -- --port 3000"));
        assert!(m("npm run dev", "npm --silent run dev"));
        assert!(!m("npm run dev", "npm run build"));
        assert!(!m("npm run dev", "npm dev run"));
        assert!(m("vite", "./node_modules/.bin/vite --host"));
        assert!(!m("./vite", "vite"));
        assert!(!m("npm", ""));
    }

    #[test]
    fn exclusions_and_globs() {
        assert!(m("docker compose up !-d !--detach", "docker compose up"));
        assert!(!m(
            "docker compose up !-d !--detach",
            "docker compose up -d"
        ));
        assert!(!m(
            "docker compose up !-d !--detach",
            "docker compose up --build --detach"
        ));
        assert!(m("tail -*f*", "tail -n 100 -f app.log"));
        assert!(m("tail -*f*", "tail -fn100 app.log"));
        assert!(!m("tail -*f*", "tail -n 100 app.log"));
        assert!(m("python* -m http.server", "python3 -m http.server 8000"));
    }

    #[test]
    fn the_program_index_never_hides_a_pattern() {
        // Programs of many lengths and first and last bytes, so that several share a filter bit.
        const LIST: &[&str] = &[
            "a",
            "ab",
            "ba",
            "abc",
            "cba",
            "npm run dev",
            "pnpm dev",
            "bun dev",
            "vite !build",
            "x",
            "make watch",
            "node server.js",
            "python* -m http.server",
            "./bin/*",
            "*serve",
            "uvicorn",
            "gunicorn",
            "hugo server",
            "zola serve",
            "jekyll serve",
            "rails server",
            "php -S *",
            "deno task dev",
            "air",
            "reflex run",
        ];
        const ORDER: BuiltinIndex = program_order(LIST);
        let parsed: Vec<Pattern> = LIST.iter().map(|p| Pattern::parse(p).unwrap()).collect();
        let mut pushed = PatternSet::default();
        for p in &parsed {
            pushed.push(p.clone());
        }
        let sets = [
            PatternSet::new(parsed.clone()),
            PatternSet::from_builtin(LIST, &ORDER),
            pushed,
        ];
        for (k, set) in sets.iter().enumerate() {
            for p in &parsed {
                // A command made of the pattern's own words (globs filled in) matches it.
                let words: Vec<String> = p
                    .words()
                    .iter()
                    .filter(|w| !w.forbidden)
                    .map(|w| p.word(w).replace('*', "q"))
                    .collect();
                assert_eq!(
                    set.find(&words).map(|f| f.as_str()),
                    Some(p.as_str()),
                    "set {k}: {words:?}"
                );
            }
            for miss in ["cargo", "ls", "git", "bc", "b", "nnpm"] {
                assert_eq!(set.find(&[miss, "dev"]), None, "set {k}: {miss}");
            }
        }
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Pattern::parse("   ").is_err());
        assert!(Pattern::parse("!npm").is_err());
        assert!(Pattern::parse("npm !").is_err());
        assert_eq!(
            Pattern::parse("  npm   start ").unwrap().as_str(),
            "npm start"
        );
    }

    #[test]
    fn blanks_are_normalized_and_static_text_is_borrowed() {
        for (text, normal) in [
            ("npm\tstart", "npm start"),
            ("npm\u{a0}start", "npm start"),
            ("  tail  -*f* ", "tail -*f*"),
            ("über !-x", "über !-x"),
        ] {
            let p = Pattern::parse(text).unwrap();
            assert_eq!(p.as_str(), normal, "{text:?}");
            assert_eq!(Pattern::parse_static(Box::leak(text.into())).unwrap(), p);
        }
        let p = Pattern::parse_static("docker compose up !-d").unwrap();
        assert!(matches!(p.text, Cow::Borrowed(_)));
        assert_eq!(p.program(), "docker");
        assert!(p.matches(&["docker", "compose", "up"]));
        assert!(!p.matches(&["docker", "compose", "up", "-d"]));
    }

    /// A built-in set (index computed at compile time, words split on first use) has the index a parsed set builds.
    #[test]
    fn builtin_sets_are_indexed_like_parsed_sets() {
        const LIST: &[&str] = &[
            "*-server --watch",
            "http-server",
            "npm run dev",
            "./bin/*",
            "npm start",
            "srv*",
            "http-server",
            "vite !build",
            "ng serve",
        ];
        const ORDER: BuiltinIndex = program_order(LIST);
        let builtin = PatternSet::from_builtin(LIST, &ORDER);
        let parsed = PatternSet::new(LIST.iter().map(|p| Pattern::parse(p).unwrap()).collect());
        assert_eq!(builtin.by_program, parsed.by_program);
        assert_eq!(builtin.globbed, parsed.globbed);
        assert!(builtin.patterns[2].words.get().is_none(), "not split yet");
        let w = ["npm", "run", "dev"];
        assert_eq!(builtin.find(&w).map(|p| p.as_str()), Some("npm run dev"));
        assert!(
            builtin.patterns[2].words.get().is_some(),
            "split on first use"
        );
        assert_eq!(builtin.find(&["vite", "build"]), None);
        assert_eq!(builtin.patterns(), parsed.patterns());
        // The compile-time index describes each pattern as parsing it does.
        for (b, p) in builtin.patterns.iter().zip(&parsed.patterns) {
            assert_eq!(
                (b.program_end, b.globbed, b.path, b.lead),
                (p.program_end, p.globbed, p.path, p.lead),
                "{}",
                b.as_str()
            );
        }
        assert_eq!(builtin.starts, parsed.starts);
        assert_eq!(builtin.globbed_first, parsed.globbed_first);
        // An index computed for another list is not used.
        let other = PatternSet::from_builtin(&LIST[1..], &ORDER);
        assert_eq!(
            other.find(&["ng", "serve"]).map(|p| p.as_str()),
            Some("ng serve")
        );
        assert_eq!(other.len(), LIST.len() - 1);
    }

    #[test]
    fn pushed_patterns_keep_the_order_added() {
        let mut set = PatternSet::new(vec![Pattern::parse("npm run dev").unwrap()]);
        set.push(Pattern::parse("npm run").unwrap());
        set.push(Pattern::parse("nodemon").unwrap());
        set.push(Pattern::parse("npm").unwrap());
        let find = |cmd: &str| {
            let w: Vec<&str> = cmd.split_whitespace().collect();
            set.find(&w).map(|p| p.as_str().to_string())
        };
        assert_eq!(find("npm run dev").as_deref(), Some("npm run dev"));
        assert_eq!(find("npm run build").as_deref(), Some("npm run"));
        assert_eq!(find("npm ci").as_deref(), Some("npm"));
        assert_eq!(find("nodemon x.js").as_deref(), Some("nodemon"));
        assert_eq!(set.len(), 4);
    }

    /// A set of `patterns` and a function returning the first one matching a command (split on blanks).
    fn finder(patterns: &[&str]) -> impl Fn(&str) -> Option<String> {
        let set = PatternSet::new(
            patterns
                .iter()
                .map(|p| Pattern::parse(p).unwrap())
                .collect(),
        );
        move |cmd: &str| {
            let w: Vec<&str> = cmd.split_whitespace().collect();
            set.find(&w).map(|p| p.as_str().to_string())
        }
    }

    #[test]
    fn pattern_sets_find_the_first_match_in_order() {
        let find = finder(&[
            "npm run dev",
            "python* -m http.server",
            "npm start",
            "./serve",
        ]);
        assert_eq!(find("npm start").as_deref(), Some("npm start"));
        assert_eq!(find("/usr/bin/npm run dev").as_deref(), Some("npm run dev"));
        assert_eq!(
            find("python3 -m http.server").as_deref(),
            Some("python* -m http.server")
        );
        assert_eq!(find("./serve").as_deref(), Some("./serve"));
        assert_eq!(find("serve"), None);
        assert_eq!(find("npm test"), None);

        // Order decides between indexed and globbed patterns; globs may sit anywhere in the program word.
        let find = finder(&[
            "*-server --watch",
            "http-server",
            "./bin/*",
            "srv*",
            "http-server",
        ]);
        assert_eq!(
            find("http-server --watch").as_deref(),
            Some("*-server --watch")
        );
        assert_eq!(find("http-server").as_deref(), Some("http-server"));
        assert_eq!(find("./bin/dev x").as_deref(), Some("./bin/*"));
        assert_eq!(find("bin/dev"), None);
        assert_eq!(find("/opt/srvd").as_deref(), Some("srv*"));
        assert_eq!(find("xsrv"), None);
    }

    #[test]
    fn glob_edge_cases() {
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b", "aXc"));
        assert!(glob("*.log", "x.y.log"));
        assert!(glob("ü*", "über"));
    }
}
