"""shellward's guard policy in Python: the twin of policies/guard (Rust), built into a component by componentize-py.

It denies commands that would harm the agent host or the user's machine, with the same rules, settings and procedure
as the Rust guard (see policies/guard/README.md), and passes the same case file. The shell reader it uses lives in
`shellward_reader.py` beside it (shared with the Python policy scaffold): the subset of shellward-kit's tokenizer the
rules need — quotes, escapes, comments, operators, io numbers, here-documents, and `$(…)`, `${…}`, backquotes kept
inside their word — and `effective_commands`, the twin of shellward-kit's `effective` module (wrappers stripped,
nested shell strings read, run-time-only words marked).
"""

import json
import re

from componentize_py_types import Err
from shellward_reader import (
    MAX_COMMANDS,
    MAX_NESTING,
    MAX_SHELL_DEPTH,
    ParseError,
    base_name,
    prints,
    read_line,
    simple_commands,
    tokenize,
)
from wit_world import exports
from wit_world.imports import host, types

RULES = [
    "fork-bomb", "kill-by-name", "kill-all", "rm-root", "privilege", "power", "block-device", "chmod-root",
    "find-root", "unreadable", "git-discard", "git-force-push", "crontab-remove", "shred",
]

# The rules that ask a person instead of refusing; the others refuse.
ASK_RULES = (
    "privilege", "kill-by-name", "power", "block-device", "git-discard", "git-force-push", "crontab-remove", "shred",
)

SUMMARIES = {
    "fork-bomb": "refuses fork bombs",
    "kill-by-name": "asks before pkill, killall and kill $(pgrep …)",
    "kill-all": "refuses kill -1 and signals to pid 1",
    "rm-root": "refuses removing /, the home directory or a system directory",
    "privilege": "asks before sudo, su, doas, pkexec and runuser",
    "power": "asks before shutdown, reboot and suspend",
    "block-device": "asks before writes to block devices (mkfs, dd of=/dev/…, bmaptool)",
    "chmod-root": "refuses chmod/chown of / or system directories",
    "find-root": "refuses find -delete or -exec rm from / or system directories",
    "unreadable": "refuses a line the guard cannot read whole",
    "git-discard": "asks before discarding uncommitted git work (reset --hard, clean -f, restore .)",
    "git-force-push": "asks before git push --force",
    "crontab-remove": "asks before crontab -r",
    "shred": "asks before shredding files",
}

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


REASONS = {
    "fork-bomb": "this is a fork bomb: it would exhaust the machine's processes",
    "kill-by-name": "this stops every process whose name matches (pkill, killall, kill $(pgrep …)), which may include the "
    "agent host or the user's own programs; the agent can stop processes it started with process_signal, "
    "or one process by its id",
    "kill-all": "kill -1 signals every process you may signal, including the agent host, and pid 1 is the machine's "
    "init; stop processes you started with process_signal",
    "rm-root": "removing /, the home directory or a system directory (rm -r, or moving it away, or rsync --delete "
    "onto it) would destroy the user's machine; remove the specific paths you mean",
    "privilege": "this runs a command as root or another user (sudo, su, doas, pkexec, runuser): it can change anything "
    "on the machine",
    "chmod-root": "changing the permissions or owner of / or a system directory, or recursively of the home directory, "
    "breaks the machine (sudo, ssh and services refuse such files); change the specific paths you mean",
    "find-root": "find from /, the home directory or a system directory with -delete or -exec rm removes files all over "
    "the machine; run find on your project's directories",
    "power": "this shuts down, reboots or suspends the machine (shutdown, reboot, systemctl poweroff, init 0, "
    "/proc/sysrq-trigger): everything running on it stops",
    "unreadable": "the guard could not read the whole line, so it cannot tell what would run; split it into shorter "
    "commands or run the nested script from a file",
    "block-device": "this writes to a block device, a disk rather than a file (mkfs, dd of=/dev/…, bmaptool, wipefs, fdisk, "
    "tee or > /dev/sd…; on Windows format, diskpart, Format-Volume, Clear-Disk): the file system on it is "
    "destroyed",
    "git-discard": "this throws away uncommitted or unmerged work in a git repository (reset --hard, clean -f, checkout or "
    "restore of paths, stash drop/clear, branch -D); it cannot be undone",
    "git-force-push": "this force-pushes (git push --force, -f, +ref): the remote branch's history is replaced and commits "
    "others pushed may be lost",
    "crontab-remove": "this removes the user's whole crontab (crontab -r): every scheduled job is deleted",
    "shred": "this overwrites files so they cannot be recovered (shred)",
}



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


