"""shellward's shell reader in Python: the twin of shellward-kit's tokenizer and `effective` module.

`effective_commands(line)` returns the commands a line would run: wrappers (`sudo -u x`, `timeout 5`, `env A=1`, …)
stripped, nested shell strings (`bash -lc '…'`) read, run-time-only words marked. It raises `ParseError` when the
line does not tokenize. The kit's part for Python policies: `shellward policy new --lang python` copies this file
beside the new policy (whose reader cases then prove it reads as the Rust kit does).
"""

# Longest first, so `&&` wins over `&`.
OPERATORS = [
    "<<<", "<<-", "&>>", ";;&",
    "&&", "||", ";;", ";&", "|&", "&>", ">>", ">|", ">&", "<&", "<<", "<>",
    ">", "<", "|", "&", ";", "(", ")",
]
# The first characters of the operators: only where one of these stands can an operator start (checked first, so a
# long word is not compared with every operator at every character).
OPERATOR_STARTS = frozenset(o[0] for o in OPERATORS)
REDIRECTS = {"<<<", "<<-", "&>>", "&>", ">>", ">|", ">&", "<&", "<<", "<>", ">", "<"}
WRITE_REDIRECTS = {">", ">>", ">|", "<>", "&>", "&>>", ">&"}

class ParseError(Exception):
    def __init__(self, message, too_deep=False):
        super().__init__(message)
        # The line nests expansions deeper than MAX_NESTING: refused rather than followed.
        self.too_deep = too_deep


# Expansions ($(…), ${…}) nested deeper than this are not read (as the Rust kit's shell::MAX_NESTING).
MAX_NESTING = 64


def tokenize(src):
    """Tokens as (kind, text, raw), and here-document bodies in the order of their `<<` operators.

    kind is "word", "io", "op" or "newline"; text has quotes removed.
    """
    tokens = []
    bodies = []
    heredocs = []  # pending (delimiter, strip_tabs)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and src[i + 1] == "\n":
            i += 2
            continue
        if c == "\n":
            tokens.append(("newline", "\n", "\n"))
            i += 1
            for delim, strip_tabs in heredocs:
                lines = []
                while i < n:
                    end = src.find("\n", i)
                    line = src[i:] if end < 0 else src[i:end]
                    i = n if end < 0 else end + 1
                    if (line.lstrip("\t") if strip_tabs else line) == delim:
                        break
                    lines.append(line)
                bodies.append("\n".join(lines))
            heredocs = []
            continue
        if c == "#":
            while i < n and src[i] != "\n":
                i += 1
            continue
        op = next((o for o in OPERATORS if src.startswith(o, i)), None)
        if op is not None:
            tokens.append(("op", op, op))
            i += len(op)
            if op in ("<<", "<<-"):
                j = i
                while j < n and src[j] in " \t":
                    j += 1
                start = j
                text, j = read_word(src, j)
                if j == start:
                    raise ParseError("here-document without a delimiter")
                tokens.append(("word", text, src[start:j]))
                heredocs.append((text, op == "<<-"))
                i = j
            continue
        start = i
        text, i = read_word(src, i)
        kind = "io" if text.isdigit() and i < n and src[i] in "<>" and src[start:i] == text else "word"
        tokens.append((kind, text, src[start:i]))
    return tokens, bodies


