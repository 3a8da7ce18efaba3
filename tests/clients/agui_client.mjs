// Drives @ag-ui/client's HttpAgent against a server, for tests/test_serve_agui_route.py.
//
// Usage: node agui_client.mjs < scenario.json, where NACELLE_AGUI_CLIENT is the npm
// prefix @ag-ui/client is installed under and the scenario is
//   {"url": ..., "threadId": ..., "steps": [{"messages": [...], "params": {...}}, ...]}.
// Each step appends its messages to the agent's and calls runAgent(params) — the
// client's own pipeline: its schema enforcement, its verifier (verifyEvents) and its
// reducer. Prints one JSON object: per step the events seen, the result, the new
// messages, the pending interrupts and any error; the agent's messages at the end;
// and every warning the client printed (enforcement strips unknown fields with one).
import { createRequire } from "node:module";
import { join } from "node:path";

const prefix = process.env.NACELLE_AGUI_CLIENT;
if (!prefix) {
  console.error("NACELLE_AGUI_CLIENT is not set");
  process.exit(2);
}
const require = createRequire(join(prefix, "package.json"));
const { HttpAgent } = require("@ag-ui/client");

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

let text = "";
for await (const chunk of process.stdin) text += chunk;
const scenario = JSON.parse(text);

const agent = new HttpAgent({ url: scenario.url, threadId: scenario.threadId,
                              headers: scenario.headers ?? {} });
const steps = [];
for (const step of scenario.steps) {
  for (const message of step.messages ?? []) agent.messages.push(message);
  const events = [];
  const out = { events };
  try {
    const result = await agent.runAgent(step.params ?? {}, {
      onEvent: ({ event }) => { events.push(event); },
    });
    out.result = result.result ?? null;
    out.newMessages = result.newMessages;
  } catch (error) {
    out.error = String(error?.message ?? error);
  }
  out.pendingInterrupts = agent.pendingInterrupts;
  steps.push(out);
  if (out.error) break;
}
process.stdout.write(JSON.stringify({ steps, messages: agent.messages, warnings }));
