"""A hand-written streamable HTTP MCP endpoint on 127.0.0.1, scripted per test.

By default it behaves: ``initialize`` answers with JSON and a session id,
notifications get 202, ``tools/list`` lists ``echo``, ``tools/call`` answers as an SSE
stream with CRLF line ends and an empty priming event, ``GET`` is 405 and
``DELETE`` 200. A test replaces the answer to any JSON-RPC method with
``endpoint.on[method] = fn(message) -> Answer`` to make it misbehave, and reads
back every request in ``endpoint.requests``. Standard library only.
"""

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, List, Optional


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: Dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    headers: Dict[str, str]
    body: Optional[dict]


def result(message, value, headers=None) -> Answer:
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": value}).encode()
    return Answer(body=body, headers=headers or {})


def sse(*messages, priming_id: str = "", retry: Optional[int] = None) -> Answer:
    """An SSE answer with CRLF line ends, as sse-starlette writes them."""
    out = []
    if priming_id or retry is not None:
        head = f"id: {priming_id}\r\n" if priming_id else ""
        head += f"retry: {retry}\r\n" if retry is not None else ""
        out.append(head + "data:\r\n\r\n")
    for message in messages:
        out.append("event: message\r\ndata: " + json.dumps(message) + "\r\n\r\n")
    return Answer(body="".join(out).encode(), content_type="text/event-stream")


class ScriptedEndpoint:
    TOOLS = [{"name": "echo", "description": "Repeat the text.",
              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]

    def __init__(self) -> None:
        self.requests: List[Seen] = []
        self.sessions = 0
        self.on: Dict[str, Callable[[dict], Answer]] = {}
        self.on_get: Callable[[Dict[str, str]], Answer] = lambda headers: Answer(405)
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                self._answer(endpoint._post(self._headers(), body))

            def do_GET(self):
                headers = self._headers()
                endpoint._record("GET", headers, None)
                self._answer(endpoint.on_get(headers))

            def do_DELETE(self):
                endpoint._record("DELETE", self._headers(), None)
                self._answer(Answer(200))

            def _headers(self):
                return {k.lower(): v for k, v in self.headers.items()}

            def _answer(self, answer: Answer):
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A client that gave up on an answer closes its socket; that is a test's
        # point, not an error worth a traceback on stderr.
        self._server.handle_error = lambda request, address: None
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/mcp"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)

    def __enter__(self) -> "ScriptedEndpoint":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()

    def posts(self, method: str) -> List[Seen]:
        return [s for s in self.requests if s.body and s.body.get("method") == method]

    def _record(self, method, headers, body) -> None:
        with self._lock:
            self.requests.append(Seen(method, headers, body))

    def _post(self, headers, message) -> Answer:
        self._record("POST", headers, message)
        method = (message or {}).get("method")
        if method in self.on:
            return self.on[method](message)
        if method == "initialize":
            with self._lock:
                self.sessions += 1
                session = f"session-{self.sessions}"
            return result(message, {"protocolVersion": "2025-06-18",
                                    "capabilities": {"tools": {}},
                                    "serverInfo": {"name": "scripted", "version": "0"}},
                          headers={"Mcp-Session-Id": session})
        if message is None or "id" not in message:
            return Answer(202)
        if method == "tools/list":
            return result(message, {"tools": self.TOOLS})
        if method == "tools/call":
            text = message["params"]["arguments"].get("text", "")
            return sse({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "echoing"}},
                       {"jsonrpc": "2.0", "id": message["id"],
                        "result": {"content": [{"type": "text", "text": text}]}},
                       priming_id="p1")
        return Answer(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": -32601, "message": "Method not found"}}).encode())
