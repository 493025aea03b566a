"""shellward's guard policy in Python: the twin of policies/guard (Rust), built into a component by componentize-py.

It denies commands that would harm the agent host or the user's machine, with the same rules, settings and procedure
as the Rust guard (see policies/guard/README.md), and passes the same case file. The shell lexer below implements the
subset of shellward-kit's tokenizer the rules need: quotes, escapes, comments, operators, io numbers, here-documents,
and `$(…)`, `${…}`, backquotes kept inside their word; `effective_commands` is the twin of shellward-kit's `effective`
module (wrappers stripped, nested shell strings read, run-time-only words marked).
"""

import json
import re

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

RULES = [
    "fork-bomb", "kill-by-name", "kill-all", "rm-root", "privilege", "power", "block-device", "chmod-root",
    "find-root", "unreadable",
]

PRIVILEGE = ("sudo", "su", "doas", "pkexec", "runuser")

SYSTEM_DIRS = [
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "sbin", "srv", "sys",
    "usr", "var",
]

SYSTEM_SUBDIRS = {
    "usr": ["bin", "lib", "lib32", "lib64", "libexec", "local", "sbin", "share", "include"],
    "var": ["lib", "log", "spool", "cache", "mail"],
}

MAX_ALTERNATIVES = 64
MAX_BRACE_GROUPS = 16

POWER_VERBS = [
    "poweroff", "reboot", "halt", "kexec", "soft-reboot", "suspend", "hibernate", "hybrid-sleep",
    "suspend-then-hibernate", "rescue", "emergency", "default",
]

BLOCK_DEVICES = [
    "/dev/sd*", "/dev/hd*", "/dev/vd*", "/dev/xvd*", "/dev/nvme*", "/dev/mmcblk*", "/dev/disk*", "/dev/dm-*",
    "/dev/mapper/*", "/dev/md*", "/dev/loop*",
]

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

REASONS = {
    "fork-bomb": "this is a fork bomb: it would exhaust the machine's processes",
    "kill-by-name": "pkill/killall (or kill $(pgrep …)) match processes by name and can kill the agent host or the user's programs; stop "
    "processes you started with process_signal, or kill one process by its id",
    "kill-all": "kill -1 signals every process you may signal, including the agent host, and pid 1 is the machine's "
    "init; stop processes you started with process_signal",
    "rm-root": "removing /, the home directory or a system directory (rm -r, or moving it away, or rsync --delete "
    "onto it) would destroy the user's machine; remove the specific paths you mean",
    "privilege": "the agent must not escalate privileges (sudo, su, doas, pkexec, runuser); ask the user to run it",
    "chmod-root": "changing the permissions or owner of / or a system directory, or recursively of the home directory, "
    "breaks the machine (sudo, ssh and services refuse such files); change the specific paths you mean",
    "find-root": "find from /, the home directory or a system directory with -delete or -exec rm removes files all over "
    "the machine; run find on your project's directories",
    "power": "shutting down, rebooting or suspending the machine is not allowed (shutdown, reboot, systemctl "
    "poweroff, init 0, /proc/sysrq-trigger); ask the user",
    "unreadable": "the guard could not read the whole line, so it cannot tell what would run; split it into shorter "
    "commands or run the nested script from a file",
    "block-device": "writing to a block device (mkfs, dd of=/dev/…, shred, wipefs, fdisk, tee or > /dev/sd…) destroys "
    "file systems; ask the user",
}


class ParseError(Exception):
    def __init__(self, message, too_deep=False):
        super().__init__(message)
        # The line nests expansions deeper than MAX_NESTING: refused rather than followed.
        self.too_deep = too_deep


# Expansions ($(…), ${…}) nested deeper than this are not read (as the Rust kit's shell::MAX_NESTING).
MAX_NESTING = 64


def glob(pattern, text):
    """`*` matches any run of characters; everything else matches itself."""
    if "*" not in pattern:
        return pattern == text
    return fnmatch(pattern, text, classes=False)


