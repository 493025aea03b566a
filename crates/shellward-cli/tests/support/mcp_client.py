"""Drives `shellward mcp` with the official MCP Python SDK (a stock client from PyPI).

Usage: python mcp_client.py PATH/TO/shellward
Prints MCP-OK on success; any failed check raises (non-zero exit) with the offending result.
"""

import asyncio
import json
import os
import shutil
import tempfile
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def get(obj, snake, camel):
    """An attribute under its SDK 2.x (snake_case) or 1.x (camelCase) name."""
    if hasattr(obj, snake):
        return getattr(obj, snake)
    return getattr(obj, camel)


def is_error(result):
    return bool(get(result, "is_error", "isError"))


def data(result):
    """The structured result of a tool call (falls back to the JSON text block)."""
    structured = get(result, "structured_content", "structuredContent")
    if structured is not None:
        return structured
    return json.loads(result.content[0].text)


def check(cond, what, result=None):
    if not cond:
        raise AssertionError(f"{what}: {result!r}")


async def main(binary):
    # The server runs in a directory of its own: its workspace, whose changes the undo tools record.
    workspace = tempfile.mkdtemp(prefix="mcp-client-workspace-")
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ), cwd=workspace)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            check(get(init, "server_info", "serverInfo").name == "shellward", "server name", init)

            tools = (await s.list_tools()).tools
            names = sorted(t.name for t in tools)
            check(names == ["changes_list", "changes_undo", "execute", "process_input", "process_list", "process_output",
                            "process_signal"], "tool names", names)
            execute = next(t for t in tools if t.name == "execute")
            for field in ["command", "timeout", "workdir", "run_in_background"]:
                check(field in get(execute, "input_schema", "inputSchema")["properties"], f"execute schema has {field}", execute)
            check("run_in_background" in execute.description and "&" in execute.description,
                  "execute description explains backgrounding", execute.description)

            # Foreground.
            r = await s.call_tool("execute", {"command": "echo hello"})
            d = data(r)
            check(not is_error(r) and d["success"] and d["exit_code"] == 0 and d["output"] == "hello\n", "foreground", d)

            r = await s.call_tool("execute", {"command": "echo nope; exit 4"})
            d = data(r)
            check(d["exit_code"] == 4 and not d["success"], "failing command", d)

            # Background, asked for.
            r = await s.call_tool("execute", {"command": "echo bg-start; sleep 300", "run_in_background": True})
            d = data(r)
            check(d["running"] and d["background_process_id"], "background start", d)
            bg = d["background_process_id"]

            # Trailing & becomes a tracked background process, with a note.
            r = await s.call_tool("execute", {"command": "echo amp-start; sleep 300 &"})
            d = data(r)
            check(d["running"] and d["background_process_id"] and any("&" in n for n in d["notes"]),
                  "trailing & promoted", d)
            amp = d["background_process_id"]
            check(amp != bg, "distinct ids", d)

            # Read output incrementally.
            r = await s.call_tool("process_output", {"process_id": bg, "cursor": 0, "wait": "5s"})
            d = data(r)
            check(d["output"] == "bg-start\n" and d["running"] and d["cursor"] == len("bg-start\n"), "output", d)
            r = await s.call_tool("process_output", {"process_id": bg, "cursor": d["cursor"], "wait": "200ms"})
            d = data(r)
            check(d["output"] == "" and d["running"], "no new output", d)

            # List: both running.
            r = await s.call_tool("process_list", {})
            d = data(r)
            listed = {p["process_id"]: p for p in d["processes"]}
            check(bg in listed and amp in listed and listed[bg]["running"] and listed[amp]["running"], "list", d)

            # Signal both.
            r = await s.call_tool("process_signal", {"process_id": bg, "signal": "terminate"})
            d = data(r)
            check(d["success"] and not d["running"], "terminate", d)
            r = await s.call_tool("process_signal", {"process_id": amp, "signal": "kill"})
            d = data(r)
            check(d["success"] and not d["running"], "kill", d)
            r = await s.call_tool("process_list", {})
            d = data(r)
            check(all(not p["running"] for p in d["processes"]), "all stopped", d)

            # Bad arguments: an error result, and the server keeps answering.
            r = await s.call_tool("execute", {"command": "ls", "timeout": "soon"})
            check(is_error(r) and "500ms" in r.content[0].text, "bad timeout", r)
            r = await s.call_tool("process_signal", {"process_id": bg, "signal": "hup"})
            check(is_error(r), "bad signal", r)
            r = await s.call_tool("process_output", {"process_id": "p999"})
            check(is_error(r) and "p999" in r.content[0].text, "unknown process", r)
            r = await s.call_tool("execute", {"command": "echo still-here"})
            check(data(r)["output"] == "still-here\n", "still answering", r)

            # Progress: a call with a progress callback hears about its running command about once a second, with
            # the elapsed seconds rising and the output's last line.
            seen = []

            async def on_progress(progress, total, message):
                seen.append((progress, message or ""))

            r = await s.call_tool(
                "execute",
                {"command": "echo first; sleep 2.5; echo second; sleep 2.5; echo done"},
                progress_callback=on_progress,
            )
            check(data(r)["output"].endswith("done\n"), "the reported run ends", r)
            check(3 <= len(seen) <= 10, "about one notification a second", seen)
            check(all(b[0] > a[0] for a, b in zip(seen, seen[1:])), "progress rises", seen)
            check(all("running for" in m for _, m in seen), "elapsed time in each", seen)
            check(any("first" in m for _, m in seen) and any("second" in m for _, m in seen), "the last line", seen)

            # Undo: what a command changed is listed and taken back (the SDK checks each result against its schema).
            r = await s.call_tool("execute", {"command": "echo undo-me > undo.txt"})
            made = data(r)["process_id"]
            check(os.path.exists(os.path.join(workspace, "undo.txt")), "the file was made", r)
            r = await s.call_tool("changes_list", {})
            d = data(r)
            check(not is_error(r) and d["commands"][0]["process_id"] == made
                  and d["commands"][0]["changes"] == [{"path": "undo.txt", "kind": "created", "entry": "file",
                                                       "size_after": 8}], "changes_list", d)
            r = await s.call_tool("changes_undo", {})
            d = data(r)
            check(not is_error(r) and d["process_id"] == made and d["removed"] == ["undo.txt"], "changes_undo", d)
            check(not os.path.exists(os.path.join(workspace, "undo.txt")), "the file is gone", d)
            r = await s.call_tool("changes_undo", {"process_id": made})
            check(is_error(r) and "already undone" in r.content[0].text, "a second undo is refused", r)

            # A process left running is stopped when the client disconnects.
            r = await s.call_tool("execute", {"command": "sleep 301", "run_in_background": True})
            check(data(r)["running"], "left running", r)
    shutil.rmtree(workspace, ignore_errors=True)
    print("MCP-OK")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
