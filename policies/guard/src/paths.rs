//! Which paths the guard protects, read the way the shell and the kernel would resolve them.
//!
//! A target is resolved lexically before it is judged: `//`, `/.`, `/usr/..`, `/tmp/../../` are `/`; `~`, `~/`,
//! `$HOME` and `${HOME}` are the home directory; a relative target is joined to the working directory when that is
//! known (the request's `workdir`, or an earlier `cd` on the same line), so `cd / && rm -rf *` is `rm -rf /*`.
//! Brace alternatives (`/{usr,etc}`) are each judged, and a glob is judged by what it could match: `/u*` could be
//! `/usr`, `~/*` is everything in the home directory.

/// Top-level directories whose loss breaks the machine.
const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "sbin",
    "srv", "sys", "usr", "var",
];

/// Second-level directories whose loss breaks the machine (`/usr/lib`, `/var/lib`).
const SYSTEM_SUBDIRS: &[(&str, &[&str])] = &[
    (
        "usr",
        &[
            "bin", "lib", "lib32", "lib64", "libexec", "local", "sbin", "share", "include",
        ],
    ),
    ("var", &["lib", "log", "spool", "cache", "mail"]),
];

/// A word with more brace groups than this is not expanded: it is judged as if it could be `/`.
pub const MAX_BRACE_GROUPS: usize = 16;

/// At most this many alternatives are read from one word's braces; a word with more is judged by its first ones.
pub const MAX_ALTERNATIVES: usize = 64;

/// Where a resolved path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    /// `/`.
    Slash,
    /// The home directory (its own path is not known to a policy).
    Home,
    /// Above the home directory (`~/..`): `/home` or higher.
    AboveHome,
}

/// A path resolved lexically: a root and the components below it (no `.`, `..` or empty ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    root: Root,
    parts: Vec<String>,
}

impl Resolved {
    fn root() -> Resolved {
        Resolved {
            root: Root::Slash,
            parts: Vec::new(),
        }
    }

    fn home() -> Resolved {
        Resolved {
            root: Root::Home,
            parts: Vec::new(),
        }
    }

    /// Applies the components of `rest` (a path relative to `self`).
    fn join(mut self, rest: &str) -> Resolved {
        for part in rest.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if self.parts.pop().is_none() && self.root == Root::Home {
                        self.root = Root::AboveHome;
                    }
                }
                _ => self.parts.push(part.to_string()),
            }
        }
        self
    }

    /// Whether removing, moving or recursively re-owning this path harms the machine (see the module docs).
    pub fn is_protected(&self) -> bool {
        let parts: Vec<&str> = self.parts.iter().map(String::as_str).collect();
        match (self.root, parts.as_slice()) {
            (Root::AboveHome, _) => true,
            (Root::Home, []) => true,
            (Root::Home, [child]) => is_wide_glob(child),
            (Root::Home, _) => false,
            (Root::Slash, []) => true,
            (Root::Slash, [top]) => SYSTEM_DIRS.iter().any(|d| matches_name(top, d)),
            // A user's home directory (`/home/alice`) or everything in one.
            (Root::Slash, ["home", _]) => true,
            (Root::Slash, ["home", _, child]) => is_wide_glob(child),
            (Root::Slash, [top, sub]) => {
                // Everything in a system directory (`/usr/*`), or one of its vital subdirectories.
                let system = SYSTEM_DIRS.contains(top);
                (system && is_wide_glob(sub))
                    || SYSTEM_SUBDIRS
                        .iter()
                        .any(|(dir, subs)| dir == top && subs.iter().any(|s| matches_name(sub, s)))
            }
            (Root::Slash, _) => false,
        }
    }

    /// Whether this is `/` or a top-level system directory (`/usr`, `/u*`), whose mode or owner alone matters.
    pub fn is_top_level(&self) -> bool {
        self.root == Root::Slash && self.parts.len() <= 1 && self.is_protected()
    }
}

/// Whether a path component (possibly a glob) could name `name`.
fn matches_name(component: &str, name: &str) -> bool {
    component == name || is_unknown(component) || (has_glob(component) && fnmatch(component, name))
}

