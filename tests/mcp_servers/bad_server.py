"""A tiny hand-written MCP server over stdio, standard library only, that misbehaves
on request: it crashes, prints garbage, never answers, refuses the handshake or
speaks an unknown protocol version. It also does what the SDK server cannot be made
to do on cue: paginate ``tools/list``, send a notification and a server-to-client
``ping`` between a request and its answer, ask the client for input (``ask``: an
``elicitation/create`` whether or not the client declared it), and report what it
received.

``python bad_server.py [MODE]``. Modes: ``ok`` (the default: behaves), ``exit-at-start``
(complains on stderr and exits 2), ``mute`` (never answers ``initialize``),
``silent-probe`` (never answers ``server/discover``, where other 2025 servers answer
method-not-found), ``refuse`` (answers ``initialize`` with a JSON-RPC error), ``not-rpc`` (answers with JSON that is
not JSON-RPC), ``old-version`` (answers protocol version 1999-01-01) and ``linger``
(ignores its closed stdin, so only a signal stops it). In every mode the tools
``crash``, ``garbage`` and ``hang`` misbehave when called, and ``emit`` writes one of
the lines in ``BAD_LINES`` (chosen by its ``line`` argument) instead of an answer:
JSON nested too deeply to read, bytes that are not UTF-8, JSON values that are not
objects, answers whose ``id`` has the wrong type; ``deaf`` answers and then stops
reading its stdin, so a large enough message blocks the client's write; ``flood``
sends many ``list_changed`` notifications or elicitation requests at once. Standard
library only, so the client's failure handling is tested on every Python nacelle
supports.
"""

import json
import os
import subprocess
import sys
import time

TOOLS = [
    {"name": "echo", "description": "Repeat the text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "hang", "description": "Never answer.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "history", "description": "The methods received so far.",
     "annotations": {"readOnlyHint": True},
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "crash", "description": "Exit mid-call.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "garbage", "description": "Print something that is not JSON.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "mixed", "description": "Every kind of content block.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "dotted.name", "description": "",
     "inputSchema": {"type": "object"}},
    {"name": "environment", "description": "The names of the environment variables.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "spawn", "description": "Start a long-lived grandchild; return its pid.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "deaf", "description": "Answer, then stop reading stdin for a minute.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "ask", "description": "Ask the client for input (elicitation/create); "
                                   "return its answer as JSON.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "emit", "description": "Write one of the bad lines instead of an answer.",
     "inputSchema": {"type": "object", "properties": {"line": {"type": "string"}},
                     "required": ["line"]}},
    {"name": "flood", "description": "Send `count` list_changed notifications, or "
                                     "elicitation requests, then answer with what came back.",
     "inputSchema": {"type": "object", "properties": {
         "what": {"type": "string", "enum": ["list_changed", "elicit"]},
         "count": {"type": "integer"}}, "required": ["what", "count"]}},
]
DEEP = 100000  # json raises RecursionError long before this depth
# Lines a server might write instead of an answer, each a function of the id of the
# request being answered. The first three name that request in a way the client can
# still read; the others cannot be tied to any request.
BAD_LINES = {
    "deep-answer": lambda i: b'{"jsonrpc":"2.0","id":%d,"result":%s%s}' % (
        i, b"[" * DEEP, b"]" * DEEP),
    "deep-answer-id-last": lambda i: b'{"jsonrpc":"2.0","result":%s%s,"id":%d}' % (
        b"[" * DEEP, b"]" * DEEP, i),
    "not-utf8-answer": lambda i: b'{"jsonrpc":"2.0","id":%d,"result":{"content":'
                                 b'[{"type":"text","text":"caf\xe9 \xff"}]}}' % i,
    "deep-array": lambda i: b"[" * DEEP + b"]" * DEEP,
    "junk-bytes": lambda i: b"\x00\x9c\xfe\xff binary junk \x1b[31m",
    "number": lambda i: b"42",
    "string": lambda i: b'"a string"',
    "empty-batch": lambda i: b"[]",
    "batch-of-numbers": lambda i: b"[1, 2]",
    "list-id": lambda i: b'{"jsonrpc":"2.0","id":[%d],"result":{}}' % i,
    "object-id": lambda i: b'{"jsonrpc":"2.0","id":{"n":%d},"result":{}}' % i,
    "boolean-id": lambda i: b'{"jsonrpc":"2.0","id":true,"result":{}}',
    "fractional-id": lambda i: b'{"jsonrpc":"2.0","id":%d.5,"result":{}}' % i,
    "null-id-error": lambda i: b'{"jsonrpc":"2.0","id":null,"error":'
                               b'{"code":-32700,"message":"Parse error"}}',
}
PAGE = 3
MIXED = [
    {"type": "text", "text": "first"},
    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
    {"type": "resource_link", "uri": "file:///tmp/a.txt", "name": "a.txt",
     "mimeType": "text/plain", "description": "a file"},
    {"type": "resource", "resource": {"uri": "mem://note", "mimeType": "text/plain",
                                      "text": "inline note"}},
    {"type": "resource", "resource": {"uri": "mem://blob", "blob": "AAAAAA=="}},
    {"type": "text", "text": "last"},
]

