"""nacelle.serve: the event schema and sse() in pure Python, the WSGI and ASGI apps
called in-process, and the same routes over real loopback servers — the standard
library's threaded server, gunicorn's gthread workers and uvicorn — streaming as
produced, keeping alive, cancelling on disconnect and resuming paused runs."""

import asyncio
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from io import BytesIO
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import nacelle
from nacelle.serve import asgi_app, event_json, make_server, sse, wsgi_app
from nacelle.serve.encode import KEEPALIVE
from nacelle.backends import anthropic
from nacelle.sessions import FileStore, MemoryStore
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream
from nacelle.sse import SSEDecoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_app  # noqa: E402
from servers import free_port, stop, wait_listening  # noqa: E402

TESTS = Path(__file__).resolve().parent
KEEP = 0.2
SLOW = 0.8


# -- the schema and sse(), in Python --------------------------------------------------


def decoded(chunks):
    events = []
    decoder = SSEDecoder()
    for chunk in chunks:
        events += decoder.feed(chunk)
    return [(e.event, json.loads(e.data)) for e in events]


def past_input(stream):
    """The first chunk of ``stream`` that is not a tool_input event."""
    chunk = next(stream)
    while chunk.startswith(b"event: tool_input\n"):
        chunk = next(stream)
    return chunk


def run_events(prompt, *, cancel=None):
    agent = serve_app.make_agent(nacelle.serve.RequestInfo("POST", "/runs", {}, "", {"prompt": prompt}, None))
    return agent.stream([nacelle.user_text(prompt)], cancel=cancel)


def test_every_event_carries_the_schema_version_and_its_kind():
    events = decoded(sse(run_events("slow 0")))
    assert [k for k, _ in events] == ["text", "tool_input", "tool_call", "turn", "tool_result", "text",
                                      "turn", "done"]
    assert all(data["v"] == 1 and data["kind"] == kind for kind, data in events)
    written, call, turn, result, done = (events[1][1], events[2][1], events[3][1], events[4][1],
                                         events[-1][1])
    assert written == {"v": 1, "kind": "tool_input", "id": "c1", "index": 0, "name": "slow",
                       "text": '{"seconds": 0.0}'}
    assert call == {"v": 1, "kind": "tool_call", "id": "c1", "index": 0, "name": "slow",
                    "server": "", "input": '{"seconds": 0.0}'}
    assert result["result"] == "slept 0.0" and result["error"] is None
    assert result["paused"] is result["refused"] is result["discarded"] is False
    assert turn["stop"] == "tools" and turn["usage"]["input_tokens"] == 12
    assert turn["usage"]["cost"] == pytest.approx(0.00042) and turn["usage"]["priced"] is True
    assert done["stop"] == "end" and done["text"] == "All done." and done["run"] is None
    assert done["usage"]["total"] == 34 and nacelle.loads(json.dumps(done["messages"]))[-1].text == "All done."


def test_a_paused_run_names_its_pending_calls_but_never_sends_the_checkpoint():
    chunks = list(sse(run_events("pause bob")))
    body = b"".join(chunks)
    assert b"fingerprint" not in body and b"checkpoint" not in body
    done = decoded(chunks)[-1][1]
    assert done["stop"] == "paused" and done["run"] is None
    assert done["pending"] == [{"id": "p1", "name": "send", "input": '{"to": "bob"}'}]


def test_sse_yields_each_event_as_it_is_produced():
    gate = threading.Event()

    def events():
        yield nacelle.Event(nacelle.Kind.TEXT, text="first")
        gate.wait(5)
        yield nacelle.Event(nacelle.Kind.TEXT, text="second")

    stream = sse(events(), keepalive=5)
    assert decoded([next(stream)]) == [("text", {"v": 1, "kind": "text", "text": "first"})]
    gate.set()
    assert decoded([next(stream)])[0][1]["text"] == "second"
    assert list(stream) == []


@pytest.mark.slow
def test_sse_sends_keepalives_while_the_generator_blocks():
    def events():
        time.sleep(0.35)
        yield nacelle.Event(nacelle.Kind.TEXT, text="late")

    chunks = list(sse(events(), keepalive=0.1))
    assert chunks.count(KEEPALIVE) >= 2 and chunks[-1].startswith(b"event: text\n")


def test_closing_the_stream_sets_the_cancel_event_and_the_tool_sees_it(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(notes))
    cancel = nacelle.CancelEvent()
    stream = sse(run_events("hang", cancel=cancel), keepalive=5, cancel=cancel)
    assert b"tool_call" in past_input(stream)
    assert wait_for(lambda: "hang started" in read(notes))
    stream.close()
    assert cancel.is_set()
    assert wait_for(lambda: "hang cancelled" in read(notes))


def test_a_failing_run_ends_with_an_error_event_that_names_only_nacelle_errors():
    def broken():
        yield nacelle.Event(nacelle.Kind.TEXT, text="hi")
        raise nacelle.StreamError("the stream stopped")

    def crashed():
        raise KeyError("/srv/secret/path")
        yield

    assert decoded(sse(broken()))[-1] == ("error", {"v": 1, "kind": "error", "error": "StreamError",
                                                    "message": "the stream stopped"})
    error = decoded(sse(crashed()))[-1][1]
    assert error["error"] == "internal error" and "secret" not in json.dumps(error)


def test_structured_output_goes_out_as_plain_json():
    import dataclasses

    @dataclasses.dataclass
    class Answer:
        city: str
        tags: tuple

    done = event_json(nacelle.Event(nacelle.Kind.DONE, stop=nacelle.Stop.END,
                                    output=Answer("Oslo", ("a", "b"))))
    assert done["output"] == {"city": "Oslo", "tags": ["a", "b"]}


