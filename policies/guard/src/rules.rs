//! The guard's rules, over plain strings, so they are unit-tested natively.
//!
//! A command line is tokenized with `shellward-kit` and checked one simple command at a time (so `&&`, `||`, `;`,
//! pipes and subshells are checked part by part); nested shells (`sh -c '…'`, `eval …`) and command substitutions
//! (`$(…)`, `` `…` ``) are checked recursively. Quoted text is data: `echo "rm -rf /"` is allowed. Before a command
//! is judged, the variables the line has set are expanded in its words ([`crate::vars`]), and its targets are resolved
//! ([`crate::paths`]) against the working directory: the request's, moved by each `cd` the line makes. The exact
//! procedure is in README.md; cases.toml proves each rule.

use crate::paths::{Cwd, is_protected, resolve};
use crate::vars::{MAX_ALTERNATIVES, Vars};
use shellward_kit::effective::{
    CommandView, MAX_COMMANDS, MAX_SHELL_DEPTH, visit_effective_commands,
};
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
    "unreadable",
    "git-discard",
    "git-force-push",
    "crontab-remove",
    "shred",
];

/// The rules that ask a person instead of refusing: what a user may well want done, but should see first. The
/// others refuse: no person should approve them from an agent.
pub const ASK_RULES: &[&str] = &[
    "privilege",
    "kill-by-name",
    "power",
    "block-device",
    "git-discard",
    "git-force-push",
    "crontab-remove",
    "shred",
];

/// Programs that run a command as another user.
const PRIVILEGE: &[&str] = &["sudo", "su", "doas", "pkexec", "runuser"];

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

/// A command the guard stops: refused, or held until a person approves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Rule id (`rm-root`, ...) or `deny-pattern`.
    pub rule: String,
    /// The reason (naming the rule and what to do instead), or for an ask the question for the person.
    pub reason: String,
    /// A person may approve it (an [`ASK_RULES`] rule); otherwise it is refused.
    pub ask: bool,
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

/// Device nodes a command writes to without harm (character devices and pseudo-files).
const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/dev/console",
    "/dev/ptmx",
    "/dev/kmsg",
    "/dev/tty*",
    "/dev/pts/*",
    "/dev/fd/*",
    "/dev/shm/*",
    "/dev/mqueue/*",
    "/dev/snd/*",
    "/dev/input/*",
];

/// A path a disk-writing tool (`dd of=`, `bmaptool`, `rpi-imager`, `wipefs`, …) may be writing a disk through: a known
/// block device, or any other node under `/dev/` but the harmless ones (`/dev/usb_drive`, `/dev/rdisk2` on macOS).
fn may_be_disk(path: &str) -> bool {
    is_block_device(path)
        || (path.starts_with("/dev/") && !HARMLESS_DEVICES.iter().any(|g| glob(g, path)))
}

/// One line saying what a built-in rule refuses or asks about (for coverage reports).
pub fn summary(rule: &str) -> &'static str {
    match rule {
        "fork-bomb" => "refuses fork bombs",
        "kill-by-name" => "asks before pkill, killall and kill $(pgrep …)",
        "kill-all" => "refuses kill -1 and signals to pid 1",
        "rm-root" => "refuses removing /, the home directory or a system directory",
        "privilege" => "asks before sudo, su, doas, pkexec and runuser",
        "power" => "asks before shutdown, reboot and suspend",
        "block-device" => "asks before writes to block devices (mkfs, dd of=/dev/…, bmaptool)",
        "git-discard" => {
            "asks before discarding uncommitted git work (reset --hard, clean -f, restore .)"
        }
        "git-force-push" => "asks before git push --force",
        "crontab-remove" => "asks before crontab -r",
        "shred" => "asks before shredding files",
        "chmod-root" => "refuses chmod/chown of / or system directories",
        "find-root" => "refuses find -delete or -exec rm from / or system directories",
        "unreadable" => "refuses a line the guard cannot read whole",
        _ => "refuses a command",
    }
}

