// Approvals through the official MCP TypeScript SDK's client (@modelcontextprotocol/client 2.x from npm): its
// elicitation request handler answers the form shellward shows for a command the built-in guard asks about (`shred`
// of a file of its own in a temporary directory, so whether it ran is checked on disk).
//
// Usage: node mcp_approvals.mjs PATH/TO/shellward   (NODE_PATH: a node_modules holding the client)
// Prints MCP-TS-APPROVALS-OK on success; a failed check throws (non-zero exit) with the offending result.

import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

// The client is resolved from NODE_PATH (ES modules ignore it; `require.resolve` does not).
const require = createRequire(path.join(process.env.NODE_PATH, "noop.js"));
const { Client } = await import(require.resolve("@modelcontextprotocol/client"));
const { StdioClientTransport } = await import(require.resolve("@modelcontextprotocol/client/stdio"));

function check(cond, what, value) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(value)}`);
}

const binary = process.argv[2];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shellward-ts-approvals-"));
// Removed when the script exits, whatever the outcome: a test leaves nothing in the temporary directory.
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
function victim(name) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, "data\n");
  return [file, `shred -u ${file}`];
}

async function session(capabilities, answer) {
  const client = new Client({ name: "shellward-test", version: "0" }, { capabilities });
  const asked = [];
  if (answer) {
    client.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params.message);
      return answer();
    });
  }
  await client.connect(new StdioClientTransport({ command: binary, args: ["mcp"], env: process.env }));
  return { client, asked };
}

// Approve, then decline, with the form.
let next = { action: "accept", content: { decision: "approve", remember: false } };
const { client, asked } = await session({ elicitation: { form: {} } }, () => next);
let [file, command] = victim("approved");
let r = await client.callTool({ name: "execute", arguments: { command } });
check(!r.isError && r.structuredContent.success && !fs.existsSync(file), "approved runs", r);
check(asked.length === 1 && asked[0].includes(command), "the person saw the command", asked);

[file, command] = victim("declined");
next = { action: "decline" };
r = await client.callTool({ name: "execute", arguments: { command } });
check(r.isError && r.structuredContent.denied && fs.existsSync(file), "declined runs nothing", r);
check(r.structuredContent.deny_reason.includes("declined"), "declined is said", r);
await client.close();

// A client that declares no elicitation: the deny, saying to ask the user.
const plain = await session({}, null);
[file, command] = victim("plain");
r = await plain.client.callTool({ name: "execute", arguments: { command } });
check(r.isError && fs.existsSync(file), "no elicitation: not run", r);
check(r.structuredContent.deny_reason.includes("Ask your user"), "the reason says what to do", r);
await plain.client.close();

console.log("MCP-TS-APPROVALS-OK");