# ---- The rules ----


def is_block_device(path):
    return any(glob(g, path) for g in BLOCK_DEVICES)


HARMLESS_DEVICES = [
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdout", "/dev/stderr", "/dev/stdin",
    "/dev/console", "/dev/ptmx", "/dev/kmsg", "/dev/tty*", "/dev/pts/*", "/dev/fd/*", "/dev/shm/*", "/dev/mqueue/*",
    "/dev/snd/*", "/dev/input/*",
]


def may_be_disk(path):
    """A path a disk-writing tool may be writing a disk through: a known block device, or any other node under /dev/
    but the harmless ones."""
    return is_block_device(path) or (path.startswith("/dev/") and not any(glob(g, path) for g in HARMLESS_DEVICES))


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
        return may_be_disk(a) or ("=" in a and may_be_disk(a.split("=", 1)[1]))

    if name == "dd":
        return any(a.startswith("of=") and may_be_disk(a[3:]) for a in args)
    if name in ("shred", "wipefs", "blkdiscard", "mkswap", "mke2fs", "mkdosfs", "mkntfs", "tee", "truncate", "bmaptool",
                "rpi-imager", "etcher", "balena-etcher"):
        return any(device(a) for a in args)
    if name.startswith("mkfs"):
        # A file system made on a device; one made into an image file is a file like any other.
        return any(device(a) or a.startswith("/dev/") or "$" in a for a in operands(args))
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
    if any(a.startswith("of=") and may_be_disk(a[3:]) for a in args):
        return "block-device"
    return None


SUDO_QUERIES = ("-l", "-ll", "--list", "-v", "--validate", "-k", "--reset-timestamp", "-K", "--remove-timestamp", "-V",
                "--version", "--help", "-n", "--non-interactive")
SUDO_WITH_VALUE = ("-u", "-U", "-g", "-h", "--user", "--other-user", "--group", "--host")


def sudo_query(args):
    """`sudo` that only asks about privileges and runs nothing (`sudo -l`, `sudo -v`, `sudo -k`, `sudo -V`)."""
    i = 0
    queried = False
    while i < len(args):
        a = args[i]
        if a in SUDO_WITH_VALUE:
            i += 2
            continue
        if not a.startswith("-"):
            return False
        if a in SUDO_QUERIES and a not in ("-n", "--non-interactive"):
            queried = True
        if a not in SUDO_QUERIES and not a.startswith("--user=") and not a.startswith("--other-user="):
            return False
        i += 1
    return queried


def kill_by_name_query(args):
    """`killall -l`, `pkill -V` and the like: listing signals or printing a version kills nothing."""
    return bool(args) and all(a in ("-l", "--list", "-L", "-V", "--version", "-h", "--help") for a in args)


GIT_GLOBAL_VALUES = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env")