received = []


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def reply(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


# The client's answers awaited: the id of our elicitation request -> the tools/call id.
asking = {}
# A flood of elicitations: the tools/call id -> [requests still unanswered, answers].
flooding = {}


def call(mode, request_id, name, arguments):
    if name == "echo":
        reply(request_id, {"content": [{"type": "text", "text": arguments.get("text", "")}]})
    elif name == "history":
        reply(request_id, {"content": [{"type": "text", "text": json.dumps(received)}]})
    elif name == "crash":
        sys.stderr.write("boom: the server fell over\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "garbage":
        sys.stdout.write("Traceback (most recent call last): oops\n")
        sys.stdout.flush()
    elif name == "mixed":
        reply(request_id, {"content": MIXED})
    elif name == "environment":
        reply(request_id, {"content": [{"type": "text", "text": json.dumps(sorted(os.environ))}]})
    elif name == "spawn":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        reply(request_id, {"content": [{"type": "text", "text": str(child.pid)}]})
    elif name == "emit":
        sys.stdout.buffer.write(BAD_LINES[arguments["line"]](request_id) + b"\n")
        sys.stdout.buffer.flush()
    elif name == "deaf":
        reply(request_id, {"content": [{"type": "text", "text": "not listening any more"}]})
        time.sleep(60)
    elif name == "hang":
        pass
    elif name == "flood" and arguments["what"] == "list_changed":
        for _ in range(arguments["count"]):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        reply(request_id, {"content": [{"type": "text", "text": "flooded"}]})
    elif name == "flood":
        flooding[request_id] = [arguments["count"], []]
        for i in range(arguments["count"]):
            send({"jsonrpc": "2.0", "id": f"flood-{request_id}-{i}", "method": "elicitation/create",
                  "params": {"mode": "form", "message": f"Question {i}?", "requestedSchema": {
                      "type": "object", "properties": {"name": {"type": "string"}}}}})
    elif name == "ask":
        # Answered when the client's response to this request arrives (see main).
        asking[f"ask-{request_id}"] = request_id
        send({"jsonrpc": "2.0", "id": f"ask-{request_id}", "method": "elicitation/create",
              "params": {"mode": "form", "message": "Your name?", "requestedSchema": {
                  "type": "object", "properties": {"name": {"type": "string"}}}}})
    else:
        send({"jsonrpc": "2.0", "id": request_id,
              "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    sys.stderr.write(f"bad_server starting in mode {mode}\n")
    sys.stderr.flush()
    if mode == "exit-at-start":
        sys.stderr.write("missing configuration file\n")
        sys.exit(2)
    for line in iter(sys.stdin.readline, ""):
        message = json.loads(line)
        method = message.get("method")
        received.append(method or "response:%s" % message.get("id"))
        if method == "notifications/cancelled":
            sys.stderr.write("cancelled %s\n" % message["params"]["requestId"])
            sys.stderr.flush()
        if method is None and str(message.get("id")).startswith("flood-"):
            call_id = int(message["id"].split("-")[1])
            left, answers = flooding[call_id]
            answers.append({k: message[k] for k in ("result", "error") if k in message})
            flooding[call_id][0] = left - 1
            if left == 1:
                reply(call_id, {"content": [{"type": "text", "text": json.dumps(answers)}]})
            continue
        if method is None and message.get("id") in asking:
            answer = {k: message[k] for k in ("result", "error") if k in message}
            reply(asking.pop(message["id"]), {"content": [{"type": "text",
                                                           "text": json.dumps(answer)}]})
            continue
        if "id" not in message or method is None:
            continue
        request_id = message["id"]
        if method == "server/discover" and mode == "silent-probe":
            continue
        if method == "initialize":
            if mode == "mute":
                continue
            if mode == "refuse":
                send({"jsonrpc": "2.0", "id": request_id, "error": {
                    "code": -32602, "message": "Unsupported protocol version",
                    "data": {"supported": ["1.0.0"]}}})
                continue
            if mode == "not-rpc":
                send({"hello": "world"})
                continue
            version = "1999-01-01" if mode == "old-version" else "2025-06-18"
            reply(request_id, {"protocolVersion": version,
                               "capabilities": {"tools": {"listChanged": True}},
                               "serverInfo": {"name": "bad", "version": "0"}})
        elif method == "tools/list":
            cursor = int((message.get("params") or {}).get("cursor") or 0)
            # Between the request and its answer: a notification, a log message and
            # a request the client must answer, as real servers do (the list_changed
            # only once, or the client's refresh would bring it back forever).
            if received.count("tools/list") == 1:
                send({"method": "notifications/tools/list_changed", "jsonrpc": "2.0"})
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "warning", "data": "listing tools"}})
            send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            result = {"tools": TOOLS[cursor:cursor + PAGE]}
            if cursor + PAGE < len(TOOLS):
                result["nextCursor"] = str(cursor + PAGE)
            time.sleep(0.01)
            reply(request_id, result)
        elif method == "tools/call":
            params = message.get("params") or {}
            call(mode, request_id, params.get("name"), params.get("arguments") or {})
        elif method == "ping":
            reply(request_id, {})
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found"}})
    if mode == "linger":  # ignore the closed stdin; only a signal ends this server
        time.sleep(60)


if __name__ == "__main__":
    main()
