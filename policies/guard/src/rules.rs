//! The guard's rules, over plain strings, so they are unit-tested natively.
//!
//! A command line is tokenized with `shellward-kit` and checked one simple command at a time (so `&&`, `||`, `;`,
//! pipes and subshells are checked part by part); nested shells (`sh -c '…'`, `eval …`) and command substitutions
//! (`$(…)`, `` `…` ``) are checked recursively. Quoted text is data: `echo "rm -rf /"` is allowed. The exact
//! procedure is in README.md; `policies/guard-py` implements the same procedure in Python and passes the same cases.

use shellward_kit::effective::{CommandView, visit_effective_commands};
use shellward_kit::pattern::{Pattern, glob};
use shellward_kit::shell::tokenize;
use std::ops::ControlFlow;

/// The built-in rules, by id.
pub const RULES: &[&str] = &[
    "fork-bomb",
    "kill-by-name",
    "kill-all",
    "rm-root",
    "privilege",
    "power",
    "block-device",
    "chmod-root",
    "find-root",
];

/// Programs that run a command as another user.
const PRIVILEGE: &[&str] = &["sudo", "su", "doas", "pkexec", "runuser"];

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
        "chmod-root" => {
            "recursively changing the permissions or owner of /, the home directory or a system directory breaks \
             the machine (sudo, ssh and services refuse such files); change the specific paths you mean"
        }
        "find-root" => {
            "find from /, the home directory or a system directory with -delete or -exec rm removes files all over \
             the machine; run find on your project's directories"
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

/// Whether a path names `/`, the home directory, or a system directory (with or without a trailing `/` or `/*`).
fn dangerous_path(t: &str) -> bool {
    let t = t.strip_suffix("/*").unwrap_or(t);
    let t = t.trim_end_matches('/');
    matches!(t, "" | "~" | "$HOME" | "${HOME}" | "/." | "/*") || SYSTEM_DIRS.contains(&t)
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
    recursive && targets.iter().any(|t| dangerous_path(t))
}

/// `chmod`/`chown`/`chgrp` with `-R` (or `--recursive`) of a dangerous path.
fn chmod_root(args: &[&str]) -> bool {
    let recursive = args.iter().any(|a| {
        *a == "--recursive" || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('R'))
    });
    recursive
        && args
            .iter()
            .any(|a| !a.starts_with('-') && dangerous_path(a))
}

/// `find` from a dangerous path with `-delete`, or with `-exec`/`-execdir`/`-ok` of `rm`, `shred` or `unlink`.
fn find_root(args: &[&str]) -> bool {
    let mut rest = args;
    // Leading options: -H, -L, -P, -D DEBUGOPTS, -O LEVEL.
    while let Some((a, tail)) = rest.split_first() {
        match *a {
            "-H" | "-L" | "-P" => rest = tail,
            "-D" => rest = tail.get(1..).unwrap_or(&[]),
            _ if a.starts_with("-O") => rest = tail,
            _ => break,
        }
    }
    let roots = rest
        .iter()
        .take_while(|a| !a.starts_with('-') && !matches!(**a, "(" | "!" | ","))
        .count();
    if !rest[..roots].iter().any(|a| dangerous_path(a)) {
        return false;
    }
    let expression = &rest[roots..];
    expression.iter().enumerate().any(|(i, a)| {
        *a == "-delete"
            || (matches!(*a, "-exec" | "-execdir" | "-ok" | "-okdir")
                && expression
                    .get(i + 1)
                    .is_some_and(|p| matches!(basename(p), "rm" | "shred" | "unlink")))
    })
}