fn reason(rule: &str) -> String {
    let why = match rule {
        "fork-bomb" => "this is a fork bomb: it would exhaust the machine's processes",
        "kill-by-name" => {
            "this stops every process whose name matches (pkill, killall, kill $(pgrep …)), which may include the \
             agent host or the user's own programs; the agent can stop processes it started with process_signal, \
             or one process by its id"
        }
        "kill-all" => {
            "kill -1 signals every process you may signal, including the agent host, and pid 1 is the machine's \
             init; stop processes you started with process_signal"
        }
        "rm-root" => {
            "removing /, the home directory or a system directory (rm -r, or moving it away, or rsync --delete \
             onto it) would destroy the user's machine; remove the specific paths you mean"
        }
        "privilege" => {
            "this runs a command as root or another user (sudo, su, doas, pkexec, runuser): it can change anything \
             on the machine"
        }
        "chmod-root" => {
            "changing the permissions or owner of / or a system directory, or recursively of the home directory, \
             breaks the machine (sudo, ssh and services refuse such files); change the specific paths you mean"
        }
        "find-root" => {
            "find from /, the home directory or a system directory with -delete or -exec rm removes files all over \
             the machine; run find on your project's directories"
        }
        "power" => {
            "this shuts down, reboots or suspends the machine (shutdown, reboot, systemctl poweroff, init 0, \
             /proc/sysrq-trigger): everything running on it stops"
        }
        "block-device" => {
            "this writes to a block device, a disk rather than a file (mkfs, dd of=/dev/…, bmaptool, wipefs, fdisk, \
             tee or > /dev/sd…; on Windows format, diskpart, Format-Volume, Clear-Disk): the file system on it is \
             destroyed"
        }
        "git-discard" => {
            "this throws away uncommitted or unmerged work in a git repository (reset --hard, clean -f, checkout or \
             restore of paths, stash drop/clear, branch -D); it cannot be undone"
        }
        "git-force-push" => {
            "this force-pushes (git push --force, -f, +ref): the remote branch's history is replaced and commits \
             others pushed may be lost"
        }
        "crontab-remove" => {
            "this removes the user's whole crontab (crontab -r): every scheduled job is deleted"
        }
        "shred" => "this overwrites files so they cannot be recovered (shred)",
        "unreadable" => {
            "the guard could not read the whole line, so it cannot tell what would run; split it into shorter \
             commands or run the nested script from a file"
        }
        _ => "refused by the guard policy",
    };
    format!("guard[{rule}]: {why}")
}

/// `kill` whose targets include `-1` (every process the caller may signal) or `1` (init); `kill -l 1` lists.
fn kill_all(args: &[&str]) -> bool {
    if args
        .first()
        .is_some_and(|a| matches!(*a, "-l" | "-L" | "--list" | "--table"))
    {
        return false;
    }
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
    // `kill` reads its targets as numbers: `-0001` is `-1`.
    pids.iter().any(|p| matches!(p.parse::<i64>(), Ok(-1 | 1)))
}

/// The operands of a command: its words that are not options, up to and after a `--`.
fn operands<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut options_done = false;
    for &a in args {
        if !options_done && a == "--" {
            options_done = true;
        } else if options_done || !(a.starts_with('-') && a.len() > 1) {
            out.push(a);
        }
    }
    out
}

/// Whether an option cluster or long option is given (`-rf` holds `r`; `--recursive`, or a prefix of it as getopt
/// accepts, `--rec`).
fn has_flag(args: &[&str], short: &[char], long: &[&str]) -> bool {
    args.iter().take_while(|a| **a != "--").any(|a| {
        long.iter()
            .any(|l| *a == *l || (a.len() >= 5 && l.starts_with(a)))
            || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(short))
    })
}

fn rm_root(args: &[&str], cwd: &Cwd) -> bool {
    has_flag(args, &['r', 'R'], &["--recursive"])
        && operands(args).iter().any(|t| is_protected(t, cwd))
}

/// `mv` of a protected path: its sources are every operand but the last, or all of them with `-t DIR`.
fn mv_root(args: &[&str], cwd: &Cwd) -> bool {
    let mut ops = operands(args);
    let target_dir = args
        .iter()
        .any(|a| *a == "-t" || a.starts_with("--target-directory"));
    if !target_dir {
        ops.pop();
    }
    ops.iter().any(|t| is_protected(t, cwd))
}

/// `rsync --delete…` onto a protected path (the last operand).
fn rsync_root(args: &[&str], cwd: &Cwd) -> bool {
    args.iter().any(|a| a.starts_with("--del"))
        && operands(args).last().is_some_and(|t| is_protected(t, cwd))
}

/// `chmod`/`chown`/`chgrp` with `-R` (or `--recursive`) of a protected path, or of `/` or a top-level system
/// directory at all (`chmod 000 /`).
fn chmod_root(args: &[&str], cwd: &Cwd) -> bool {
    let recursive = has_flag(args, &['R'], &["--recursive"]);
    operands(args).iter().any(|a| {
        resolve(a, cwd)
            .iter()
            .any(|r| r.is_top_level() || (recursive && r.is_protected()))
    })
}

/// `find` from a protected path with `-delete`, or with `-exec`/`-execdir`/`-ok` of `rm`, `shred` or `unlink`.
fn find_root(args: &[&str], cwd: &Cwd) -> bool {
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
    // With no starting point, find starts at `.`.
    let starts: &[&str] = if roots == 0 { &["."] } else { &rest[..roots] };
    if !starts.iter().any(|a| is_protected(a, cwd)) {
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

/// Whether a word holds a substitution that finds processes by name (`$(pgrep -f node)`, `` `pidof node` ``): a
/// `kill` of its output is a `pkill`.
fn looks_up_by_name(word: &str) -> bool {
    let starts = word.match_indices("$(").chain(word.match_indices('`'));
    starts.into_iter().any(|(i, open)| {
        let inner = word[i + open.len()..].trim_start();
        ["pgrep", "pidof"].iter().any(|p| {
            inner
                .strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ')', '`']))
        })
    })
}