/// A component that is only a parameter expansion not known statically (`$X`, `${DIR}`, `${X:-}`): any name, or none.
fn is_unknown(component: &str) -> bool {
    let Some(rest) = component.strip_prefix('$') else {
        return false;
    };
    match rest.strip_prefix('{') {
        Some(inner) => inner.ends_with('}') && !inner[..inner.len() - 1].contains(['{', '}', '$']),
        None => !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
    }
}

/// Shell pattern matching of one path component: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`/`[^x]`; a `[` without its `]`
/// is literal. Written here (not the `glob` crate) because the guard needs only this, in a component kept small; the
/// star backtracking keeps it O(pattern × name).
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = name.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(1),
            Some('[') => match class(&p[pi..], t[ti]) {
                Some((true, len)) => Some(len),
                Some((false, _)) => None,
                None => (t[ti] == '[').then_some(1),
            },
            Some(&c) => (c == t[ti]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(len), _) => {
                pi += len;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A bracket expression at the start of `p`: whether `c` matches it and its length; `None` when it is not closed.
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negated = matches!(p.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let &lo = p.get(i)?;
        if lo == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&hi| hi != ']') {
            let hi = p[i + 2];
            matched |= lo <= c && c <= hi;
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// A glob that matches (nearly) every entry of a directory: `*`, `.*`, `**`, `?*`, `*.*`, `[a-z]*`.
fn is_wide_glob(component: &str) -> bool {
    if is_unknown(component) {
        return true;
    }
    if !component.contains('*') {
        return false;
    }
    let mut in_class = false;
    for c in component.chars() {
        match c {
            '[' => in_class = true,
            ']' => in_class = false,
            _ if in_class => {}
            '*' | '?' | '.' => {}
            _ => return false,
        }
    }
    true
}

/// The working directory commands on a line run in, as far as it is known statically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cwd(Option<Resolved>);

impl Cwd {
    /// The directory a request names (`None`, or a relative one: unknown).
    pub fn from_workdir(workdir: Option<&str>) -> Cwd {
        Cwd(workdir.and_then(|w| resolve_one(w, &Cwd(None))))
    }

    /// Follows a `cd`/`pushd` with these arguments (after the program); anything not statically known (`cd -`,
    /// `cd "$DIR"`) makes the directory unknown.
    pub fn change(&mut self, args: &[&str]) {
        let operands: Vec<&str> = args
            .iter()
            .copied()
            .skip_while(|a| a.starts_with('-') && *a != "-" && *a != "--")
            .skip_while(|a| *a == "--")
            .collect();
        let dynamic = operands.iter().any(|a| {
            let rest = ["~", "$HOME", "${HOME}"]
                .iter()
                .find_map(|h| a.strip_prefix(h))
                .unwrap_or(a);
            rest.contains(['$', '`'])
        });
        self.0 = match operands.as_slice() {
            _ if dynamic => None,
            [] => Some(Resolved::home()),
            ["-"] => None,
            [dir] => resolve_one(dir, self),
            _ => None,
        };
    }

    /// Forgets the directory (`popd`, a `cd` it cannot follow).
    pub fn forget(&mut self) {
        self.0 = None;
    }
}

/// Every path `word` can name once braces are expanded, each resolved against `cwd`; relative ones are left out
/// when `cwd` is unknown.
pub fn resolve(word: &str, cwd: &Cwd) -> Vec<Resolved> {
    if brace_groups(word).len() > MAX_BRACE_GROUPS {
        // Too many to expand in bounded work: judged as if it could be `/` (no real command needs so many).
        return vec![Resolved::root()];
    }
    expand_braces(word)
        .iter()
        .filter_map(|w| resolve_one(w, cwd))
        .collect()
}

/// Whether any path `word` can name is protected (see [`Resolved::is_protected`]).
pub fn is_protected(word: &str, cwd: &Cwd) -> bool {
    resolve(word, cwd).iter().any(Resolved::is_protected)
}

fn resolve_one(word: &str, cwd: &Cwd) -> Option<Resolved> {
    for home in ["~", "$HOME", "${HOME}"] {
        if let Some(rest) = word.strip_prefix(home)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(Resolved::home().join(rest));
        }
    }
    if let Some(rest) = word.strip_prefix('/') {
        return Some(Resolved::root().join(rest));
    }
    if let Some(rest) = word.strip_prefix("~+")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return cwd.0.clone().map(|dir| dir.join(rest));
    }
    if let Some(user) = word.strip_prefix('~') {
        // `~NAME`: that user's home directory.
        let (name, rest) = user.split_once('/').unwrap_or((user, ""));
        if name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Some(Resolved::root().join("home").join(name).join(rest));
        }
    }
    if word.is_empty() || word.starts_with('~') || word.starts_with('$') {
        // `~user`, an unknown variable or an empty word: not statically known.
        return None;
    }
    cwd.0.clone().map(|dir| dir.join(word))
}

