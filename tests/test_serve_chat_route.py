"""nacelle.serve.chat_route, POST /api/chat: the route in-process on the WSGI and ASGI
apps, and the AI SDK's own client — the ``ai`` package's DefaultChatTransport,
readUIMessageStream and validateUIMessages — against a server on loopback
(tests/vercel_chat.mjs drives it; NACELLE_AI_SDK names the folder holding
``node_modules/ai``, which .ci/run installs)."""

import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from io import BytesIO
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from nacelle.serve import asgi_app, make_server, wsgi_app
from nacelle.serve.chat_route import decisions
from nacelle.serve.vercel import HEADER
from nacelle.sessions import MemoryStore

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import chat_app  # noqa: E402


def chunks(data):
    """The stream's bytes as chunk objects; the last line must be ``data: [DONE]``."""
    text = b"".join(data).decode("utf-8")
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") and "\n" not in e for e in events), events
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: "):]) for e in events[:-1]]


def types(found):
    return [c["type"] for c in found]


def test_an_answer_on_a_call_waiting_on_its_sub_agent_decides_each_call_it_waits_on():
    inner = SimpleNamespace(waiting=lambda: (SimpleNamespace(id="e1"), SimpleNamespace(id="e2")))
    checkpoint = SimpleNamespace(pending=(SimpleNamespace(id="q1", child=inner),
                                          SimpleNamespace(id="p1", child=None)))
    assert decisions(checkpoint, {"q1": "not now", "p1": True}) == {
        "e1": "not now", "e2": "not now", "p1": True}


# -- the route, in-process ------------------------------------------------------------


def call_wsgi(app, body, headers=None, path="/api/chat"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    env = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "wsgi.input": BytesIO(data),
           "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data)),
           "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1:8000"}
    env.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()})
    seen = {}

    def start_response(status, response_headers):
        seen["status"], seen["headers"] = status, dict(response_headers)

    out = b"".join(app(env, start_response))
    return int(seen["status"].split()[0]), seen["headers"], out


def user(text, id="u1"):
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def body(*messages, chat="chat-1"):
    return {"id": chat, "messages": list(messages), "trigger": "submit-message",
            "messageId": None, "extra": "an app's own field"}


def answered(found, message_id, approved=True, reason=None):
    """The assistant message the client holds after an approval request, answered."""
    approval = {"id": "p1", "approved": approved, **({"reason": reason} if reason else {})}
    return {"id": message_id, "role": "assistant", "parts": [
        {"type": "step-start"}, {"type": "text", "text": "I will send it.", "state": "done"},
        {"type": "tool-send", "toolCallId": "p1", "state": "approval-responded",
         "input": {"to": "ada"}, "approval": approval}]}


@pytest.fixture
def app():
    return wsgi_app(chat_app.make_agent, store=MemoryStore(), keepalive=5)


def test_a_chat_streams_the_ui_message_stream_with_its_header(app):
    status, headers, out = call_wsgi(app, body(user("hello")))
    assert status == 200 and headers[HEADER[0]] == "v1" == HEADER[1]
    assert headers["Content-Type"].startswith("text/event-stream")
    found = chunks([out])
    assert found[0]["type"] == "start" and found[0]["messageId"].startswith("msg_")
    assert "".join(c.get("delta", "") for c in found) == "Hello, world"


def test_an_approval_pauses_the_chat_and_the_next_request_resumes_it_once(app):
    found = chunks([call_wsgi(app, body(user("pause ada")))[2]])
    assert types(found)[-3:] == ["tool-approval-request", "finish-step", "finish"]
    message_id = found[0]["messageId"]
    again = body(user("pause ada"), answered(found, message_id))
    status, _, out = call_wsgi(app, again)
    resumed = chunks([out])
    assert status == 200 and resumed[:2] == [
        {"type": "start", "messageId": message_id},
        {"type": "tool-output-available", "toolCallId": "p1", "output": "sent to ada"}]
    assert "".join(c.get("delta", "") for c in resumed) == "Sent."
    status, _, out = call_wsgi(app, again)  # the checkpoint was taken: once only
    assert status == 404 and "no paused run" in json.loads(out)["message"]


