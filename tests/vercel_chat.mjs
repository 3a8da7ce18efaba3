// Drives a nacelle server's POST /api/chat with the `ai` package's own client parts, as
// useChat does: DefaultChatTransport sends the chat and parses the stream (checking each
// chunk against the package's schema), readUIMessageStream folds the chunks into the
// assistant's UIMessage, validateUIMessages checks the conversation after every request.
//
// Usage: NODE_PATH=<dir with node_modules/ai> node vercel_chat.mjs < spec.json
// spec: {"api": "http://127.0.0.1:PORT/api/chat", "chatId": "...", "headers": {...},
//        "turns": [{"text": "hello"}, {"approve": true} | {"approve": false, "reason": "..."}]}
// Prints one JSON object: {"turns": [{"chunks": [...], "errors": [...], "ready": bool,
// "status": "ok" | "failed: ..."}], "messages": [...], "valid": true | "error text"}.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const require = createRequire(path.join(process.env.NACELLE_AI_SDK || process.cwd(), "x.js"));
const ai = await import(pathToFileURL(require.resolve("ai")).href);
const {
  DefaultChatTransport, readUIMessageStream, validateUIMessages,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} = ai;

let input = "";
for await (const piece of process.stdin) input += piece;
const spec = JSON.parse(input);
const transport = new DefaultChatTransport({ api: spec.api, headers: spec.headers || {} });
let messages = [];
let counter = 0;
const report = { turns: [], messages: null, valid: null };

for (const turn of spec.turns) {
  const record = { chunks: [], errors: [], ready: null, status: "ok" };
  report.turns.push(record);
  let base;
  let messageId;
  if ("text" in turn) {
    messages.push({ id: `user-${++counter}`, role: "user", parts: [{ type: "text", text: turn.text }] });
  } else {
    // What Chat.addToolApprovalResponse does to the part the person answered.
    base = messages[messages.length - 1];
    base = {
      ...base,
      parts: base.parts.map((part) => part.state === "approval-requested"
        ? { ...part, state: "approval-responded",
            approval: { ...part.approval, approved: turn.approve,
                        ...(turn.reason ? { reason: turn.reason } : {}) } }
        : part),
    };
    messages[messages.length - 1] = base;
    messageId = base.id;
    record.ready = lastAssistantMessageIsCompleteWithApprovalResponses({ messages });
  }
  try {
    const stream = await transport.sendMessages({
      chatId: spec.chatId, messages, trigger: "submit-message", messageId,
      abortSignal: undefined,
    });
    const recorded = stream.pipeThrough(new TransformStream({
      transform(chunk, controller) { record.chunks.push(chunk); controller.enqueue(chunk); },
    }));
    let last;
    for await (const snapshot of readUIMessageStream({
      message: base, stream: recorded, onError: (error) => record.errors.push(String(error.message || error)),
    })) {
      last = snapshot;
    }
    if (base) messages[messages.length - 1] = last ?? base;
    else if (last) messages.push(last);
  } catch (error) {
    record.status = `failed: ${error && error.message ? error.message : String(error)}`;
  }
}
report.messages = messages;
try {
  await validateUIMessages({ messages });
  report.valid = true;
} catch (error) {
  report.valid = String(error && error.message ? error.message : error);
}
process.stdout.write(JSON.stringify(report));