def test_tool_input_carries_each_delta_of_a_calls_arguments_with_its_id_and_name():
    from nacelle.events import ToolEvent

    data = event_json(nacelle.Event(nacelle.Kind.TOOL_INPUT, text='"pa',
                                    tool=ToolEvent("c1", 0, "read", '{"pa')))
    assert data == {"v": 1, "kind": "tool_input", "id": "c1", "index": 0, "name": "read",
                    "text": '"pa'}


def test_a_tool_result_carries_its_images_and_documents_only_when_it_has_them():
    from nacelle.events import ToolEvent

    plain = event_json(nacelle.Event(nacelle.Kind.TOOL_RESULT,
                                     tool=ToolEvent("c1", 0, "read", "{}", result="text")))
    assert "content" not in plain
    shot = ToolEvent("c1", 0, "shot", "{}", result="the page", content=(
        nacelle.Text("the page"), nacelle.Image("image/png", "iVBORw0KGgo="),
        nacelle.Document("application/pdf", "JVBERi0=", "Q3")))
    data = event_json(nacelle.Event(nacelle.Kind.TOOL_RESULT, tool=shot))
    assert data["result"] == "the page" and data["content"] == [
        {"type": "text", "text": "the page"},
        {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
        {"type": "document", "media_type": "application/pdf", "data": "JVBERi0=", "title": "Q3"}]


# -- the WSGI app, in-process -------------------------------------------------------------


def call_wsgi(app, method="POST", path="/runs", body=b"", headers=None, **environ):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": BytesIO(data),
           "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data)),
           "REMOTE_ADDR": "127.0.0.1"}
    env.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()})
    env.update(environ)
    seen = {}

    def start_response(status, response_headers):
        seen["status"], seen["headers"] = status, dict(response_headers)

    out = b"".join(app(env, start_response))
    return int(seen["status"].split()[0]), seen["headers"], out


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "store")


@pytest.fixture
def app(store):
    return wsgi_app(serve_app.make_agent, store=store, keepalive=KEEP)


def test_bad_json_and_bad_shapes_are_400_with_a_json_message(app):
    for body, words in [(b"{nope", "not JSON"), (b"[1]", "JSON object"),
                        ({"prompt": ""}, "prompt"), ({"messages": "x"}, "messages"),
                        ({"messages": [{"role": "robot", "parts": []}]}, "role"),
                        ({"prompt": "hi", "extra": 1}, "unknown field 'extra'"),
                        ({"prompt": "hi", "session": "../etc"}, "session name"), ({}, "send a prompt")]:
        status, headers, out = call_wsgi(app, body=body)
        assert status == 400 and headers["Content-Type"] == "application/json", body
        assert words in json.loads(out)["message"], (body, out)


def test_a_declared_oversize_body_is_413_before_it_is_read(store):
    app = wsgi_app(serve_app.make_agent, store=store, max_body=100)

    class Unreadable:
        def read(self, n):
            raise AssertionError("the body was read")

    status, _, out = call_wsgi(app, body=b"x", CONTENT_LENGTH="101", **{"wsgi.input": Unreadable()})
    assert status == 413 and "100 bytes" in json.loads(out)["message"]


def test_an_undeclared_length_is_read_only_up_to_the_limit(store):
    app = wsgi_app(serve_app.make_agent, store=store, max_body=100)
    status, _, _ = call_wsgi(app, body=b"x" * 500, CONTENT_LENGTH="", **{"wsgi.input_terminated": True})
    assert status == 413
    status, _, _ = call_wsgi(app, body=b"{}", CONTENT_LENGTH="", HTTP_TRANSFER_ENCODING="chunked")
    assert status == 411


def test_routes_methods_and_media_types(app):
    assert call_wsgi(app, path="/nope")[0] == 404
    status, headers, _ = call_wsgi(app, method="GET", path="/runs")
    assert status == 405 and headers["Allow"] == "POST"
    assert call_wsgi(app, method="POST", path="/")[0] == 405
    assert call_wsgi(app, body={"prompt": "hi"}, CONTENT_TYPE="text/plain")[0] == 415
    status, headers, page = call_wsgi(app, method="GET", path="/")
    assert status == 200 and b"<title>nacelle</title>" in page
    assert "connect-src 'self'" in headers["Content-Security-Policy"]
    for unsafe in (b"innerHTML", b"outerHTML", b"insertAdjacentHTML", b"document.write",
                   b"http://", b"https://", b"src="):
        assert unsafe not in page, unsafe


def test_an_unknown_run_id_is_404(app):
    for run in ("run_doesnotexist", "..%2Fetc", "-x"):
        status, _, out = call_wsgi(app, path=f"/runs/{run}/decisions", body={"decisions": {}})
        assert status == 404, run


def test_a_decisions_path_with_a_trailing_newline_is_no_route_and_keeps_the_run(app, store):
    run = decoded([call_wsgi(app, body={"prompt": "pause ada"})[2]])[-1][1]["run"]
    path = f"/runs/{run}/decisions"
    assert call_wsgi(app, path=path + "\n", body={"decisions": {"p1": False}})[0] == 404
    status, _, out = call_wsgi(app, path=path, body={"decisions": {"p1": False}})
    assert status == 200 and decoded([out])[-1][1]["stop"] == "end"


def test_an_empty_checkpoint_key_is_refused_when_the_app_is_made(store):
    for key in ("", b""):
        with pytest.raises(nacelle.ConfigError, match="must not be empty"):
            wsgi_app(serve_app.make_agent, store=store, key=key)


