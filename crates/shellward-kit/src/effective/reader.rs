//! How [`Reader`] reads a command line: each simple command's words through the wrappers it strips, the shell
//! strings it reads again, `find`'s and `xargs`' commands, and the bounds that stop a hostile line.

use super::*;

/// A wrapper command as an unwrapping step sees it: its name, its words, the words after its name, the context it was
/// found in and where it was found.
struct Wrapper<'a, 'w, 's> {
    name: &'a str,
    words: &'w [Word<'s>],
    rest: &'w [Word<'s>],
    ctx: &'a mut Context,
    found: &'a Found<'a>,
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
    pub(super) fn commands(
        &mut self,
        script: &Script<'_>,
        commands: &[SimpleCommand],
        ctx: &Context,
    ) {
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
            let at = Wrapper {
                name,
                words,
                rest,
                ctx: &mut ctx,
                found,
            };
            let step = match name {
                "nohup" | "builtin" | "command" | "exec" | "time" | "nice" | "setsid"
                | "stdbuf" | "timeout" | "busybox" | "chroot" => self.unwrap_simple(at),
                "env" => self.unwrap_env(at),
                "su" | "runuser" => self.unwrap_su(at),
                "xargs" => self.unwrap_xargs(at),
                "ionice" | "chrt" | "taskset" | "flock" => self.unwrap_scheduler(at),
                "watch" | "parallel" => self.unwrap_repeater(at),
                "strace" | "ltrace" | "script" => self.unwrap_tracer(at),
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

    /// [`Reader::line`], ending a wrapper's step.
    fn done_line<'w, 's>(&mut self, line: &str, ctx: &Context, via: &str) -> Step<'w, 's> {
        self.line(line, ctx, via);
        Step::Done
    }

    /// [`Walker::emit`], ending a wrapper's step.
    fn done_emit<'w, 's>(&mut self, cmd: &Wrapper<'_, '_, '_>) -> Step<'w, 's> {
        self.emit(cmd.words, cmd.ctx, cmd.found);
        Step::Done
    }

    /// Wrappers that are their options, then the command (`nohup`, `command`, `exec`, `time`, `nice`, `setsid`,
    /// `stdbuf`, `timeout`, `busybox`, `chroot`).
    fn unwrap_simple<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match cmd.name {
            "nohup" | "builtin" => skip_options(cmd.rest, &[]),
            "command" => {
                // `command -v NAME` looks a program up; it does not run it.
                if any_option(cmd.rest, |t| cluster_has(t, 'v') || cluster_has(t, 'V')) {
                    return self.done_emit(&cmd);
                }
                skip_options(cmd.rest, &[])
            }
            "exec" => skip_options(cmd.rest, &["-a"]),
            "time" => skip_options(cmd.rest, &["-f", "-o", "--format", "--output"]),
            "nice" => skip_options(cmd.rest, &["-n", "--adjustment"]),
            "setsid" => skip_options(cmd.rest, &[]),
            "stdbuf" => skip_options(
                cmd.rest,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
            ),
            "timeout" => {
                let r = skip_options(cmd.rest, &["-s", "-k", "--signal", "--kill-after"]);
                r.get(1..).unwrap_or(&[])
            }
            "busybox" => {
                if cmd.rest.is_empty() || is_option(cmd.rest[0].text) {
                    return self.done_emit(&cmd);
                }
                cmd.rest
            }
            "chroot" => {
                // `chroot [--userspec U:G] [--groups G] NEWROOT [COMMAND…]`; without a command it runs a shell.
                let r = skip_options(cmd.rest, &["--userspec", "--groups"]);
                match r.get(1..) {
                    Some(command) if !command.is_empty() => command,
                    _ => return self.done_emit(&cmd),
                }
            }
            _ => return self.done_emit(&cmd),
        };
        Step::Next(next)
    }

    /// `env [options] [NAME=value]… COMMAND`, and `env -S LINE`.
    fn unwrap_env<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = {
            let mut r = cmd.rest;
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
                return self.done_line(&line, &cmd.ctx.with("env"), "env -S");
            }
            r
        };
        Step::Next(next)
    }

    /// `su [options] [user] -c LINE`; `runuser -u USER -- COMMAND…`.
    fn unwrap_su<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = {
            // `su [options] [user] -c LINE`; `runuser -u USER -- CMD…`.
            if let Some(at) = cmd.rest.iter().position(|w| {
                w.text == "-c" || w.text == "--command" || w.text.starts_with("--command=")
            }) {
                let line = match cmd.rest[at].text.strip_prefix("--command=") {
                    Some(l) => Some(l.to_string()),
                    None => cmd.rest.get(at + 1).map(|w| w.text.to_string()),
                };
                if let Some(line) = line {
                    self.line(&line, &cmd.ctx.with(cmd.name), &format!("{} -c", cmd.name));
                }
                return self.done_emit(&cmd);
            }
            if cmd.name == "runuser"
                && let Some(at) = cmd.rest.iter().position(|w| w.text == "--")
                && at + 1 < cmd.rest.len()
            {
                &cmd.rest[at + 1..]
            } else {
                return self.done_emit(&cmd);
            }
        };
        Step::Next(next)
    }

    /// `xargs [options] COMMAND`: with a known standard input, the command with the arguments it would get.
    fn unwrap_xargs<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = {
            let r = skip_options(
                cmd.rest,
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
                return self.done_emit(&cmd);
            }
            // Arguments read from a known standard input (`echo / | xargs rm -rf`) are known too.
            let options = &cmd.rest[..cmd.rest.len() - r.len()];
            if let Some((input, _)) = cmd.found.stdin
                && let Some(mode) = xargs_input(options)
            {
                {
                    self.xargs(r, input, mode, cmd.ctx, cmd.found);
                    return Step::Done;
                }
            }
            cmd.ctx.more_args = true;
            r
        };
        Step::Next(next)
    }

    /// Schedulers and locks that run a command: `ionice`, `chrt`, `taskset`, `flock` (and `flock -c LINE`).
    fn unwrap_scheduler<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match cmd.name {
            "ionice" => {
                if any_option(cmd.rest, |t| {
                    ["-p", "-P", "-u", "--pid", "--pgid", "--uid"].contains(&t)
                }) {
                    return self.done_emit(&cmd);
                }
                skip_options(cmd.rest, &["-c", "-n", "--class", "--classdata"])
            }
            "chrt" => {
                if any_option(cmd.rest, |t| t == "--pid" || cluster_has(t, 'p')) {
                    return self.done_emit(&cmd);
                }
                let r = skip_options(
                    cmd.rest,
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
                if any_option(cmd.rest, |t| t == "--pid" || cluster_has(t, 'p')) {
                    return self.done_emit(&cmd);
                }
                let r = skip_options(cmd.rest, &[]);
                r.get(1..).unwrap_or(&[])
            }
            "flock" => {
                let r = skip_options(
                    cmd.rest,
                    &["-w", "-E", "--timeout", "--wait", "--conflict-exit-code"],
                );
                let r = r.get(1..).unwrap_or(&[]);
                if let Some((c, tail)) = r.split_first()
                    && (c.text == "-c" || c.text == "--command")
                {
                    if let Some(line) = tail.first() {
                        self.line(line.text, &cmd.ctx.with("flock"), "flock -c");
                    }
                    return Step::Done;
                }
                if r.is_empty() {
                    return self.done_emit(&cmd);
                }
                r
            }
            _ => return self.done_emit(&cmd),
        };
        Step::Next(next)
    }

    /// Commands that run a line again or in parallel: `watch`, `parallel`.
    fn unwrap_repeater<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match cmd.name {
            "watch" => {
                let exec = any_option(cmd.rest, |t| t == "--exec" || cluster_has(t, 'x'));
                let r = skip_options(cmd.rest, &["-n", "-d", "--interval", "-q", "--equexit"]);
                if r.is_empty() {
                    return self.done_emit(&cmd);
                }
                if !exec {
                    return self.done_line(&join(r), cmd.ctx, "watch");
                }
                r
            }
            "parallel" => {
                let r = skip_options(
                    cmd.rest,
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
                    return self.done_emit(&cmd);
                }
                let mut inner = cmd.ctx.clone();
                inner.more_args = true;
                return self.done_line(&join(&r[..end]), &inner, "parallel");
            }
            _ => return self.done_emit(&cmd),
        };
        Step::Next(next)
    }

    /// Tracers and recorders: `strace`/`ltrace` (not when attached to a running process), `script -c LINE`.
    fn unwrap_tracer<'w, 's>(&mut self, cmd: Wrapper<'_, 'w, 's>) -> Step<'w, 's> {
        let next: &'w [Word<'s>] = match cmd.name {
            "strace" | "ltrace" => {
                // Attached to a running process (`-p PID`), it runs nothing.
                if any_option(cmd.rest, |t| t == "--attach" || t.starts_with("-p")) {
                    return self.done_emit(&cmd);
                }
                let r = skip_options(
                    cmd.rest,
                    &[
                        "-o", "-e", "-s", "-E", "-u", "-a", "-b", "-I", "-O", "-S", "-X", "-P",
                        "-n", "-l",
                    ],
                );
                if r.is_empty() {
                    return self.done_emit(&cmd);
                }
                r
            }
            "script" => {
                // `script -c LINE [FILE]` runs LINE in a shell (an agent's way to get a terminal).
                if let Some(at) = cmd.rest.iter().position(|w| {
                    w.text == "--command"
                        || w.text.starts_with("--command=")
                        || cluster_has(w.text, 'c')
                }) {
                    let w = cmd.rest[at].text;
                    let line = if let Some(l) = w.strip_prefix("--command=") {
                        Some(l)
                    } else if w.starts_with("--") {
                        cmd.rest.get(at + 1).map(|w| w.text)
                    } else {
                        // `-qc LINE`, or `-cLINE`: the value follows the `c`.
                        let tail = &w[w.find('c').map_or(w.len(), |i| i + 1)..];
                        if tail.is_empty() {
                            cmd.rest.get(at + 1).map(|w| w.text)
                        } else {
                            Some(tail)
                        }
                    };
                    if let Some(line) = line {
                        self.line(line, &cmd.ctx.with("script"), "script -c");
                    }
                    return Step::Done;
                }
                return self.done_emit(&cmd);
            }

            _ => return self.done_emit(&cmd),
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