/// The kernel's magic SysRq trigger: writing `b` reboots, `o` powers off, `c` crashes the machine.
const SYSRQ: &str = "/proc/sysrq-trigger";

/// `systemctl`/`loginctl` verbs and targets that stop, restart or suspend the machine.
const POWER_VERBS: &[&str] = &[
    "poweroff",
    "reboot",
    "halt",
    "kexec",
    "soft-reboot",
    "suspend",
    "hibernate",
    "hybrid-sleep",
    "suspend-then-hibernate",
    "rescue",
    "emergency",
    "default",
];

fn power(name: &str, args: &[&str]) -> bool {
    match name {
        "shutdown" | "reboot" | "halt" | "poweroff" => true,
        "tee" | "cp" | "dd" => args
            .iter()
            .any(|a| *a == SYSRQ || a.strip_prefix("of=") == Some(SYSRQ)),
        "init" | "telinit" => args
            .first()
            .is_some_and(|a| matches!(*a, "0" | "6" | "1" | "s" | "S")),
        "systemctl" | "loginctl" => {
            let ops = operands(args);
            match ops.first() {
                Some(verb) if POWER_VERBS.contains(verb) => true,
                Some(&("isolate" | "start" | "restart")) => ops[1..].iter().any(|t| {
                    let unit = t.strip_suffix(".target").unwrap_or(t);
                    POWER_VERBS.contains(&unit)
                }),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Programs that write to a device named among their arguments, and those that do unless told only to read it.
fn block_device_write(name: &str, args: &[&str]) -> bool {
    let device =
        |a: &&str| may_be_disk(a) || a.split_once('=').is_some_and(|(_, v)| may_be_disk(v));
    match name {
        "dd" => args
            .iter()
            .any(|a| a.strip_prefix("of=").is_some_and(may_be_disk)),
        "shred" | "wipefs" | "blkdiscard" | "mkswap" | "mke2fs" | "mkdosfs" | "mkntfs" | "tee"
        | "truncate" | "bmaptool" | "rpi-imager" | "etcher" | "balena-etcher" => {
            args.iter().any(device)
        }
        // A file system made on a device; one made into an image file (`mkfs.erofs image.erofs dir/`) is a file
        // like any other. A target only known when the line runs (`$DEV`) may be a device.
        _ if name.starts_with("mkfs") => operands(args)
            .iter()
            .any(|a| device(a) || a.starts_with("/dev/") || a.contains('$')),
        "cp" | "install" | "mv" | "ln" => {
            let to_dir = args.iter().position(|a| *a == "-t");
            to_dir.and_then(|i| args.get(i + 1)).is_some_and(device)
                || operands(args).last().is_some_and(device)
        }
        "fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "cgdisk" | "parted" => {
            let reads_only = args.iter().any(|a| {
                matches!(
                    *a,
                    "-l" | "--list"
                        | "-d"
                        | "--dump"
                        | "-J"
                        | "--json"
                        | "-p"
                        | "--print"
                        | "print"
                        | "-s"
                        | "--show-size"
                        | "-V"
                        | "--version"
                        | "-h"
                        | "--help"
                )
            });
            !reads_only && args.iter().any(device)
        }
        "badblocks" => has_flag(args, &['w', 'n'], &[]) && args.iter().any(device),
        _ => false,
    }
}

/// The rule a command whose program is unknown (`$k -9 -1`) breaks by its arguments alone, if any: only rules that
/// judge arguments, so `$CC main.c` passes.
fn unknown_program_rule(args: &[&str], cwd: &Cwd) -> Option<&'static str> {
    if kill_all(args) && args.contains(&"-1") {
        Some("kill-all")
    } else if rm_root(args, cwd) {
        Some("rm-root")
    } else if has_flag(args, &['R'], &["--recursive"]) && chmod_root(args, cwd) {
        Some("chmod-root")
    } else if find_root(args, cwd) {
        Some("find-root")
    } else if args
        .iter()
        .any(|a| a.strip_prefix("of=").is_some_and(may_be_disk))
    {
        Some("block-device")
    } else {
        None
    }
}

/// `sudo` that only asks about privileges and runs nothing (`sudo -l`, `sudo -v`, `sudo -k`, `sudo -V`): every word
/// an option or an option's value, and one of them a query.
fn sudo_query(args: &[&str]) -> bool {
    const QUERIES: &[&str] = &[
        "-l",
        "-ll",
        "--list",
        "-v",
        "--validate",
        "-k",
        "--reset-timestamp",
        "-K",
        "--remove-timestamp",
        "-V",
        "--version",
        "--help",
        "-n",
        "--non-interactive",
    ];
    const WITH_VALUE: &[&str] = &[
        "-u",
        "-U",
        "-g",
        "-h",
        "--user",
        "--other-user",
        "--group",
        "--host",
    ];
    let mut i = 0;
    let mut queried = false;
    while i < args.len() {
        let a = args[i];
        if WITH_VALUE.contains(&a) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            return false;
        }
        queried |= QUERIES.contains(&a) && !matches!(a, "-n" | "--non-interactive");
        if !QUERIES.contains(&a) && !a.starts_with("--user=") && !a.starts_with("--other-user=") {
            return false;
        }
        i += 1;
    }
    queried
}

/// `killall -l`, `pkill -V` and the like: listing signals or printing a version kills nothing.
fn kill_by_name_query(args: &[&str]) -> bool {
    !args.is_empty()
        && args.iter().all(|a| {
            matches!(
                *a,
                "-l" | "--list" | "-L" | "-V" | "--version" | "-h" | "--help"
            )
        })
}

/// Git's global options that take a value as the next word (`git -C DIR status`).
const GIT_GLOBAL_VALUES: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
];