def test_the_authorize_hook_refuses_with_401_and_has_no_default_key(store):
    app = wsgi_app(serve_app.make_agent, store=store,
                   authorize=lambda environ: environ.get("HTTP_AUTHORIZATION") == "Bearer s3cret")
    assert call_wsgi(app, body={"prompt": "hi"})[0] == 401
    assert call_wsgi(app, method="GET", path="/")[0] == 401
    status, headers, out = call_wsgi(app, body={"prompt": "hi"}, headers={"Authorization": "Bearer s3cret"})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert headers["Cache-Control"] == "no-cache" and headers["X-Accel-Buffering"] == "no"
    broken = wsgi_app(serve_app.make_agent, store=store, authorize=lambda e: 1 / 0)
    assert call_wsgi(broken, body={"prompt": "hi"})[0] == 500


@pytest.mark.parametrize("host,answered", [
    ("127.0.0.1:8000", True), ("[::1]:8000", True), ("10.0.0.7", True), ("localhost", True),
    ("LOCALHOST.:8000", True), ("app.localhost:8000", True),
    ("evil.example", False), ("evil.example:8000", False), ("127.0.0.1.nip.io", False),
    ("localhost.evil.example", False), ("[::1", False), ("a b", False), ("x:port", False),
])
def test_only_ip_addresses_and_localhost_are_answered_by_default(app, host, answered):
    status, _, out = call_wsgi(app, "GET", "/", headers={"Host": host})
    assert (status == 200) is answered, (host, status, out[:200])
    if not answered:
        assert status == 400 and "allowed_hosts" in json.loads(out)["message"]


def test_allowed_hosts_names_more_hosts_a_domain_or_any(store):
    named = wsgi_app(serve_app.make_agent, store=store,
                     allowed_hosts=["chat.example.com", ".corp.example"])
    for host, status in (("chat.example.com", 200), ("CHAT.example.com:443", 200),
                         ("corp.example", 200), ("a.b.corp.example", 200),
                         ("example.com", 400), ("evilcorp.example", 400)):
        assert call_wsgi(named, "GET", "/", headers={"Host": host})[0] == status, host
    anything = wsgi_app(serve_app.make_agent, store=store, allowed_hosts=["*"])
    assert call_wsgi(anything, "GET", "/", headers={"Host": "evil.example"})[0] == 200
    with pytest.raises(nacelle.ConfigError, match="allowed_hosts"):
        wsgi_app(serve_app.make_agent, store=store, allowed_hosts="chat.example.com")


def test_a_rebound_host_is_refused_before_any_run_starts(store, tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    status, _, out = call_wsgi(wsgi_app(serve_app.make_agent, store=store), body={
        "prompt": "pause Ada"}, headers={"Host": "evil.example:8000"})
    assert status == 400 and b"event:" not in out
    sent = call_asgi(asgi_app(serve_app.make_agent, store=store), [b'{"prompt": "hi"}'],
                     headers=[(b"host", b"evil.example")])
    assert sent[0] == 400 and b"allowed_hosts" in sent[1]
    assert read(tmp_path / "notes") == ""


def test_a_session_is_loaded_and_saved_by_name(app, store):
    for _ in range(2):
        status, _, out = call_wsgi(app, body={"prompt": "hello", "session": "chat-1"})
        assert status == 200 and decoded([out])[-1][1]["stop"] == "end"
    saved = store.load("chat-1")
    assert [m.role.value for m in saved] == ["user", "assistant", "user", "assistant"]


def test_bad_decisions_are_400_and_keep_the_paused_run(app, store, tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    run = decoded([call_wsgi(app, body={"prompt": "pause ada"})[2]])[-1][1]["run"]
    assert run.startswith("run_") and len(run) > 30
    path = f"/runs/{run}/decisions"
    assert call_wsgi(app, path=path, body={"decisions": {"p1": 3}})[0] == 400
    status, _, out = call_wsgi(app, path=path, body={"decisions": {"nope": True}})
    assert status == 400 and "not pending" in json.loads(out)["message"]
    status, _, out = call_wsgi(app, path=path, body={"decisions": {"p1": {"to": "eve"}},
                                                     "session": "after"})
    assert status == 200 and decoded([out])[-1][1]["text"] == "Sent."
    assert read(tmp_path / "notes") == "send eve\n"
    assert [m.role.value for m in store.load("after")][-1] == "assistant"
    assert call_wsgi(app, path=path, body={"decisions": {"p1": True}})[0] == 404


def test_a_decision_edited_into_what_a_hook_denies_is_denied_and_never_runs(store, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))

    def no_eve(event):
        return nacelle.HookResult(deny="eve is not a recipient" if "eve" in event.input else "")

    def make_agent(info):
        agent = serve_app.make_agent(info)
        return nacelle.Agent(agent.backend, agent.system, tools=agent.tools,
                             approve=agent.approve,
                             hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [no_eve]})

    app = wsgi_app(make_agent, store=store, keepalive=KEEP)
    run = decoded([call_wsgi(app, body={"prompt": "pause ada"})[2]])[-1][1]["run"]
    status, _, out = call_wsgi(app, path=f"/runs/{run}/decisions",
                               body={"decisions": {"p1": {"to": "eve"}}})
    assert status == 200
    (result,) = [data for kind, data in decoded([out]) if kind == "tool_result"]
    assert result["error"] == "eve is not a recipient" and result["result"] == ""
    assert read(tmp_path / "notes") == ""


def test_make_agent_may_take_no_argument_or_be_an_agent(store):
    agent = nacelle.Agent(nacelle.testing.ScriptedBackend(["one", "two"]), "Be brief.")
    for make in (lambda: agent, agent):
        status, _, out = call_wsgi(wsgi_app(make, store=store), body={"prompt": "hi"})
        assert status == 200 and decoded([out])[-1][1]["stop"] == "end"
    with pytest.raises(nacelle.ConfigError, match="save_checkpoint"):
        wsgi_app(agent, store=object())


