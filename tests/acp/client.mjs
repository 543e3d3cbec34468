// An ACP client built on the official TypeScript SDK (`@agentclientprotocol/sdk`, its client
// side), driving `wright acp` through a scenario for tests/tests/acp.rs. The SDK validates
// every message wright sends against the published schema (zod), so a malformed update fails
// the scenario here, not only in the Rust assertions.
//
// Usage: node client.mjs SCENARIO.json, with WRIGHT_BIN naming the binary and ACP_NODE_MODULES
// the node_modules that `cargo xtask e2e acp --install` filled (target/editors/acp-node). The scenario is
// {"fs": {"read": bool, "write": bool}, "unsaved": {ABSOLUTE_PATH: TEXT},
//  "permissions": [OPTION_ID, …], "steps": [STEP, …]}; each line of stdout is one JSON
// record of what happened (updates, requests from the agent, answers, errors), which the Rust
// test reads.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const acp = await import(
  pathToFileURL(join(process.env.ACP_NODE_MODULES, "@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href
);

const scenario = JSON.parse(readFileSync(process.argv[2], "utf8"));
const record = (entry) => process.stdout.write(JSON.stringify(entry) + "\n");
const unsaved = new Map(Object.entries(scenario.unsaved ?? {}));
const permissions = [...(scenario.permissions ?? [])];

// Waiters for an update of a kind (a step that acts when the turn has begun).
const waiters = [];
function onUpdate(update) {
  for (const waiter of waiters.splice(0)) {
    if (waiter.kind === update.sessionUpdate) waiter.resolve();
    else waiters.push(waiter);
  }
}

function start() {
  const child = spawn(process.env.WRIGHT_BIN, ["acp"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const app = acp
    .client()
    .onNotification("session/update", ({ params }) => {
      record({ type: "update", sessionId: params.sessionId, update: params.update });
      onUpdate(params.update);
    })
    .onRequest("fs/read_text_file", ({ params }) => {
      record({ type: "request", method: "fs/read_text_file", params });
      if (unsaved.has(params.path)) return { content: unsaved.get(params.path) };
      return { content: readFileSync(params.path, "utf8") };
    })
    .onRequest("fs/write_text_file", ({ params }) => {
      record({ type: "request", method: "fs/write_text_file", params });
      // The editor keeps it as an unsaved buffer: later reads see it, the disk does not.
      unsaved.set(params.path, params.content);
      return {};
    })
    .onRequest("session/request_permission", ({ params }) => {
      record({ type: "request", method: "session/request_permission", params });
      const optionId = permissions.shift() ?? "reject_once";
      return { outcome: { outcome: "selected", optionId } };
    });
  return { child, app };
}

async function run() {
  // The steps up to each "restart" run against one process; the next segment on a new one
  // (the same data directory, so its journal is what session/load finds).
  const segments = [[]];
  for (const step of scenario.steps) {
    if (step.op === "restart") segments.push([]);
    else segments.at(-1).push(step);
  }
  const state = { sessionId: scenario.sessionId ?? null };
  for (const steps of segments) {
    const { child, app } = start();
    const exited = new Promise((resolve) => child.on("exit", resolve));
    await app.connectWith(
      acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)),
      async (agent) => {
        for (const step of steps) await perform(agent, child, state, step);
      },
    );
    child.stdin.end();
    record({ type: "exit", code: await exited });
  }
}

async function perform(agent, child, state, step) {
  const answered = (value) => record({ type: "answer", op: step.op, result: value });
  try {
    switch (step.op) {
      case "initialize":
        answered(
          await agent.request("initialize", {
            protocolVersion: 1,
            clientCapabilities: {
              fs: { readTextFile: !!scenario.fs?.read, writeTextFile: !!scenario.fs?.write },
              terminal: true,
            },
            clientInfo: { name: "wright-tests", version: "1" },
          }),
        );
        break;
      case "authenticate":
        answered(await agent.request("authenticate", { methodId: step.methodId ?? "none" }));
        break;
      case "new": {
        const result = await agent.request("session/new", { cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
        state.sessionId = result.sessionId;
        answered(result);
        break;
      }
      case "load":
        answered(
          await agent.request("session/load", {
            sessionId: state.sessionId,
            cwd: step.cwd,
            mcpServers: step.mcpServers ?? [],
          }),
        );
        break;
      case "prompt":
        answered(await agent.request("session/prompt", { sessionId: state.sessionId, prompt: step.prompt }));
        break;
      case "prompt_then_cancel": {
        // The prompt, then session/cancel once the answer has begun to stream.
        const begun = new Promise((resolve) => waiters.push({ kind: step.after, resolve }));
        const prompt = agent.request("session/prompt", { sessionId: state.sessionId, prompt: step.prompt });
        await begun;
        await agent.notify("session/cancel", { sessionId: state.sessionId });
        record({ type: "cancelled" });
        answered(await prompt);
        break;
      }
      case "set_mode":
        answered(await agent.request("session/set_mode", { sessionId: state.sessionId, modeId: step.modeId }));
        break;
      case "set_model":
        answered(
          await agent.request("session/set_config_option", {
            sessionId: state.sessionId,
            configId: "model",
            value: step.value,
          }),
        );
        break;
      case "raw":
        // Bytes past the SDK, straight onto wright's stdin.
        child.stdin.write(step.line);
        record({ type: "raw" });
        break;
      default:
        throw new Error(`unknown step ${step.op}`);
    }
  } catch (error) {
    record({ type: "error", op: step.op, code: error?.code ?? null, message: String(error?.message ?? error) });
  }
}

run().then(
  () => process.exit(0),
  (error) => {
    record({ type: "fatal", message: String(error?.stack ?? error) });
    process.exit(1);
  },
);
