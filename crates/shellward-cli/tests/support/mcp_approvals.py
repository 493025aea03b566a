"""Approvals through the official MCP Python SDK's elicitation callback (a stock client from PyPI).

The built-in guard asks before `shred` of a file; each call shreds a file of its own in a temporary directory, so
whether the command ran is checked on disk. Approve runs it and returns its result; decline, cancel and a "deny"
choice run nothing and say the user declined; "remember for this session" is not asked again; a client without
elicitation gets a deny telling the model to ask its user.

Usage: python mcp_approvals.py PATH/TO/shellward
Prints MCP-APPROVALS-OK on success; any failed check raises (non-zero exit) with the offending result.
"""

import atexit
import shutil
import asyncio
import os
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from mcp_client import check, data, is_error


class Person:
    """The elicitation callback: answers as told, and remembers what it was asked."""

    def __init__(self):
        self.answer = None
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        return self.answer


async def main(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    workdir = tempfile.mkdtemp(prefix="shellward-approvals-")
    # Removed when the script exits, whatever the outcome: a test leaves nothing in the temporary directory.
    atexit.register(shutil.rmtree, workdir, True)

    def victim(name):
        path = os.path.join(workdir, name)
        with open(path, "w") as f:
            f.write("data\n")
        return path, f"shred -u {path}"

    person = Person()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=person) as s:
            await s.initialize()

            # Approve: the command runs and its result comes back.
            path, command = victim("approved")
            person.answer = types.ElicitResult(action="accept", content={"decision": "approve", "remember": False})
            r = await s.call_tool("execute", {"command": command})
            d = data(r)
            check(not is_error(r) and d["success"] and not os.path.exists(path), "approved runs", d)
            check(len(person.asked) == 1 and command in person.asked[0] and "shred" in person.asked[0],
                  "the person saw the question and the command", person.asked)
            check(any("Approved by the user at the client" in n for n in d.get("notes", [])), "approval noted", d)

            # Decline, cancel, and choosing deny in the form: nothing runs.
            for action, content, word in [("decline", None, "declined"), ("cancel", None, "cancelled"),
                                          ("accept", {"decision": "deny"}, "deny")]:
                path, command = victim(f"refused-{action}")
                person.answer = types.ElicitResult(action=action, content=content)
                r = await s.call_tool("execute", {"command": command})
                d = data(r)
                check(is_error(r) and d.get("denied") and os.path.exists(path), f"{action} runs nothing", d)
                check("declined" in d["deny_reason"] and word in d["deny_reason"], f"{action} says so", d)

            # A command that would rewrite the person's screen (erase the line, carriage return, right-to-left
            # override, zero-width space) is shown with every such character escaped and counted; never raw.
            hidden = ["\x1b", "\r", "\u202e", "\u200b"]
            path, _ = victim("hostile")
            command = f"shred -u {path} \x1b[2K\x1b[1G\r\u202eecho safe\u200b"
            person.answer = types.ElicitResult(action="decline")
            asked = len(person.asked)
            r = await s.call_tool("execute", {"command": command})
            shown = person.asked[asked]
            check(not any(h in shown for h in hidden), "nothing raw reaches the person", shown)
            check("\\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}" in shown, "shown escaped", shown)
            check("contains 5 invisible or control characters, shown escaped" in shown, "the count is said", shown)
            check(os.path.exists(path), "declined: not run", data(r))

            # A 100 KB command with the dangerous part at its end: the form keeps the end in view, says what it cut.
            path, _ = victim("long")
            command = f"echo {'a' * 100_000}; shred -u {path}"
            r = await s.call_tool("execute", {"command": command})
            shown = person.asked[-1]
            check(f"shred -u {path}" in shown and "more characters not shown here" in shown
                  and len(shown) < 10_000, "the tail is shown, the cut said", shown[:300] + shown[-600:])
            check(os.path.exists(path), "declined: not run", data(r))

            # Remember for this session: the same command is not asked about again.
            path, command = victim("remembered")
            person.answer = types.ElicitResult(action="accept", content={"decision": "approve", "remember": True})
            asked = len(person.asked)
            r = await s.call_tool("execute", {"command": command})
            check(data(r)["success"] and not os.path.exists(path), "remembered approval runs", data(r))
            with open(path, "w") as f:
                f.write("again\n")
            person.answer = types.ElicitResult(action="decline")
            r = await s.call_tool("execute", {"command": command})
            d = data(r)
            check(d["success"] and not os.path.exists(path) and len(person.asked) == asked + 1,
                  "the session did not ask again", (d, person.asked))

    # A client without elicitation: nobody can be asked, so the command is refused with a reason for the model.
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            path, command = victim("no-elicitation")
            r = await s.call_tool("execute", {"command": command})
            d = data(r)
            check(is_error(r) and d.get("denied") and os.path.exists(path), "no elicitation: not run", d)
            check("Ask your user" in d["deny_reason"] and command in d["deny_reason"], "the reason says what to do", d)

    print("MCP-APPROVALS-OK")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    asyncio.run(main(sys.argv[1]))