def test_a_decision_whose_check_breaks_unexpectedly_is_400_and_keeps_the_paused_run(
        store, tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    broken = []

    class Breaking(nacelle.Agent):
        def resume(self, checkpoint, decisions, *, cancel=None):
            if broken:
                raise RuntimeError("/srv/secret: the schema's check broke")
            return super().resume(checkpoint, decisions, cancel=cancel)

    def make(info):
        agent = serve_app.make_agent(info)
        return Breaking(agent.backend, "Be brief.", tools=[serve_app.slow, serve_app.hang,
                                                         serve_app.send], approve=serve_app.approve)

    for app in (wsgi_app(make, store=store), asgi_app(make, store=store)):
        run = decoded([call_wsgi(wsgi_app(make, store=store), body={"prompt": "pause ada"})[2]])[-1][1]["run"]
        path = f"/runs/{run}/decisions"
        broken.append(True)
        body = json.dumps({"decisions": {"p1": True}}).encode()
        if "wsgi" in app.__qualname__:
            status, _, out = call_wsgi(app, path=path, body=body)
        else:
            status, out = call_asgi(app, [body], path=path)
        assert status == 400 and b"secret" not in out, out
        broken.clear()
        status, _, out = call_wsgi(app if "wsgi" in app.__qualname__ else wsgi_app(make, store=store),
                                   path=path, body=body)
        assert status == 200 and decoded([out])[-1][1]["text"] == "Sent."


def by_header(environ):
    """authorize: the X-User header names the principal; "shared" is let in as True."""
    user = environ.get("HTTP_X_USER", "")
    return True if user == "shared" else user or False


def test_sessions_and_paused_runs_belong_to_the_principal_authorize_names(store, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    app = wsgi_app(serve_app.make_agent, store=store, authorize=by_header)

    def post(user, body, path="/runs"):
        status, _, out = call_wsgi(app, path=path, body=body, headers={"X-User": user})
        return status, (decoded([out]) if status == 200 else json.loads(out))

    for _ in range(2):
        assert post("alice", {"prompt": "hello", "session": "chat"})[0] == 200
    status, events = post("bob", {"prompt": "hello", "session": "chat"})
    assert status == 200 and len(events[-1][1]["messages"]) == 2  # not alice's four
    status, events = post("alice", {"prompt": "hello", "session": "chat"})
    assert len(events[-1][1]["messages"]) == 6
    assert "chat" not in store.names()  # the shared name stays free
    assert post("shared", {"prompt": "hello", "session": "chat"})[1][-1][1]["messages"][0][
        "parts"][0]["text"] == "hello" and len(store.load("chat")) == 2
    run = post("alice", {"prompt": "pause ada"})[1][-1][1]["run"]
    path = f"/runs/{run}/decisions"
    for other in ("bob", "shared"):
        assert post(other, {"decisions": {"p1": True}}, path)[0] == 404
    status, events = post("alice", {"decisions": {"p1": True}}, path)
    assert status == 200 and events[-1][1]["text"] == "Sent."
    assert read(tmp_path / "notes") == "send ada\n"
    for owned in store.names() + store.checkpoint_names():  # the server's own names
        status, out = post("shared", {"prompt": "hello", "session": owned})
        if owned != "chat":
            assert status == 400 and "keeps for its own" in out["message"]
    assert post("", {"prompt": "hello"})[0] == 401


def test_a_principal_reaches_make_agent(store):
    seen = []

    def make(info):
        seen.append(info.principal)
        return nacelle.Agent(nacelle.testing.ScriptedBackend(["hi"]), "Be brief.")

    app = wsgi_app(make, store=store, authorize=by_header)
    for user in ("alice", "shared"):
        call_wsgi(app, body={"prompt": "hi"}, headers={"X-User": user})
    assert seen == ["alice", ""]


def test_a_running_run_is_cancelled_by_the_id_its_answer_names_and_only_by_its_principal(
        store, tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(notes))
    app = wsgi_app(serve_app.make_agent, store=store, authorize=by_header, max_runs=1,
                   keepalive=5)
    seen = {}
    env = {"REQUEST_METHOD": "POST", "PATH_INFO": "/runs", "CONTENT_TYPE": "application/json",
           "wsgi.input": BytesIO(b'{"prompt": "hang"}'), "CONTENT_LENGTH": "18",
           "HTTP_X_USER": "alice"}
    stream = iter(app(env, lambda status, headers: seen.update(status=status, headers=dict(headers))))
    assert seen["status"].startswith("200") and b"event: tool_" in next(stream)
    run = seen["headers"]["X-Nacelle-Run"]
    assert run.startswith("run_")
    assert wait_for(lambda: "hang started" in read(notes))
    path = f"/runs/{run}/cancel"
    for user in ("bob", "shared"):  # another principal's run is not there for them
        assert call_wsgi(app, path=path, body={}, headers={"X-User": user})[0] == 404
    assert call_wsgi(app, path=path, body={"why": 1}, headers={"X-User": "alice"})[0] == 400
    assert call_wsgi(app, method="GET", path=path, headers={"X-User": "alice"})[0] == 405
    # It takes no place under max_runs (the one place is the hanging run's).
    status, _, out = call_wsgi(app, path=path, body={}, headers={"X-User": "alice"})
    assert (status, json.loads(out)) == (200, {"cancelled": True})
    rest = decoded(list(stream))
    assert rest[-1][0] == "error" and rest[-1][1]["error"] == "Cancelled"
    assert wait_for(lambda: "hang cancelled" in read(notes))
    assert call_wsgi(app, path=path, body={}, headers={"X-User": "alice"})[0] == 404
    assert call_wsgi(app, body={"prompt": "hello"}, headers={"X-User": "alice"})[0] == 200


def test_a_session_is_read_back_by_get_for_its_principal_only(store):
    app = wsgi_app(serve_app.make_agent, store=store, authorize=by_header)
    assert call_wsgi(app, body={"prompt": "hello", "session": "chat"},
                     headers={"X-User": "alice"})[0] == 200
    status, headers, out = call_wsgi(app, method="GET", path="/sessions/chat",
                                     headers={"X-User": "alice"})
    assert status == 200 and headers["Cache-Control"] == "no-store"
    data = json.loads(out)
    assert data["session"] == "chat"
    assert [m.text for m in nacelle.loads(json.dumps(data["messages"]))] == [
        "hello", "Hello, world <b>!</b>"]
    for user in ("bob", "shared"):
        status, _, out = call_wsgi(app, method="GET", path="/sessions/chat", headers={"X-User": user})
        assert (status, json.loads(out)["messages"]) == (200, [])
    assert call_wsgi(app, method="GET", path="/sessions/chat")[0] == 401
    for bad in ("..", "-x", "s" + "0" * 40):
        status, _, out = call_wsgi(app, method="GET", path=f"/sessions/{bad}", headers={"X-User": "alice"})
        assert status == 400, bad
    assert call_wsgi(app, path="/sessions/chat", body={}, headers={"X-User": "alice"})[0] == 405


def test_a_paused_call_carries_what_approving_it_would_do_when_the_server_has_a_preview(
        store, tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    asked = []

    def preview(name, input):
        asked.append((name, dict(input)))
        return f"  $ send {input['to']}\n"

    plain = decoded([call_wsgi(wsgi_app(serve_app.make_agent, store=store),
                               body={"prompt": "pause ada"})[2]])
    assert all("preview" not in data for _, data in plain)
    events = decoded([call_wsgi(wsgi_app(serve_app.make_agent, store=store, preview=preview),
                                body={"prompt": "slow 0"})[2]])
    assert all("preview" not in data for _, data in events) and asked == []  # ran, not paused
    events = decoded([call_wsgi(wsgi_app(serve_app.make_agent, store=store, preview=preview),
                                body={"prompt": "pause ada"})[2]])
    paused = [data for kind, data in events if kind == "tool_result"]
    assert paused[0]["paused"] is True and paused[0]["preview"] == "  $ send ada\n"
    assert asked == [("send", {"to": "ada"})]

    def broken(name, input):
        raise OSError("disk gone")

    events = decoded([call_wsgi(wsgi_app(serve_app.make_agent, store=store, preview=broken),
                                body={"prompt": "pause ada"})[2]])
    assert [d for k, d in events if k == "tool_result"][0]["paused"] is True
    assert events[-1][1]["stop"] == "paused" and all("preview" not in d for _, d in events)
    with pytest.raises(nacelle.ConfigError, match="preview"):
        wsgi_app(serve_app.make_agent, preview="yes")


def test_the_store_is_optional_and_defaults_to_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    for app in (wsgi_app(serve_app.make_agent), asgi_app(serve_app.make_agent)):
        assert app is not None
    app = wsgi_app(serve_app.make_agent)
    run = decoded([call_wsgi(app, body={"prompt": "pause ada", "session": "s"})[2]])[-1][1]["run"]
    status, _, out = call_wsgi(app, path=f"/runs/{run}/decisions",
                               body={"decisions": {"p1": True}, "session": "s"})
    assert status == 200 and decoded([out])[-1][1]["text"] == "Sent."
    assert call_wsgi(app, path=f"/runs/{run}/decisions", body={"decisions": {"p1": True}})[0] == 404
    status, _, out = call_wsgi(app, body={"prompt": "hello", "session": "s"})
    assert len(decoded([out])[-1][1]["messages"]) == 6


def test_runs_past_max_runs_are_503_with_retry_after(store, tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(notes))
    app = wsgi_app(serve_app.make_agent, store=store, max_runs=1, keepalive=5)
    seen = {}
    env = {"REQUEST_METHOD": "POST", "PATH_INFO": "/runs", "CONTENT_TYPE": "application/json",
           "wsgi.input": BytesIO(b'{"prompt": "hang"}'), "CONTENT_LENGTH": "18"}
    stream = app(env, lambda status, headers: seen.update(status=status))
    assert seen["status"].startswith("200") and b"tool_call" in past_input(iter(stream))
    status, headers, out = call_wsgi(app, body={"prompt": "hello"})
    assert status == 503 and headers["Retry-After"].isdigit()
    assert "1 runs" in json.loads(out)["message"]
    stream.close()
    assert wait_for(lambda: call_wsgi(app, body={"prompt": "hello"})[0] == 200)
    # A stream the server drops before it starts gives its place back too.
    env["wsgi.input"] = BytesIO(b'{"prompt": "hang"}')
    app(env, lambda status, headers: None).close()
    assert call_wsgi(app, body={"prompt": "hello"})[0] == 200
    asgi = asgi_app(serve_app.make_agent, store=store, max_runs=1)
    assert call_asgi(asgi, [b'{"prompt": "hello"}'])[0] == 200


def test_a_content_length_of_other_digits_is_400(app, store):
    for value in ("\u00b2", "\u0663", "+5", "1_0", "5, 6"):
        status, _, out = call_wsgi(app, body=b'{"prompt": "hi"}', CONTENT_LENGTH=value)
        assert status == 400 and "Content-Length" in json.loads(out)["message"], value
        status, out = call_asgi(asgi_app(serve_app.make_agent, store=store), [b'{"prompt": "hi"}'],
                                headers=[(b"content-length", value.encode("utf-8"))])
        assert status == 400, value


def test_a_lone_surrogate_is_400_in_a_body_and_replaced_in_a_saved_answer(store):
    app = wsgi_app(serve_app.make_agent, store=store)
    status, _, out = call_wsgi(app, body=b'{"prompt": "half \\ud83d", "session": "s"}')
    assert status == 400 and "surrogate" in json.loads(out)["message"]
    def agent():
        return nacelle.Agent(nacelle.testing.ScriptedBackend(["half \ud83d of it"]), "Be brief.")

    for server_store in (store, nacelle.sessions.MemoryStore()):
        status, _, out = call_wsgi(wsgi_app(agent, store=server_store),
                                   body={"prompt": "hi", "session": "s"})
        assert status == 200 and decoded([out])[-1][0] == "done", out
        assert server_store.load("s")[-1].text == "half \ufffd of it"


# -- the ASGI app, in-process -------------------------------------------------------------


def call_asgi(app, body_chunks, method="POST", path="/runs", headers=(), disconnect_after=None,
              then=lambda: True):
    async def go():
        messages = [{"type": "http.request", "body": c, "more_body": i < len(body_chunks) - 1}
                    for i, c in enumerate(body_chunks)]
        sent = []
        gone = asyncio.Event()

        async def receive():
            if messages:
                return messages.pop(0)
            await gone.wait()
            while not then():  # the client leaves once the tool has started
                await asyncio.sleep(0.02)
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if disconnect_after and b"".join(m.get("body", b"") for m in sent).count(
                    disconnect_after.encode()):
                gone.set()

        scope = {"type": "http", "method": method, "path": path, "client": ("127.0.0.1", 1),
                 "headers": [(b"content-type", b"application/json"), *headers]}
        await asyncio.wait_for(app(scope, receive, send), 10)
        return sent

    sent = asyncio.run(go())
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_the_asgi_app_refuses_an_oversize_body_as_it_arrives(store):
    app = asgi_app(serve_app.make_agent, store=store, max_body=100)
    assert call_asgi(app, [b"x" * 60, b"x" * 60])[0] == 413
    assert call_asgi(app, [b"{"], headers=[(b"content-length", b"500")])[0] == 413
    assert call_asgi(app, [b"{nope"])[0] == 400


def test_the_asgi_app_cancels_the_run_when_the_client_disconnects(store, tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(notes))
    app = asgi_app(serve_app.make_agent, store=store, keepalive=5)
    status, body = call_asgi(app, [json.dumps({"prompt": "hang"}).encode()],
                             disconnect_after="tool_call", then=lambda: "hang started" in read(notes))
    assert status == 200 and b"event: done" not in body
    assert wait_for(lambda: "hang cancelled" in read(notes))


# -- real servers on loopback -----------------------------------------------------------


# The standard library's server runs in this process; gunicorn and uvicorn are
# processes to start, so their runs are left out of the fast subset.
SERVERS = ["stdlib", pytest.param("gunicorn", marks=pytest.mark.slow),
           pytest.param("uvicorn", marks=pytest.mark.slow)]


@contextlib.contextmanager
def running(kind, home, keepalive):
    """(base url, notes file) of a ``kind`` server running tests/serve_app.py's agent."""
    notes = home / "notes"
    env = dict(os.environ, NACELLE_SERVE_STORE=str(home / "store"), NACELLE_SERVE_NOTES=str(notes),
               NACELLE_SERVE_KEEPALIVE=str(keepalive),
               PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS)]))
    if kind == "stdlib":
        saved = os.environ.get("NACELLE_SERVE_NOTES")
        os.environ["NACELLE_SERVE_NOTES"] = str(notes)
        app = wsgi_app(serve_app.make_agent, store=FileStore(home / "store"), keepalive=keepalive)
        httpd = make_server(app, "127.0.0.1", 0)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield httpd.url.rstrip("/"), notes
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(10)
            if saved is None:
                os.environ.pop("NACELLE_SERVE_NOTES", None)
            else:
                os.environ["NACELLE_SERVE_NOTES"] = saved
        return
    if kind == "gunicorn":
        if sys.platform == "win32":
            pytest.skip("gunicorn runs on POSIX only")
        pytest.importorskip("gunicorn")
        port = free_port()
        command = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "2",
                   "--threads", "4", "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "1",
                   "serve_app:wsgi"]
    else:
        pytest.importorskip("uvicorn")
        port = free_port()
        command = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
                   "--log-level", "warning", "serve_app:asgi"]
    process = subprocess.Popen(command, cwd=str(TESTS), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, process)
        yield f"http://127.0.0.1:{port}", notes
    finally:
        stop(process)


