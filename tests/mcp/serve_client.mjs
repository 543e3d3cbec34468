// Drives `wright mcp serve` with the TypeScript SDK's client, for tests/tests/mcp_serve.rs.
//
// Usage: node serve_client.mjs NODE_MODULES stdio WRIGHT ROOT   (spawns `WRIGHT mcp serve --root ROOT`)
//        node serve_client.mjs NODE_MODULES http URL
// Reads a JSON array of calls on stdin, [{"tool": NAME, "arguments": {...}}, ...], and prints
// one JSON document: {"server": serverInfo, "tools": [the listed tools], "results": [each
// call's result, or {"protocolError": message}]}.

import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [modules, mode, ...rest] = process.argv.slice(2);
const sdk = (path) =>
  import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");

let transport;
if (mode === "stdio") {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const [wright, root] = rest;
  transport = new StdioClientTransport({
    command: wright,
    args: ["mcp", "serve", "--root", root],
    env: process.env,
    stderr: "inherit",
  });
} else if (mode === "http") {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else {
  throw new Error(`unknown mode ${mode}`);
}

let input = "";
for await (const chunk of process.stdin) input += chunk;
const calls = JSON.parse(input || "[]");

const client = new Client({ name: "wright-serve-test", version: "1.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const results = [];
for (const call of calls) {
  try {
    results.push(
      await client.callTool({ name: call.tool, arguments: call.arguments }, undefined, {
        timeout: 120000,
      }),
    );
  } catch (error) {
    results.push({ protocolError: String(error?.message ?? error) });
  }
}
const server = client.getServerVersion();
await client.close();
process.stdout.write(JSON.stringify({ server, tools: listed.tools, results }) + "\n");
