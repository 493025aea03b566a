// The host in control of a running call, through the official MCP TypeScript SDK's client
// (@modelcontextprotocol/client 2.x from npm): progress while a foreground command runs (`onprogress`), and an
// `AbortSignal` that cancels the call and so stops the command's whole tree.
//
// Usage: node mcp_control.mjs PATH/TO/shellward   (NODE_PATH: a node_modules holding the client)
// Prints the cancelled command's marker file path and MCP-TS-CONTROL-OK on success; a failed check throws.

import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH, "noop.js"));
const { Client } = await import(require.resolve("@modelcontextprotocol/client"));
const { StdioClientTransport } = await import(require.resolve("@modelcontextprotocol/client/stdio"));

function check(cond, what, value) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(value)}`);
}

const client = new Client({ name: "shellward-test", version: "0" }, { capabilities: {} });
await client.connect(new StdioClientTransport({ command: process.argv[2], args: ["mcp"], env: process.env }));

// Progress: a 3 s foreground command reports about once a second, with the last line of output.
const updates = [];
const r = await client.callTool(
  { name: "execute", arguments: { command: "echo step-one; sleep 3; echo done", timeout: "30s" } },
  { onprogress: (p) => updates.push(p), resetTimeoutOnProgress: true },
);
check(!r.isError && r.structuredContent.output === "step-one\ndone\n", "the command's result", r);
check(updates.length >= 1 && updates.length <= 10, "progress about once a second", updates);
check(updates.some((p) => (p.message || "").includes("step-one")), "progress carries the last line", updates);

// Cancel: aborting the call stops the command; the cancelled call answers nothing, the next one works at once.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shellward-ts-cancel-"));
// Removed when the script exits, whatever the outcome: a test leaves nothing in the temporary directory.
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
const marker = path.join(dir, "still-running");
const controller = new AbortController();
const pending = client.callTool(
  { name: "execute", arguments: { command: `sleep 1; sleep 300; touch ${marker}`, timeout: "10m" } },
  { signal: controller.signal },
);
await new Promise((done) => setTimeout(done, 1500));
controller.abort("the user pressed Esc");
let rejected = false;
try {
  await pending;
} catch {
  rejected = true;
}
check(rejected, "the aborted call rejects", null);
const next = await client.callTool({ name: "execute", arguments: { command: "echo next" } });
check(next.structuredContent.output === "next\n", "the next call is served", next);
// The tree is stopped as a timeout stops it (terminate, a grace period, kill): poll until it is gone.
const cancelledAt = Date.now();
let list;
for (;;) {
  list = await client.callTool({ name: "process_list", arguments: {} });
  const running = (list.structuredContent.processes || []).filter((p) => p.running);
  if (running.length === 0 || Date.now() - cancelledAt > 10_000) break;
  await new Promise((done) => setTimeout(done, 100));
}
check(!list.structuredContent.processes.some((p) => p.running), "nothing of the cancelled call runs", list.structuredContent);
console.log(`stopped within ${Date.now() - cancelledAt} ms`);
check(!fs.existsSync(marker), "the command never reached its end", marker);
await client.close();
console.log("MCP-TS-CONTROL-OK");
