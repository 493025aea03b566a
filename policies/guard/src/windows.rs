//! The guard's Windows reading: the catastrophic commands of `cmd` and PowerShell, for a request whose `os` is
//! `windows` or whose `shell` is `cmd`, `powershell` or `pwsh`. The POSIX reading ([`crate::rules`]) still runs on
//! such a line too; this one adds what only Windows' own commands do.
//!
//! The procedure (README.md):
//!
//! 1. The line is split into commands at `&`, `|`, `;`, `(`, `)` and line breaks outside quotes. Quotes are `"`, and
//!    for PowerShell `'` too; in `cmd`, `^` makes the next character plain.
//! 2. A command's words are split at blanks outside quotes, quotes removed. Its name is the first word's last path
//!    component, lower-cased, without a leading `@` or a `.exe`/`.com`/`.bat`/`.cmd` ending. `cmd /c …`, `cmd /k …`,
//!    `powershell -Command …` (`-c`) and `pwsh -Command …` read their rest as a line of that shell, at most
//!    [`MAX_DEPTH`] deep; a line nested deeper is refused as unreadable.
//! 3. Options are words starting with `/` (for `cmd`'s programs) or `-` (PowerShell's), compared lower-cased;
//!    operands are the other words.
//! 4. The rules, by the built-in rule ids:
//!    - `rm-root`: `rd`/`rmdir`/`del`/`erase` with `/s`, or PowerShell's `Remove-Item` (and its aliases `ri`, `rm`,
//!      `rmdir`, `rd`, `del`, `erase`) with `-Recurse` (or a prefix of it down to `-r`), of a protected path;
//!    - `kill-by-name`: `taskkill` with `/im` or a filter on the image name (`/fi "imagename …"`); `Stop-Process`
//!      (`spps`, `kill`) without `-Id` or a numeric operand (by `-Name`, or fed by `Get-Process`); `wmic process …
//!      delete|terminate`;
//!    - `block-device`: `format`, `diskpart`, `Format-Volume`, `Clear-Disk`, `Initialize-Disk`, `Remove-Partition`;
//!    - `power`: `shutdown`, `Stop-Computer`, `Restart-Computer`;
//!    - `privilege`: `runas`, `gsudo`, `sudo`, `Start-Process -Verb RunAs`.
//!
//!    Protected paths, compared lower-cased with `/` read as `\` and a trailing `\`, `\*` or `\*.*` dropped: a drive's
//!    root (`C:`, `C:\`, `\`), `C:\Windows`, `C:\Program Files`, `C:\Program Files (x86)`, `C:\ProgramData`,
//!    `C:\Users` and a directory right under it (a home directory), and the variables that name them (`%SystemRoot%`,
//!    `%windir%`, `%SystemDrive%`, `%USERPROFILE%`, `%ProgramFiles%`, `%ProgramData%`, `$env:…` of the same, `$HOME`,
//!    `~`).

/// How many shells deep (`cmd /c "powershell -c …"`) a line is read.
pub const MAX_DEPTH: usize = 8;

/// Whether the Windows reading applies to a request on `os` whose command runs in `shell`.
pub fn applies(os: &str, shell: &str) -> bool {
    os.eq_ignore_ascii_case("windows") || shell_kind(shell).is_some()
}

/// Which Windows shell `shell` names, if any.
fn shell_kind(shell: &str) -> Option<Shell> {
    match program_name(shell).as_str() {
        "cmd" => Some(Shell::Cmd),
        "powershell" | "pwsh" => Some(Shell::PowerShell),
        _ => None,
    }
}

/// The shell a line is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// `cmd.exe`.
    Cmd,
    /// Windows PowerShell or PowerShell (`pwsh`).
    PowerShell,
}

/// The shell a request's line is read as: its `shell` when that is a Windows shell, else `cmd`.
pub fn shell_of(shell: &str) -> Shell {
    shell_kind(shell).unwrap_or(Shell::Cmd)
}