def test_a_denied_approval_reaches_the_model_as_the_reason_and_the_call_never_runs(app):
    found = chunks([call_wsgi(app, body(user("pause ada")))[2]])
    denied = answered(found, found[0]["messageId"], approved=False, reason="not now")
    resumed = chunks([call_wsgi(app, body(user("pause ada"), denied))[2]])
    assert resumed[1] == {"type": "tool-output-denied", "toolCallId": "p1"}


def test_an_answer_for_a_call_the_run_is_not_waiting_on_is_400_and_keeps_the_paused_run(app):
    found = chunks([call_wsgi(app, body(user("pause ada")))[2]])
    wrong = answered(found, found[0]["messageId"])
    wrong["parts"][2]["toolCallId"] = "p2"
    status, _, out = call_wsgi(app, body(user("pause ada"), wrong))
    assert status == 400 and "p2" in json.loads(out)["message"]
    right = answered(found, found[0]["messageId"])
    assert call_wsgi(app, body(user("pause ada"), right))[0] == 200


def test_paused_chats_belong_to_their_chat_id_and_principal():
    app = wsgi_app(chat_app.make_agent, store=MemoryStore(),
                   authorize=lambda environ: environ.get("HTTP_X_USER") or False)
    found = chunks([call_wsgi(app, body(user("pause ada")), {"X-User": "alice"})[2]])
    again = body(user("pause ada"), answered(found, found[0]["messageId"]))
    assert call_wsgi(app, again, {"X-User": "bob"})[0] == 404
    assert call_wsgi(app, {**again, "id": "chat-2"}, {"X-User": "alice"})[0] == 404
    assert call_wsgi(app, again)[0] == 401
    assert call_wsgi(app, again, {"X-User": "alice"})[0] == 200


@pytest.mark.parametrize("bad, words", [
    (b"{nope", "not JSON"), ({"messages": [user("hi")]}, "id must be"),
    ({"id": "c", "messages": []}, "messages must be"),
    ({"id": "c", "messages": [user("hi")], "trigger": "resume-stream"}, "trigger"),
    ({"id": "c", "messages": [{"id": "s", "role": "system", "parts": []}]}, "system"),
    ({"id": "c", "messages": [{"role": "user", "parts": [{"type": "file", "mediaType": "image/png",
                                                        "url": "https://example.com/x.png"}]}]},
     "data: URL"),
    ({"id": "c", "messages": [{"role": "user", "parts": "hi"}]}, "messages[0].parts"),
])
def test_a_body_that_is_not_a_usechat_request_is_400_naming_the_field(app, bad, words):
    status, headers, out = call_wsgi(app, bad)
    assert status == 400 and headers["Content-Type"] == "application/json", out
    assert words in json.loads(out)["message"]


def test_the_chat_route_keeps_the_apps_checks_and_limits():
    app = wsgi_app(chat_app.make_agent, max_body=200)
    assert call_wsgi(app, body(user("x" * 300)))[0] == 413
    assert call_wsgi(app, body(user("hi")), {"Host": "evil.example"})[0] == 400
    env_get = {"REQUEST_METHOD": "GET", "PATH_INFO": "/api/chat", "wsgi.input": BytesIO(b""),
               "REMOTE_ADDR": "127.0.0.1"}
    seen = {}
    b"".join(app(env_get, lambda status, headers: seen.update(status=status, headers=dict(headers))))
    assert seen["status"].startswith("405") and seen["headers"]["Allow"] == "POST"


def test_a_client_that_leaves_cancels_its_chat_run_and_frees_its_place():
    app = wsgi_app(chat_app.make_agent, store=MemoryStore(), keepalive=0.05, max_runs=1)
    httpd = make_server(app, "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = urlsplit(httpd.url)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        connection.request("POST", "/api/chat", body=json.dumps(body(user("slow 30"))),
                           headers={"Content-Type": "application/json"})
        sock = connection.sock  # getresponse() lets go of it on HTTP/1.0
        response = connection.getresponse()
        assert response.status == 200 and response.read1(65536).startswith(b"data: ")
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        deadline = time.monotonic() + 5
        while True:  # the cancelled run gives its only place back within moments
            status = call_wsgi(app, body(user("hello")))[0]
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 200
    finally:
        httpd.shutdown()


