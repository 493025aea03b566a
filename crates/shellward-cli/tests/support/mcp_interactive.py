"""Interactive processes over MCP with the official Python SDK: `execute` with `interactive`/`tty`, `process_input`.

Usage: python mcp_interactive.py PATH/TO/shellward
Prints MCP-INTERACTIVE-OK on success; any failed check raises (non-zero exit) with the offending result.
"""

import asyncio
import os
import socket
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_client import check, data, is_error


def text_of(result):
    return result.content[0].text


async def main(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            check("process_input" in tools, "process_input listed", list(tools))
            ex = tools["execute"]
            for word in ["interactive", "tty", "on_timeout"]:
                check(word in ex.description, f"execute description explains {word}", ex.description)
            check("idle" in tools["process_output"].description, "process_output explains idle",
                  tools["process_output"].description)

            # A Python REPL answers on a pipe and on a terminal.
            for mode in [{"interactive": True}, {"tty": True}]:
                r = await s.call_tool("execute", {"command": "python3 -i -q", **mode})
                d = data(r)
                check(not is_error(r) and d["running"] and d["process_id"], f"REPL starts {mode}", d)
                pid = d["process_id"]
                started = time.monotonic()
                r = await s.call_tool("process_input", {"process_id": pid, "text": "print(6*7)\n"})
                took = time.monotonic() - started
                d = data(r)
                check("42" in d["output"], f"REPL answers {mode}", d)
                # Answered when the next prompt waits for input, not after the 1 s idle window.
                check(d.get("waiting_for_input") is True, f"waiting for input {mode}", d)
                check(took < 0.4, f"REPL exchange within 0.4 s {mode} (took {took:.3f} s)", d)
                check("\r" not in d["output"] and "\x1b" not in d["output"], f"clean view {mode}", d)
                check("42" in text_of(r), f"the model's text shows the answer {mode}", text_of(r))
                r = await s.call_tool("process_input", {"process_id": pid, "close_stdin": True, "wait": "10s"})
                d = data(r)
                check(not d["running"] and d["exit_code"] == 0, f"REPL ends at end of input {mode}", d)

            # A background server is answered when it listens, naming its port; a failing start with its error.
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            started = time.monotonic()
            r = await s.call_tool("execute", {
                "command": f"sleep 1.5; exec python3 -m http.server --bind 127.0.0.1 {port}",
                "run_in_background": True,
            })
            took = time.monotonic() - started
            d = data(r)
            check(d["running"] and d.get("listening") == [f"tcp 127.0.0.1:{port}"], "ready names its port", d)
            check(took < 2.9, f"ready answered at once (took {took:.2f} s)", d)
            await s.call_tool("process_signal", {"process_id": d["process_id"], "signal": "kill"})
            r = await s.call_tool("execute", {
                "command": "sleep 1.2; echo 'address already in use' >&2; exit 1",
                "run_in_background": True,
            })
            d = data(r)
            check(not d["running"] and d["exit_code"] == 1 and "already in use" in d["output"],
                  "a failed start is answered with its exit and error", d)

            # A process blocked reading its input is reported waiting for it; a sleeping one is not.
            r = await s.call_tool("execute", {"command": "read line; echo got $line", "interactive": True})
            reader = data(r)["process_id"]
            d = data(await s.call_tool("process_output", {"process_id": reader, "wait": "2s"}))
            check(d.get("waiting_for_input") is True, "a reader waits for input", d)
            r = await s.call_tool("execute", {"command": "sleep 30", "interactive": True})
            sleeper = data(r)["process_id"]
            d = data(await s.call_tool("process_output", {"process_id": sleeper, "wait": "1s"}))
            check(d.get("waiting_for_input") is not True, "a sleeper does not wait for input", d)
            for p in (reader, sleeper):
                await s.call_tool("process_signal", {"process_id": p, "signal": "kill"})

            # The session keeps its working directory.
            import tempfile
            with tempfile.TemporaryDirectory() as tmp:
                there = os.path.realpath(tmp)
                await s.call_tool("execute", {"command": f"cd {there}"})
                d = data(await s.call_tool("execute", {"command": "pwd"}))
                check(d["output"] == there + "\n", "cd persists in the session", d)
                # A retried execute with a client token starts nothing new; the token with another call is refused.
                tally = os.path.join(there, "tally")
                call = {"command": f"echo run >> {tally}; echo ok", "client_token": "mcp-retry-1"}
                first = data(await s.call_tool("execute", call))
                again = data(await s.call_tool("execute", call))
                check(again.get("attached") is True and again["process_id"] == first["process_id"],
                      "a retry attaches to the first call", again)
                with open(tally) as f:
                    check(f.read() == "run\n", "the retry ran nothing", tally)
                r = await s.call_tool("execute", {"command": "echo other", "client_token": "mcp-retry-1"})
                check(is_error(r) and "client_token" in text_of(r), "the token with another call is refused",
                      text_of(r))
                await s.call_tool("execute", {"command": "cd /"})

            # A shell prompt (read -p) is answered.
            r = await s.call_tool("execute", {"command": "read -p 'name? ' n; echo \"hello $n\"", "tty": True})
            d = data(r)
            check("name? " in d["output"], "prompt shown", d)
            r = await s.call_tool("process_input", {"process_id": d["process_id"], "text": "bob\n"})
            d = data(r)
            check("hello bob" in d["output"], "prompt answered", d)

            # Only a terminal is a tty.
            r = await s.call_tool("execute", {"command": "tty -s", "tty": True})
            check(data(r)["exit_code"] == 0, "tty -s on a terminal", data(r))
            r = await s.call_tool("execute", {"command": "tty -s"})
            check(data(r)["exit_code"] != 0, "tty -s without a terminal", data(r))

            # Ctrl-C interrupts the foreground job of an interactive shell, not the shell.
            r = await s.call_tool("execute", {"command": "sh", "tty": True})
            sh = data(r)["process_id"]
            await s.call_tool("process_input", {"process_id": sh, "text": "sleep 100\n", "idle": "500ms"})
            r = await s.call_tool("process_input", {"process_id": sh, "text": "\u0003", "idle": "500ms"})
            r = await s.call_tool("process_input", {"process_id": sh, "text": "echo still-here\n"})
            d = data(r)
            check("still-here" in d["output"] and d["running"], "shell survives Ctrl-C", d)
            r = await s.call_tool("process_signal", {"process_id": sh, "signal": "kill"})
            check(not is_error(r), "shell stopped", r)

            # Closing stdin ends cat.
            r = await s.call_tool("execute", {"command": "cat", "interactive": True})
            cat = data(r)["process_id"]
            r = await s.call_tool("process_input", {"process_id": cat, "text": "hi\n", "close_stdin": True,
                                                    "wait": "10s"})
            d = data(r)
            check(not d["running"] and d["exit_code"] == 0 and "hi" in d["output"], "cat ends", d)

            # A process that never reads: the writer gets a clear error, not a hang.
            r = await s.call_tool("execute", {"command": "sleep 60", "interactive": True})
            idle = data(r)["process_id"]
            import base64
            big = base64.b64encode(b"x" * (1 << 20)).decode()
            results = []
            for _ in range(3):
                r = await s.call_tool("process_input", {"process_id": idle, "bytes_base64": big})
                results.append(r)
                if is_error(r):
                    break
            check(is_error(results[-1]) and "did not read its input" in text_of(results[-1]),
                  "a stalled write is an error", [text_of(x) for x in results])
            await s.call_tool("process_signal", {"process_id": idle, "signal": "kill"})

            # Input to a command that is not interactive: a clear error.
            r = await s.call_tool("execute", {"command": "sleep 60", "run_in_background": True})
            plain = data(r)["background_process_id"]
            r = await s.call_tool("process_input", {"process_id": plain, "text": "x"})
            check(is_error(r) and "interactive" in text_of(r), "not interactive", text_of(r))
            await s.call_tool("process_signal", {"process_id": plain, "signal": "kill"})
    print("MCP-INTERACTIVE-OK")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    asyncio.run(main(sys.argv[1]))