class Pattern:
    """A word pattern: program (glob, base name unless it has a `/`), required words in order, `!` exclusions."""

    def __init__(self, text):
        words = text.split()
        if not words:
            raise ValueError(f"invalid pattern {text!r}: it is empty; give at least a program name")
        if words[0].startswith("!"):
            raise ValueError(f"invalid pattern {text!r}: the first word must be a program name, not a `!` exclusion")
        self.text = " ".join(words)
        self.program = words[0]
        self.required = []
        self.forbidden = []
        for w in words[1:]:
            if w == "!":
                raise ValueError(f"invalid pattern {text!r}: a lone `!` excludes nothing; write `!WORD`")
            if w.startswith("!"):
                self.forbidden.append(w[1:])
            else:
                self.required.append(w)

    def matches(self, words):
        if not words:
            return False
        program, args = words[0], words[1:]
        name = program if "/" in self.program else program.rsplit("/", 1)[-1]
        if not glob(self.program, name):
            return False
        if any(glob(f, a) for f in self.forbidden for a in args):
            return False
        rest = iter(args)
        return all(any(glob(r, a) for a in rest) for r in self.required)


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
        if c in "$`":
            j = skip_expansion(src, i)
            out.append(src[i:j])
            i = j
            continue
        out.append(c)
        i += 1
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
        if c in "$`":
            j = skip_expansion(src, i)
            out.append(src[i:j])
            i = j
            continue
        out.append(c)
        i += 1
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


# ---- The rules ----


def is_block_device(path):
    return any(glob(g, path) for g in BLOCK_DEVICES)


def kill_all(args):
    """`kill` whose targets include `-1` (every process the caller may signal) or `1` (init); `kill -l 1` lists."""
    if args and args[0] in ("-l", "-L", "--list", "--table"):
        return False
    pids = []
    options_done = False
    signal_seen = False
    i = 0
    while i < len(args):
        a = args[i]
        if not options_done and not pids:
            if a == "--":
                options_done = True
                i += 1
                continue
            if a in ("-s", "-n"):
                signal_seen = True
                i += 2
                continue
            if a.startswith("-") and len(a) > 1 and not signal_seen:
                signal_seen = True
                i += 1
                continue
        pids.append(a)
        i += 1
    # kill reads its targets as numbers: -0001 is -1.
    for p in pids:
        try:
            if int(p) in (-1, 1):
                return True
        except ValueError:
            pass
    return False


# -- Paths: resolved lexically (`..`, `//`, braces, globs, the working directory); see policies/guard/src/paths.rs.

SLASH, HOME, ABOVE_HOME = "slash", "home", "above-home"


def fnmatch(pattern, name, classes=True):
    """Shell pattern matching of one path component: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`/`[^x]`; with `classes`
    false only `*` is special (the word patterns' `glob`)."""
    pi = ti = 0
    star = None
    while ti < len(name):
        step = None
        c = pattern[pi] if pi < len(pattern) else None
        if c == "*":
            star = (pi, ti)
            pi += 1
            continue
        if not classes:
            step = 1 if c == name[ti] else None
        elif c == "?":
            step = 1
        elif c == "[":
            cls = bracket(pattern[pi:], name[ti])
            if cls is None:
                step = 1 if name[ti] == "[" else None
            elif cls[0]:
                step = cls[1]
        elif c is not None and c == name[ti]:
            step = 1
        if step is not None:
            pi += step
            ti += 1
        elif star is not None:
            pi = star[0] + 1
            ti = star[1] + 1
            star = (star[0], star[1] + 1)
        else:
            return False
    return all(c == "*" for c in pattern[pi:])


def bracket(p, c):
    i = 1
    negated = i < len(p) and p[i] in "!^"
    if negated:
        i += 1
    matched = False
    first = True
    while True:
        if i >= len(p):
            return None
        lo = p[i]
        if lo == "]" and not first:
            return (matched != negated, i + 1)
        first = False
        if i + 2 < len(p) and p[i + 1] == "-" and p[i + 2] != "]":
            matched = matched or lo <= c <= p[i + 2]
            i += 3
        else:
            matched = matched or lo == c
            i += 1


def has_glob(s):
    return any(ch in s for ch in "*?[")


def matches_name(component, name):
    return component == name or is_unknown(component) or (has_glob(component) and fnmatch(component, name))