/// The words a bash brace expansion of `word` yields (`/{usr,etc}` → `/usr`, `/etc`; `/{,}` → `/`, `/`), at most
/// [`MAX_ALTERNATIVES`]; a word without a complete `{a,b}` is itself.
pub fn expand_braces(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    expand_into(word, &mut out);
    if out.is_empty() {
        out.push(word.to_string());
    }
    out
}

fn expand_into(word: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_ALTERNATIVES {
        return;
    }
    let Some((open, close, commas)) = first_brace(word) else {
        out.push(word.to_string());
        return;
    };
    let (prefix, body, suffix) = (&word[..open], &word[open + 1..close], &word[close + 1..]);
    let mut start = 0;
    for end in commas.into_iter().chain([body.len()]) {
        expand_into(&format!("{prefix}{}{suffix}", &body[start..end]), out);
        start = end + 1;
        if out.len() >= MAX_ALTERNATIVES {
            return;
        }
    }
}

/// The first `{…}` holding a top-level comma: its byte offsets and the commas' offsets within its body.
fn first_brace(word: &str) -> Option<(usize, usize, Vec<usize>)> {
    brace_groups(word).into_iter().min_by_key(|g| g.0)
}

/// Every `{…}` of `word` holding a top-level comma (its byte offsets and its commas' offsets within its body), found
/// in one pass: each `}` closes the nearest open `{`, and a comma belongs to the innermost open one.
fn brace_groups(word: &str) -> Vec<(usize, usize, Vec<usize>)> {
    let mut open: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut groups = Vec::new();
    for (i, b) in word.bytes().enumerate() {
        match b {
            b'{' => open.push((i, Vec::new())),
            b',' => {
                if let Some((at, commas)) = open.last_mut() {
                    commas.push(i - *at - 1);
                }
            }
            b'}' => {
                if let Some((at, commas)) = open.pop()
                    && !commas.is_empty()
                {
                    groups.push((at, i, commas));
                }
            }
            _ => {}
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected(word: &str, cwd: Option<&str>) -> bool {
        is_protected(word, &Cwd::from_workdir(cwd))
    }

    #[test]
    fn the_root_home_and_system_directories_however_written() {
        for w in [
            "/",
            "/$X",
            "/${X}",
            "/${X}/",
            "~/$DIR",
            "/usr/$X",
            "/home/$USER",
            "~root",
            "~bob/",
            "//",
            "/.",
            "/./",
            "/..",
            "/../",
            "/tmp/..",
            "/tmp/../../",
            "/usr/..",
            "/*",
            "/*/",
            "~",
            "~/",
            "~/*",
            "~/.*",
            "$HOME",
            "${HOME}/",
            "$HOME/*",
            "~/..",
            "~/../bob",
            "/usr",
            "/usr/",
            "/etc/",
            "/usr/lib",
            "/var/lib/",
            "/u*",
            "/[eu]*",
            "/etc/*",
            "/home/alice",
            "/home/alice/*",
            "/{,}",
            "/{tmp,usr}",
            "/tmp/{a,../..}",
        ] {
            assert!(protected(w, None), "{w}");
        }
    }

    #[test]
    fn ordinary_paths_are_not_protected() {
        for w in [
            "/tmp",
            "/tmp/$X",
            "~/$DIR/build",
            "/$X/project",
            "~+",
            "~-",
            "~bob/project",
            "/tmp/x",
            "/tmp/*",
            "/usr/local/bin/tool",
            "/home/alice/project",
            "~/project",
            "~/.cache/*",
            "~/*.log",
            "./build",
            "build",
            "*",
            ".",
            "..",
            "$DIR",
            "${DIR}/x",
            "",
            "/t*",
            "{a,b}",
            "/var/tmp/x",
            "/opt/app/data",
        ] {
            assert!(!protected(w, None), "{w}");
        }
    }

    #[test]
    fn relative_paths_follow_the_working_directory() {
        assert!(protected("*", Some("/")));
        assert!(protected(".", Some("/")));
        assert!(protected("./*", Some("/")));
        assert!(protected("usr", Some("/")));
        assert!(protected("..", Some("/tmp")));
        assert!(protected("../..", Some("/home/alice/project")));
        assert!(!protected("..", Some("/home/alice/project/src")));
        assert!(!protected("build", Some("/")));
        assert!(!protected("*", Some("relative/dir")));
        assert!(protected("~+", Some("/")));
        assert!(protected("~+/..", Some("/tmp")));

        let mut cwd = Cwd::default();
        cwd.change(&[]);
        assert!(is_protected("*", &cwd), "a bare cd goes home");
        cwd.change(&["project"]);
        assert!(!is_protected("*", &cwd));
        cwd.change(&["-P", "/"]);
        assert!(is_protected(".", &cwd));
        cwd.change(&["-"]);
        assert!(!is_protected(".", &cwd), "cd - is not followed");
        cwd.change(&["/"]);
        cwd.change(&["$DIR"]);
        assert!(!is_protected(".", &cwd), "a dynamic cd is not followed");
        cwd.change(&["$HOME/.."]);
        assert!(is_protected(".", &cwd), "cd $HOME/.. is followed");
    }

    #[test]
    fn shell_patterns_match_like_the_shell() {
        for (p, n, want) in [
            ("u*", "usr", true),
            ("*", "etc", true),
            ("[eu]*", "usr", true),
            ("[eu]*", "bin", false),
            ("[a-f]tc", "etc", true),
            ("[!e]tc", "etc", false),
            ("[^b]in", "bin", false),
            ("b?n", "bin", true),
            ("b?n", "bn", false),
            ("[]x]", "]", true),
            ("[abc", "[abc", true),
            ("*.*", "etc", false),
            ("**", "", true),
            ("e*c", "etc", true),
            ("e*d", "etc", false),
        ] {
            assert_eq!(fnmatch(p, n), want, "{p} {n}");
        }
        // Hostile patterns cost bounded work.
        assert!(!fnmatch(&"*a".repeat(200), &"a".repeat(150)));
    }

    #[test]
    fn braces_expand_boundedly() {
        assert_eq!(expand_braces("a{b,c}d"), ["abd", "acd"]);
        assert_eq!(expand_braces("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(expand_braces("x{a,{b,c}}"), ["xa", "xb", "xc"]);
        assert_eq!(expand_braces("{a}"), ["{a}"]);
        assert_eq!(expand_braces("${HOME}"), ["${HOME}"]);
        assert_eq!(expand_braces("{a,b"), ["{a,b"]);
        let many = "{a,b}".repeat(12);
        assert_eq!(expand_braces(&many).len(), MAX_ALTERNATIVES);
        // Hostile words cost bounded work and are not a way around the rules.
        let padded = format!("{}/", "{,}".repeat(MAX_BRACE_GROUPS + 1));
        assert!(protected(&padded, None));
        assert!(protected(
            &format!("{}/", "{,}".repeat(MAX_BRACE_GROUPS)),
            None
        ));
        assert!(!protected(
            &format!("/tmp/{}", "{a,b}".repeat(MAX_BRACE_GROUPS)),
            None
        ));
        let unclosed = format!("/tmp/{}", "{".repeat(100_000));
        assert!(!protected(&unclosed, None));
    }
}
