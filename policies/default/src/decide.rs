//! The default policy's decision: plain Rust over plain types, unit-tested natively.

use crate::settings::{Network, OnTimeout, Settings};
use shellward_kit::duration::format_millis;
use shellward_kit::effective::visit_effective_commands;
use shellward_kit::pattern::base_name;
use shellward_kit::shell::{Op, Script, SimpleCommand, TokenKind, tokenize};
use std::ops::ControlFlow;

/// A request, mirroring `shellward:policy/types.request`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// Command text.
    pub command: String,
    /// Working directory.
    pub workdir: Option<String>,
    /// Requested foreground timeout (ms).
    pub timeout_ms: Option<u64>,
    /// Explicit background flag.
    pub background: Option<bool>,
    /// Already-decided timeout behaviour.
    pub on_timeout: Option<OnTimeout>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Caller context.
    pub context: Vec<(String, String)>,
    /// The shell that runs the command (`sh`, `bash`, `cmd`, `powershell`, …); empty means `sh`.
    pub shell: String,
}

/// A plan, mirroring `shellward:policy/types.plan`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Command to run.
    pub command: String,
    /// Working directory.
    pub workdir: Option<String>,
    /// Background or foreground.
    pub background: bool,
    /// Foreground timeout (ms).
    pub timeout_ms: Option<u64>,
    /// Behaviour when the timeout expires.
    pub on_timeout: OnTimeout,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Notes for the agent.
    pub notes: Vec<String>,
    /// The network the command gets, when this policy narrows it (`None`: the request's).
    pub network: Option<Network>,
    /// How long a background start waits for readiness (`None`: the request's).
    pub startup_wait_ms: Option<u64>,
    /// The ids of the rules that shaped the plan (see [`RULES`]).
    pub rules: Vec<&'static str>,
}

/// The outcome, mirroring `shellward:policy/types.outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run with this plan.
    Run(Plan),
    /// Refuse, with a reason and the rule that refused.
    Deny {
        /// Shown to the agent.
        reason: String,
        /// The rule's id (see [`RULES`]).
        rule: &'static str,
    },
}

/// Every rule this policy names in plans and denials, with what it does (the `rules` export).
pub const RULES: &[(&str, &str)] = &[
    ("timeout-zero", "refuses a timeout of zero"),
    (
        "nesting-limit",
        "refuses a command whose expansions nest past the reader's limit",
    ),
    (
        "parse-error",
        "notes that a command could not be parsed (it runs unchanged)",
    ),
    (
        "trailing-ampersand",
        "turns a trailing `&` (or `& disown`) into a tracked background run",
    ),
    (
        "setsid",
        "removes `setsid`, which would detach the process from tracking",
    ),
    (
        "inner-ampersand",
        "runs a command with `&` part-way through as one background process ending in `wait`",
    ),
    (
        "unread",
        "notes that a command too long or deep to read whole was not looked at for servers",
    ),
    (
        "promotion",
        "starts a command that keeps running (a promotion pattern) in the background",
    ),
    (
        "background-timeout",
        "notes that a timeout does not apply to a background run",
    ),
    ("timeout-cap", "lowers a timeout above max_timeout"),
    (
        "timeout-default",
        "gives a foreground command without a timeout the default timeout",
    ),
    (
        "network",
        "gives commands the network of the `network` setting (e.g. none)",
    ),
    (
        "network-exception",
        "keeps the operator's network for commands matching network_exceptions",
    ),
    (
        "startup-wait",
        "gives promoted commands the start-up wait of promoted_startup_wait",
    ),
];

const FOLLOW_UP: &str = "The result carries its process id: read its output with process_output and stop it with \
                         process_signal.";

/// Concatenates the parts of a note with one allocation (decisions run often; `format!` costs more in a component).
fn note(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.push_str(p);
    }
    out
}

/// Byte-range replacements applied to the source from the back.
struct Edits(Vec<(usize, usize, &'static str)>);

impl Edits {
    /// The script without the tokens that lie inside an edit (here-documents are not kept).
    fn cut<'a>(&self, script: &Script<'a>) -> Script<'a> {
        let tokens = script
            .tokens
            .iter()
            .filter(|t| {
                !self
                    .0
                    .iter()
                    .any(|&(from, to, _)| t.start >= from && t.end <= to)
            })
            .cloned()
            .collect();
        Script {
            src: script.src,
            tokens,
            heredocs: Vec::new(),
        }
    }

    fn apply(&mut self, src: &str) -> String {
        self.0.sort_by_key(|e| std::cmp::Reverse(e.0));
        let mut out = src.to_string();
        for &(start, end, with) in &self.0 {
            out.replace_range(start..end, with);
        }
        out
    }
}