/// The ask rule a `git` command breaks, if any: work thrown away (`git-discard`) or a remote rewritten
/// (`git-force-push`).
fn git_rule(args: &[&str]) -> Option<&'static str> {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        i += if GIT_GLOBAL_VALUES.contains(&args[i]) {
            2
        } else {
            1
        };
    }
    let (sub, rest) = args.get(i..)?.split_first()?;
    let flag = |short: &[char], long: &[&str]| has_flag(rest, short, long);
    let ops = operands(rest);
    let discards_paths = |ops: &[&str]| ops.iter().any(|p| matches!(*p, "." | "*" | ":/" | "./"));
    let discard = match *sub {
        "reset" => rest.iter().any(|a| matches!(*a, "--hard" | "--merge")),
        "clean" => flag(&['f'], &["--force"]) && !flag(&['n'], &["--dry-run"]),
        "checkout" => {
            let after_dashes = rest.iter().position(|a| *a == "--").map(|i| &rest[i + 1..]);
            flag(&['f'], &["--force"])
                || after_dashes.is_some_and(|paths| !paths.is_empty())
                || discards_paths(&ops)
        }
        "restore" => !flag(&['S'], &["--staged"]) || flag(&['W'], &["--worktree"]),
        "stash" => matches!(ops.first(), Some(&("drop" | "clear"))),
        "branch" => {
            rest.iter().any(|a| {
                *a == "-D" || (a.starts_with('-') && !a.starts_with("--") && a.contains('D'))
            }) || (flag(&['d'], &["--delete"]) && flag(&['f'], &["--force"]))
        }
        _ => false,
    };
    if discard {
        return Some("git-discard");
    }
    let forced = *sub == "push"
        && (flag(&['f'], &["--force"]) || ops.iter().skip(1).any(|r| r.starts_with('+')));
    forced.then_some("git-force-push")
}

/// The built-in rule a simple command (program first, wrappers stripped) breaks, if any.
fn builtin_rule(words: &[&str], cwd: &Cwd) -> Option<&'static str> {
    let (program, args) = words.split_first()?;
    let name = basename(program);
    match name {
        "pkill" | "killall" if kill_by_name_query(args) => None,
        "pkill" | "killall" | "killall5" => Some("kill-by-name"),
        "kill" if kill_all(args) => Some("kill-all"),
        "kill" if args.iter().any(|a| looks_up_by_name(a)) => Some("kill-by-name"),
        "rm" if rm_root(args, cwd) => Some("rm-root"),
        "mv" if mv_root(args, cwd) => Some("rm-root"),
        "rsync" if rsync_root(args, cwd) => Some("rm-root"),
        "sudo" if sudo_query(args) => None,
        "sudo" | "su" | "doas" | "pkexec" | "runuser" => Some("privilege"),
        "git" => git_rule(args),
        "crontab" if has_flag(args, &['r'], &["--remove"]) => Some("crontab-remove"),
        "chmod" | "chown" | "chgrp" if chmod_root(args, cwd) => Some("chmod-root"),
        "find" if find_root(args, cwd) => Some("find-root"),
        _ if power(name, args) => Some("power"),
        _ if block_device_write(name, args) => Some("block-device"),
        "shred" if !operands(args).is_empty() => Some("shred"),
        _ => None,
    }
}