/// What the Windows reading found: the rule a command breaks, or that the line nests too deep to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A built-in rule's id.
    Rule(&'static str),
    /// Shells nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// Reads `line` as `shell` reads it; returns the first finding.
pub fn check(line: &str, shell: Shell) -> Option<Finding> {
    check_at(line, shell, 0)
}

fn check_at(line: &str, shell: Shell, depth: usize) -> Option<Finding> {
    if depth > MAX_DEPTH {
        return Some(Finding::TooDeep);
    }
    for command in split_commands(line, shell) {
        let words = split_words(&command, shell);
        let Some((first, args)) = words.split_first() else {
            continue;
        };
        let name = program_name(first);
        let lower: Vec<String> = args.iter().map(|a| a.to_ascii_lowercase()).collect();
        let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
        // A nested shell: its rest is a line of its own.
        if let Some((inner, rest)) = nested(&name, args, &lower) {
            if let Some(f) = check_at(&rest, inner, depth + 1) {
                return Some(f);
            }
            continue;
        }
        if let Some(rule) = rule_of(&name, args, &lower) {
            return Some(Finding::Rule(rule));
        }
    }
    None
}

/// `cmd /c REST`, `cmd /k REST`, `powershell -Command REST` (or `-c`), `pwsh …`: the shell and its line.
fn nested(name: &str, args: &[String], lower: &[&str]) -> Option<(Shell, String)> {
    let (shell, flags): (Shell, &[&str]) = match name {
        "cmd" => (Shell::Cmd, &["/c", "/k", "/r"]),
        "powershell" | "pwsh" => (Shell::PowerShell, &["-command", "-c", "/command", "/c"]),
        _ => return None,
    };
    let at = lower.iter().position(|a| flags.contains(a))?;
    Some((shell, args[at + 1..].join(" ")))
}

/// The rule a simple command breaks, by its name, its arguments and their lower-cased forms.
fn rule_of(name: &str, args: &[String], lower: &[&str]) -> Option<&'static str> {
    let option = |o: &str| lower.contains(&o);
    let operands = || {
        args.iter()
            .zip(lower)
            .filter(|(_, l)| !l.starts_with('/') && !l.starts_with('-'))
            .map(|(a, _)| a.as_str())
    };
    match name {
        "rd" | "rmdir" | "del" | "erase" if option("/s") && operands().any(is_protected) => {
            Some("rm-root")
        }
        "remove-item" | "ri" | "rm" | "rmdir" | "rd" | "del" | "erase"
            if lower.iter().any(|a| is_prefix_of(a, "-recurse", 2))
                && operands().any(is_protected) =>
        {
            Some("rm-root")
        }
        "taskkill"
            if option("/im")
                || lower
                    .windows(2)
                    .any(|w| w[0] == "/fi" && w[1].trim_start().starts_with("imagename")) =>
        {
            Some("kill-by-name")
        }
        "stop-process" | "spps" | "kill" => {
            let by_id = lower
                .iter()
                .any(|a| is_prefix_of(a, "-id", 3) || is_prefix_of(a, "-inputobject", 3))
                || operands().any(|o| o.split(',').all(|p| p.trim().parse::<u32>().is_ok()));
            (!by_id).then_some("kill-by-name")
        }
        "wmic" if option("process") && (option("delete") || option("terminate")) => {
            Some("kill-by-name")
        }
        "format" | "diskpart" | "format-volume" | "clear-disk" | "initialize-disk"
        | "remove-partition" => Some("block-device"),
        "shutdown" | "stop-computer" | "restart-computer" => Some("power"),
        "runas" | "gsudo" | "sudo" => Some("privilege"),
        "start-process" | "saps" | "start"
            if lower
                .windows(2)
                .any(|w| is_prefix_of(w[0], "-verb", 2) && w[1] == "runas") =>
        {
            Some("privilege")
        }
        _ => None,
    }
}

/// Whether `word` is `-` + a prefix of `full`'s name at least `min` characters long (`-rec` of `-recurse`).
fn is_prefix_of(word: &str, full: &str, min: usize) -> bool {
    word.len() >= min && full.starts_with(word)
}

