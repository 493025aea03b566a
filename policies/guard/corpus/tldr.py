"""Measures a policy chain on a public command corpus: the example commands of the tldr pages
(https://github.com/tldr-pages/tldr, English pages for common, linux, osx, freebsd, netbsd, openbsd, sunos, android).

Placeholders are filled the way a reader would: `{{path/to/file}}` becomes `path/to/file`, `{{[-f|--force]}}` its first
form `-f`, `{{1..10}}` `1`. Every command becomes a case of a generated case file expecting `run`; `shellward policy
test --json` then says what the chain did with each (run, deny, ask) without running anything.

Usage: python3 policies/guard/corpus/tldr.py TLDR_CHECKOUT SHELLWARD_BINARY [--policy P]... [--show RULE]
Prints the counts by outcome and by rule; --show RULE lists the commands a rule hit.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

PLATFORMS = ["common", "linux", "osx", "freebsd", "netbsd", "openbsd", "sunos", "android"]


def fill(command):
    def one(m):
        inner = m.group(1)
        if inner.startswith("[") and inner.endswith("]") and "|" in inner:
            return inner[1:-1].split("|")[0]
        if re.fullmatch(r"\d+\.\.\d+", inner):
            return inner.split("..")[0]
        return inner
    return re.sub(r"\{\{(.*?)\}\}", one, command)


def commands(root):
    out = []
    for platform in PLATFORMS:
        d = os.path.join(root, "pages", platform)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith(".md"):
                continue
            with open(os.path.join(d, name), encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if len(line) > 2 and line.startswith("`") and line.endswith("`"):
                        out.append((f"{platform}/{name[:-3]}", fill(line[1:-1])))
    return out


def toml_string(s):
    return json.dumps(s)


def main():
    root, binary = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    policies, show = [], None
    while args:
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--policy":
            policies += ["--policy", value]
        elif flag == "--show":
            show = value
    corpus = commands(root)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        for i, (page, command) in enumerate(corpus):
            if "\0" in command:
                continue
            f.write(f"[[case]]\nname = {toml_string(f'{i} {page}')}\ncommand = {toml_string(command)}\n"
                    'expect = { decision = "run" }\n\n')
        cases = f.name
    r = subprocess.run([binary, "policy", "test", *policies, cases, "--json"], capture_output=True, text=True)
    os.unlink(cases)
    report = json.loads(r.stdout)
    outcomes, rules = Counter(), Counter()
    hits = []
    for case in report["cases"]:
        actual = next((m["actual"] for m in case["mismatches"] if m["field"] == "decision"), None)
        if actual is None:
            outcomes["run"] += 1
            continue
        kind = actual.split(":", 1)[0]
        outcomes[kind] += 1
        rule = re.search(r"guard\[([a-z-]+)\]", actual)
        key = (kind, rule.group(1) if rule else "other")
        rules[key] += 1
        if show and key[1] == show:
            hits.append(corpus[int(case["name"].split()[0])][1])
    total = sum(outcomes.values())
    pages = len({p for p, _ in corpus})
    print(f"{total} commands from {pages} pages")
    for kind in ["run", "ask", "deny"]:
        print(f"  {kind:5} {outcomes[kind]:6}  {100.0 * outcomes[kind] / total:5.2f} %")
    for (kind, rule), n in sorted(rules.items(), key=lambda kv: -kv[1]):
        print(f"    {kind:4} {rule:16} {n}")
    for h in hits:
        print("   ", h)


if __name__ == "__main__":
    main()