@pytest.fixture(scope="module", params=SERVERS)
def server(request, tmp_path_factory):
    """(base url, notes file) of a server keeping alive every KEEP seconds."""
    with running(request.param, tmp_path_factory.mktemp(request.param), KEEP) as found:
        yield found


@pytest.fixture(params=SERVERS)
def quiet_server(request, tmp_path):
    """(base url, notes file) of a server whose keepalive is 30 s: a disconnect is not
    found by a keepalive's failed write."""
    with running(request.param, tmp_path, 30.0) as found:
        yield found


def open_stream(base, path, body, *, headers=None):
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.request("POST", path, body=json.dumps(body).encode(),
                       headers={"Content-Type": "application/json", **(headers or {})})
    connection.raw_socket = connection.sock  # getresponse() lets go of it on HTTP/1.0
    return connection, connection.getresponse()


def read_events(response, until=None, start=None):
    """[(seconds since ``start`` (the monotonic time the request was sent; by default
    now), kind, data)], and how many keepalives came."""
    start = time.monotonic() if start is None else start
    decoder, events, keepalives = SSEDecoder(), [], 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return events, keepalives
        keepalives += chunk.count(KEEPALIVE)
        for event in decoder.feed(chunk):
            events.append((time.monotonic() - start, event.event, json.loads(event.data)))
            if until is not None and until(events[-1]):
                return events, keepalives