/// A program's name as it is compared: the last path component, lower-cased, without a leading `@` or an
/// executable's ending.
fn program_name(word: &str) -> String {
    let word = word.trim_start_matches('@');
    let last = word.rsplit(['\\', '/']).next().unwrap_or(word);
    let lower = last.to_ascii_lowercase();
    for ext in [".exe", ".com", ".bat", ".cmd"] {
        if let Some(stem) = lower.strip_suffix(ext) {
            return stem.to_string();
        }
    }
    lower
}

/// The variables (lower-cased, as written in `cmd` and PowerShell) that name a protected directory.
const PROTECTED_VARS: &[&str] = &[
    "%systemroot%",
    "%windir%",
    "%systemdrive%",
    "%userprofile%",
    "%homedrive%%homepath%",
    "%programfiles%",
    "%programfiles(x86)%",
    "%programdata%",
    "%public%",
    "$env:systemroot",
    "$env:windir",
    "$env:systemdrive",
    "$env:userprofile",
    "$env:programfiles",
    "$env:programdata",
    "$home",
    "~",
];

/// Whether a path names a drive's root, a system directory or a home directory.
pub fn is_protected(path: &str) -> bool {
    let mut p = path.trim().to_ascii_lowercase().replace('/', "\\");
    loop {
        let before = p.len();
        for tail in ["\\*.*", "\\*", "\\"] {
            if let Some(rest) = p.strip_suffix(tail) {
                p = rest.to_string();
            }
        }
        if p.len() == before {
            break;
        }
    }
    if p.is_empty() || p == "*" || p == "*.*" || PROTECTED_VARS.contains(&p.as_str()) {
        return true;
    }
    // A variable followed by nothing but the path's own end was handled; `%SystemDrive%\Windows` and the like:
    let p = PROTECTED_VARS
        .iter()
        .find_map(|v| p.strip_prefix(v).filter(|rest| rest.starts_with('\\')))
        .map(|rest| format!("c:{rest}"))
        .unwrap_or(p);
    let bytes = p.as_bytes();
    let Some(rest) =
        (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':').then(|| &p[2..])
    else {
        return false;
    };
    let parts: Vec<&str> = rest.split('\\').filter(|s| !s.is_empty()).collect();
    matches!(
        parts.as_slice(),
        [] | ["windows" | "program files" | "program files (x86)" | "programdata" | "users"]
            | ["users", _]
    )
}

/// The commands of a line: split at `&`, `|`, `;`, `(`, `)` and line breaks outside quotes.
fn split_commands(line: &str, shell: Shell) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), c) => current.push(c),
            (None, '^') if shell == Shell::Cmd => {
                // The caret and the character it makes plain (kept, so the word splitting sees it as written).
                if let Some(next) = chars.next() {
                    current.push('^');
                    current.push(next);
                }
            }
            (None, '"') => {
                quote = Some('"');
                current.push(c);
            }
            (None, '\'') if shell == Shell::PowerShell => {
                quote = Some('\'');
                current.push(c);
            }
            (None, '&' | '|' | ';' | '(' | ')' | '\n' | '\r') => {
                out.push(std::mem::take(&mut current));
            }
            (None, c) => current.push(c),
        }
    }
    out.push(current);
    out.retain(|c| !c.trim().is_empty());
    out
}

