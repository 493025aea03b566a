//! The guard's rules, over plain strings, so they are unit-tested natively.
//!
//! A command line is tokenized with `shellward-kit` and checked one simple command at a time (so `&&`, `||`, `;`,
//! pipes and subshells are checked part by part); nested shells (`sh -c '…'`, `eval …`) and command substitutions
//! (`$(…)`, `` `…` ``) are checked recursively. Quoted text is data: `echo "rm -rf /"` is allowed. The exact
//! procedure is in README.md; `policies/guard-py` implements the same procedure in Python and passes the same cases.

use shellward_kit::pattern::{Pattern, glob, strip_wrappers};
use shellward_kit::shell::{Op, Redirect, TokenKind, tokenize};

/// How deep nested shells and substitutions are followed.
const MAX_DEPTH: u32 = 8;

/// The built-in rules, by id.
pub const RULES: &[&str] = &[
    "fork-bomb",
    "kill-by-name",
    "kill-all",
    "rm-root",
    "privilege",
    "power",
    "block-device",
];

/// Top-level system directories `rm -r` must not remove.
const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root",
    "/sbin", "/srv", "/sys", "/usr", "/var",
];

/// Block devices (globs).
const BLOCK_DEVICES: &[&str] = &[
    "/dev/sd*",
    "/dev/hd*",
    "/dev/vd*",
    "/dev/xvd*",
    "/dev/nvme*",
    "/dev/mmcblk*",
    "/dev/disk*",
    "/dev/dm-*",
    "/dev/mapper/*",
    "/dev/md*",
    "/dev/loop*",
];

/// Words that may start a simple command without being its program.
const RESERVED: &[&str] = &[
    "{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
];

/// Shells whose `-c` argument is a command line to check.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "ash"];

/// A refused command: the rule and the reason for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Rule id (`rm-root`, ...) or `deny-pattern`.
    pub rule: String,
    /// The reason, naming the rule and what to do instead.
    pub reason: String,
}

/// The guard's configuration.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Extra patterns to deny.
    pub deny: Vec<Pattern>,
    /// Patterns that exempt a simple command from every rule.
    pub allow: Vec<Pattern>,
    /// Built-in rules turned off.
    pub disabled: Vec<String>,
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn is_block_device(path: &str) -> bool {
    BLOCK_DEVICES.iter().any(|g| glob(g, path))
}

fn reason(rule: &str) -> String {
    let why = match rule {
        "fork-bomb" => "this is a fork bomb: it would exhaust the machine's processes",
        "kill-by-name" => {
            "pkill/killall match processes by name and can kill the agent host or the user's programs; stop \
             processes you started with process_signal, or kill one process by its id"
        }
        "kill-all" => {
            "kill -1 signals every process you may signal, including the agent host; stop processes you started \
             with process_signal"
        }
        "rm-root" => {
            "recursive removal of /, the home directory or a system directory would destroy the user's machine; \
             remove the specific paths you mean"
        }
        "privilege" => {
            "the agent must not escalate privileges (sudo, su, doas, pkexec, runuser); ask the user to run it"
        }
        "power" => "shutting down or rebooting the machine is not allowed; ask the user",
        "block-device" => {
            "writing to a block device (mkfs, dd of=/dev/…, shred, wipefs, > /dev/sd…) destroys file systems; ask \
             the user"
        }
        _ => "refused by the guard policy",
    };
    format!("guard[{rule}]: {why}")
}

/// `kill` targets: the words after an optional leading signal option.
fn kill_all(args: &[&str]) -> bool {
    let mut pids: Vec<&str> = Vec::new();
    let mut options_done = false;
    let mut signal_seen = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if !options_done && pids.is_empty() {
            if a == "--" {
                options_done = true;
                i += 1;
                continue;
            }
            if a == "-s" || a == "-n" {
                signal_seen = true;
                i += 2;
                continue;
            }
            if a.starts_with('-') && a.len() > 1 && !signal_seen {
                signal_seen = true;
                i += 1;
                continue;
            }
        }
        pids.push(a);
        i += 1;
    }
    pids.contains(&"-1")
}

fn rm_root(args: &[&str]) -> bool {
    let mut recursive = false;
    let mut targets: Vec<&str> = Vec::new();
    let mut options_done = false;
    for &a in args {
        if !options_done && a == "--" {
            options_done = true;
        } else if !options_done && a == "--recursive" {
            recursive = true;
        } else if !options_done && a.starts_with("--") {
        } else if !options_done && a.starts_with('-') && a.len() > 1 {
            if a[1..].contains(['r', 'R']) {
                recursive = true;
            }
        } else {
            targets.push(a);
        }
    }
    recursive
        && targets.iter().any(|t| {
            let mut t: &str = t;
            if let Some(s) = t.strip_suffix("/*") {
                t = s;
            }
            let t = t.trim_end_matches('/');
            matches!(t, "" | "~" | "$HOME" | "${HOME}" | "/.") || SYSTEM_DIRS.contains(&t)
        })
}