def test_a_failing_model_ends_the_chat_with_an_error_chunk(app):
    found = chunks([call_wsgi(app, body(user("fail")))[2]])
    assert {"type": "error", "errorText": "the provider broke off"} in found
    assert found[-1] == {"type": "finish", "finishReason": "error"}


def test_the_asgi_app_serves_the_chat_and_its_approvals():
    app = asgi_app(chat_app.make_agent, store=MemoryStore(), keepalive=5)

    def post(payload):
        async def go():
            messages = [{"type": "http.request", "body": json.dumps(payload).encode()}]
            sent = []

            async def receive():
                if messages:
                    return messages.pop(0)
                await asyncio.sleep(30)
                return {"type": "http.disconnect"}

            async def send(message):
                sent.append(message)

            scope = {"type": "http", "method": "POST", "path": "/api/chat",
                     "client": ("127.0.0.1", 1),
                     "headers": [(b"content-type", b"application/json"), (b"host", b"localhost")]}
            await asyncio.wait_for(app(scope, receive, send), 10)
            return sent

        sent = asyncio.run(go())
        headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
        return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])

    status, headers, out = post(body(user("pause ada")))
    found = chunks([out])
    assert status == 200 and headers[HEADER[0]] == "v1"
    assert found[-3]["type"] == "tool-approval-request"
    status, _, out = post(body(user("pause ada"), answered(found, found[0]["messageId"])))
    assert status == 200 and chunks([out])[1]["type"] == "tool-output-available"


# -- the AI SDK's own client ------------------------------------------------------------


def ai_sdk():
    """The folder holding node_modules/ai, or skip saying why."""
    folder = os.environ.get("NACELLE_AI_SDK", "")
    if not shutil.which("node"):
        pytest.skip("node is not installed; the AI SDK client tests need it")
    if not folder:
        pytest.skip("NACELLE_AI_SDK is unset: install the ai package (.ci/run does: "
                    "npm install --prefix DIR ai@6.0.326) and name DIR in it")
    if not (Path(folder) / "node_modules" / "ai" / "package.json").is_file():
        pytest.skip(f"NACELLE_AI_SDK={folder} holds no node_modules/ai; the install failed")
    return folder


@pytest.fixture(scope="module")
def chat_server():
    app = wsgi_app(chat_app.make_agent, store=MemoryStore(), keepalive=0.05)
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api/chat"
    finally:
        httpd.shutdown()
        thread.join(5)