def skip_expansion(src, i):
    """Index after the expansion starting at src[i] (`$(…)`, `$((…))`, `${…}`, a backquote), or after a plain `$`."""
    n = len(src)
    if src[i] == "`":
        j = i + 1
        while j < n and src[j] != "`":
            j += 2 if src[j] == "\\" else 1
        if j >= n:
            raise ParseError("unterminated backquote")
        return j + 1
    if src.startswith("$(", i) or src.startswith("${", i):
        close = ")" if src[i + 1] == "(" else "}"
        openc = src[i + 1]
        depth = 0
        j = i + 1
        while j < n:
            ch = src[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "'" and close == ")":
                end = src.find("'", j + 1)
                if end < 0:
                    raise ParseError("unterminated quote")
                j = end + 1
                continue
            if ch == '"':
                _, j = read_double(src, j + 1)
                continue
            if ch == openc:
                depth += 1
                if depth > MAX_NESTING:
                    raise ParseError("expansions nested too deep", too_deep=True)
            elif ch == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise ParseError("unterminated substitution")
    return i + 1


def take_plain(src, i, out):
    """Appends src[i] to out, or the whole expansion that starts there ($..., `...`) as written; returns the index
    after it."""
    if src[i] in "$`":
        j = skip_expansion(src, i)
        out.append(src[i:j])
        return j
    out.append(src[i])
    return i + 1


def read_double(src, i):
    """Reads a double-quoted string from after its opening quote; returns (text, index after the closing quote)."""
    out = []
    n = len(src)
    while i < n:
        c = src[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            nxt = src[i + 1]
            if nxt in '$`"\\':
                out.append(nxt)
                i += 2
                continue
            if nxt == "\n":
                i += 2
                continue
            out.append(c)
            i += 1
            continue
        i = take_plain(src, i, out)
    raise ParseError("unterminated double quote")


def read_word(src, i):
    """Reads one word from src[i]; returns (text with quotes removed, index after it)."""
    out = []
    n = len(src)
    while i < n:
        c = src[i]
        if c in " \t\r\n" or (c in OPERATOR_STARTS and any(src.startswith(o, i) for o in OPERATORS)):
            break
        if c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                i += 2
                continue
            if i + 1 < n:
                out.append(src[i + 1])
            i += 2
            continue
        if c == "'":
            end = src.find("'", i + 1)
            if end < 0:
                raise ParseError("unterminated single quote")
            out.append(src[i + 1:end])
            i = end + 1
            continue
        if c == '"':
            text, i = read_double(src, i + 1)
            out.append(text)
            continue
        i = take_plain(src, i, out)
    return "".join(out), i


def is_assignment(raw):
    if "=" not in raw:
        return False
    name = raw.split("=", 1)[0]
    return bool(name) and (name[0] == "_" or name[0].isascii() and name[0].isalpha()) and all(
        ch == "_" or (ch.isascii() and ch.isalnum()) for ch in name
    )


# ---- The effective commands of a line: the twin of shellward-kit's `effective` module ----

MAX_SHELL_DEPTH = 8
MAX_COMMANDS = 4096

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash"}

RESERVED = {"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time"}


def base_name(program):
    return program.rsplit("/", 1)[-1]


def is_dynamic(raw):
    """Whether a raw word holds an expansion or substitution outside single quotes."""
    single = double = False
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\" and not single:
            i += 1
        elif c == "'" and not double:
            single = not single
        elif c == '"' and not single:
            double = not double
        elif c == "`" and not single:
            return True
        elif c == "$" and not single and i + 1 < n and (raw[i + 1].isascii() and raw[i + 1].isalnum()
                                                        or raw[i + 1] in "_{(@*#?$!-"):
            return True
        i += 1
    return False


def is_command_double_paren(raw, i):
    """Whether bash reads the `$((` at raw[i] as a command substitution starting with a subshell (`$((cmd) …)`, which
    runs cmd) rather than arithmetic: the parenthesis opened second closes without a `)` right after it."""
    j, parens, n = i + 3, 2, len(raw)
    while parens > 0:
        if j >= n:
            return False
        if raw[j] == "(":
            parens += 1
        elif raw[j] == ")":
            parens -= 1
            if parens == 1 and raw[j + 1:j + 2] != ")":
                return True
        j += 1
    return False


def substitutions(raw):
    """Command lines inside `$(…)` and backquotes of a raw word (single-quoted text excluded; `$((…))` is arithmetic
    unless bash reads it as a command substitution, see is_command_double_paren)."""
    out = []
    i, n = 0, len(raw)
    single = False
    while i < n:
        c = raw[i]
        if c == "\\" and not single:
            i += 2
            continue
        if c == "'":
            single = not single
        elif not single and c == "$" and raw[i + 1:i + 2] == "(" and (
                raw[i + 2:i + 3] != "(" or is_command_double_paren(raw, i)):
            start = i + 2
            depth = 0
            j = i + 1
            quote = ""
            while j < n:
                ch = raw[j]
                if ch == "\\" and quote != "'":
                    j += 1
                elif ch in "'\"" and not quote:
                    quote = ch
                elif quote and ch == quote:
                    quote = ""
                elif ch == "(" and not quote:
                    depth += 1
                elif ch == ")" and not quote:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(raw[start:min(j, n)])
            i = j
        elif not single and c == "`":
            start = i + 1
            j = start
            while j < n and raw[j] != "`":
                if raw[j] == "\\":
                    j += 1
                j += 1
            out.append(raw[start:min(j, n)])
            i = j
        i += 1
    return out


def simple_commands(tokens, bodies):
    """Simple commands as dicts: words [(text, dynamic, raw)], write targets, substitution lines, and the known
    standard input: (text, how) from a here-string or here-document, "pipe" after a `|`, or None."""
    commands = []
    current = None
    pending = None
    piped = False
    doc = 0
    for kind, text, raw in tokens:
        control = kind == "newline" or (kind == "op" and text not in REDIRECTS)
        if control:
            if current is not None:
                commands.append(current)
            current = None
            pending = None
            piped = text in ("|", "|&")
            continue
        if current is None:
            current = {"words": [], "targets": [], "subs": [], "assigns": [], "stdin": "pipe" if piped else None}
        if kind == "op":
            pending = text
            if text in ("<<", "<<-"):
                if doc < len(bodies):
                    current["stdin"] = (bodies[doc], "<<")
                doc += 1
            elif text == "<":
                current["stdin"] = None
            continue
        if kind == "io":
            continue
        current["subs"].extend(substitutions(raw))
        if pending is not None:
            if pending in WRITE_REDIRECTS:
                current["targets"].append(text)
            elif pending == "<<<":
                current["stdin"] = (text, "<<<")
            pending = None
        elif not current["words"] and is_assignment(raw):
            current["assigns"].append((text, is_dynamic(raw)))
        else:
            current["words"].append((text, is_dynamic(raw), raw))
    if current is not None:
        commands.append(current)
    return commands


def is_option(w):
    return len(w) > 1 and w.startswith("-")


def skip_options(words, with_value):
    i = 0
    while i < len(words):
        w = words[i][0]
        if w == "--":
            return words[i + 1:]
        if not is_option(w):
            break
        i += 2 if (w in with_value and i + 1 < len(words)) else 1
    return words[i:]


def cluster_has(w, letter):
    return w.startswith("-") and not w.startswith("--") and letter in w[1:]


def leading_options(words):
    out = []
    for w, _ in words:
        if not is_option(w):
            break
        out.append(w)
    return out


def join(words):
    return " ".join(w for w, _ in words)


def prints(words, stdin):
    """What a simple command prints when that is known statically (echo, printf, cat of its here-string)."""
    if not words:
        return None
    name = base_name(words[0][0])
    args = words[1:]
    if name == "echo":
        k = 0
        while k < len(args) and args[k][0] in ("-n", "-e", "-E", "-ne", "-en"):
            k += 1
        return join(args[k:])
    if name == "printf":
        return join(args).replace("\\n", "\n")
    if name == "find":
        texts = [w for w, _ in args]
        k = 0
        while k < len(texts) and texts[k] in ("-H", "-L", "-P"):
            k += 1
        roots = []
        while k < len(texts) and not texts[k].startswith("-") and texts[k] not in ("(", "!", ","):
            roots.append(texts[k])
            k += 1
        return " ".join(r.rstrip("/") + "/*" for r in (roots or ["."]))
    if name == "cat" and all(w == "-" for w, _ in args):
        return stdin
    return None


SUDO_VALUES = ("-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group", "--host",
               "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user", "--command-timeout",
               "--chroot")
XARGS_VALUES = ("-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof", "--replace",
                "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var")
PARALLEL_VALUES = ("-j", "-S", "-I", "-n", "-N", "-L", "-d", "-E", "-a", "--jobs", "--sshlogin", "--colsep",
                   "--delimiter", "--arg-file", "--joblog", "--results", "--timeout", "--retries", "--tmpdir",
                   "--workdir", "--max-args", "--max-lines")


MAX_XARGS_INPUT = 64


def xargs_input(options):
    """How xargs with these options reads its input: "append" (blank-separated words), the marker each line replaces
    (`-I {}`), or None where a guess could be wrong (`-0`, `-d`, `-a FILE`, `-E EOF`)."""
    mode = "append"
    for i, t in enumerate(options):
        if t in ("-0", "--null", "-d", "--delimiter", "-a", "--arg-file", "-E", "--eof"):
            return None
        if t == "-I":
            if i + 1 >= len(options):
                return None
            mode = options[i + 1]
        elif t in ("-i", "--replace"):
            mode = "{}"
        elif t.startswith("--replace="):
            mode = t[len("--replace="):]
        elif t.startswith("-I"):
            mode = t[2:]
        elif t.startswith("--delimiter=") or t.startswith("--arg-file=") or t.startswith("-d"):
            return None
    return None if mode == "" else mode


NAMESPACE_VALUES = ("-t", "--target", "-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd",
                    "--map-user", "--map-group", "--propagation", "--setgroups")
TRACE_VALUES = ("-o", "-e", "-s", "-E", "-u", "-a", "-b", "-I", "-O", "-S", "-X", "-P", "-n", "-l")
SYSTEMD_RUN_VALUES = ("-p", "--property", "-u", "--unit", "-E", "--setenv", "--uid", "--gid", "-M", "--machine",
                      "-H", "--host", "--description", "--slice", "--working-directory", "--nice", "--on-active",
                      "--on-calendar", "--timer-property", "--path-property", "--socket-property")


class Effective:
    """One command that would run: words [(text, dynamic)], wrappers it was reached through, write targets."""

    def __init__(self, words, via, more_args, writes, written, depth, assignments=()):
        self.assignments = list(assignments)
        self.words = [w for w, _ in words]
        self.dynamic = [d for _, d in words]
        self.via = list(via)
        self.more_args = more_args
        self.writes = list(writes)
        self.written = list(written)
        self.depth = depth

    def program_known(self):
        return not (self.dynamic and self.dynamic[0])


class Reader:
    def __init__(self):
        self.commands = []
        self.too_deep = False
        self.truncated = False

    def full(self):
        if len(self.commands) >= MAX_COMMANDS:
            self.truncated = True
        return self.truncated

    def line(self, line, ctx, via):
        via_list, more_args, depth = ctx
        if depth >= MAX_SHELL_DEPTH:
            self.too_deep = True
            return
        try:
            tokens, bodies = tokenize(line)
        except ParseError as e:
            self.too_deep = self.too_deep or e.too_deep
            return
        self.script(tokens, bodies, (via_list + [via], more_args, depth + 1))

    def script(self, tokens, bodies, ctx):
        printed = None
        for cmd in simple_commands(tokens, bodies):
            if self.full():
                return
            stdin = cmd["stdin"]
            if stdin == "pipe":
                stdin = None if printed is None else (printed, "|")
            for inner in cmd["subs"]:
                self.line(inner, ctx, "$(…)")
            words = cmd["words"]
            lead = 0
            while lead < len(words) and words[lead][2] in RESERVED:
                lead += 1
            words = [(text, dynamic) for text, dynamic, _ in words[lead:]]
            printed = prints(words, stdin[0] if stdin else None)
            found = ([w for w, _ in words], cmd["targets"], stdin, cmd["assigns"])
            if not words:
                # Redirections alone (`> /dev/sda`) still open their targets: yielded with no words.
                self.emit(words, ctx, found)
            else:
                self.unwrap(words, ctx, found)

    def emit(self, words, ctx, found):
        if (not words and not found[1] and not found[3]) or self.full():
            return
        via, more_args, depth = ctx
        self.commands.append(Effective(words, via, more_args, found[1], found[0], depth, found[3]))

    def unwrap(self, words, ctx, found):
        via, more_args, depth = ctx
        via = list(via)
        while True:
            if self.full() or not words:
                return
            first, dynamic = words[0]
            if dynamic:
                return self.emit(words, (via, more_args, depth), found)
            name = base_name(first)
            rest = words[1:]
            here = (via, more_args, depth)
            opts = leading_options(rest)
            if name in ("nohup", "builtin", "setsid"):
                nxt = skip_options(rest, ())
            elif name == "command":
                if any(cluster_has(o, "v") or cluster_has(o, "V") for o in opts):
                    return self.emit(words, here, found)
                nxt = skip_options(rest, ())
            elif name == "exec":
                nxt = skip_options(rest, ("-a",))
            elif name == "time":
                nxt = skip_options(rest, ("-f", "-o", "--format", "--output"))
            elif name == "nice":
                nxt = skip_options(rest, ("-n", "--adjustment"))
            elif name == "stdbuf":
                nxt = skip_options(rest, ("-i", "-o", "-e", "--input", "--output", "--error"))
            elif name == "timeout":
                nxt = skip_options(rest, ("-s", "-k", "--signal", "--kill-after"))[1:]
            elif name == "env":
                r = rest
                split = None
                while r:
                    t = r[0][0]
                    if t == "--":
                        r = r[1:]
                        break
                    if not is_option(t):
                        break
                    if t in ("-S", "--split-string"):
                        split = r[1][0] if len(r) > 1 else None
                        r = r[2:]
                        break
                    if t.startswith("--split-string="):
                        split = t[len("--split-string="):]
                        r = r[1:]
                        break
                    if t.startswith("-S"):
                        split = t[2:]
                        r = r[1:]
                        break
                    r = r[2:] if (t in ("-u", "-C", "--unset", "--chdir") and len(r) > 1) else r[1:]
                while r and "=" in r[0][0] and not r[0][0].startswith("=") and not r[0][1]:
                    r = r[1:]
                if split is not None:
                    line = " ".join([split] + [w for w, _ in r])
                    return self.line(line, (via + ["env"], more_args, depth), "env -S")
                nxt = r
            elif name == "sudo":
                nxt = skip_options(rest, SUDO_VALUES)
                if not nxt:
                    return self.emit(words, here, found)
            elif name == "doas":
                nxt = skip_options(rest, ("-u", "-C"))
                if not nxt:
                    return self.emit(words, here, found)
            elif name == "pkexec":
                nxt = skip_options(rest, ("--user",))
                if not nxt:
                    return self.emit(words, here, found)
            elif name in ("su", "runuser"):
                at = next((k for k, (w, _) in enumerate(rest)
                           if w in ("-c", "--command") or w.startswith("--command=")), None)
                if at is not None:
                    w = rest[at][0]
                    line = w[len("--command="):] if w.startswith("--command=") else (
                        rest[at + 1][0] if at + 1 < len(rest) else None)
                    if line is not None:
                        self.line(line, (via + [name], more_args, depth), f"{name} -c")
                    return self.emit(words, here, found)
                dd = next((k for k, (w, _) in enumerate(rest) if w == "--"), None)
                if name == "runuser" and dd is not None and dd + 1 < len(rest):
                    nxt = rest[dd + 1:]
                else:
                    return self.emit(words, here, found)
            elif name == "xargs":
                nxt = skip_options(rest, XARGS_VALUES)
                if not nxt:
                    return self.emit(words, here, found)
                mode = xargs_input([w for w, _ in rest[:len(rest) - len(nxt)]])
                if found[2] is not None and mode is not None:
                    return self.xargs(nxt, found[2][0], mode, (via + ["xargs"], False, depth), found)
                more_args = True
            elif name == "busybox":
                if not rest or is_option(rest[0][0]):
                    return self.emit(words, here, found)
                nxt = rest
            elif name == "ionice":
                if any(o in ("-p", "-P", "-u", "--pid", "--pgid", "--uid") for o in opts):
                    return self.emit(words, here, found)
                nxt = skip_options(rest, ("-c", "-n", "--class", "--classdata"))
            elif name in ("chrt", "taskset"):
                if any(o == "--pid" or cluster_has(o, "p") for o in opts):
                    return self.emit(words, here, found)
                values = ("-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline") \
                    if name == "chrt" else ()
                nxt = skip_options(rest, values)[1:]
            elif name == "flock":
                r = skip_options(rest, ("-w", "-E", "--timeout", "--wait", "--conflict-exit-code"))[1:]
                if r and r[0][0] in ("-c", "--command"):
                    if len(r) > 1:
                        self.line(r[1][0], (via + ["flock"], more_args, depth), "flock -c")
                    return
                if not r:
                    return self.emit(words, here, found)
                nxt = r
            elif name == "watch":
                exec_mode = any(o == "--exec" or cluster_has(o, "x") for o in opts)
                r = skip_options(rest, ("-n", "-d", "--interval", "-q", "--equexit"))
                if not r:
                    return self.emit(words, here, found)
                if not exec_mode:
                    return self.line(join(r), here, "watch")
                nxt = r
            elif name == "parallel":
                r = skip_options(rest, PARALLEL_VALUES)
                end = next((k for k, (w, _) in enumerate(r) if w.startswith(":::")), len(r))
                if end == 0:
                    return self.emit(words, here, found)
                return self.line(join(r[:end]), (via, True, depth), "parallel")
            elif name == "chroot":
                r = skip_options(rest, ("--userspec", "--groups"))[1:]
                if not r:
                    return self.emit(words, here, found)
                nxt = r
            elif name in ("unshare", "nsenter"):
                nxt = skip_options(rest, NAMESPACE_VALUES)
                if not nxt:
                    return self.emit(words, here, found)
            elif name in ("strace", "ltrace"):
                if any(o == "--attach" or o.startswith("-p") for o in opts):
                    return self.emit(words, here, found)
                nxt = skip_options(rest, TRACE_VALUES)
                if not nxt:
                    return self.emit(words, here, found)
            elif name == "unbuffer":
                nxt = skip_options(rest, ())
                if not nxt:
                    return self.emit(words, here, found)
            elif name == "systemd-run":
                nxt = skip_options(rest, SYSTEMD_RUN_VALUES)
                if not nxt:
                    return self.emit(words, here, found)
            elif name == "script":
                at = next((k for k, (w, _) in enumerate(rest)
                           if w == "--command" or w.startswith("--command=") or cluster_has(w, "c")), None)
                if at is None:
                    return self.emit(words, here, found)
                w = rest[at][0]
                if w.startswith("--command="):
                    line = w[len("--command="):]
                elif w.startswith("--"):
                    line = rest[at + 1][0] if at + 1 < len(rest) else None
                else:
                    tail = w[w.index("c") + 1:]
                    line = tail if tail else (rest[at + 1][0] if at + 1 < len(rest) else None)
                if line is not None:
                    self.line(line, (via + ["script"], more_args, depth), "script -c")
                return
            elif name == "eval":
                return self.line(join(rest), here, "eval")
            elif name == "find":
                return self.find(words, here, found)
            elif name in SHELLS:
                return self.shell(words, here, found)
            else:
                return self.emit(words, here, found)
            if not nxt:
                # A wrapper with no command (`exec 3>/dev/sda`, `nohup`) is itself the command.
                return self.emit(words, here, found)
            via = via + [name]
            words = nxt

    def xargs(self, command, text, mode, ctx, found):
        consumed = (found[0], found[1], None, found[3])
        if mode == "append":
            extra = [(w, False) for w in text.split()[:MAX_XARGS_INPUT]]
            return self.unwrap(command + extra, ctx, consumed)
        lines = [line.rstrip("\r").lstrip() for line in text.split("\n")]
        for line in [line for line in lines if line][:MAX_XARGS_INPUT]:
            self.unwrap([(w.replace(mode, line), d) for w, d in command], ctx, consumed)

    def shell(self, words, ctx, found):
        name = base_name(words[0][0])
        rest = words[1:]
        with_c = reads_stdin = False
        while rest:
            t = rest[0][0]
            if t in ("--", "-"):
                rest = rest[1:]
                break
            if not (is_option(t) or (t.startswith("+") and len(t) > 1)):
                break
            rest = rest[1:]
            if t.startswith("--"):
                if t in ("--rcfile", "--init-file") and rest:
                    rest = rest[1:]
                continue
            letters = t[1:]
            if t.startswith("-") and "c" in letters:
                with_c = True
            if t.startswith("-") and "s" in letters:
                reads_stdin = True
            if (letters.endswith("o") or letters.endswith("O")) and rest:
                rest = rest[1:]
        if with_c:
            if rest:
                self.line(rest[0][0], ctx, f"{name} -c")
            return
        if not rest or reads_stdin:
            stdin = found[2]
            if stdin is not None:
                text, how = stdin
                self.line(text, ctx, f"| {name}" if how == "|" else f"{name} {how}")
            if not rest:
                return
        self.emit(words, ctx, found)

    def find(self, words, ctx, found):
        self.emit(words, ctx, found)
        via, _, depth = ctx
        i = 1
        while i < len(words):
            if words[i][0] in ("-exec", "-execdir", "-ok", "-okdir"):
                start = i + 1
                end = start
                while end < len(words) and words[end][0] not in (";", "+"):
                    end += 1
                self.unwrap(words[start:end], (via + ["find -exec"], True, depth), (found[0], [], None, []))
                i = end
            i += 1


def effective_commands(line):
    """The effective commands of a line (raises ParseError when the line itself does not tokenize)."""
    return read_line(line).commands


def read_line(line):
    """The Reader of a whole line: its commands, and whether a limit stopped it (raises ParseError as above)."""
    tokens, bodies = tokenize(line)
    reader = Reader()
    reader.script(tokens, bodies, ([], False, 0))
    return reader