/// The built-in rule a simple command (program first, wrappers stripped) breaks, if any.
fn builtin_rule(words: &[&str]) -> Option<&'static str> {
    let (program, args) = words.split_first()?;
    let name = basename(program);
    match name {
        "pkill" | "killall" | "killall5" => Some("kill-by-name"),
        "kill" if kill_all(args) => Some("kill-all"),
        "rm" if rm_root(args) => Some("rm-root"),
        "sudo" | "su" | "doas" | "pkexec" | "runuser" => Some("privilege"),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some("power"),
        "init" if args.first().is_some_and(|a| *a == "0" || *a == "6") => Some("power"),
        "dd" if args
            .iter()
            .any(|a| a.strip_prefix("of=").is_some_and(is_block_device)) =>
        {
            Some("block-device")
        }
        "shred" | "wipefs" | "blkdiscard" if args.iter().any(|a| is_block_device(a)) => {
            Some("block-device")
        }
        _ if name.starts_with("mkfs") => Some("block-device"),
        _ => None,
    }
}

/// Whether the command line holds a fork bomb (`NAME(){ NAME|NAME& };NAME`), looked for with blanks removed.
fn fork_bomb(command: &str) -> bool {
    let squashed: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    let mut from = 0;
    while let Some(pos) = squashed[from..].find("(){") {
        let at = from + pos;
        let name_start = squashed[..at]
            .rfind(|c: char| "(){}|&;".contains(c))
            .map(|i| i + 1)
            .unwrap_or(0);
        let name = &squashed[name_start..at];
        if !name.is_empty() && squashed[at + 3..].contains(&format!("{name}|{name}&")) {
            return true;
        }
        from = at + 3;
    }
    false
}