/// Finds a trailing `&` (optionally followed by `disown …`) at top level and returns the edit that removes it
/// together with any comment after it, keeping here-document bodies.
fn trailing_ampersand(
    script: &Script<'_>,
    cmds: &[SimpleCommand],
) -> Option<(usize, usize, &'static str, bool)> {
    let last = script.last_significant()?;
    let mut amp = last;
    let mut disown = false;
    if script.tokens[last].kind != TokenKind::Op(Op::Amp) {
        // `cmd & disown [args]`
        let c = cmds.last()?;
        if c.last_token != last
            || c.depth != 0
            || c.words.first().map(|&w| &*script.tokens[w].text) != Some("disown")
            || c.first_token == 0
        {
            return None;
        }
        amp = c.first_token - 1;
        disown = true;
    }
    let t = &script.tokens[amp];
    if t.kind != TokenKind::Op(Op::Amp) || t.depth != 0 || amp == 0 {
        return None;
    }
    let cut_from = script.tokens[amp - 1].end;
    Some(match script.heredocs.iter().find(|h| h.start >= t.end) {
        Some(h) => (cut_from, h.start, "\n", disown),
        None => (cut_from, script.src.len(), "", disown),
    })
}

/// Edits removing `setsid [options]` wherever it starts a simple command; returns whether any of them waits (`-w`).
fn setsid_edits(script: &Script<'_>, cmds: &[SimpleCommand], edits: &mut Edits) -> (bool, bool) {
    let mut found = false;
    let mut waits = false;
    for c in cmds {
        let Some(&first) = c.words.first() else {
            continue;
        };
        let name = base_name(&script.tokens[first].text);
        if name != "setsid" || c.words.len() < 2 {
            continue;
        }
        let mut k = 1;
        while k < c.words.len() {
            let w = &script.tokens[c.words[k]].text;
            if w == "--" {
                k += 1;
                break;
            }
            if !w.starts_with('-') {
                break;
            }
            waits |= w == "--wait" || (!w.starts_with("--") && w.contains('w'));
            k += 1;
        }
        if k >= c.words.len() {
            continue;
        }
        found = true;
        edits.0.push((
            script.tokens[first].start,
            script.tokens[c.words[k]].start,
            "",
        ));
    }
    (found, waits)
}

/// Whether the script starts jobs with `&` anywhere (after the trailing one was removed).
fn has_inner_ampersand(script: &Script<'_>) -> bool {
    script
        .tokens
        .iter()
        .any(|t| t.kind == TokenKind::Op(Op::Amp))
}

/// Whether the last simple command of the script is `wait`.
fn ends_with_wait(script: &Script<'_>, cmds: &[SimpleCommand]) -> bool {
    cmds.last().is_some_and(|c| {
        c.depth == 0 && c.words.len() == 1 && script.tokens[c.words[0]].text == "wait"
    })
}

