"""POST /agui: the route called in-process (its 400s, the thread's paused run kept and
resumed, the ASGI app), and the same over a loopback server driven by the real
@ag-ui/client 1.0 HttpAgent — its schema enforcement, its verifier and its reducer —
for a text run, a tool run, an approval interrupt and its resume (also from the ASGI
app under uvicorn), a forwarding sub-agent, and a front end's tool answered by the next
input."""

import asyncio
import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import nacelle
from nacelle.messages import Message, Role, Text, ToolCall
from nacelle.serve import asgi_app, make_server, wsgi_app
from nacelle.serve.agui_route import thread_name
from nacelle.sessions import MemoryStore
from nacelle.testing import ScriptedBackend

TESTS = Path(__file__).resolve().parent
DRIVER = TESTS / "clients" / "agui_client.mjs"
sys.path.insert(0, str(TESTS))
from servers import free_port  # noqa: E402


@nacelle.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@nacelle.tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def approve(name, arguments, ctx):
    return nacelle.PAUSE if name == "delete" else True


def calls(*parts):
    return Message(Role.ASSISTANT, tuple(parts))


def make_agent(turns):
    return nacelle.Agent(ScriptedBackend(turns), "You help.", tools=[add, delete],
                         approve=approve)


@contextlib.contextmanager
def serving(agent, store=None):
    app = wsgi_app(agent, store=store or MemoryStore(), keepalive=5)
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.url.rstrip("/")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def post(base, body, *, content_type="application/json"):
    """(status, content type, body) of a POST /agui."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", "/agui", data, {"Content-Type": content_type})
    response = connection.getresponse()
    try:
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        connection.close()


def events_of(body):
    return [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")]


def user(text, id="u1"):
    return {"id": id, "role": "user", "content": text}


def run_input(messages, **more):
    return {"threadId": "t1", "runId": more.pop("runId", "r1"), "messages": messages,
            "tools": [], "context": [], "state": {}, "forwardedProps": {}, **more}


# -- in-process ---------------------------------------------------------------------------


def test_a_text_run_is_an_agui_event_stream():
    with serving(make_agent(["Hello there."])) as base:
        status, media, body = post(base, run_input([user("hi")]))
    assert status == 200 and media.startswith("text/event-stream")
    events = events_of(body)
    assert [e["type"] for e in events] == [
        "RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
    assert events[3]["delta"] == "Hello there."
    assert events[-1]["outcome"] == {"type": "success"}


@pytest.mark.parametrize("body, says", [
    ({"runId": "r", "messages": []}, "threadId"),
    ({"threadId": "t", "runId": "r", "messages": "hi"}, "messages"),
    ({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot"}]},
     "messages[0].role"),
    ({"threadId": "t", "runId": "r", "messages": [user("hi")], "tools": [{"name": 3}]},
     "tools[0].name"),
    ({"threadId": "t", "runId": "r", "messages": [user("hi")],
      "tools": [{"name": "add", "description": "mine"}]}, "the agent's own"),
    ({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": [
        {"type": "image", "source": {"type": "url", "value": "http://10.0.0.1/x.png"}}]}]},
     "fetches no URL"),
])
def test_an_input_of_the_wrong_shape_is_a_400_naming_the_field(body, says):
    with serving(make_agent([])) as base:
        status, media, answer = post(base, body)
    assert status == 400 and media == "application/json"
    assert says in json.loads(answer)["message"]


def test_the_route_keeps_the_checks_of_every_post():
    with serving(make_agent([])) as base:
        assert post(base, b"{}", content_type="text/plain")[0] == 415
        assert post(base, b"[[[[" * 200)[0] == 400


def test_an_approval_pauses_the_thread_and_the_next_input_resumes_it():
    store = MemoryStore()
    agent = make_agent([calls(Text("Deleting."), ToolCall("c1", "delete", '{"path": "a.txt"}')),
                        "Deleted it."])
    with serving(agent, store) as base:
        events = events_of(post(base, run_input([user("delete a.txt")]))[2])
        finished = events[-1]
        assert finished["outcome"]["type"] == "interrupt"
        (interrupt,) = finished["outcome"]["interrupts"]
        assert interrupt["toolCallId"] == "c1" and interrupt["reason"] == "tool_call"
        assert "TOOL_CALL_RESULT" not in [e["type"] for e in events]
        # A new message on a thread that waits is refused (the spec's rule 4) ...
        refused = events_of(post(base, run_input([user("delete a.txt"), user("hm", "u2")],
                                                 runId="r2"))[2])
        assert [e["type"] for e in refused] == ["RUN_ERROR"]
        assert refused[0]["code"] == "interrupt_unresolved"
        # ... and the checkpoint is still there for the answer.
        resumed = events_of(post(base, run_input(
            [user("delete a.txt")], runId="r3",
            resume=[{"interruptId": interrupt["id"], "status": "resolved",
                     "payload": {"approved": True}}]))[2])
    types = [e["type"] for e in resumed]
    assert "TOOL_CALL_START" not in types  # the spec: not re-emitted when resumed
    result = next(e for e in resumed if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "c1" and result["content"] == "deleted a.txt"
    assert resumed[-1]["outcome"] == {"type": "success"}
    with pytest.raises(LookupError):
        store.take_checkpoint(thread_name("", "t1"))


def test_a_resume_on_a_thread_that_waits_for_nothing_is_a_run_error():
    with serving(make_agent([])) as base:
        events = events_of(post(base, run_input([user("hi")], resume=[
            {"interruptId": "x", "status": "cancelled"}]))[2])
    assert [e["type"] for e in events] == ["RUN_ERROR"]


def paused_thread(base, runId="r1"):
    events = events_of(post(base, run_input([user("delete a.txt")], runId=runId))[2])
    assert events[-1]["outcome"]["type"] == "interrupt"


def resume(base, payload, *, runId="r2", status="resolved", interrupt="c1", **more):
    entry = {"interruptId": interrupt, "status": status}
    if payload is not None:
        entry["payload"] = payload
    return events_of(post(base, run_input([user("delete a.txt")], runId=runId,
                                          resume=[entry], **more))[2])


def deleting_agent():
    return make_agent([calls(ToolCall("c1", "delete", '{"path": "a.txt"}')), "Done."])


def test_an_edited_input_runs_instead_of_the_proposed_one():
    agent = deleting_agent()
    with serving(agent) as base:
        paused_thread(base)
        events = resume(base, {"approved": True, "editedArgs": {"path": "b.txt"}})
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "deleted b.txt"


@pytest.mark.parametrize("payload, status, reads", [
    (False, "resolved", "did not approve"),
    ({"approved": False, "reason": "keep it"}, "resolved", "keep it"),
    (None, "cancelled", "cancelled"),
])
def test_a_refusal_or_a_cancel_is_what_the_model_reads(payload, status, reads):
    agent = deleting_agent()
    with serving(agent) as base:
        paused_thread(base)
        events = resume(base, payload, status=status)
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert reads in result["content"]
    assert events[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize("payload, more, says", [
    ({"yes": 1}, {}, "approved"),
    ({"approved": True, "editedArgs": {"path": 5}}, {}, "path"),
    ({"approved": True}, {"interrupt": "c7"}, "c7"),
])
def test_answers_the_run_cannot_take_are_a_run_error_and_the_thread_still_waits(payload, more, says):
    agent = deleting_agent()
    with serving(agent) as base:
        paused_thread(base)
        refused = resume(base, payload, **more)
        assert [e["type"] for e in refused] == ["RUN_ERROR"] and says in refused[0]["message"]
        events = resume(base, {"approved": True}, runId="r3")
    assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"] == "deleted a.txt"


def test_one_principal_cannot_answer_anothers_thread():
    who = {"alice": "alice", "bob": "bob"}

    def authorize(environ):
        return who.get(environ.get("HTTP_X_USER", ""), False)

    app = wsgi_app(deleting_agent(), store=MemoryStore(), authorize=authorize)
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = urlsplit(httpd.url)

        def as_user(name, body):
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            connection.request("POST", "/agui", json.dumps(body).encode(),
                               {"Content-Type": "application/json", "X-User": name})
            response = connection.getresponse()
            try:
                return response.status, events_of(response.read())
            finally:
                connection.close()

        answer = {"interruptId": "c1", "status": "resolved", "payload": {"approved": True}}
        assert as_user("alice", run_input([user("delete")]))[1][-1]["outcome"]["type"] == "interrupt"
        assert as_user("mallory", run_input([user("x")]))[0] == 401
        status, events = as_user("bob", run_input([user("x")], runId="r2", resume=[answer]))
        assert [e["type"] for e in events] == ["RUN_ERROR"]
        status, events = as_user("alice", run_input([user("x")], runId="r3", resume=[answer]))
        assert events[-1]["type"] == "RUN_FINISHED"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def test_a_new_run_needs_a_user_message():
    with serving(make_agent([])) as base:
        status, _, answer = post(base, run_input([]))
    assert status == 400 and "user message" in json.loads(answer)["message"]


def test_a_front_end_tool_no_longer_declared_still_takes_its_answer():
    confirm = {"name": "confirm", "description": "Ask.", "parameters": {"type": "object"}}
    agent = make_agent([calls(ToolCall("c9", "confirm", "{}")), "Going."])
    with serving(agent) as base:
        first = events_of(post(base, run_input([user("go?")], tools=[confirm]))[2])
        assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c9"]}
        history = [user("go?"), {"id": "a", "role": "assistant", "toolCalls": [
            {"id": "c9", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}]},
            {"id": "t", "role": "tool", "toolCallId": "c9", "content": "yes"}]
        events = events_of(post(base, run_input(history, runId="r2"))[2])
    assert [e["type"] for e in events if e["type"].startswith("TOOL")] == []
    assert events[-1]["outcome"] == {"type": "success"}


def test_the_asgi_app_answers_agui_too():
    app = asgi_app(make_agent(["Hi from ASGI."]), store=MemoryStore())
    body = json.dumps(run_input([user("hi")])).encode()

    async def go():
        sent = []
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop(0)
            await asyncio.sleep(30)
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/agui", "client": ("127.0.0.1", 1),
                 "headers": [(b"content-type", b"application/json")]}
        await asyncio.wait_for(app(scope, receive, send), 10)
        return sent

    sent = asyncio.run(go())
    assert sent[0]["status"] == 200
    events = events_of(b"".join(m.get("body", b"") for m in sent[1:]))
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"


# -- the real client -----------------------------------------------------------------------


def client_prefix():
    prefix = os.environ.get("NACELLE_AGUI_CLIENT", "")
    if not shutil.which("node"):
        pytest.skip("node is not installed; the AG-UI client tests need it")
    if not prefix or not (Path(prefix) / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("NACELLE_AGUI_CLIENT does not name an npm prefix holding @ag-ui/client "
                    "(.ci/run installs it: npm install --prefix DIR @ag-ui/client@1.0.0)")
    return prefix


def drive(base, steps, thread="thread-1"):
    """What tests/clients/agui_client.mjs reports for ``steps`` run by HttpAgent."""
    scenario = {"url": base + "/agui", "threadId": thread, "steps": steps}
    done = subprocess.run(["node", str(DRIVER)], input=json.dumps(scenario), text=True,
                          capture_output=True, timeout=60,
                          env=dict(os.environ, NACELLE_AGUI_CLIENT=client_prefix()))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["warnings"] == []  # nothing stripped or dropped by the client's checks
    return report


@pytest.mark.integration
def test_the_agui_client_reads_a_text_run():
    with serving(make_agent(["Hello ", ])) as base:
        report = drive(base, [{"messages": [user("hi")]}])
    (step,) = report["steps"]
    assert "error" not in step, step
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"]
    assert report["messages"][1]["content"] == "Hello "


ARGS = '{"a": 2,          "b": 3}'.replace("          ", " " * 30)


@pytest.mark.integration
def test_the_agui_client_reads_a_tool_run():
    agent = make_agent([calls(Text("Adding."), ToolCall("c1", "add", ARGS)), "It is 5."])
    with serving(agent) as base:
        report = drive(base, [{"messages": [user("2+3?")]}])
    (step,) = report["steps"]
    assert "error" not in step, step
    messages = report["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == "Adding."
    assert messages[1]["toolCalls"] == [{"id": "c1", "type": "function", "function": {
        "name": "add", "arguments": ARGS}}]
    assert messages[2]["toolCallId"] == "c1" and messages[2]["content"] == "5"
    assert messages[3]["content"] == "It is 5."
    types = [e["type"] for e in step["events"]]
    assert types.count("STEP_STARTED") == types.count("STEP_FINISHED") == 2
    assert types.count("TOOL_CALL_ARGS") == 2  # the scripted backend streams 32 at a time


@pytest.mark.integration
def test_the_agui_client_gets_an_approval_interrupt_and_resumes_it():
    agent = make_agent([calls(ToolCall("c1", "delete", '{"path": "a.txt"}')), "Deleted."])
    with serving(agent) as base:
        report = drive(base, [
            {"messages": [user("delete a.txt")]},
            {"params": {"resume": [{"interruptId": "c1", "status": "resolved",
                                    "payload": {"approved": True}}]}},
        ])
    first, second = report["steps"]
    assert "error" not in first and "error" not in second, report["steps"]
    assert [i["toolCallId"] for i in first["pendingInterrupts"]] == ["c1"]
    assert second["pendingInterrupts"] == []
    roles = [(m["role"], m.get("content")) for m in report["messages"]]
    assert roles == [("user", "delete a.txt"), ("assistant", None),
                     ("tool", "deleted a.txt"), ("assistant", "Deleted.")]


@pytest.mark.integration
def test_the_agui_client_refusal_reaches_the_model():
    agent = make_agent([calls(ToolCall("c1", "delete", '{"path": "a.txt"}')), "Kept it."])
    with serving(agent) as base:
        report = drive(base, [
            {"messages": [user("delete a.txt")]},
            {"params": {"resume": [{"interruptId": "c1", "status": "resolved",
                                    "payload": {"approved": False, "reason": "not that one"}}]}},
        ])
    assert all("error" not in s for s in report["steps"]), report["steps"]
    tool = next(m for m in report["messages"] if m["role"] == "tool")
    assert "not that one" in tool["content"]
    assert "not that one" in str(agent.backend.requests[-1].messages[-1])


@pytest.mark.integration
def test_the_agui_client_answers_a_front_end_tool_and_the_run_goes_on():
    confirm = {"name": "confirm", "description": "Ask the person to confirm.",
               "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                              "required": ["question"]}}
    agent = make_agent([calls(ToolCall("c9", "confirm", '{"question": "Go?"}')), "Going."])
    with serving(agent) as base:
        report = drive(base, [
            {"messages": [user("go?")], "params": {"tools": [confirm]}},
            {"messages": [{"id": "t9", "role": "tool", "toolCallId": "c9", "content": "yes"}],
             "params": {"tools": [confirm]}},
        ])
    first, second = report["steps"]
    assert "error" not in first and "error" not in second, report["steps"]
    finished = first["events"][-1]
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["c9"]}
    assert [(m["role"], m.get("content")) for m in report["messages"]] == [
        ("user", "go?"), ("assistant", None), ("tool", "yes"), ("assistant", "Going.")]
    result = agent.backend.requests[-1].messages[-1].tool_results[0]
    assert result.id == "c9" and result.result == "yes"


@pytest.mark.integration
def test_the_agui_client_follows_a_sub_agent_and_resumes_its_approval():
    @nacelle.tool
    def search(query: str) -> str:
        """Search the archive."""
        return f"3 papers on {query}"

    @nacelle.tool
    def email(to: str, body: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    backend = ScriptedBackend([
        calls(ToolCall("lead_1", "researcher", '{"task": "Find papers; email Ann."}')),
        calls(Text("Searching."), ToolCall("r_1", "search", '{"query": "tides"}')),
        calls(ToolCall("r_2", "email", '{"to": "ann", "body": "3 papers"}')),
        "Found 3 papers and emailed Ann.", "Ann has the papers."])
    worker = nacelle.Agent(backend, "You research.", tools=[search, email])
    researcher = nacelle.subagent_tool(
        worker, name="researcher", forward=True,
        approve=lambda name, input, ctx: nacelle.PAUSE if name == "email" else True)
    lead = nacelle.Agent(backend, "You lead.", tools=[researcher])
    with serving(lead) as base:
        report = drive(base, [
            {"messages": [user("Tides, and tell Ann.")]},
            {"params": {"resume": [{"interruptId": "r_2", "status": "resolved",
                                    "payload": {"approved": True}}]}},
        ])
    first, second = report["steps"]
    assert "error" not in first and "error" not in second, report["steps"]
    (interrupt,) = first["pendingInterrupts"]
    assert interrupt["toolCallId"] == "r_2" and interrupt["subagentRunId"]
    started = [e for e in first["events"] if e["type"] == "SUBAGENT_STARTED"]
    assert [(e["name"], e["parentToolCallId"]) for e in started] == [("researcher", "lead_1")]
    assert any(e["type"] == "TEXT_MESSAGE_CONTENT" and e.get("subagentRunId") == interrupt["subagentRunId"]
               for e in first["events"])
    assert second["pendingInterrupts"] == []
    top = [(m["role"], m.get("content")) for m in report["messages"] if "subagentRunId" not in m]
    assert top[-1] == ("assistant", "Ann has the papers.")


@pytest.mark.integration
def test_the_agui_client_reads_the_asgi_app_under_uvicorn():
    uvicorn = pytest.importorskip("uvicorn")
    client_prefix()
    port = free_port()
    agent = make_agent([calls(ToolCall("c1", "delete", '{"path": "a.txt"}')), "Deleted."])
    server = uvicorn.Server(uvicorn.Config(asgi_app(agent, store=MemoryStore()), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        report = drive(f"http://127.0.0.1:{port}", [
            {"messages": [user("delete a.txt")]},
            {"params": {"resume": [{"interruptId": "c1", "status": "resolved",
                                    "payload": {"approved": True}}]}},
        ])
    finally:
        server.should_exit = True
        thread.join(10)
    assert all("error" not in s for s in report["steps"]), report["steps"]
    assert [(m["role"], m.get("content")) for m in report["messages"]][-2:] == [
        ("tool", "deleted a.txt"), ("assistant", "Deleted.")]