def is_unknown(component):
    """A component that is only a parameter expansion not known statically (`$X`, `${DIR}`)."""
    if not component.startswith("$"):
        return False
    rest = component[1:]
    if rest.startswith("{"):
        inner = rest[1:]
        return inner.endswith("}") and not any(ch in inner[:-1] for ch in "{}$")
    return bool(rest) and all(ch == "_" or (ch.isascii() and ch.isalnum()) for ch in rest)


def is_wide_glob(component):
    if is_unknown(component):
        return True
    if "*" not in component:
        return False
    in_class = False
    for ch in component:
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        elif in_class or ch in "*?.":
            pass
        else:
            return False
    return True


def join_path(resolved, rest):
    root, parts = resolved
    parts = list(parts)
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            elif root == HOME:
                root = ABOVE_HOME
        else:
            parts.append(part)
    return (root, parts)


def is_protected_path(resolved):
    root, parts = resolved
    if root == ABOVE_HOME:
        return True
    if root == HOME:
        return not parts or (len(parts) == 1 and is_wide_glob(parts[0]))
    if not parts:
        return True
    if len(parts) == 1:
        return any(matches_name(parts[0], d) for d in SYSTEM_DIRS)
    if parts[0] == "home" and len(parts) == 2:
        return True
    if parts[0] == "home" and len(parts) == 3:
        return is_wide_glob(parts[2])
    if len(parts) == 2:
        top, sub = parts
        return (top in SYSTEM_DIRS and is_wide_glob(sub)) or \
            any(matches_name(sub, x) for x in SYSTEM_SUBDIRS.get(top, []))
    return False


def is_top_level(resolved):
    return resolved[0] == SLASH and len(resolved[1]) <= 1 and is_protected_path(resolved)


def resolve_one(word, cwd):
    for home in ("~", "$HOME", "${HOME}"):
        if word.startswith(home):
            rest = word[len(home):]
            if not rest or rest.startswith("/"):
                return join_path((HOME, []), rest)
    if word.startswith("/"):
        return join_path((SLASH, []), word[1:])
    if word.startswith("~+") and (len(word) == 2 or word[2] == "/"):
        return join_path(cwd, word[2:]) if cwd is not None else None
    if word.startswith("~"):
        name, _, rest = word[1:].partition("/")
        if name and (name[0] == "_" or (name[0].isascii() and name[0].isalnum())) and \
                all(ch in "_-." or (ch.isascii() and ch.isalnum()) for ch in name):
            return join_path((SLASH, ["home", name]), rest)
    if not word or word.startswith("~") or word.startswith("$"):
        return None
    return join_path(cwd, word) if cwd is not None else None


def brace_groups(word):
    """Every `{…}` holding a top-level comma, found in one pass: (open, close, commas' offsets in the body)."""
    stack = []
    groups = []
    for i, b in enumerate(word):
        if b == "{":
            stack.append((i, []))
        elif b == "," and stack:
            at, commas = stack[-1]
            commas.append(i - at - 1)
        elif b == "}" and stack:
            at, commas = stack.pop()
            if commas:
                groups.append((at, i, commas))
    return groups


def first_brace(word):
    groups = brace_groups(word)
    return min(groups, key=lambda g: g[0]) if groups else None


def expand_braces(word):
    out = []

    def expand(w):
        if len(out) >= MAX_ALTERNATIVES:
            return
        found = first_brace(w)
        if found is None:
            out.append(w)
            return
        open_, close, commas = found
        prefix, body, suffix = w[:open_], w[open_ + 1:close], w[close + 1:]
        start = 0
        for end in commas + [len(body)]:
            expand(prefix + body[start:end] + suffix)
            start = end + 1
            if len(out) >= MAX_ALTERNATIVES:
                return

    expand(word)
    return out or [word]


def resolve(word, cwd):
    if len(brace_groups(word)) > MAX_BRACE_GROUPS:
        return [(SLASH, [])]
    return [r for r in (resolve_one(w, cwd) for w in expand_braces(word)) if r is not None]


def is_protected(word, cwd):
    return any(is_protected_path(r) for r in resolve(word, cwd))


def cwd_from_workdir(workdir):
    return resolve_one(workdir, None) if workdir else None