/// The first promotion pattern matching any effective command (wrappers such as `nohup`, `env`, `setsid` stripped,
/// `bash -c '…'` read; `cd` and commands bounded by `timeout` ignored), with the command's text; and whether the
/// reading reached every command (false when it stopped at a limit without a match: a server past the limit was not
/// looked for, which the caller says).
/// The commands are read one at a time and borrowed: the reading stops at the first match.
///
/// On another shell than a POSIX one (Windows' `cmd`, PowerShell), `ping` ends by itself unless given `-t`: only
/// `ping -t` keeps running there.
fn promotion<'s>(
    settings: &'s Settings,
    script: &Script<'_>,
    cmds: &[SimpleCommand],
    posix: bool,
) -> (Option<(&'s str, String)>, bool) {
    if settings.promote.is_empty() {
        return (None, true);
    }
    let mut found = None;
    let visit = visit_effective_commands(script, cmds, |c| {
        if c.name() == Some("cd") || c.via("timeout") {
            return ControlFlow::Continue(());
        }
        if !posix
            && c.name().is_some_and(|n| {
                n.eq_ignore_ascii_case("ping") || n.eq_ignore_ascii_case("ping.exe")
            })
            && !c
                .args()
                .iter()
                .any(|w| w.text.eq_ignore_ascii_case("-t") || w.text.eq_ignore_ascii_case("/t"))
        {
            return ControlFlow::Continue(());
        }
        match settings.promote.find(c.words) {
            Some(p) => {
                found = Some((p.as_str(), c.line()));
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    });
    let complete = found.is_some() || (!visit.too_deep && !visit.truncated);
    (found, complete)
}

/// Whether `shell` (a program name or path, as the host reports it) reads POSIX shell syntax: `sh` and the shells
/// compatible with it. An empty name is `sh` (a host older than the field).
pub fn reads_posix(shell: &str) -> bool {
    let name = shell.rsplit(['/', '\\']).next().unwrap_or(shell);
    let name = name.to_ascii_lowercase();
    let name = name.strip_suffix(".exe").unwrap_or(&name);
    matches!(
        name,
        "" | "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "busybox" | "yash" | "posh"
    )
}

/// Decides what to do with one request.
pub fn evaluate(settings: &Settings, req: &Request) -> Outcome {
    evaluate_owned(settings, req.clone())
}

/// [`evaluate`] taking the request by value, so its strings move into the plan instead of being copied (the component
/// owns the request the host lowered into its memory).
pub fn evaluate_owned(settings: &Settings, req: Request) -> Outcome {
    if req.timeout_ms == Some(0) {
        return timeout_zero(settings);
    }
    let asked_background = req.background == Some(true);
    let mut found = Findings {
        background: asked_background,
        ..Findings::default()
    };
    // The command line is read as POSIX shell syntax. Another shell's line (`cmd`, where `&` separates commands,
    // PowerShell) is only looked at for programs that keep running: nothing in it is rewritten, and what the POSIX
    // reader cannot read is not reported as a syntax error.
    let posix = reads_posix(&req.shell);
    match tokenize(&req.command) {
        Err(_) if !posix => {}
        Err(e) if e.too_deep => {
            return Outcome::Deny {
                rule: "nesting-limit",
                reason: format!(
                    "The command is {e}: shellward cannot check a command line whose $(…) and ${{…}} expansions \
                     nest this deep. Split it into steps, or write it to a script file and run the file."
                ),
            };
        }
        Err(e) => found.add(
            "parse-error",
            format!(
                "shellward could not parse this command ({e}); it runs unchanged and the shell will probably report \
                 a syntax error. Check the quoting."
            ),
        ),
        Ok(script) => found.read(settings, &req.command, script, posix, asked_background),
    }
    let mut command = found.edited.take().unwrap_or(req.command);
    if found.append_wait {
        command.push_str("\nwait");
    }
    let timeout_ms = found.timeout(settings, req.timeout_ms, asked_background);
    let network = found.network(settings);
    let startup_wait_ms = match settings.promoted_startup_wait_ms {
        Some(ms) if found.promoted_here => {
            found.rules.push("startup-wait");
            Some(ms)
        }
        _ => None,
    };
    Outcome::Run(Plan {
        command,
        workdir: req.workdir,
        background: found.background,
        timeout_ms,
        on_timeout: req.on_timeout.unwrap_or(settings.on_timeout),
        env: req.env,
        notes: found.notes,
        network,
        startup_wait_ms,
        rules: found.rules,
    })
}

/// The denial of a zero timeout, saying what to give instead.
fn timeout_zero(settings: &Settings) -> Outcome {
    Outcome::Deny {
        rule: "timeout-zero",
        reason: format!(
            "A timeout of zero would stop the command before it starts. Omit the timeout to get the default ({}), \
             give a positive duration such as 30s or 5m (at most {}), or set run_in_background for commands that keep \
             running.",
            format_millis(settings.default_timeout_ms),
            format_millis(settings.max_timeout_ms)
        ),
    }
}

/// What reading a request found so far: the plan's shape, the rules that shaped it and the notes that say why.
#[derive(Default)]
struct Findings {
    /// Whether the command runs in the background.
    background: bool,
    notes: Vec<String>,
    rules: Vec<&'static str>,
    /// Whether this policy promoted the command to the background (a program that keeps running).
    promoted_here: bool,
    /// Whether the command keeps the operator's network under a narrowing `network` setting.
    network_exception: bool,
    /// The command with edits applied, when there were any.
    edited: Option<String>,
    /// Whether a final `wait` is appended (jobs started part-way through are waited for).
    append_wait: bool,
}

impl Findings {
    /// Records that `rule` shaped the plan, and the note that tells the agent.
    fn add(&mut self, rule: &'static str, note: String) {
        self.rules.push(rule);
        self.notes.push(note);
    }

    /// Reads a POSIX-parsed (or, on another shell, POSIX-read) command: detaching edits first, then what the edited
    /// command starts.
    fn read(
        &mut self,
        settings: &Settings,
        command: &str,
        script: Script<'_>,
        posix: bool,
        asked_background: bool,
    ) {
        let mut edits = Edits(Vec::new());
        let cmds = script.simple_commands();
        if settings.network.is_some() {
            self.network_exception = matches_any(&settings.network_exceptions, &script, &cmds);
        }
        self.undetach(
            settings,
            &script,
            &cmds,
            posix,
            asked_background,
            &mut edits,
        );
        if !edits.0.is_empty() {
            self.edited = Some(edits.apply(command));
        }
        // The edits only cut whole tokens (the trailing `&`, `disown …`, `setsid [options]`) and comments, so the
        // edited command's tokens are the original ones minus those inside a cut: no second tokenizer pass.
        if self.edited.is_some() {
            let cut = edits.cut(&script);
            let cmds = cut.simple_commands();
            self.keep_tracked(settings, &cut, &cmds, posix);
        } else {
            self.keep_tracked(settings, &script, &cmds, posix);
        }
    }

    /// The edits that undo detaching (a trailing `&` or `& disown`, `setsid`), with their notes; a command they
    /// detached runs as a tracked background process instead.
    fn undetach(
        &mut self,
        settings: &Settings,
        script: &Script<'_>,
        cmds: &[SimpleCommand],
        posix: bool,
        asked_background: bool,
        edits: &mut Edits,
    ) {
        let trailing = if settings.ampersand_to_background && posix {
            trailing_ampersand(script, cmds)
        } else {
            None
        };
        let (setsid, setsid_waits) = if posix {
            setsid_edits(script, cmds, edits)
        } else {
            (false, false)
        };
        if let Some((from, to, with, disown)) = trailing {
            edits.0.push((from, to, with));
            let what = if disown {
                "`& disown`"
            } else {
                "the trailing `&`"
            };
            let note = if asked_background {
                note(&[
                    "Removed ",
                    what,
                    // The caller asked for the background: the host's result says how to follow up.
                    ": the command already runs in the background, and `&` would have made the shell exit at once \
                     while its child ran on untracked.",
                ])
            } else {
                note(&[
                    "Removed ",
                    what,
                    " and started the command as a tracked background process instead, so it is not orphaned and \
                     its output is kept. Use run_in_background rather than `&`. ",
                    FOLLOW_UP,
                ])
            };
            self.add("trailing-ampersand", note);
            self.background = true;
        }
        if setsid {
            let note = if setsid_waits {
                "Removed `setsid`: it would move the process out of shellward's tracking."
                    .to_string()
            } else {
                // How to follow up is said by whoever moved it to the background (here, or the `&` above, or the
                // caller's request: then the host's result says it).
                let follow_up = if self.background { "" } else { FOLLOW_UP };
                self.background = true;
                format!(
                    "Removed `setsid` and started the command as a tracked background process instead: setsid \
                     detaches the process so it would run on untracked. {follow_up}"
                )
                .trim_end()
                .to_string()
            };
            self.add("setsid", note);
        }
    }

    /// What the (edited) command starts that must stay tracked: jobs started with `&` part-way through, and programs
    /// that keep running (promotion); and a command too long to read whole, which is said.
    fn keep_tracked(
        &mut self,
        settings: &Settings,
        script: &Script<'_>,
        cmds: &[SimpleCommand],
        posix: bool,
    ) {
        let inner_amp = settings.ampersand_to_background && posix && has_inner_ampersand(script);
        let waits = ends_with_wait(script, cmds);
        let (promoted, read_all) = promotion(settings, script, cmds, posix);
        if inner_amp {
            self.append_wait = !waits;
            let follow_up = if self.background { "" } else { FOLLOW_UP };
            self.background = true;
            self.add(
                "inner-ampersand",
                format!(
                    "The command starts jobs with `&` part-way through, so it runs as one tracked background process \
                     and a final `wait` keeps the shell alive until those jobs end (nothing is orphaned). To run \
                     something in the background, prefer run_in_background over `&`. {follow_up}"
                )
                .trim_end()
                .to_string(),
            );
        }
        if !read_all && !self.background {
            self.add(
                "unread",
                "The command is too long or nests shell strings too deep to be read whole, so a server or watcher \
                 in it was not looked for: it runs in the foreground. Split it into steps, and start anything that \
                 keeps running with run_in_background."
                    .to_string(),
            );
        }
        if let (false, Some((pattern, matched))) = (self.background, promoted) {
            self.promoted_here = true;
            self.background = true;
            self.add(
                "promotion",
                note(&[
                    "`",
                    &matched,
                    "` usually keeps running until it is stopped (promotion pattern `",
                    pattern,
                    "`), so it was started as a background process instead of blocking. ",
                    FOLLOW_UP,
                ]),
            );
        }
    }

    /// The foreground timeout: none in the background (said when one was given for a command this policy moved
    /// there), else the request's or the default, capped at the maximum.
    fn timeout(
        &mut self,
        settings: &Settings,
        asked: Option<u64>,
        asked_background: bool,
    ) -> Option<u64> {
        if self.background {
            if let (Some(t), false) = (asked, asked_background) {
                self.add(
                    "background-timeout",
                    format!(
                        "The timeout ({}) does not apply to background processes.",
                        format_millis(t)
                    ),
                );
            }
            return None;
        }
        if asked.is_none() {
            self.rules.push("timeout-default");
        }
        let asked = asked.unwrap_or(settings.default_timeout_ms);
        if asked > settings.max_timeout_ms {
            self.add(
                "timeout-cap",
                format!(
                    "The timeout {} exceeds the maximum of {}; it was lowered to {}. For longer work, use \
                     run_in_background and read the output with process_output.",
                    format_millis(asked),
                    format_millis(settings.max_timeout_ms),
                    format_millis(settings.max_timeout_ms)
                ),
            );
        }
        Some(asked.min(settings.max_timeout_ms))
    }

    /// The network this policy narrows the command to, unless the command is one of the operator's exceptions.
    fn network(&mut self, settings: &Settings) -> Option<Network> {
        let narrowed = settings.network?;
        if self.network_exception {
            self.rules.push("network-exception");
            return None;
        }
        self.rules.push("network");
        Some(narrowed)
    }
}

/// Whether any effective command of the script matches one of `patterns` (wrappers seen through). A reading that
/// stops at a limit matches nothing: the narrowing applies (fail closed).
fn matches_any(
    patterns: &shellward_kit::pattern::PatternSet,
    script: &Script<'_>,
    cmds: &[SimpleCommand],
) -> bool {
    if patterns.is_empty() {
        return false;
    }
    let mut found = false;
    visit_effective_commands(script, cmds, |c| {
        if patterns.find(c.words).is_some() {
            found = true;
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(req: Request) -> Plan {
        match evaluate(&Settings::default(), &req) {
            Outcome::Run(p) => p,
            Outcome::Deny { reason, .. } => panic!("denied: {reason}"),
        }
    }

    fn cmd(c: &str) -> Plan {
        run(Request {
            command: c.to_string(),
            ..Default::default()
        })
    }

    #[track_caller]
    fn bg(c: &str, expect: &str) {
        let p = cmd(c);
        assert!(p.background, "{c:?} should run in background");
        assert_eq!(p.command, expect, "{c:?}");
        assert_eq!(p.timeout_ms, None, "{c:?}");
        assert!(!p.notes.is_empty(), "{c:?} rewrote without a note");
        assert!(
            p.notes.iter().any(|n| n.contains("process_output")),
            "{c:?}: {:?}",
            p.notes
        );
    }

    #[track_caller]
    fn unchanged_fg(c: &str) {
        let p = cmd(c);
        assert!(!p.background, "{c:?} should stay in foreground");
        assert_eq!(p.command, c);
        assert_eq!(p.timeout_ms, Some(10_000));
        assert!(p.notes.is_empty(), "{c:?}: {:?}", p.notes);
    }

    /// Another shell's line is not read as POSIX: in `cmd`, `&` separates commands, so nothing is moved to the
    /// background or rewritten for it, and a quote the POSIX reader cannot close is no syntax error; a program that
    /// keeps running is still started in the background.
    #[test]
    fn only_posix_lines_are_rewritten() {
        let on = |shell: &str, c: &str| {
            run(Request {
                command: c.to_string(),
                shell: shell.to_string(),
                ..Default::default()
            })
        };
        for shell in [
            "cmd",
            "C:\\Windows\\System32\\cmd.exe",
            "powershell",
            "pwsh.exe",
        ] {
            for c in ["echo one & echo two", "dir &", "echo it's", "setsid foo"] {
                let p = on(shell, c);
                assert!(!p.background, "{shell}: {c:?}");
                assert_eq!(p.command, c, "{shell}: {c:?}");
                assert!(p.notes.is_empty(), "{shell}: {c:?}: {:?}", p.notes);
                assert_eq!(p.timeout_ms, Some(10_000), "{shell}: {c:?}");
            }
            for c in ["npm run dev", "ping -t 127.0.0.1"] {
                let p = on(shell, c);
                assert!(
                    p.background && p.rules.contains(&"promotion"),
                    "{shell}: {c:?}: {p:?}"
                );
            }
            // Windows' ping stops after its count (four by default) unless given -t.
            assert!(!on(shell, "ping -n 40 127.0.0.1").background, "{shell}");
        }
        for shell in ["", "sh", "/bin/bash", "zsh"] {
            let p = on(shell, "sleep 5 &");
            assert!(
                p.background && p.rules.contains(&"trailing-ampersand"),
                "{shell}: {p:?}"
            );
            assert!(on(shell, "ping -n 127.0.0.1").background, "{shell}");
        }
    }

    /// A line the reading cannot finish does not pass as "nothing to promote" silently: the agent is told that a
    /// server past the limit was not looked for.
    #[test]
    fn an_unfinished_reading_says_what_was_not_looked_for() {
        let long = format!("{}npm run dev", "true;".repeat(5000));
        let p = cmd(&long);
        assert!(!p.background);
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("too long or nests shell strings too deep")),
            "{:?}",
            p.notes
        );
        let mut deep = "npm run dev".to_string();
        for _ in 0..10 {
            deep = format!("sh -c '{}'", deep.replace('\'', "'\\''"));
        }
        assert!(
            cmd(&deep)
                .notes
                .iter()
                .any(|n| n.contains("run_in_background"))
        );
        // A promotion found before the limit still promotes, without the note.
        let early = format!("npm run dev; {}", "true;".repeat(5000));
        let p = cmd(&early);
        assert!(p.background);
        assert!(
            !p.notes.iter().any(|n| n.contains("too long")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn trailing_ampersand_becomes_background() {
        bg("npm run dev &", "npm run dev");
        bg("npm run dev &   # start the server", "npm run dev");
        bg("make && ./server &", "make && ./server");
        bg("nohup ./server > log 2>&1 &", "nohup ./server > log 2>&1");
        bg("(cd app && npm start) &", "(cd app && npm start)");
        bg("./server&", "./server");
        bg("./server &\n\n", "./server");
        bg(
            "python3 app.py 'a b' \"c & d\" &",
            "python3 app.py 'a b' \"c & d\"",
        );
        bg("./x \\& &", "./x \\&");
        bg("{ ./a; ./b; } &", "{ ./a; ./b; }");
        bg("./server 2>&1 | tee log &", "./server 2>&1 | tee log");
    }

    #[test]
    fn ampersand_that_does_not_background_is_left_alone() {
        for c in [
            "a && b",
            "echo \"x &\"",
            "echo 'x &'",
            "echo x \\&",
            "cmd 2>&1",
            "cmd &> out.log",
            "cmd &>> out.log",
            "cmd >& out.log",
            "cmd |& tee x",
            "echo $(sleep 1 &)",
            "echo `true &`",
            "echo ${X:-&}",
            "cat <<EOF\na & b &\nEOF",
            "cat <<'EOF' > notes.txt\nrun me &\nEOF\nwc -l notes.txt",
            "echo done # and then &",
            "grep -c '&' file",
            "a || b",
        ] {
            unchanged_fg(c);
        }
    }

    #[test]
    fn heredoc_is_kept_when_trailing_ampersand_is_removed() {
        bg("cat <<EOF > f &\nx & y\nEOF", "cat <<EOF > f\nx & y\nEOF");
        bg("cat <<EOF &  # c\nbody\nEOF\n", "cat <<EOF\nbody\nEOF\n");
    }

    #[test]
    fn trailing_ampersand_is_stripped_when_background_was_asked() {
        let p = run(Request {
            command: "npm run dev &".into(),
            background: Some(true),
            ..Default::default()
        });
        assert!(p.background);
        assert_eq!(p.command, "npm run dev");
        assert!(
            p.notes[0].contains("already runs in the background"),
            "{:?}",
            p.notes
        );
        // A plain background request needs no note.
        let p = run(Request {
            command: "./build.sh".into(),
            background: Some(true),
            ..Default::default()
        });
        assert!(p.background && p.notes.is_empty() && p.timeout_ms.is_none());
    }

    #[test]
    fn mid_list_ampersand_runs_tracked_with_wait() {
        bg("sleep 5 & echo started", "sleep 5 & echo started\nwait");
        bg("./a & ./b &", "./a & ./b\nwait");
        bg("./a & ./b & wait", "./a & ./b & wait");
        bg(
            "./server & sleep 1 && curl localhost # probe",
            "./server & sleep 1 && curl localhost # probe\nwait",
        );
        bg("(./daemon &)", "(./daemon &)\nwait");
    }

    /// The decision analyses an edited command through the original tokens minus the cut ones; that must be what the
    /// tokenizer makes of the edited text.
    #[test]
    fn cut_tokens_equal_a_fresh_tokenization_of_the_edited_command() {
        let significant = |s: &Script<'_>| -> Vec<(TokenKind, String, u32)> {
            s.tokens
                .iter()
                .filter(|t| t.kind != TokenKind::Newline)
                .map(|t| (t.kind, t.text.to_string(), t.depth))
                .collect()
        };
        for c in [
            "npm run dev &",
            "npm run dev &   # start the server",
            "make && ./server &",
            "nohup ./server > log 2>&1 &",
            "(cd app && npm start) &",
            "./server & disown -h %1",
            "setsid -f npm run dev",
            "setsid --fork ./a; setsid -w ./b &",
            "cd web && setsid nohup 'python3' -m http.server 8000 >/dev/null 2>&1 &",
            "cat <<EOF > f &\nx & y\nEOF",
            "sleep 5 & echo started &",
            "X=1 setsid ./s \"a b\" $(date) &  # c",
        ] {
            let script = tokenize(c).unwrap();
            let cmds = script.simple_commands();
            let mut edits = Edits(Vec::new());
            if let Some((from, to, with, _)) = trailing_ampersand(&script, &cmds) {
                edits.0.push((from, to, with));
            }
            setsid_edits(&script, &cmds, &mut edits);
            assert!(!edits.0.is_empty(), "{c:?} has no edit");
            let edited = edits.apply(c);
            let cut = edits.cut(&script);
            let fresh = tokenize(&edited).unwrap();
            assert_eq!(
                significant(&cut),
                significant(&fresh),
                "{c:?} -> {edited:?}"
            );
        }
    }

    #[test]
    fn disown_and_setsid() {
        bg("./server & disown", "./server");
        bg("./server & disown -h %1", "./server");
        bg("setsid ./server", "./server");
        bg("setsid -f ./server > log 2>&1", "./server > log 2>&1");
        bg("setsid ./server &", "./server");
        bg("cd app && setsid -f npm start", "cd app && npm start");
        let p = cmd("setsid -w ./job");
        assert!(!p.background);
        assert_eq!(p.command, "./job");
        assert!(p.notes[0].contains("setsid"));
        // `setsid` as an argument is not touched.
        unchanged_fg("echo setsid ./x");
        unchanged_fg("man setsid");
    }

    #[test]
    fn long_running_commands_are_promoted() {
        for (c, pattern) in [
            ("npm run dev", "npm run dev"),
            ("PORT=3000 npm start", "npm start"),
            ("cd web && yarn dev", "yarn dev"),
            (
                "cd web; NODE_ENV=dev pnpm run dev -- --port 4000",
                "pnpm run dev",
            ),
            ("tail -f /var/log/syslog", "tail -*f*"),
            ("tail -n 50 -F app.log | grep ERROR", "tail -*F*"),
            ("docker compose up", "docker compose up !-d !--detach"),
            ("python3 -m http.server 8000", "python* -m http.server"),
            (
                "python manage.py runserver 0.0.0.0:8000",
                "python* manage.py runserver",
            ),
            ("npm install && npm run dev", "npm run dev"),
            ("env NODE_ENV=dev nohup npx vite --host", "npx vite !build"),
            ("./node_modules/.bin/vite", "vite !build !optimize"),
            ("(cd app && cargo watch -x run)", "cargo watch"),
            // More words than the matcher gathers on the stack.
            (
                "npx vite --host 0.0.0.0 --port 5173 --strictPort --open --cors --mode dev --base /app/ --logLevel \
                 info --clearScreen false --force",
                "npx vite !build",
            ),
            (
                "npx vite --host 0.0.0.0 --port 5173 --strictPort --open --cors --mode dev --base /app/ --logLevel \
                 info --clearScreen false --force tail",
                "npx vite !build",
            ),
        ] {
            let p = cmd(c);
            assert!(p.background, "{c:?} should be promoted");
            assert_eq!(p.command, c, "promotion must not rewrite");
            assert_eq!(p.timeout_ms, None);
            assert!(p.notes[0].contains(pattern), "{c:?}: {:?}", p.notes);
        }
        for c in [
            "docker compose up -d",
            "npm run build",
            "npm test",
            "vite build",
            "tail -n 20 app.log",
            "echo npm run dev",
            "grep 'npm start' README.md",
            "ping -c 3 localhost",
            "cd web",
            "npx vite --host 0.0.0.0 --port 5173 --strictPort --open --cors --mode dev --base /app/ --logLevel info \
             --clearScreen false --force build",
        ] {
            unchanged_fg(c);
        }
        // An explicit foreground flag does not stop promotion: the command would never return.
        let p = run(Request {
            command: "npm run dev".into(),
            background: Some(false),
            ..Default::default()
        });
        assert!(p.background);
    }

    #[test]
    fn timeouts_default_clamp_and_zero() {
        assert_eq!(cmd("make").timeout_ms, Some(10_000));
        let p = run(Request {
            command: "make".into(),
            timeout_ms: Some(90_000),
            ..Default::default()
        });
        assert_eq!((p.timeout_ms, p.notes.len()), (Some(90_000), 0));
        let p = run(Request {
            command: "make".into(),
            timeout_ms: Some(5 * 3_600_000),
            ..Default::default()
        });
        assert_eq!(p.timeout_ms, Some(3_600_000));
        assert!(
            p.notes[0].contains("5h") && p.notes[0].contains("1h"),
            "{:?}",
            p.notes
        );
        let denied = evaluate(
            &Settings::default(),
            &Request {
                command: "make".into(),
                timeout_ms: Some(0),
                ..Default::default()
            },
        );
        assert!(
            matches!(denied, Outcome::Deny { reason: r, rule: "timeout-zero" } if r.contains("zero") && r.contains("30s"))
        );
        // Expansions nested past the tokenizer's limit are denied with the limit named, not followed.
        let deep = format!("echo {}x{}", "$(".repeat(1000), ")".repeat(1000));
        let denied = evaluate(
            &Settings::default(),
            &Request {
                command: deep,
                ..Default::default()
            },
        );
        assert!(
            matches!(&denied, Outcome::Deny { reason: r, rule: "nesting-limit" } if r.contains("nested too deeply (limit 64)")),
            "{denied:?}"
        );
        // Background runs carry no timeout; a promoted run says the timeout was dropped.
        let p = run(Request {
            command: "npm run dev".into(),
            timeout_ms: Some(60_000),
            ..Default::default()
        });
        assert_eq!(p.timeout_ms, None);
        assert!(p.notes.iter().any(|n| n.contains("does not apply")));
    }

    #[test]
    fn on_timeout_defaults_to_background_and_respects_previous_decision() {
        assert_eq!(cmd("make").on_timeout, OnTimeout::Background);
        let p = run(Request {
            command: "make".into(),
            on_timeout: Some(OnTimeout::Kill),
            ..Default::default()
        });
        assert_eq!(p.on_timeout, OnTimeout::Kill);
        let s = Settings::from_json(r#"{"on_timeout":"kill","default_timeout":"2s"}"#).unwrap();
        let Outcome::Run(p) = evaluate(
            &s,
            &Request {
                command: "make".into(),
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert_eq!((p.on_timeout, p.timeout_ms), (OnTimeout::Kill, Some(2_000)));
    }

    #[test]
    fn settings_change_behaviour() {
        let s = Settings::from_json(
            r#"{"ampersand_to_background":false,"promote_patterns":["make serve"]}"#,
        )
        .unwrap();
        let ev = |c: &str| match evaluate(
            &s,
            &Request {
                command: c.into(),
                ..Default::default()
            },
        ) {
            Outcome::Run(p) => p,
            Outcome::Deny { reason, .. } => panic!("{reason}"),
        };
        assert!(!ev("./server &").background);
        assert_eq!(ev("./server &").command, "./server &");
        assert!(!ev("npm run dev").background);
        assert!(ev("make serve PORT=1").background);
    }

    #[test]
    fn env_workdir_pass_through_and_parse_errors_are_noted() {
        let p = run(Request {
            command: "echo 'unterminated".into(),
            workdir: Some("/tmp".into()),
            env: vec![("A".into(), "1".into())],
            ..Default::default()
        });
        assert_eq!(p.command, "echo 'unterminated");
        assert_eq!(p.workdir.as_deref(), Some("/tmp"));
        assert_eq!(p.env, vec![("A".to_string(), "1".to_string())]);
        assert!(p.notes[0].contains("unterminated single quote"));
    }
}
