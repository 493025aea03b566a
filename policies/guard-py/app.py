"""shellward's guard policy in Python: the twin of policies/guard (Rust), built into a component by componentize-py.

It denies commands that would harm the agent host or the user's machine, with the same rules, settings and procedure
as the Rust guard (see policies/guard/README.md), and passes the same case file. The shell lexer below implements the
subset of shellward-kit's tokenizer the rules need: quotes, escapes, comments, operators, io numbers, here-documents,
and `$(…)`, `${…}`, backquotes kept inside their word.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

MAX_DEPTH = 8

RULES = ["fork-bomb", "kill-by-name", "kill-all", "rm-root", "privilege", "power", "block-device"]

SYSTEM_DIRS = {
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root", "/sbin",
    "/srv", "/sys", "/usr", "/var",
}

BLOCK_DEVICES = [
    "/dev/sd*", "/dev/hd*", "/dev/vd*", "/dev/xvd*", "/dev/nvme*", "/dev/mmcblk*", "/dev/disk*", "/dev/dm-*",
    "/dev/mapper/*", "/dev/md*", "/dev/loop*",
]

RESERVED = {"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"}

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}

# Longest first, so `&&` wins over `&`.
OPERATORS = [
    "<<<", "<<-", "&>>", ";;&",
    "&&", "||", ";;", ";&", "|&", "&>", ">>", ">|", ">&", "<&", "<<", "<>",
    ">", "<", "|", "&", ";", "(", ")",
]
REDIRECTS = {"<<<", "<<-", "&>>", "&>", ">>", ">|", ">&", "<&", "<<", "<>", ">", "<"}
WRITE_REDIRECTS = {">", ">>", ">|", "<>", "&>", "&>>", ">&"}

REASONS = {
    "fork-bomb": "this is a fork bomb: it would exhaust the machine's processes",
    "kill-by-name": "pkill/killall match processes by name and can kill the agent host or the user's programs; stop "
    "processes you started with process_signal, or kill one process by its id",
    "kill-all": "kill -1 signals every process you may signal, including the agent host; stop processes you started "
    "with process_signal",
    "rm-root": "recursive removal of /, the home directory or a system directory would destroy the user's machine; "
    "remove the specific paths you mean",
    "privilege": "the agent must not escalate privileges (sudo, su, doas, pkexec, runuser); ask the user to run it",
    "power": "shutting down or rebooting the machine is not allowed; ask the user",
    "block-device": "writing to a block device (mkfs, dd of=/dev/…, shred, wipefs, > /dev/sd…) destroys file systems; "
    "ask the user",
}


class ParseError(Exception):
    pass


def glob(pattern, text):
    """`*` matches any run of characters; everything else matches itself."""
    if "*" not in pattern:
        return pattern == text
    p, t = pattern, text
    pi = ti = 0
    star = None
    while ti < len(t):
        if pi < len(p) and p[pi] == "*":
            star = (pi, ti)
            pi += 1
        elif pi < len(p) and p[pi] == t[ti]:
            pi += 1
            ti += 1
        elif star is not None:
            pi = star[0] + 1
            ti = star[1] + 1
            star = (star[0], star[1] + 1)
        else:
            return False
    return all(c == "*" for c in p[pi:])


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


def strip_wrappers(words):
    """Drops env/nohup/exec/command/time/nice/stdbuf wrappers, as shellward-kit does."""

    def skip_options(rest, with_value):
        i = 0
        while i < len(rest):
            w = rest[i]
            if w == "--":
                return rest[i + 1:]
            if not w.startswith("-") or w == "-":
                break
            i += 2 if (w in with_value and i + 1 < len(rest)) else 1
        return rest[i:]

    while words:
        name = words[0].rsplit("/", 1)[-1]
        rest = words[1:]
        if name in ("nohup", "exec", "command", "time"):
            words = skip_options(rest, ())
        elif name == "nice":
            words = skip_options(rest, ("-n",))
        elif name == "stdbuf":
            words = skip_options(rest, ("-i", "-o", "-e"))
        elif name == "env":
            r = skip_options(rest, ("-u", "-C", "-S"))
            while r and "=" in r[0] and not r[0].startswith("="):
                r = r[1:]
            words = r
        else:
            return words
    return words


def tokenize(src):
    """Tokens as (kind, text, raw): kind is "word", "io", "op" or "newline"; text has quotes removed."""
    tokens = []
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
                while i < n:
                    end = src.find("\n", i)
                    line = src[i:] if end < 0 else src[i:end]
                    i = n if end < 0 else end + 1
                    if (line.lstrip("\t") if strip_tabs else line) == delim:
                        break
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
    return tokens


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
        if c in " \t\r\n" or any(src.startswith(o, i) for o in OPERATORS):
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


def simple_commands(tokens):
    """Splits tokens into simple commands: (words, write-redirect targets, raw word texts)."""
    commands = []
    current = None
    pending_redirect = None
    for kind, text, raw in tokens:
        control = kind == "newline" or (kind == "op" and text not in REDIRECTS)
        if control:
            if current is not None:
                commands.append(current)
            current = None
            pending_redirect = None
            continue
        if current is None:
            current = {"words": [], "targets": [], "raws": []}
        if kind == "op":
            pending_redirect = text
        elif kind == "io":
            pass
        elif pending_redirect is not None:
            if pending_redirect in WRITE_REDIRECTS:
                current["targets"].append(text)
            current["raws"].append(raw)
            pending_redirect = None
        elif not current["words"] and is_assignment(raw):
            current["raws"].append(raw)
        else:
            current["words"].append(text)
            current["raws"].append(raw)
    if current is not None:
        commands.append(current)
    return commands


def substitutions(raw):
    """Command lines inside `$(…)` and backquotes of a raw word (single-quoted text excluded)."""
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
        elif not single and c == "$" and raw[i + 1:i + 2] == "(" and raw[i + 2:i + 3] != "(":
            depth = 0
            start = i + 2
            j = i + 1
            while j < n:
                if raw[j] == "(":
                    depth += 1
                elif raw[j] == ")":
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


def is_block_device(path):
    return any(glob(g, path) for g in BLOCK_DEVICES)


def kill_all(args):
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
    return "-1" in pids


def rm_root(args):
    recursive = False
    targets = []
    options_done = False
    for a in args:
        if not options_done and a == "--":
            options_done = True
        elif not options_done and a == "--recursive":
            recursive = True
        elif not options_done and a.startswith("--"):
            pass
        elif not options_done and a.startswith("-") and len(a) > 1:
            if "r" in a[1:] or "R" in a[1:]:
                recursive = True
        else:
            targets.append(a)

    def dangerous(t):
        if t.endswith("/*"):
            t = t[:-2]
        t = t.rstrip("/")
        return t in ("", "~", "$HOME", "${HOME}", "/.") or t in SYSTEM_DIRS

    return recursive and any(dangerous(t) for t in targets)


def builtin_rule(words):
    if not words:
        return None
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    if name in ("pkill", "killall", "killall5"):
        return "kill-by-name"
    if name == "kill" and kill_all(args):
        return "kill-all"
    if name == "rm" and rm_root(args):
        return "rm-root"
    if name in ("sudo", "su", "doas", "pkexec", "runuser"):
        return "privilege"
    if name in ("shutdown", "reboot", "halt", "poweroff"):
        return "power"
    if name == "init" and args and args[0] in ("0", "6"):
        return "power"
    if name == "dd" and any(a.startswith("of=") and is_block_device(a[3:]) for a in args):
        return "block-device"
    if name in ("shred", "wipefs", "blkdiscard") and any(is_block_device(a) for a in args):
        return "block-device"
    if name.startswith("mkfs"):
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

    def check(self, command, depth=0):
        if depth > MAX_DEPTH:
            return None
        if fork_bomb(command):
            d = self.denial("fork-bomb")
            if d:
                return d
        try:
            tokens = tokenize(command)
        except ParseError:
            return None
        for cmd in simple_commands(tokens):
            all_words = cmd["words"]
            start = 0
            while start < len(all_words) and all_words[start] in RESERVED:
                start += 1
            words = strip_wrappers(all_words[start:])
            if any(p.matches(words) for p in self.allow):
                continue
            for p in self.deny:
                if p.matches(words):
                    return f"guard[deny-pattern]: the operator denies commands matching `{p.text}`; ask the user"
            rule = builtin_rule(words)
            if rule:
                d = self.denial(rule)
                if d:
                    return d
            if any(is_block_device(t) for t in cmd["targets"]):
                d = self.denial("block-device")
                if d:
                    return d
            if words:
                name = words[0].rsplit("/", 1)[-1]
                nested = None
                if name in SHELLS and "-c" in words[1:]:
                    at = words.index("-c", 1)
                    if at + 1 < len(words):
                        nested = words[at + 1]
                elif name == "eval":
                    nested = " ".join(words[1:])
                if nested is not None:
                    d = self.check(nested, depth + 1)
                    if d:
                        return d
            for raw in cmd["raws"]:
                for inner in substitutions(raw):
                    d = self.check(inner, depth + 1)
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
        reason = GUARD.check(request.command)
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
            )
        )