/// The forms a command's words may take once the line's variables are expanded (each dynamic word's values, at
/// most [`MAX_ALTERNATIVES`] combinations), each with whether its program is then known. A word that cannot be
/// expanded stays as written.
fn variants(c: &CommandView<'_>, vars: &Vars) -> Vec<(Vec<String>, bool)> {
    let mut out = vec![(Vec::with_capacity(c.words.len()), true)];
    for (i, w) in c.words.iter().enumerate() {
        let values = if w.dynamic { vars.expand(w.text) } else { None };
        let known = !w.dynamic || values.is_some();
        let values = values.unwrap_or_else(|| vec![w.text.to_string()]);
        let mut next = Vec::with_capacity(out.len() * values.len());
        'fill: for (words, program_known) in &out {
            for v in &values {
                if next.len() == MAX_ALTERNATIVES {
                    break 'fill;
                }
                let mut words = words.clone();
                words.push(v.clone());
                next.push((words, *program_known && (i > 0 || known)));
            }
        }
        out = next;
    }
    out
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

    /// The finding of a built-in rule that is on: a refusal, or for an [`ASK_RULES`] rule a question.
    fn deny(&self, rule: &str) -> Option<Denial> {
        self.rule_on(rule).then(|| Denial {
            rule: rule.to_string(),
            reason: reason(rule),
            ask: ASK_RULES.contains(&rule),
        })
    }

    /// Checks a whole command line whose working directory is not known.
    pub fn check(&self, command: &str) -> Option<Denial> {
        self.check_in(command, None)
    }

    /// Checks a request's line: the POSIX reading ([`Guard::check_in`]), then, for a request on Windows or for a
    /// Windows shell (`cmd`, PowerShell), the Windows reading ([`crate::windows`]).
    pub fn check_request(
        &self,
        command: &str,
        workdir: Option<&str>,
        os: &str,
        shell: &str,
    ) -> Option<Denial> {
        if let Some(d) = self.check_in(command, workdir) {
            return Some(d);
        }
        if !crate::windows::applies(os, shell) {
            return None;
        }
        match crate::windows::check(command, crate::windows::shell_of(shell))? {
            crate::windows::Finding::Rule(rule) => self.deny(rule),
            crate::windows::Finding::TooDeep => self.unreadable(&format!(
                "shells (cmd /c, powershell -Command) are nested more than {} deep",
                crate::windows::MAX_DEPTH
            )),
        }
    }

    /// Checks a whole command line run in `workdir` (the request's; `None` or a relative one: not known). Relative
    /// targets are resolved against it and against the `cd`s the line makes before them.
    pub fn check_in(&self, command: &str, workdir: Option<&str>) -> Option<Denial> {
        if fork_bomb(command)
            && let Some(d) = self.deny("fork-bomb")
        {
            return Some(d);
        }
        // A line that does not tokenize is run unchanged: the shell refuses it too. One nested deeper than the
        // tokenizer follows is another matter: the shell would run it, unread.
        let script = match tokenize(command) {
            Ok(script) => script,
            Err(e) if e.too_deep => {
                return self.unreadable(&format!(
                    "expansions ($(…), ${{…}}, quotes inside them) are nested more than {} deep",
                    shellward_kit::shell::MAX_NESTING
                ));
            }
            Err(_) => return None,
        };
        let mut cwd = Cwd::from_workdir(workdir);
        let mut vars = Vars::default();
        // Each command is checked as it is read (borrowed, not copied); the reading stops at the first refusal.
        // The first question is kept while reading on: a later command may still be refused (deny beats ask).
        let mut denial = None;
        let mut question: Option<Denial> = None;
        let visit = visit_effective_commands(&script, &script.simple_commands(), |c| {
            // The words as they would run: as written unless some must be expanded (no copies then).
            let expanded;
            let forms: Vec<(Vec<&str>, bool)> = if c.words.iter().any(|w| w.dynamic) {
                expanded = variants(c, &vars);
                expanded
                    .iter()
                    .map(|(w, known)| (w.iter().map(String::as_str).collect(), *known))
                    .collect()
            } else {
                vec![(c.words.iter().map(|w| w.text).collect(), true)]
            };
            for (words, program_known) in &forms {
                match self.check_command(c, words, *program_known, &cwd, &vars) {
                    Some(d) if d.ask => {
                        question.get_or_insert(d);
                    }
                    Some(d) => {
                        denial = Some(d);
                        return ControlFlow::Break(());
                    }
                    None => {}
                }
            }
            // What the command changes for the ones after it: variables, the working directory.
            if c.words.is_empty() {
                for a in c.assignments {
                    vars.assign(a.text, a.dynamic);
                }
            }
            if let Some((words, true)) = forms.first() {
                match words.first().map(|p| basename(p)) {
                    Some("cd" | "pushd") => cwd.change(&words[1..]),
                    Some("popd") => cwd.forget(),
                    Some(
                        "export" | "declare" | "typeset" | "local" | "readonly" | "for" | "unset"
                        | "read",
                    ) => {
                        let flags = c.words.iter().map(|w| w.dynamic);
                        let pairs: Vec<(&str, bool)> = words.iter().copied().zip(flags).collect();
                        vars.follow(&pairs);
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        });
        // What was not read may be anything: a reading that stopped at a limit (not at a denial) is refused.
        if denial.is_none() && visit.too_deep {
            return self.unreadable(&format!(
                "shell strings (sh -c, eval, bash <<<, $(…)) are nested more than {MAX_SHELL_DEPTH} deep"
            ));
        }
        if denial.is_none() && visit.truncated {
            return self.unreadable(&format!("the line has more than {MAX_COMMANDS} commands"));
        }
        denial.or(question)
    }

    /// The `unreadable` denial, saying which limit the line passed.
    fn unreadable(&self, limit: &str) -> Option<Denial> {
        self.deny("unreadable").map(|mut d| {
            d.reason = format!(
                "guard[unreadable]: {limit}; the guard could not read the whole line, so it cannot tell what \
                 would run: split it into shorter commands, or put the nested script in a file and run that"
            );
            d
        })
    }

    /// Checks one effective command (wrappers stripped, nested shell strings already read) whose words, the line's
    /// variables expanded, are `words`.
    fn check_command(
        &self,
        c: &CommandView<'_>,
        words: &[&str],
        program_known: bool,
        cwd: &Cwd,
        vars: &Vars,
    ) -> Option<Denial> {
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
                ask: false,
            });
        }
        let rule = if program_known {
            builtin_rule(words, cwd)
        } else {
            // `$k -9 -1`: the program is unknown, so only its arguments can be judged.
            unknown_program_rule(&words[1..], cwd)
        };
        let found = rule.and_then(|rule| self.deny(rule));
        // A refusal stands whatever runs it (`sudo rm -rf /`); otherwise the outermost escalation is asked about
        // first: `sudo reboot` asks about privilege.
        if let Some(d) = found.as_ref().filter(|d| !d.ask) {
            return Some(d.clone());
        }
        if PRIVILEGE.iter().any(|w| c.via(w))
            && let Some(d) = self.deny("privilege")
        {
            return Some(d);
        }
        if found.is_some() {
            return found;
        }
        let device = |t: &&str| {
            is_block_device(t)
                || (t.contains('$')
                    && vars
                        .expand(t)
                        .is_some_and(|v| v.iter().any(|t| is_block_device(t))))
        };
        if c.writes.iter().any(device)
            && let Some(d) = self.deny("block-device")
        {
            return Some(d);
        }
        if c.writes.contains(&SYSRQ)
            && let Some(d) = self.deny("power")
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

    /// A line the guard could not read to its end is refused, whatever its readable part holds: what was not read
    /// may be `rm -rf /`. Each limit says itself in the reason.
    #[test]
    fn a_line_read_only_in_part_is_refused_naming_the_limit() {
        let many = format!("{} rm -rf /", "true;".repeat(MAX_COMMANDS + 4));
        let many_harmless = format!("{} echo done", "true;".repeat(MAX_COMMANDS + 4));
        let evals = format!("{}rm -rf /", "eval ".repeat(MAX_SHELL_DEPTH as usize + 1));
        let mut nested = String::from("rm -rf /");
        for _ in 0..=MAX_SHELL_DEPTH {
            nested = format!("sh -c '{}'", nested.replace('\'', "'\\''"));
        }
        let deep = format!("echo {}x{}", "$(".repeat(70), ")".repeat(70));
        for (line, limit) in [
            (&many, "more than 4096 commands"),
            (&many_harmless, "more than 4096 commands"),
            (&evals, "nested more than 8 deep"),
            (&nested, "nested more than 8 deep"),
            (&deep, "nested more than 64 deep"),
        ] {
            let d = Guard::default()
                .check(line)
                .unwrap_or_else(|| panic!("ran: {}", &line[line.len().saturating_sub(80)..]));
            assert_eq!(d.rule, "unreadable", "{}", d.reason);
            assert!(d.reason.contains(limit), "{}", d.reason);
            assert!(d.reason.contains("split it"), "{}", d.reason);
        }
        // Below the limits the line is read and judged as usual.
        let fits = format!("{} echo done", "true;".repeat(100));
        assert_eq!(Guard::default().check(&fits), None);
        let shallow = format!("{}echo hi", "eval ".repeat(3));
        assert_eq!(Guard::default().check(&shallow), None);
        // An operator may turn the rule off, as any other.
        let lenient = Guard {
            disabled: vec!["unreadable".into()],
            ..Guard::default()
        };
        assert_eq!(lenient.check(&many_harmless), None);
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
            // Paths however written: `..`, doubled slashes, globs, braces, the working directory.
            ("rm -rf /../", "rm-root"),
            ("rm -rf /tmp/../../", "rm-root"),
            ("rm -rf /usr/..", "rm-root"),
            ("rm -rf /{,}", "rm-root"),
            ("rm -rf /{tmp,etc}", "rm-root"),
            ("rm -rf /u*", "rm-root"),
            ("rm -rf ~/.*", "rm-root"),
            ("rm -rf /home/alice", "rm-root"),
            ("rm -rf /usr/lib", "rm-root"),
            ("rm -rf /etc/*", "rm-root"),
            ("cd / && rm -rf *", "rm-root"),
            ("cd /; rm -rf .", "rm-root"),
            ("cd ~ && rm -rf ./*", "rm-root"),
            ("cd && rm -rf *", "rm-root"),
            ("cd /tmp && rm -rf ..", "rm-root"),
            ("pushd / >/dev/null; rm -rf usr", "rm-root"),
            ("cd / && find . -delete", "find-root"),
            ("cd / && chmod -R 777 .", "chmod-root"),
            ("mv ~ /dev/null", "rm-root"),
            ("mv /usr /tmp/old", "rm-root"),
            ("mv -t /tmp /etc", "rm-root"),
            ("rsync -a --delete /empty/ /", "rm-root"),
            ("chmod 000 /", "chmod-root"),
            ("chown nobody /usr", "chmod-root"),
            ("kill -9 1", "kill-all"),
            ("kill -TERM 1", "kill-all"),
            ("systemctl poweroff", "power"),
            ("systemctl --force reboot", "power"),
            ("systemctl isolate rescue.target", "power"),
            ("loginctl suspend", "power"),
            ("telinit 6", "power"),
            ("> /dev/sda", "block-device"),
            ("bash -c '>/dev/nvme0n1'", "block-device"),
            ("tee /dev/sda < /dev/zero", "block-device"),
            ("truncate -s 0 /dev/sda", "block-device"),
            ("mkswap /dev/sdb2", "block-device"),
            ("fdisk /dev/sda", "block-device"),
            ("parted /dev/sda mklabel gpt", "block-device"),
            ("cp disk.img /dev/sdb", "block-device"),
            ("chroot / rm -rf /", "rm-root"),
            ("unshare -r rm -rf ~", "rm-root"),
            ("strace -f kill -9 -1", "kill-all"),
            ("script -qc 'rm -rf /' /dev/null", "rm-root"),
            // Variables the line sets before it uses them.
            ("X=/; rm -rf $X", "rm-root"),
            ("X=/ Y=usr; rm -rf \"$X$Y\"", "rm-root"),
            ("export D=~; rm -rf ${D}/", "rm-root"),
            ("for d in /tmp /; do rm -rf \"$d\"; done", "rm-root"),
            ("rm -rf ${TARGET:-/}", "rm-root"),
            ("K=kill; $K -9 1", "kill-all"),
            ("P=/; cd $P && rm -rf *", "rm-root"),
            ("bash -c 'X=/; rm -rf $X'", "rm-root"),
            ("D=/dev/sda; echo x > $D", "block-device"),
            ("echo / | xargs rm -rf", "rm-root"),
            ("echo ~ | xargs -I{} rm -rf {}", "rm-root"),
            ("rm -rf $(echo /)", "rm-root"),
            ("rm -rf `echo ~`", "rm-root"),
            ("rm -rf \"$(printf /)\"", "rm-root"),
            ("rm -rf /$EMPTY", "rm-root"),
            ("rm -rf \"$HOME/$PROJECT\"", "rm-root"),
            ("rm -rf ~root", "rm-root"),
            ("rm --rec /", "rm-root"),
            ("chmod --recurs 777 /usr/lib", "chmod-root"),
            ("echo b > /proc/sysrq-trigger", "power"),
            ("echo o | tee /proc/sysrq-trigger", "power"),
            ("kill -9 $(pgrep -f node)", "kill-by-name"),
            ("kill `pidof python3`", "kill-by-name"),
            ("kill -9 -0001", "kill-all"),
            ("rm -rf ${HOME:?}", "rm-root"),
            ("cd / && rm -rf \"$PWD\"", "rm-root"),
            ("cd ~ && rm -rf \"$(pwd)\"/*", "rm-root"),
            ("find ~ -type f | xargs rm -rf", "rm-root"),
            ("exec 3>/dev/sda", "block-device"),
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
            "rm -rf /tmp/build/..",
            "rm -rf ~/project/target",
            "rm -rf ~/*.log",
            "rm -rf /t*",
            "rm -rf /home/alice/project/node_modules",
            "rm -rf {build,dist}",
            "cd /tmp && rm -rf *",
            "cd ~/project && rm -rf ./target",
            "cd \"$DIR\" && rm -rf *",
            "cd - && rm -rf *",
            "mv build /tmp/old-build",
            "mv ~/notes.txt ~/docs/",
            "rsync -a --delete ./dist/ /srv/www/app/",
            "chmod 700 ~",
            "chmod 755 /usr/local/bin/tool",
            "kill -l 1",
            "kill 12345",
            "systemctl status nginx",
            "systemctl --user restart app",
            "fdisk -l /dev/sda",
            "parted /dev/sda print",
            "cp /dev/sda disk.img",
            "tee out.log",
            "truncate -s 0 app.log",
            "> out.log",
            "chroot /srv/jail ls",
            "X=build; rm -rf $X",
            "X=/tmp/x; rm -rf $X/..",
            "for f in *.o; do rm -f $f; done",
            "for d in /; do ls $d; done",
            "rm -rf $UNKNOWN",
            "rm -rf ${TARGET:-./build}",
            "X=/; unset X; rm -rf $X",
            "echo build dist | xargs rm -rf",
            "find . -name '*.o' | xargs rm -f",
            "rm -rf /tmp/$BUILD",
            "rm -rf \"$HOME/$PROJECT/target\"",
            "rm -rf ~alice/project/build",
            "kill -9 $PID",
            "kill $(cat server.pid)",
            "cat /proc/sysrq-trigger",
            "rm --force ./x",
            "rm -rf \"$PWD/build\"",
            "rm -rf $(pwd)/target",
            "find . -name '*.pyc' | xargs rm -f",
            "kill 12",
        ] {
            assert_eq!(rule(cmd), None, "{cmd}");
        }
    }

    /// What a user may want done but should see first is asked about; what no person should approve from an agent
    /// stays refused, also behind `sudo`, and a refusal anywhere on the line beats a question.
    #[test]
    fn risky_commands_ask_and_destructive_ones_stay_refused() {
        let g = Guard::default();
        let verdict = |cmd: &str| g.check(cmd).map(|d| (d.rule, d.ask));
        for (cmd, rule) in [
            ("sudo apt-get install -y jq", "privilege"),
            ("doas pkg_add vim", "privilege"),
            ("sudo reboot", "privilege"),
            ("sudo -i", "privilege"),
            ("pkill -f 'node server.js'", "kill-by-name"),
            ("killall -9 python3", "kill-by-name"),
            ("reboot", "power"),
            ("shutdown -h now", "power"),
            ("init 0", "power"),
            ("git reset --hard", "git-discard"),
            ("git reset --hard HEAD~3", "git-discard"),
            ("git -C repo reset --hard origin/main", "git-discard"),
            ("git clean -f -x", "git-discard"),
            ("git clean -fdx", "git-discard"),
            ("git checkout -- .", "git-discard"),
            ("git checkout .", "git-discard"),
            ("git restore .", "git-discard"),
            ("git stash drop", "git-discard"),
            ("git stash clear", "git-discard"),
            ("git branch -D feature", "git-discard"),
            ("git push --force", "git-force-push"),
            ("git push -f origin main", "git-force-push"),
            ("git push origin +main", "git-force-push"),
            ("crontab -r", "crontab-remove"),
            ("crontab -u bob -r", "crontab-remove"),
            ("shred -u secrets.txt", "shred"),
            ("dd if=image.iso of=/dev/sdb bs=4M", "block-device"),
            ("bmaptool copy image.wic.bz2 /dev/sdb", "block-device"),
            ("rpi-imager --cli image.zip /dev/sdX", "block-device"),
            ("mkfs.ext4 /dev/sdb1", "block-device"),
            ("wipefs -a /dev/sdc", "block-device"),
            ("sgdisk --zap-all /dev/nvme0n1", "block-device"),
            (
                "dd if=image.iso of=/dev/usb_drive status=progress",
                "block-device",
            ),
            ("dd if=image.iso of=/dev/rdisk2 bs=1m", "block-device"),
        ] {
            assert_eq!(verdict(cmd), Some((rule.to_string(), true)), "{cmd}");
        }
        for (cmd, rule) in [
            ("sudo rm -rf /", "rm-root"),
            ("sudo kill -9 -1", "kill-all"),
            (":(){ :|:& };:", "fork-bomb"),
            ("sudo reboot; rm -rf ~", "rm-root"),
            ("git reset --hard && rm -rf /", "rm-root"),
        ] {
            assert_eq!(verdict(cmd), Some((rule.to_string(), false)), "{cmd}");
        }
        for cmd in [
            "killall -l",
            "pkill --version",
            "sudo -l",
            "sudo -v",
            "sudo -k",
            "sudo -n -l",
            "sudo -U alice -l",
            "mkfs.erofs image.erofs dir/",
            "mkfs.ext4 -F disk.img",
            "git reset --soft HEAD~1",
            "git reset HEAD file.txt",
            "git clean -n",
            "git clean -nfd",
            "git checkout -b feature",
            "git checkout main",
            "git restore --staged file.txt",
            "git stash",
            "git stash pop",
            "git branch -d merged",
            "git push origin main",
            "git push --force-with-lease origin feature",
            "git push --follow-tags",
            "crontab -l",
            "shred --help",
            "dd if=/dev/zero of=/dev/null bs=1M count=10",
            "dd if=disk.img of=copy.img",
            "tee /dev/stderr",
            "cp log.txt /dev/stdout",
        ] {
            assert_eq!(verdict(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn relative_paths_follow_the_requests_working_directory() {
        let g = Guard::default();
        let rule = |cmd, dir| g.check_in(cmd, dir).map(|d| d.rule);
        assert_eq!(rule("rm -rf *", Some("/")).as_deref(), Some("rm-root"));
        assert_eq!(
            rule("rm -rf ..", Some("/home/alice")).as_deref(),
            Some("rm-root")
        );
        assert_eq!(
            rule("rm -rf ../..", Some("/home/alice/project")).as_deref(),
            Some("rm-root")
        );
        assert_eq!(rule("rm -rf *", Some("/home/alice/project")), None);
        assert_eq!(
            rule("rm -rf *", Some("project")),
            None,
            "a relative workdir is not known"
        );
        assert_eq!(rule("rm -rf *", None), None);
        assert_eq!(
            rule("cd /tmp && rm -rf *", Some("/")),
            None,
            "the cd is followed"
        );
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
