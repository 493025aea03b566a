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

use std::fmt;

/// A parsed word pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    program: String,
    required: Vec<String>,
    forbidden: Vec<String>,
}

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

impl Pattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let err = |problem: &str| PatternError {
            pattern: text.to_string(),
            problem: problem.to_string(),
        };
        let mut words = text.split_whitespace();
        let program = words
            .next()
            .ok_or_else(|| err("it is empty; give at least a program name"))?;
        if program.starts_with('!') {
            return Err(err(
                "the first word must be a program name, not a `!` exclusion",
            ));
        }
        let mut required = Vec::new();
        let mut forbidden = Vec::new();
        for w in words {
            match w.strip_prefix('!') {
                Some("") => return Err(err("a lone `!` excludes nothing; write `!WORD`")),
                Some(rest) => forbidden.push(rest.to_string()),
                None => required.push(w.to_string()),
            }
        }
        Ok(Pattern {
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
            program: program.to_string(),
            required,
            forbidden,
        })
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
        let name = if self.program.contains('/') {
            program
        } else {
            base
        };
        glob(&self.program, name)
    }

    /// Whether the arguments (program excluded) satisfy the required and forbidden words.
    fn matches_args<S: AsRef<str>>(&self, args: &[S]) -> bool {
        if self
            .forbidden
            .iter()
            .any(|f| args.iter().any(|a| glob(f, a.as_ref())))
        {
            return false;
        }
        let mut rest = args.iter();
        self.required
            .iter()
            .all(|r| rest.any(|a| glob(r, a.as_ref())))
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
    if !p.contains(&b'*') {
        return p == t;
    }
    let (mut pi, mut ti) = (0, 0);
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

/// Orders program names by length, then bytes.
fn by_length(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// A set of patterns indexed by program name, so matching a command checks only the patterns for its program (plus
/// those whose program is a glob or a path).
///
/// The index is a sorted list searched by bisection: for the hundred or so patterns of a policy that is a handful of
/// string comparisons per lookup, with no hashing (this runs on every decision of a policy component).
#[derive(Debug, Clone, Default)]
pub struct PatternSet {
    patterns: Vec<Pattern>,
    /// (program, pattern indices in the order added), sorted by program length, then program: most probes are
    /// settled by comparing lengths.
    by_program: Vec<(String, Vec<usize>)>,
    /// (literal text before the first `*` of the program, pattern index), in the order added.
    globbed: Vec<(String, usize)>,
}

impl PatternSet {
    /// Builds a set from patterns.
    pub fn new(patterns: Vec<Pattern>) -> PatternSet {
        let mut set = PatternSet::default();
        for p in patterns {
            set.push(p);
        }
        set
    }

    /// Adds a pattern.
    pub fn push(&mut self, p: Pattern) {
        let i = self.patterns.len();
        if p.program.contains('*') || p.program.contains('/') {
            let prefix = p.program.split('*').next().unwrap_or("");
            // A path pattern is matched against the whole command word, a name pattern against its base name.
            self.globbed.push((prefix.to_string(), i));
        } else {
            match self
                .by_program
                .binary_search_by(|(name, _)| by_length(name, &p.program))
            {
                Ok(k) => self.by_program[k].1.push(i),
                Err(k) => self.by_program.insert(k, (p.program.clone(), vec![i])),
            }
        }
        self.patterns.push(p);
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
        let named = match self
            .by_program
            .binary_search_by(|(name, _)| by_length(name, base))
        {
            Ok(k) => self.by_program[k].1.as_slice(),
            Err(_) => &[],
        };
        // Patterns indexed under the base name already match the program: only their arguments are checked.
        let mut best = named
            .iter()
            .copied()
            .find(|&i| self.patterns[i].matches_args(args));
        for (prefix, i) in &self.globbed {
            if best.is_some_and(|b| b < *i) {
                break;
            }
            let p = &self.patterns[*i];
            let name = if p.program.contains('/') {
                program
            } else {
                base
            };
            if name.starts_with(prefix.as_str())
                && p.matches_program(program, base)
                && p.matches_args(args)
            {
                best = Some(*i);
                break;
            }
        }
        best.map(|i| &self.patterns[i])
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
    fn bad_patterns_are_refused() {
        assert!(Pattern::parse("   ").is_err());
        assert!(Pattern::parse("!npm").is_err());
        assert!(Pattern::parse("npm !").is_err());
        assert_eq!(
            Pattern::parse("  npm   start ").unwrap().as_str(),
            "npm start"
        );
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