def drive(api, chat_id, *turns, errors=()):
    folder = ai_sdk()
    spec = {"api": api, "chatId": chat_id, "turns": list(turns)}
    done = subprocess.run(["node", str(TESTS / "vercel_chat.mjs")], input=json.dumps(spec),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NACELLE_AI_SDK": folder})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    for turn_report in report["turns"]:
        assert turn_report["status"] == "ok", turn_report
    assert [e for t in report["turns"] for e in t["errors"]] == list(errors)
    assert report["valid"] is True, report["valid"]
    return report


def parts(message):
    return [p for p in message["parts"] if p["type"] != "step-start"]


@pytest.mark.integration
def test_the_ai_sdk_client_reads_a_text_run_and_keeps_its_usage_as_metadata(chat_server):
    report = drive(chat_server, "text-chat", {"text": "hello"})
    user_message, answer = report["messages"]
    assert answer["role"] == "assistant" and answer["id"].startswith("msg_")
    assert parts(answer) == [{"type": "text", "text": "Hello, world", "state": "done"}]
    assert answer["metadata"]["stop"] == "end"
    assert answer["metadata"]["usage"]["input_tokens"] == 12


@pytest.mark.integration
def test_the_ai_sdk_client_reads_a_tool_run_with_streamed_input_and_sends_it_back(chat_server):
    city = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch"
    report = drive(chat_server, "tool-chat", {"text": f"tool {city}"}, {"text": "hello"})
    answer = report["messages"][1]
    assert [p["type"] for p in answer["parts"]] == ["step-start", "reasoning", "text", "tool-lookup",
                                                   "step-start", "text"]
    call = answer["parts"][3]
    assert call["state"] == "output-available" and call["input"] == {"city": city}
    assert call["output"] == f"sunny in {city}"
    deltas = [c["inputTextDelta"] for c in report["turns"][0]["chunks"]
              if c["type"] == "tool-input-delta"]
    assert len(deltas) > 1 and json.loads("".join(deltas)) == {"city": city}  # the backend's pieces
    assert parts(report["messages"][3])[0]["text"] == "Hello, world"  # the history went back in


@pytest.mark.integration
def test_the_ai_sdk_client_answers_an_approval_request_in_its_next_request(chat_server):
    report = drive(chat_server, "approval-chat", {"text": "pause ada"}, {"approve": True})
    first, second = report["turns"]
    assert "tool-approval-request" in [c["type"] for c in first["chunks"]]
    assert second["ready"] is True  # lastAssistantMessageIsCompleteWithApprovalResponses
    (answer,) = report["messages"][1:]
    call = parts(answer)[1]
    assert call["state"] == "output-available" and call["output"] == "sent to ada"
    assert call["approval"] == {"id": "p1", "approved": True}
    assert parts(answer)[-1]["text"] == "Sent."


@pytest.mark.integration
def test_the_ai_sdk_client_shows_a_denied_call_as_denied(chat_server):
    report = drive(chat_server, "denial-chat", {"text": "pause ada"},
                   {"approve": False, "reason": "not today"})
    call = parts(report["messages"][1])[1]
    assert call["state"] == "output-denied"
    assert call["approval"] == {"id": "p1", "approved": False, "reason": "not today"}


@pytest.mark.integration
def test_the_ai_sdk_client_answers_a_sub_agents_approval_and_both_runs_finish(chat_server):
    report = drive(chat_server, "delegate-chat", {"text": "delegate bob"}, {"approve": True},
                   {"text": "hello"})
    first, second, _ = report["turns"]
    assert second["ready"] is True
    answer = report["messages"][1]
    calls = {p["toolCallId"]: p for p in answer["parts"] if p["type"].startswith("tool-")}
    assert calls["d1"]["state"] == "output-available" and calls["d1"]["output"] == "Sent."
    assert calls["e1"]["state"] == "output-available" and calls["e1"]["output"] == "sent to bob"
    assert calls["e1"]["toolMetadata"] == {"agent": ["errand"], "via": "d1"}
    assert parts(answer)[-1]["text"] == "Delegated and sent."
    assert parts(report["messages"][3])[0]["text"] == "Hello, world"


@pytest.mark.integration
def test_the_ai_sdk_client_answers_a_quiet_sub_agents_approval_on_its_parents_call(chat_server):
    report = drive(chat_server, "quiet-chat", {"text": "quietly bob"}, {"approve": True})
    first, second = report["turns"]
    (request,) = [c for c in first["chunks"] if c["type"] == "tool-approval-request"]
    assert request == {"type": "tool-approval-request", "approvalId": "q1", "toolCallId": "q1",
                       "approvalDescriptor": {"waiting": [
                           {"id": "e1", "name": "send", "input": '{"to": "bob"}'}]}}
    assert second["ready"] is True
    calls = [p for p in report["messages"][1]["parts"] if p["type"].startswith("tool-")]
    assert [(p["toolCallId"], p["state"], p["output"]) for p in calls] == [
        ("q1", "output-available", "Sent.")]


@pytest.mark.integration
def test_the_ai_sdk_client_reads_past_keepalive_comments(chat_server):
    report = drive(chat_server, "slow-chat", {"text": "slow 0.4"})  # keepalive every 0.05 s
    assert parts(report["messages"][1]) == [{"type": "text", "text": "Late.", "state": "done"}]


@pytest.mark.integration
def test_the_ai_sdk_client_hears_a_failed_run_as_an_error(chat_server):
    report = drive(chat_server, "fail-chat", {"text": "fail"}, errors=["the provider broke off"])
    (turn_report,) = report["turns"]
    assert [c["type"] for c in turn_report["chunks"]][-3:] == ["error", "finish-step", "finish"]
    assert parts(report["messages"][1]) == [{"type": "text", "text": "Part", "state": "done"}]
