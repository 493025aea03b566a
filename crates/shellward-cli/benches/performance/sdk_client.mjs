// The MCP round trip as a TypeScript agent host makes it: the stock SDK's Client.callTool (which validates the
// structured result against the tool's output schema, compiled once by ajv at listTools), against several servers at
// once, calls interleaved.
//
// Usage: node sdk_client.mjs N LABEL=ARGV_JSON=CALL_JSON ...  (each server: a label, its argv as JSON, the call's
// {"name", "arguments"} as JSON). Run with NODE_PATH naming the node_modules that holds @modelcontextprotocol/sdk.
// Prints one JSON line: {label: [milliseconds per call, ...], ...}.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NODE_PATH ?? process.cwd(), 'x.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const n = Number(process.argv[2]);
const servers = process.argv.slice(3).map((spec) => {
  // LABEL=[argv…]={call…}: the label ends at the first `=`, the argv at the `=` before the call's `{`.
  const first = spec.indexOf('=');
  const second = spec.indexOf('={', first + 1);
  const label = spec.slice(0, first);
  return { label, argv: JSON.parse(spec.slice(first + 1, second)), call: JSON.parse(spec.slice(second + 1)) };
});
const sessions = [];
for (const s of servers) {
  const transport = new StdioClientTransport({ command: s.argv[0], args: s.argv.slice(1), env: process.env, stderr: 'ignore' });
  const client = new Client({ name: 'shellward-bench', version: '1.0.0' });
  await client.connect(transport);
  await client.listTools();
  sessions.push({ ...s, client });
}
const times = Object.fromEntries(sessions.map((s) => [s.label, []]));
for (let i = 0; i < n + 10; i++) {
  for (const s of sessions) {
    const started = performance.now();
    const result = await s.client.callTool({ name: s.call.name, arguments: s.call.arguments });
    const elapsed = performance.now() - started;
    if (result.isError) {
      console.error(`${s.label}: the call failed: ${JSON.stringify(result.content)}`);
      process.exit(1);
    }
    if (i >= 10) times[s.label].push(elapsed);
  }
}
console.log(JSON.stringify(times));
for (const s of sessions) await s.client.close();
