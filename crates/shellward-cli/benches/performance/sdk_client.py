"""The MCP round trip as a Python agent host makes it: the stock SDK's ClientSession.call_tool (which validates the
structured result against the tool's output schema), against two servers at once, calls interleaved.

Usage: sdk_client.py N NAME=COMMAND_JSON=ARGS_JSON ...  (each server: a label, its argv as JSON, the call's
{"name", "arguments"} as JSON). Prints one JSON line: {label: [milliseconds per call, ...], ...}.
"""

import asyncio
import json
import os
import sys
import time
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    n = int(sys.argv[1])
    servers = []
    for spec in sys.argv[2:]:
        # LABEL=[argv…]={call…}: the label ends at the first "=", the argv at the "=" before the call's "{".
        label, rest = spec.split("=", 1)
        argv, call = rest.split("={", 1)
        servers.append((label, json.loads(argv), json.loads("{" + call)))
    async with AsyncExitStack() as stack:
        sessions = []
        for label, argv, call in servers:
            # The bench's whole environment (the SDK passes a reduced one by default).
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()
            sessions.append((label, session, call))
        times = {label: [] for label, _, _ in sessions}
        for i in range(n + 10):
            for label, session, call in sessions:
                started = time.perf_counter()
                result = await session.call_tool(call["name"], call["arguments"])
                elapsed = (time.perf_counter() - started) * 1000
                if result.isError:
                    raise SystemExit(f"{label}: the call failed: {result.content}")
                if i >= 10:  # the first ten warm up
                    times[label].append(elapsed)
        print(json.dumps(times))


asyncio.run(main())