def change_dir(args, cwd):
    """The working directory after `cd`/`pushd` ARGS (None: not known)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-", "--"):
        i += 1
    if i < len(args) and args[i] == "--":
        i += 1
    operands = args[i:]
    for a in operands:
        rest = a
        for h in ("~", "$HOME", "${HOME}"):
            if a.startswith(h):
                rest = a[len(h):]
                break
        if "$" in rest or "`" in rest:
            return None
    if not operands:
        return (HOME, [])
    if len(operands) == 1 and operands[0] != "-":
        return resolve_one(operands[0], cwd)
    return None


# -- Variables the line sets before it uses them; see policies/guard/src/vars.rs.

MAX_VALUES = 16


def is_name(s):
    return bool(s) and (s[0] == "_" or (s[0].isascii() and s[0].isalpha())) and all(
        ch == "_" or (ch.isascii() and ch.isalnum()) for ch in s)


def product(prefixes, values):
    out = []
    for p in prefixes:
        for v in values:
            if len(out) == MAX_VALUES:
                return out
            out.append(p + v)
    return out


class Vars:
    def __init__(self):
        self.values = {}

    def set(self, name, values):
        self.values.pop(name, None)
        if values is not None:
            self.values[name] = values

    def assign(self, word, dynamic):
        if "=" not in word:
            return
        name, value = word.split("=", 1)
        if name.endswith("+"):
            name = name[:-1]
        if not is_name(name):
            return
        self.set(name, self.expand(value) if dynamic else [value])

    def follow(self, words):
        if not words:
            return
        program, args = words[0][0], words[1:]
        if program in ("export", "declare", "typeset", "local", "readonly"):
            for a, dynamic in args:
                if not a.startswith("-"):
                    self.assign(a, dynamic)
        elif program == "for":
            if len(args) >= 2 and args[1][0] == "in" and is_name(args[0][0]):
                values = []
                for w, dynamic in args[2:]:
                    if dynamic:
                        values.extend(self.expand(w) or [])
                    else:
                        values.append(w)
                self.set(args[0][0], values[:MAX_VALUES])
        elif program in ("unset", "read"):
            for a, _ in args:
                if not a.startswith("-"):
                    self.set(a, None)

    def expand(self, word):
        out = [""]
        i = 0
        literal_from = 0
        while i < len(word):
            ch = word[i]
            if ch == "`" or word.startswith("$(", i):
                out = [o + word[literal_from:i] for o in out]
                if ch == "`":
                    close = word.find("`", i + 1)
                    inner = word[i + 1:close]
                else:
                    close = closing_paren(word, i + 1)
                    inner = word[i + 2:close] if close is not None else ""
                if close is None or close < 0:
                    return None
                values = substitution(inner)
                if values is None:
                    return None
                out = product(out, values)
                i = literal_from = close + 1
                continue
            if ch == "$":
                out = [o + word[literal_from:i] for o in out]
                got = self.parameter(word, i)
                if got is None:
                    return None
                values, end = got
                out = product(out, values)
                i = literal_from = end
            else:
                i += 1
        return [o + word[literal_from:] for o in out]

    def parameter(self, word, at):
        rest = word[at + 1:]
        default = None
        if rest.startswith("{"):
            close = rest.find("}")
            if close < 0:
                return None
            body = rest[1:close]
            end = at + 1 + close + 1
            p = min([k for k in (body.find(":"), body.find("-")) if k >= 0], default=-1)
            if p >= 0:
                name, op = body[:p], body[p:]
                if op.startswith(":?") or op.startswith("?"):
                    default = None
                elif op.startswith(":-"):
                    default = op[2:]
                elif op.startswith("-"):
                    default = op[1:]
                else:
                    return None
            else:
                name = body
        else:
            n = 0
            while n < len(rest) and (rest[n] == "_" or (rest[n].isascii() and rest[n].isalnum())):
                n += 1
            name = rest[:n]
            end = at + 1 + n
        if not is_name(name):
            return None
        if name in self.values:
            return (list(self.values[name]), end)
        if default is not None and "$" not in default and "`" not in default:
            return ([default], end)
        if default is None and name == "HOME":
            return (["$HOME"], end)
        if default is None and name == "PWD":
            return (["~+"], end)
        return None


def static_output(line):
    """What a line prints when that is known statically: one echo or printf of words without expansions or
    redirections, trailing newlines removed (the twin of shellward-kit's `static_output`)."""
    try:
        tokens, bodies = tokenize(line)
    except ParseError:
        return None
    if any(kind not in ("word", "newline") for kind, _, _ in tokens):
        return None
    commands = simple_commands(tokens, bodies)
    if len(commands) != 1 or commands[0]["assigns"]:
        return None
    words = commands[0]["words"]
    if any(dynamic for _, dynamic, _ in words):
        return None
    out = prints([(text, False) for text, _, _ in words], None)
    return None if out is None else out.rstrip("\n")


def substitution(line):
    if line.strip() in ("pwd", "pwd -P", "pwd -L"):
        return ["~+"]
    output = static_output(line)
    if output is None:
        return None
    fields = output.split()[:MAX_VALUES]
    return fields or [""]


def closing_paren(word, open_):
    depth = 0
    quote = None
    for i in range(open_, len(word)):
        b = word[i]
        if quote is not None:
            if b == quote:
                quote = None
        elif b in "'\"":
            quote = b
        elif b == "(":
            depth += 1
        elif b == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def variants(c, vars_):
    """The forms a command's words may take once the line's variables are expanded, each with whether its program
    is then known."""
    out = [([], True)]
    for i, (w, dynamic) in enumerate(zip(c.words, c.dynamic)):
        values = vars_.expand(w) if dynamic else None
        known = not dynamic or values is not None
        if values is None:
            values = [w]
        nxt = []
        for words, program_known in out:
            for v in values:
                if len(nxt) < MAX_VALUES:
                    nxt.append((words + [v], program_known and (i > 0 or known)))
        out = nxt
    return out


# -- The rules on one command.


def operands(args):
    out = []
    options_done = False
    for a in args:
        if not options_done and a == "--":
            options_done = True
        elif options_done or not (a.startswith("-") and len(a) > 1):
            out.append(a)
    return out


def has_flag(args, short, long):
    for a in args:
        if a == "--":
            break
        if any(a == x or (len(a) >= 5 and x.startswith(a)) for x in long) or \
                (a.startswith("-") and not a.startswith("--") and any(ch in a[1:] for ch in short)):
            return True
    return False


def rm_root(args, cwd):
    return has_flag(args, "rR", ("--recursive",)) and any(is_protected(t, cwd) for t in operands(args))


def mv_root(args, cwd):
    ops = operands(args)
    if not any(a == "-t" or a.startswith("--target-directory") for a in args):
        ops = ops[:-1]
    return any(is_protected(t, cwd) for t in ops)


def rsync_root(args, cwd):
    ops = operands(args)
    return any(a.startswith("--del") for a in args) and bool(ops) and is_protected(ops[-1], cwd)


def chmod_root(args, cwd):
    recursive = has_flag(args, "R", ("--recursive",))
    return any(is_top_level(r) or (recursive and is_protected_path(r))
               for a in operands(args) for r in resolve(a, cwd))


def find_root(args, cwd):
    rest = list(args)
    while rest:
        a = rest[0]
        if a in ("-H", "-L", "-P"):
            rest = rest[1:]
        elif a == "-D":
            rest = rest[2:]
        elif a.startswith("-O"):
            rest = rest[1:]
        else:
            break
    roots = 0
    while roots < len(rest) and not rest[roots].startswith("-") and rest[roots] not in ("(", "!", ","):
        roots += 1
    starts = rest[:roots] if roots else ["."]
    if not any(is_protected(a, cwd) for a in starts):
        return False
    expression = rest[roots:]
    for i, a in enumerate(expression):
        if a == "-delete":
            return True
        if a in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(expression) and \
                base_name(expression[i + 1]) in ("rm", "shred", "unlink"):
            return True
    return False


SYSRQ = "/proc/sysrq-trigger"


def looks_up_by_name(word):
    """A substitution that finds processes by name (`$(pgrep -f node)`): a kill of its output is a pkill."""
    starts = [m.end() for m in re.finditer(r"\$\(|`", word)]
    for at in starts:
        inner = word[at:].lstrip()
        for p in ("pgrep", "pidof"):
            if inner.startswith(p):
                rest = inner[len(p):]
                if not rest or rest[0] in " )`":
                    return True
    return False


def power(name, args):
    if name in ("shutdown", "reboot", "halt", "poweroff"):
        return True
    if name in ("tee", "cp", "dd"):
        return any(a == SYSRQ or a == "of=" + SYSRQ for a in args)
    if name in ("init", "telinit"):
        return bool(args) and args[0] in ("0", "6", "1", "s", "S")
    if name in ("systemctl", "loginctl"):
        ops = operands(args)
        if not ops:
            return False
        if ops[0] in POWER_VERBS:
            return True
        if ops[0] in ("isolate", "start", "restart"):
            return any((t[:-len(".target")] if t.endswith(".target") else t) in POWER_VERBS for t in ops[1:])
    return False


READ_ONLY_PARTITIONER_FLAGS = {"-l", "--list", "-d", "--dump", "-J", "--json", "-p", "--print", "print", "-s",
                               "--show-size", "-V", "--version", "-h", "--help"}


def block_device_write(name, args):
    def device(a):
        return is_block_device(a) or ("=" in a and is_block_device(a.split("=", 1)[1]))

    if name == "dd":
        return any(a.startswith("of=") and is_block_device(a[3:]) for a in args)
    if name in ("shred", "wipefs", "blkdiscard", "mkswap", "mke2fs", "mkdosfs", "mkntfs", "tee", "truncate"):
        return any(device(a) for a in args)
    if name.startswith("mkfs"):
        return True
    if name in ("cp", "install", "mv", "ln"):
        if "-t" in args:
            i = args.index("-t")
            if i + 1 < len(args) and device(args[i + 1]):
                return True
        ops = operands(args)
        return bool(ops) and device(ops[-1])
    if name in ("fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "cgdisk", "parted"):
        return not any(a in READ_ONLY_PARTITIONER_FLAGS for a in args) and any(device(a) for a in args)
    if name == "badblocks":
        return has_flag(args, "wn", ()) and any(device(a) for a in args)
    return False


def unknown_program_rule(args, cwd):
    """The rule a command whose program is unknown (`$k -9 -1`) breaks by its arguments alone."""
    if kill_all(args) and "-1" in args:
        return "kill-all"
    if rm_root(args, cwd):
        return "rm-root"
    if has_flag(args, "R", ("--recursive",)) and chmod_root(args, cwd):
        return "chmod-root"
    if find_root(args, cwd):
        return "find-root"
    if any(a.startswith("of=") and is_block_device(a[3:]) for a in args):
        return "block-device"
    return None


def builtin_rule(words, cwd):
    if not words:
        return None
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    if name in ("pkill", "killall", "killall5"):
        return "kill-by-name"
    if name == "kill" and kill_all(args):
        return "kill-all"
    if name == "kill" and any(looks_up_by_name(a) for a in args):
        return "kill-by-name"
    if name == "rm" and rm_root(args, cwd):
        return "rm-root"
    if name == "mv" and mv_root(args, cwd):
        return "rm-root"
    if name == "rsync" and rsync_root(args, cwd):
        return "rm-root"
    if name in PRIVILEGE:
        return "privilege"
    if name in ("chmod", "chown", "chgrp") and chmod_root(args, cwd):
        return "chmod-root"
    if name == "find" and find_root(args, cwd):
        return "find-root"
    if power(name, args):
        return "power"
    if block_device_write(name, args):
        return "block-device"
    return None


def fork_bomb(command):
    squashed = "".join(ch for ch in command if not ch.isspace())
    start = 0
    while True:
        at = squashed.find("(){", start)
        if at < 0:
            return False
        name_start = max(squashed.rfind(ch, 0, at) for ch in "(){}|&;") + 1
        name = squashed[name_start:at]
        if name and f"{name}|{name}&" in squashed[at + 3:]:
            return True
        start = at + 3


class Guard:
    def __init__(self):
        self.deny = []
        self.allow = []
        self.disabled = []

    def denial(self, rule):
        if rule in self.disabled:
            return None
        return f"guard[{rule}]: {REASONS[rule]}"

    def check(self, command, workdir=None):
        if fork_bomb(command):
            d = self.denial("fork-bomb")
            if d:
                return d
        try:
            reading = read_line(command)
        except ParseError as e:
            if e.too_deep:
                return self.unreadable(
                    f"expansions ($(…), ${{…}}, quotes inside them) are nested more than {MAX_NESTING} deep"
                )
            return None
        commands = reading.commands
        cwd = cwd_from_workdir(workdir)
        vars_ = Vars()
        for c in commands:
            forms = variants(c, vars_)
            for words, program_known in forms:
                d = self.check_command(c, words, program_known, cwd, vars_)
                if d:
                    return d
            if not c.words:
                for text, dynamic in c.assignments:
                    vars_.assign(text, dynamic)
            words, program_known = forms[0]
            if program_known and words:
                name = base_name(words[0])
                if name in ("cd", "pushd"):
                    cwd = change_dir(words[1:], cwd)
                elif name == "popd":
                    cwd = None
                else:
                    vars_.follow(list(zip(words, c.dynamic)))
        # What was not read may be anything: a reading that stopped at a limit is refused.
        if reading.too_deep:
            return self.unreadable(
                f"shell strings (sh -c, eval, bash <<<, $(…)) are nested more than {MAX_SHELL_DEPTH} deep"
            )
        if reading.truncated:
            return self.unreadable(f"the line has more than {MAX_COMMANDS} commands")
        return None

    def unreadable(self, limit):
        if not self.denial("unreadable"):
            return None
        return (
            f"guard[unreadable]: {limit}; the guard could not read the whole line, so it cannot tell what would "
            "run: split it into shorter commands, or put the nested script in a file and run that"
        )

    def check_command(self, c, words, program_known, cwd, vars_):
        def sees(p):
            return p.matches(c.words) or p.matches(c.written)

        if any(sees(p) for p in self.allow):
            return None
        for p in self.deny:
            if sees(p):
                return f"guard[deny-pattern]: the operator denies commands matching `{p.text}`; ask the user"
        if any(w in c.via for w in PRIVILEGE):
            d = self.denial("privilege")
            if d:
                return d
        rule = builtin_rule(words, cwd) if program_known else unknown_program_rule(words[1:], cwd)
        if rule:
            d = self.denial(rule)
            if d:
                return d
        def device(t):
            if is_block_device(t):
                return True
            values = vars_.expand(t) if "$" in t else None
            return values is not None and any(is_block_device(v) for v in values)

        if any(device(t) for t in c.writes):
            d = self.denial("block-device")
            if d:
                return d
        if SYSRQ in c.writes:
            d = self.denial("power")
            if d:
                return d
        return None


def parse_settings(text):
    guard = Guard()
    if not text.strip():
        return guard
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"settings are not valid JSON: {e}")
    if not isinstance(value, dict):
        raise ValueError('settings must be a JSON object such as {"deny": ["git push --force"]}')
    for key, v in value.items():
        if key not in ("deny", "allow", "disable"):
            raise ValueError(f"unknown setting `{key}`; the settings are deny, allow and disable")
        if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
            raise ValueError(f"setting `{key}` must be an array of strings")
        if key == "disable":
            for rule in v:
                if rule not in RULES:
                    raise ValueError(f"setting `disable`: unknown rule {rule!r}; the rules are {', '.join(RULES)}")
            guard.disabled = list(v)
        else:
            try:
                patterns = [Pattern(p) for p in v]
            except ValueError as e:
                raise ValueError(f"setting `{key}`: {e}")
            setattr(guard, key, patterns)
    return guard


GUARD = Guard()


class Policy(exports.Policy):
    def configure(self, settings: str) -> None:
        global GUARD
        try:
            GUARD = parse_settings(settings)
        except ValueError as e:
            raise Err(str(e))
        host.log(host.Level.DEBUG, f"configured: {len(GUARD.deny)} deny and {len(GUARD.allow)} allow patterns")

    def evaluate(self, request: types.Request) -> types.Outcome:
        reason = GUARD.check(request.command, request.workdir)
        if reason is not None:
            return types.Outcome_Deny(reason)
        return types.Outcome_Run(
            types.Plan(
                command=request.command,
                workdir=request.workdir,
                background=bool(request.background),
                timeout_ms=request.timeout_ms,
                on_timeout=request.on_timeout if request.on_timeout is not None else types.OnTimeout.BACKGROUND,
                env=request.env,
                notes=[],
                interactive=request.interactive,
                tty=request.tty,
            )
        )