def git_rule(args):
    """The ask rule a `git` command breaks: work thrown away, or a remote rewritten."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in GIT_GLOBAL_VALUES else 1
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1:]
    ops = operands(rest)
    discard = False
    if sub == "reset":
        discard = any(a in ("--hard", "--merge") for a in rest)
    elif sub == "clean":
        discard = has_flag(rest, "f", ("--force",)) and not has_flag(rest, "n", ("--dry-run",))
    elif sub == "checkout":
        after = rest[rest.index("--") + 1:] if "--" in rest else None
        discard = has_flag(rest, "f", ("--force",)) or bool(after) or \
            any(p in (".", "*", ":/", "./") for p in ops)
    elif sub == "restore":
        discard = not has_flag(rest, "S", ("--staged",)) or has_flag(rest, "W", ("--worktree",))
    elif sub == "stash":
        discard = bool(ops) and ops[0] in ("drop", "clear")
    elif sub == "branch":
        discard = any(a == "-D" or (a.startswith("-") and not a.startswith("--") and "D" in a) for a in rest) or \
            (has_flag(rest, "d", ("--delete",)) and has_flag(rest, "f", ("--force",)))
    if discard:
        return "git-discard"
    if sub == "push" and (has_flag(rest, "f", ("--force",)) or any(r.startswith("+") for r in ops[1:])):
        return "git-force-push"
    return None


def builtin_rule(words, cwd):
    if not words:
        return None
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    if name in ("pkill", "killall") and kill_by_name_query(args):
        return None
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
    if name == "sudo" and sudo_query(args):
        return None
    if name in PRIVILEGE:
        return "privilege"
    if name == "git":
        return git_rule(args)
    if name == "crontab" and has_flag(args, "r", ("--remove",)):
        return "crontab-remove"
    if name in ("chmod", "chown", "chgrp") and chmod_root(args, cwd):
        return "chmod-root"
    if name == "find" and find_root(args, cwd):
        return "find-root"
    if power(name, args):
        return "power"
    if block_device_write(name, args):
        return "block-device"
    if name == "shred" and operands(args):
        return "shred"
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
        """The finding of a rule that is on: (rule, reason or question, whether a person may approve it)."""
        if rule in self.disabled:
            return None
        return (rule, f"guard[{rule}]: {REASONS[rule]}", rule in ASK_RULES)

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
        # The first question is kept while reading on: a later command may still be refused (deny beats ask).
        question = None
        for c in commands:
            forms = variants(c, vars_)
            for words, program_known in forms:
                d = self.check_command(c, words, program_known, cwd, vars_)
                if d and d[2]:
                    question = question or d
                elif d:
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
        return question

    def unreadable(self, limit):
        if not self.denial("unreadable"):
            return None
        return (
            "unreadable",
            f"guard[unreadable]: {limit}; the guard could not read the whole line, so it cannot tell what would "
            "run: split it into shorter commands, or put the nested script in a file and run that",
            False,
        )

    def check_command(self, c, words, program_known, cwd, vars_):
        def sees(p):
            return p.matches(c.words) or p.matches(c.written)

        if any(sees(p) for p in self.allow):
            return None
        for p in self.deny:
            if sees(p):
                return ("deny-pattern",
                        f"guard[deny-pattern]: the operator denies commands matching `{p.text}`; ask the user", False)
        rule = builtin_rule(words, cwd) if program_known else unknown_program_rule(words[1:], cwd)
        found = self.denial(rule) if rule else None
        # A refusal stands whatever runs it (`sudo rm -rf /`); otherwise the outermost escalation is asked about first.
        if found and not found[2]:
            return found
        if any(w in c.via for w in PRIVILEGE):
            d = self.denial("privilege")
            if d:
                return d
        if found:
            return found
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


def pass_through(request):
    """The request, unchanged, as a plan (the on-timeout an earlier policy chose, else background)."""
    return types.Plan(
        command=request.command,
        workdir=request.workdir,
        background=bool(request.background),
        timeout_ms=request.timeout_ms,
        on_timeout=request.on_timeout if request.on_timeout is not None else types.OnTimeout.BACKGROUND,
        env=request.env,
        notes=[],
        interactive=request.interactive,
        tty=request.tty,
        confinement=request.confinement,
        startup_wait_ms=request.startup_wait_ms,
        rules=[],
    )


class Policy(exports.Policy):
    def configure(self, settings: str) -> None:
        global GUARD
        try:
            GUARD = parse_settings(settings)
        except ValueError as e:
            raise Err(str(e))
        host.log(host.Level.DEBUG, f"configured: {len(GUARD.deny)} deny and {len(GUARD.allow)} allow patterns")

    def rules(self) -> list[types.Rule]:
        out = [types.Rule(id=r, summary=SUMMARIES[r]) for r in RULES if r not in GUARD.disabled]
        if GUARD.deny:
            out.append(types.Rule(id="deny-pattern", summary="refuses commands matching the operator's deny patterns"))
        return out

    def evaluate(self, request: types.Request) -> types.Outcome:
        found = GUARD.check(request.command, request.workdir)
        if found is None:
            return types.Outcome_Run(pass_through(request))
        rule, text, ask = found
        if ask:
            return types.Outcome_Ask(types.Question(plan=pass_through(request), text=text, rule=rule))
        return types.Outcome_Deny(types.Denial(reason=text, rule=rule))