/// A command's words: split at blanks outside quotes, quotes removed (and in `cmd`, carets).
fn split_words(command: &str, shell: Shell) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '^') if shell == Shell::Cmd => {
                in_word = true;
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            (None, '"') => {
                in_word = true;
                quote = Some('"');
            }
            (None, '\'') if shell == Shell::PowerShell => {
                in_word = true;
                quote = Some('\'');
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                in_word = true;
                current.push(c);
            }
        }
    }
    if in_word {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> Option<Finding> {
        check(line, Shell::Cmd)
    }

    fn ps(line: &str) -> Option<Finding> {
        check(line, Shell::PowerShell)
    }

    /// The issue's catastrophic commands, in their usual spellings, are refused by the rule that says why; their
    /// harmless neighbours run.
    #[test]
    fn windows_catastrophes_are_refused_and_their_neighbours_are_not() {
        let rm = Some(Finding::Rule("rm-root"));
        for line in [
            "rd /s /q C:\\",
            "RD /S /Q c:",
            "rmdir /s C:\\Windows",
            "del /s /q C:\\*",
            "del /f /s /q %SystemRoot%\\",
            "echo x & rd /s /q %USERPROFILE%",
            "cmd /c \"rd /s /q C:\\\\\"",
            "rd /s /q \"C:\\Program Files\"",
            "rd /s /q C:\\Users\\alice",
        ] {
            assert_eq!(cmd(line), rm, "{line}");
        }
        for line in [
            "Remove-Item -Recurse -Force C:\\",
            "rm -r -fo $env:USERPROFILE",
            "Remove-Item 'C:\\Program Files' -Rec",
            "powershell -Command \"Remove-Item -Recurse C:\\Windows\"",
        ] {
            assert_eq!(ps(line), rm, "{line}");
        }
        assert_eq!(cmd("format D: /q"), Some(Finding::Rule("block-device")));
        assert_eq!(
            ps("Format-Volume -DriveLetter D"),
            Some(Finding::Rule("block-device"))
        );
        assert_eq!(
            cmd("taskkill /f /im node.exe"),
            Some(Finding::Rule("kill-by-name"))
        );
        assert_eq!(
            cmd("taskkill /f /fi \"IMAGENAME eq node.exe\""),
            Some(Finding::Rule("kill-by-name"))
        );
        assert_eq!(
            ps("Stop-Process -Name node"),
            Some(Finding::Rule("kill-by-name"))
        );
        assert_eq!(
            ps("Get-Process node | Stop-Process -Force"),
            Some(Finding::Rule("kill-by-name"))
        );
        assert_eq!(cmd("shutdown /s /t 0"), Some(Finding::Rule("power")));
        assert_eq!(ps("Restart-Computer -Force"), Some(Finding::Rule("power")));
        assert_eq!(
            cmd("runas /user:Administrator cmd"),
            Some(Finding::Rule("privilege"))
        );
        assert_eq!(
            ps("Start-Process cmd -Verb RunAs"),
            Some(Finding::Rule("privilege"))
        );
        for line in [
            "rd /s /q build",
            "rd /s /q C:\\Users\\alice\\project\\target",
            "del /q C:\\*.tmp",
            "del C:\\Windows\\Temp\\x.log",
            "taskkill /pid 4242 /f",
            "echo rd /s /q C:\\",
            "dir C:\\",
            "rd /q C:\\",
        ] {
            assert_eq!(cmd(line), None, "{line}");
        }
        for line in [
            "Stop-Process -Id 4242",
            "Stop-Process 4242",
            "Remove-Item C:\\Users\\alice\\project\\bin -Recurse",
            "Remove-Item C:\\x.txt",
            "Write-Output 'rd /s /q C:\\'",
        ] {
            assert_eq!(ps(line), None, "{line}");
        }
    }

    /// A line nested deeper than the reading follows is refused as unreadable, not passed.
    #[test]
    fn a_line_nested_too_deep_is_unreadable() {
        let mut line = "echo hi".to_string();
        for _ in 0..=MAX_DEPTH {
            line = format!("cmd /c {line}");
        }
        assert_eq!(cmd(&line), Some(Finding::TooDeep));
    }

    /// The reading applies on Windows and to Windows' shells, not to POSIX shells elsewhere.
    #[test]
    fn it_applies_to_windows_and_its_shells() {
        assert!(applies("windows", "sh"));
        assert!(applies("linux", "cmd"));
        assert!(applies("linux", "C:\\Windows\\System32\\cmd.exe"));
        assert!(applies("linux", "pwsh"));
        assert!(!applies("linux", "sh"));
        assert!(!applies("macos", "/bin/bash"));
        assert_eq!(shell_of("powershell.exe"), Shell::PowerShell);
        assert_eq!(shell_of("sh"), Shell::Cmd);
    }
}