/// The rule a command whose program is unknown (`$k -9 -1`) breaks by its arguments alone, if any: only rules that
/// judge arguments, so `$CC main.c` passes.
fn unknown_program_rule(args: &[&str]) -> Option<&'static str> {
    if kill_all(args) {
        Some("kill-all")
    } else if rm_root(args) {
        Some("rm-root")
    } else if chmod_root(args) {
        Some("chmod-root")
    } else if find_root(args) {
        Some("find-root")
    } else if args
        .iter()
        .any(|a| a.strip_prefix("of=").is_some_and(is_block_device))
    {
        Some("block-device")
    } else {
        None
    }
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
        "chmod" | "chown" | "chgrp" if chmod_root(args) => Some("chmod-root"),
        "find" if find_root(args) => Some("find-root"),
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
        if fork_bomb(command)
            && let Some(d) = self.deny("fork-bomb")
        {
            return Some(d);
        }
        // A line that does not tokenize is run unchanged: the shell refuses it too.
        let script = tokenize(command).ok()?;
        // Each command is checked as it is read (borrowed, not copied); the reading stops at the first denial.
        let mut denial = None;
        visit_effective_commands(&script, &script.simple_commands(), |c| {
            denial = self.check_command(c);
            if denial.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        denial
    }

    /// Checks one effective command (wrappers stripped, nested shell strings already read).
    fn check_command(&self, c: &CommandView<'_>) -> Option<Denial> {
        let patterns_see = |p: &Pattern| p.matches(c.words) || p.matches(c.written);
        if self.allow.iter().any(patterns_see) {
            return None;
        }
        if let Some(p) = self.deny.iter().find(|p| patterns_see(p)) {
            return Some(Denial {
                rule: "deny-pattern".into(),
                reason: format!(
                    "guard[deny-pattern]: the operator denies commands matching `{p}`; ask the user"
                ),
            });
        }
        // The outermost escalation is named first: `sudo reboot` is a privilege denial.
        if PRIVILEGE.iter().any(|w| c.via(w))
            && let Some(d) = self.deny("privilege")
        {
            return Some(d);
        }
        let words: Vec<&str> = c.words.iter().map(|w| w.text).collect();
        let rule = if c.program_known() {
            builtin_rule(&words)
        } else {
            // `$k -9 -1`: the program is unknown, so only its arguments can be judged.
            unknown_program_rule(&words[1..])
        };
        if let Some(rule) = rule
            && let Some(d) = self.deny(rule)
        {
            return Some(d);
        }
        if c.writes.iter().any(|t| is_block_device(t))
            && let Some(d) = self.deny("block-device")
        {
            return Some(d);
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
            // Wrappers and nested shells, seen through.
            ("bash -lc 'kill -9 -1'", "kill-all"),
            ("bash -ec 'kill -9 -1'", "kill-all"),
            ("sh -xc 'kill -9 -1'", "kill-all"),
            ("timeout 5 kill -9 -1", "kill-all"),
            ("ps aux | xargs pkill", "kill-by-name"),
            ("busybox kill -9 -1", "kill-all"),
            ("ionice -c3 pkill node", "kill-by-name"),
            ("setsid kill -9 -1", "kill-all"),
            ("watch -n 1 pkill node", "kill-by-name"),
            ("find / -delete", "find-root"),
            ("find / -exec rm -rf {} +", "find-root"),
            ("find . -exec pkill {} ;", "kill-by-name"),
            ("echo 'kill -9 -1' | bash", "kill-all"),
            ("bash <<< 'pkill node'", "kill-by-name"),
            ("sh <<EOF\nkill -9 -1\nEOF", "kill-all"),
            ("$k -9 -1", "kill-all"),
            ("\"$RM\" -rf /", "rm-root"),
            ("chmod -R 777 /", "chmod-root"),
            ("chown -R nobody /usr", "chmod-root"),
            ("sudo -u root -E id", "privilege"),
            ("doas reboot", "privilege"),
            ("env -i PATH=/bin kill -9 -1", "kill-all"),
            (
                "nohup stdbuf -oL chrt -f 1 taskset 1 flock /tmp/l pkill x",
                "kill-by-name",
            ),
            ("parallel 'pkill {}' ::: node", "kill-by-name"),
            ("mkfs.ext4 /dev/sdb", "block-device"),
            ("bash -c 'echo x > /dev/sda'", "block-device"),
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
            // Look-alikes of the wrapper forms.
            "rm -rf ./build target node_modules",
            "kill %1",
            "kill $PID",
            "git clean -fdx",
            "$CC main.c -o main",
            "timeout 5 cargo test",
            "bash -lc 'cargo build'",
            "echo 'kill -9 -1' > notes.txt",
            "find . -name '*.o' -delete",
            "find /tmp/build -delete",
            "find . -exec rm {} +",
            "xargs -n1 echo",
            "chmod -R 755 ./dist",
            "chmod 755 /usr/local/bin/tool",
            "chown -R $USER:$USER .",
            "command -v pkill",
            "watch -n 5 'ls -la'",
            "bash ./scripts/kill-all.sh",
            "cat script.sh | bash",
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