/// The command lines inside `$(…)` and backquotes of a word as written (single-quoted text excluded).
fn substitutions(raw: &str) -> Vec<String> {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut single = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && !single {
            i += 2;
            continue;
        }
        if c == '\'' {
            single = !single;
        } else if !single
            && c == '$'
            && chars.get(i + 1) == Some(&'(')
            && chars.get(i + 2) != Some(&'(')
        {
            let mut depth = 0;
            let start = i + 2;
            let mut j = i + 1;
            while j < chars.len() {
                match chars[j] {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            out.push(chars[start..j.min(chars.len())].iter().collect());
            i = j;
        } else if !single && c == '`' {
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && chars[j] != '`' {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            out.push(chars[start..j.min(chars.len())].iter().collect());
            i = j;
        }
        i += 1;
    }
    out
}

impl Guard {
    fn rule_on(&self, rule: &str) -> bool {
        !self.disabled.iter().any(|d| d == rule)
    }

    fn deny(&self, rule: &str) -> Option<Denial> {
        self.rule_on(rule).then(|| Denial {
            rule: rule.to_string(),
            reason: reason(rule),
        })
    }

    /// Checks a whole command line.
    pub fn check(&self, command: &str) -> Option<Denial> {
        self.check_at(command, 0)
    }

    fn check_at(&self, command: &str, depth: u32) -> Option<Denial> {
        if depth > MAX_DEPTH {
            return None;
        }
        if fork_bomb(command)
            && let Some(d) = self.deny("fork-bomb")
        {
            return Some(d);
        }
        // A line that does not tokenize is run unchanged: the shell refuses it too.
        let Ok(script) = tokenize(command) else {
            return None;
        };
        for cmd in script.simple_commands() {
            let all: Vec<&str> = cmd.word_texts(&script);
            let start = all
                .iter()
                .position(|w| !RESERVED.contains(w))
                .unwrap_or(all.len());
            let words = strip_wrappers(&all[start..]);
            if self.allow.iter().any(|p| p.matches(words)) {
                continue;
            }
            if let Some(p) = self.deny.iter().find(|p| p.matches(words)) {
                return Some(Denial {
                    rule: "deny-pattern".into(),
                    reason: format!(
                        "guard[deny-pattern]: the operator denies commands matching `{p}`; ask the user"
                    ),
                });
            }
            if let Some(rule) = builtin_rule(words)
                && let Some(d) = self.deny(rule)
            {
                return Some(d);
            }
            // Output redirections to block devices.
            for i in cmd.first_token..cmd.last_token {
                let writes = matches!(
                    script.tokens[i].kind,
                    TokenKind::Op(Op::Redirect(
                        Redirect::Out
                            | Redirect::Append
                            | Redirect::Clobber
                            | Redirect::ReadWrite
                            | Redirect::OutErr
                            | Redirect::AppendOutErr
                            | Redirect::DupOut
                    ))
                );
                if writes
                    && script.tokens[i + 1].kind == TokenKind::Word
                    && is_block_device(&script.tokens[i + 1].text)
                    && let Some(d) = self.deny("block-device")
                {
                    return Some(d);
                }
            }
            // Nested command lines: sh -c '…', eval …
            if let Some((program, args)) = words.split_first() {
                let name = basename(program);
                let nested = if SHELLS.contains(&name) {
                    args.iter()
                        .position(|a| *a == "-c")
                        .and_then(|i| args.get(i + 1))
                        .map(|s| s.to_string())
                } else if name == "eval" {
                    Some(args.join(" "))
                } else {
                    None
                };
                if let Some(line) = nested
                    && let Some(d) = self.check_at(&line, depth + 1)
                {
                    return Some(d);
                }
            }
            // Command substitutions inside its words.
            for i in cmd.first_token..=cmd.last_token {
                if script.tokens[i].kind == TokenKind::Word {
                    for inner in substitutions(script.raw(i)) {
                        if let Some(d) = self.check_at(&inner, depth + 1) {
                            return Some(d);
                        }
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(command: &str) -> Option<String> {
        Guard::default().check(command).map(|d| d.rule)
    }

    #[test]
    fn harmful_commands_are_denied() {
        for (cmd, want) in [
            ("pkill node", "kill-by-name"),
            ("killall -9 python", "kill-by-name"),
            ("kill -9 -1", "kill-all"),
            ("kill -s KILL -1", "kill-all"),
            ("kill -- -1", "kill-all"),
            ("rm -rf /", "rm-root"),
            ("rm -rf ~", "rm-root"),
            ("rm -fr ~/", "rm-root"),
            ("rm -r -f /*", "rm-root"),
            ("rm --recursive --force $HOME", "rm-root"),
            ("rm -rf --no-preserve-root /", "rm-root"),
            ("rm -rf /usr", "rm-root"),
            ("sudo apt install x", "privilege"),
            ("su -c id", "privilege"),
            (":(){ :|:& };:", "fork-bomb"),
            ("bomb() { bomb | bomb & }; bomb", "fork-bomb"),
            ("dd if=/dev/zero of=/dev/sda bs=1M", "block-device"),
            ("mkfs.ext4 /dev/sdb1", "block-device"),
            ("echo x > /dev/nvme0n1", "block-device"),
            ("shutdown -h now", "power"),
            ("cd / && rm -rf /", "rm-root"),
            ("true; sudo reboot", "privilege"),
            ("ls | xargs echo; (pkill x)", "kill-by-name"),
            ("env FOO=1 nohup sudo id", "privilege"),
            ("bash -c 'rm -rf /'", "rm-root"),
            ("sh -c \"sudo id\"", "privilege"),
            ("eval sudo id", "privilege"),
            ("echo $(pkill node)", "kill-by-name"),
            ("echo `sudo id`", "privilege"),
            ("if true; then sudo id; fi", "privilege"),
            ("{ pkill x; }", "kill-by-name"),
        ] {
            assert_eq!(rule(cmd).as_deref(), Some(want), "{cmd}");
        }
    }

    #[test]
    fn harmless_commands_pass() {
        for cmd in [
            "echo \"rm -rf /\"",
            "echo 'sudo make me a sandwich'",
            "rm -rf ./build",
            "rm -rf /tmp/x",
            "rm / ",
            "kill -1 1234",
            "kill -9 4242",
            "kill -1",
            "grep pkill notes.txt",
            "man sudo",
            "dd if=/dev/zero of=disk.img bs=1M count=1",
            "echo x > /dev/null",
            "echo '$(pkill x)'",
            "ls -la && cargo build",
            "git commit -m 'fix: handle sudo in tests'",
        ] {
            assert_eq!(rule(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn settings_patterns_and_disabled_rules() {
        let guard = Guard {
            deny: vec![Pattern::parse("git push --force").unwrap()],
            allow: vec![Pattern::parse("sudo -n systemctl status *").unwrap()],
            disabled: vec!["power".into()],
        };
        assert_eq!(
            guard.check("git push --force origin main").map(|d| d.rule),
            Some("deny-pattern".into())
        );
        assert_eq!(guard.check("git push origin main"), None);
        assert_eq!(guard.check("sudo -n systemctl status nginx"), None);
        assert!(guard.check("sudo rm x").is_some());
        assert_eq!(guard.check("reboot"), None);
    }
}