def post_json(base, path, body, *, raw=None, headers=None):
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        connection.request("POST", path, body=data,
                           headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.slow
def test_the_first_event_arrives_before_the_run_ends(server):
    base, _ = server
    # Timed from the request: the server sends its headers with the first event, and a
    # loaded machine may hand them to this process well after the tool began sleeping
    # (gunicorn also loads the app at its first request). The end cannot come sooner
    # than the tool's sleep after the request; the first event must come well before it.
    sent = time.monotonic()
    connection, response = open_stream(base, "/runs", {"prompt": f"slow {SLOW}"})
    try:
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/event-stream")
        events, _ = read_events(response, start=sent)
    finally:
        connection.close()
    first, last = events[0], events[-1]
    assert first[1] == "text" and last[1] == "done" and last[2]["stop"] == "end"
    assert last[0] >= SLOW and last[0] - first[0] >= SLOW / 2


@pytest.mark.slow
def test_keepalives_are_sent_while_a_tool_runs(server):
    base, _ = server
    connection, response = open_stream(base, "/runs", {"prompt": f"slow {SLOW}"})
    try:
        events, keepalives = read_events(response)
    finally:
        connection.close()
    assert keepalives >= 2 and events[-1][1] == "done"


def test_a_client_disconnect_cancels_the_run(server):
    base, notes = server
    notes.write_text("")
    connection, response = open_stream(base, "/runs", {"prompt": "hang"})
    try:
        events, _ = read_events(response, until=lambda e: e[1] == "tool_call")
        assert events[-1][2]["name"] == "hang"
        assert wait_for(lambda: "hang started" in read(notes))
    finally:
        connection.raw_socket.shutdown(socket.SHUT_RDWR)
        response.close()
        connection.close()
    assert wait_for(lambda: "hang cancelled" in read(notes), timeout=8), read(notes)


@pytest.mark.slow
def test_a_disconnect_cancels_the_run_within_a_second_whatever_the_keepalive(quiet_server):
    base, notes = quiet_server
    connection, response = open_stream(base, "/runs", {"prompt": "hang"})
    try:
        events, _ = read_events(response, until=lambda e: e[1] == "tool_call")
        assert wait_for(lambda: "hang started" in read(notes))
    finally:
        connection.raw_socket.shutdown(socket.SHUT_RDWR)
        response.close()
        connection.close()
    left = time.monotonic()
    assert wait_for(lambda: "hang cancelled" in read(notes), timeout=5), read(notes)
    assert time.monotonic() - left < 1.0


def test_a_paused_run_resumes_once_over_http(server):
    base, notes = server
    notes.write_text("")
    connection, response = open_stream(base, "/runs", {"prompt": "pause bob"})
    try:
        events, _ = read_events(response)
    finally:
        connection.close()
    kinds = [k for _, k, _ in events]
    assert kinds == ["text", "tool_input", "tool_call", "turn", "tool_result", "done"]
    assert events[4][2]["paused"] is True
    done = events[-1][2]
    assert done["stop"] == "paused" and done["pending"][0]["id"] == "p1"
    assert "checkpoint" not in done and read(notes) == ""
    path = f"/runs/{done['run']}/decisions"
    connection, response = open_stream(base, path, {"decisions": {"p1": True}})
    try:
        assert response.status == 200
        resumed, _ = read_events(response)
    finally:
        connection.close()
    result = next(d for _, k, d in resumed if k == "tool_result")
    assert result["result"] == "sent to bob" and resumed[-1][2]["text"] == "Sent."
    assert resumed[-1][2]["stop"] == "end" and read(notes) == "send bob\n"
    assert post_json(base, path, {"decisions": {"p1": True}})[0] == 404
    assert read(notes) == "send bob\n"


def test_bad_requests_are_refused_by_every_server(server):
    base, _ = server
    status, body = post_json(base, "/runs", None, raw=b"{not json")
    assert status == 400 and "not JSON" in json.loads(body)["message"]
    assert post_json(base, "/runs/run_unknown/decisions", {"decisions": {}})[0] == 404
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        raw.sendall(b"POST /runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 5000000\r\n\r\n{")
        head = b""
        while b"\r\n" not in head:
            chunk = raw.recv(4096)
            if not chunk:
                break
            head += chunk
    assert head.split(b"\r\n")[0].split()[1] == b"413", head[:200]


@pytest.mark.slow
def test_the_stdlib_server_holds_60_slow_clients_and_40_simultaneous_posts_with_bounded_threads(
        tmp_path, monkeypatch):
    """Half-sent requests are dropped after request_timeout; runs past max_runs are 503;
    handler threads never pass max_threads. One client thread drives every socket, so
    the process's thread count is the server's."""
    import selectors

    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    app = wsgi_app(serve_app.make_agent, store=MemoryStore(), keepalive=KEEP, max_runs=8)
    httpd = make_server(app, "127.0.0.1", 0, max_threads=12, request_timeout=1.0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    before = threading.active_count()
    port = httpd.server_address[1]
    body = json.dumps({"prompt": "slow 0.3"}).encode()
    post = (b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    halves = [b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",  # the head, cut
              post[:-5]]  # the body, cut
    selector = selectors.DefaultSelector()
    answers = {}
    try:
        for n in range(100):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(halves[n % 2] if n < 60 else post)
            sock.setblocking(False)
            answers[sock] = b""
            selector.register(sock, selectors.EVENT_READ, "slow" if n < 60 else "post")
        peak, deadline, ended = 0, time.monotonic() + 30, {}
        while len(ended) < 100 and time.monotonic() < deadline:
            peak = max(peak, threading.active_count() - before)
            for key, _ in selector.select(0.05):
                try:
                    chunk = key.fileobj.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if chunk:
                    answers[key.fileobj] += chunk
                else:
                    ended[key.fileobj] = (key.data, time.monotonic())
                    selector.unregister(key.fileobj)
        assert len(ended) == 100, f"{100 - len(ended)} connections still open after 30 s"
        slow = [answers[s] for s, (kind, _) in ended.items() if kind == "slow"]
        posts = [answers[s] for s, (kind, _) in ended.items() if kind == "post"]
        # Dropped, with no answer or a 408 when the body's read timed out first.
        assert all(a == b"" or a.startswith(b"HTTP/1.0 408 ") for a in slow), slow
        statuses = [p.split(b" ", 2)[1] for p in posts]
        assert set(statuses) <= {b"200", b"503"} and statuses.count(b"200") >= 8, statuses
        done = [p for p in posts if p.startswith(b"HTTP/1.0 200") or p.startswith(b"HTTP/1.1 200")]
        assert all(b"event: done" in p for p in done)
        busy = [p for p in posts if b" 503 " in p.split(b"\r\n", 1)[0]]
        assert all(b"Retry-After: " in p for p in busy)
        # 12 handler threads, and per run at most a pump and a tool thread (8 runs),
        # and the watchdog and the disconnect watcher: a thread per connection is 100.
        assert peak <= 12 + 2 * 8 + 2, peak
    finally:
        for sock in answers:
            sock.close()
        selector.close()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.mark.slow
def test_a_request_behind_silent_connections_gets_a_thread_of_its_own():
    app = wsgi_app(serve_app.make_agent, keepalive=KEEP)
    httpd = make_server(app, "127.0.0.1", 0, max_threads=8, request_timeout=5.0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    silent = []
    try:
        for _ in range(5):
            silent.append(socket.create_connection(("127.0.0.1", httpd.server_address[1]), timeout=5))
        start = time.monotonic()
        status, _ = post_json(httpd.url.rstrip("/"), "/runs", {"prompt": "hello"})
        assert status == 200 and time.monotonic() - start < 2.5
    finally:
        for sock in silent:
            sock.close()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.mark.slow
def test_a_request_sent_a_byte_at_a_time_is_dropped_at_the_request_timeout(tmp_path):
    app = wsgi_app(serve_app.make_agent, keepalive=KEEP)
    httpd = make_server(app, "127.0.0.1", 0, request_timeout=0.6)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", httpd.server_address[1]), timeout=5) as sock:
            start, dropped = time.monotonic(), False
            for byte in b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    dropped = True
                    break
                time.sleep(0.05)  # each byte well inside any per-recv timeout
                if time.monotonic() - start > 3:
                    break
            assert dropped or sock.recv(1) == b""
            assert time.monotonic() - start < 2.5
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def test_a_content_length_of_other_digits_is_400_over_the_stdlib_server(server):
    base, _ = server
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        raw.sendall("POST /runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: \u00b2\r\n\r\n{}".encode("utf-8"))
        head = raw.recv(4096)
    assert head.split(b"\r\n")[0].split()[1] == b"400", head[:200]


# -- helpers ------------------------------------------------------------------------------


def read(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


HIGH, LOW, EMOJI = "\ud83d", "\ude00", "\U0001f600"  # an emoji cut in two UTF-16 halves


def split_emoji_agent(server):
    """An Agent on the Anthropic backend whose answer streams an emoji's two halves in
    two deltas, as a server that cuts by UTF-16 code unit sends it."""
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hi " + HIGH, LOW + "!"])))
    return nacelle.Agent(anthropic.Backend("sk-ant-test-0123456789", base_url=server.url,
                                           max_retries=0), "Be brief.")


def test_an_answer_with_an_emoji_split_over_two_deltas_is_served_and_saved_whole(store):
    with FakeServer() as server:
        agent = split_emoji_agent(server)
        status, _, out = call_wsgi(wsgi_app(agent, store=store),
                                   body={"prompt": "Smile", "session": "smile"})
    assert status == 200 and decoded([out])[-1][1]["text"] == "Hi " + EMOJI + "!"
    assert store.load("smile")[-1].text == "Hi " + EMOJI + "!"


def test_a_forwarded_sub_agent_event_carries_its_agent_and_via_and_nested_waits_are_pending(
        tmp_path, monkeypatch):
    import checkpoint_agent

    monkeypatch.setenv("NACELLE_SIDE_EFFECTS", str(tmp_path / "effects"))
    agent = checkpoint_agent.delegating_agent(checkpoint_agent.delegating_turns())
    events = [event_json(e) for e in agent.stream([nacelle.user_text("greet ann")])]
    own = [e for e in events if "agent" not in e]
    forwarded = [e for e in events if "agent" in e]
    assert all("via" not in e for e in own) and all(e["v"] == 1 for e in events)
    tags = [(e["kind"], e["agent"], e["via"], e.get("id")) for e in forwarded]
    assert tags[:5] == [("tool_input", ["delegate"], "p1", "c1"),
                        ("tool_input", ["delegate"], "p1", "c2"),
                        ("tool_call", ["delegate"], "p1", "c1"),
                        ("tool_call", ["delegate"], "p1", "c2"), ("turn", ["delegate"], "p1", None)]
    assert sorted(tags[5:]) == [("tool_result", ["delegate"], "p1", "c1"),
                                ("tool_result", ["delegate"], "p1", "c2")]
    done = events[-1]
    assert done["stop"] == "paused"
    assert done["pending"] == [{"id": "c2", "name": "send", "agent": ["delegate"],
                                "key": "p1/c2", "input": '{"to": "ann", "body": "hi"}'}]
