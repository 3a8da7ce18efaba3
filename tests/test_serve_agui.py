"""nacelle.serve.agui: every mapping of the pure encoder from hand-built Events, and
the encoder's streams for those events read by the real @ag-ui/client 1.0 HttpAgent
(its schema enforcement and verifier) from a server that only replays them."""

import contextlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import nacelle
from nacelle.checkpoint import Checkpoint, PendingCall
from nacelle.compaction import Compacted
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage
from nacelle.messages import Image, Text
from nacelle.serve import make_server
from nacelle.serve.agui import APPROVAL_SCHEMA, encode, frame

DRIVER = Path(__file__).resolve().parent / "clients" / "agui_client.mjs"


def call(id, name="add", input='{"a":1}', **more):
    return ToolEvent(id, 0, name, input, **more)


def text(delta, **who):
    return Event(Kind.TEXT, text=delta, **who)


def turn(**who):
    return Event(Kind.TURN, stop=Stop.END, **who)


def done(stop=Stop.END, **more):
    return Event(Kind.DONE, stop=stop, **more)


def encoded(events, **options):
    options.setdefault("thread_id", "t")
    options.setdefault("run_id", "r")
    return list(encode(events, **options))


def types(events):
    return [e["type"] for e in events]


def test_a_text_run_is_a_run_a_step_and_a_message():
    out = encoded([text("Hel"), text("lo"), turn(), done()])
    assert out == [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STEP_STARTED", "stepName": "turn 1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "r-m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r-m1", "delta": "Hel"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r-m1", "delta": "lo"},
        {"type": "TEXT_MESSAGE_END", "messageId": "r-m1"},
        {"type": "STEP_FINISHED", "stepName": "turn 1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"},
         "metadata": {"stop": "end"}},
    ]


def test_thinking_is_a_reasoning_span_holding_one_message_closed_before_the_text():
    out = encoded([Event(Kind.THINKING, text="hmm"), Event(Kind.THINKING, text="..."),
                   text("Yes."), turn(), done()])
    assert types(out)[2:10] == [
        "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert out[3] == {"type": "REASONING_MESSAGE_START", "messageId": "r-m1", "role": "reasoning"}


def test_streamed_tool_input_is_one_args_event_per_delta():
    events = [text("Adding."),
              Event(Kind.TOOL_INPUT, text='{"a"', tool=call("c1", input='{"a"')),
              Event(Kind.TOOL_INPUT, text=':1}', tool=call("c1")),
              Event(Kind.TOOL_CALL, tool=call("c1")), turn(),
              Event(Kind.TOOL_RESULT, tool=call("c1", result="1")), done()]
    out = encoded(events)
    tools = [e for e in out if e["type"].startswith("TOOL_CALL")]
    assert tools == [
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "add",
         "parentMessageId": "r-m1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a"'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": ":1}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r-m2", "toolCallId": "c1", "content": "1",
         "role": "tool"},
    ]
    assert out.index(tools[3]) < types(out).index("STEP_FINISHED")


def test_a_call_without_streamed_input_sends_its_whole_input_once():
    out = encoded([Event(Kind.TOOL_CALL, tool=call("c1", input='{"a":2}')), turn(), done()])
    assert [e for e in out if e["type"] == "TOOL_CALL_ARGS"] == [
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a":2}'}]
    start = next(e for e in out if e["type"] == "TOOL_CALL_START")
    assert start["parentMessageId"] == "r-m1"  # the turn's message, made for its calls


def test_input_the_deltas_did_not_finish_is_sent_at_the_call():
    out = encoded([Event(Kind.TOOL_INPUT, text='{"a"', tool=call("c1", input='{"a"')),
                   Event(Kind.TOOL_CALL, tool=call("c1", input='{"a":1}')), turn(), done()])
    assert [e["delta"] for e in out if e["type"] == "TOOL_CALL_ARGS"] == ['{"a"', ":1}"]


def test_an_input_streamed_in_many_pieces_arrives_whole_and_once():
    whole = '{"text": "' + "x" * 10_000 + '"}'

    def stream():
        for end in range(32, len(whole) + 32, 32):
            yield Event(Kind.TOOL_INPUT, text=whole[end - 32:end],
                        tool=call("c1", input=whole[:end]))
        yield Event(Kind.TOOL_CALL, tool=call("c1", input=whole))
        yield turn()
        yield done()

    args = [e["delta"] for e in encoded(stream()) if e["type"] == "TOOL_CALL_ARGS"]
    assert len(args) == -(-len(whole) // 32) and "".join(args) == whole


def test_a_call_the_turn_cut_off_is_ended_with_its_turn():
    out = encoded([Event(Kind.TOOL_INPUT, text='{"a', tool=call("c1", input='{"a')),
                   Event(Kind.TURN, stop=Stop.MAX_TOKENS), done(Stop.MAX_TOKENS)])
    assert types(out)[-3:] == ["TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert out[-1]["metadata"] == {"stop": "max_tokens"}


def test_a_failed_call_reads_as_its_failure_and_media_as_content_parts():
    image = Image("image/png", "iVBORw0KGgo=")
    out = encoded([Event(Kind.TOOL_CALL, tool=call("c1")), Event(Kind.TOOL_CALL, tool=call("c2")),
                   turn(),
                   Event(Kind.TOOL_RESULT, tool=call("c1", error="no such file")),
                   Event(Kind.TOOL_RESULT, tool=call("c2", result="a chart",
                                                    content=(Text("a chart"), image))),
                   done()])
    results = [e for e in out if e["type"] == "TOOL_CALL_RESULT"]
    assert results[0]["content"] == "no such file"
    assert results[1]["content"] == [
        {"type": "text", "text": "a chart"},
        {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=",
                                     "mimeType": "image/png"}}]


def test_a_result_whose_call_was_never_started_gets_its_call_first():
    out = encoded([Event(Kind.TOOL_RESULT, tool=call("c1", result="1")), done()])
    assert types(out)[1:5] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                               "TOOL_CALL_RESULT"]


def paused_done(*pending):
    checkpoint = Checkpoint((), (), tuple(PendingCall(id, name, "{}", "f") for id, name in pending))
    return Event(Kind.DONE, stop=Stop.PAUSED, checkpoint=checkpoint)


def test_an_approval_ends_the_run_with_an_interrupt_and_no_result():
    out = encoded([Event(Kind.TOOL_CALL, tool=call("c1", "delete")), turn(),
                   Event(Kind.TOOL_RESULT, tool=call("c1", "delete", error="paused",
                                                     paused=True)),
                   paused_done(("c1", "delete"))])
    assert "TOOL_CALL_RESULT" not in types(out)
    assert out[-1]["outcome"] == {"type": "interrupt", "interrupts": [
        {"id": "c1", "reason": "tool_call", "toolCallId": "c1",
         "message": "Allow this call of delete?", "responseSchema": APPROVAL_SCHEMA,
         "metadata": {"toolName": "delete"}}]}


def test_a_front_end_tool_ends_the_run_with_its_call_pending():
    out = encoded([Event(Kind.TOOL_CALL, tool=call("c1", "confirm")), turn(),
                   Event(Kind.TOOL_RESULT, tool=call("c1", "confirm", paused=True)),
                   paused_done(("c1", "confirm"))], client_tools={"confirm"})
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c1"]}
    assert "TOOL_CALL_RESULT" not in types(out)


def test_a_resumed_call_is_not_started_again_and_a_client_answer_not_repeated():
    events = [Event(Kind.TOOL_CALL, tool=call("c1", "delete")),
              Event(Kind.TOOL_CALL, tool=call("c2", "confirm")),
              Event(Kind.TOOL_RESULT, tool=call("c1", "delete", result="deleted")),
              Event(Kind.TOOL_RESULT, tool=call("c2", "confirm", result="yes")),
              text("Done."), turn(), done()]
    out = encoded(events, announced={"c1", "c2"}, answered={"c2"})
    assert types(out)[:3] == ["RUN_STARTED", "TOOL_CALL_RESULT", "STEP_STARTED"]
    assert out[1]["toolCallId"] == "c1"


def test_a_sub_agents_events_are_attributed_to_its_run():
    via = {"agent": ("researcher",), "via": "p1"}
    out = encoded([Event(Kind.TOOL_CALL, tool=call("p1", "researcher")), turn(),
                   text("Looking.", **via), Event(Kind.TOOL_CALL, tool=call("k1"), **via),
                   turn(**via), Event(Kind.TOOL_RESULT, tool=call("k1", result="1"), **via),
                   Event(Kind.TOOL_RESULT, tool=call("p1", "researcher", result="found")),
                   done()])
    started = next(e for e in out if e["type"] == "SUBAGENT_STARTED")
    assert started == {"type": "SUBAGENT_STARTED", "subagentRunId": "r-s2",
                       "name": "researcher", "parentToolCallId": "p1"}
    inside = out[out.index(started) + 1:types(out).index("SUBAGENT_FINISHED")]
    assert inside and all(e.get("subagentRunId") == "r-s2" for e in inside)
    assert {"type": "STEP_STARTED", "stepName": "turn 1", "subagentRunId": "r-s2"} in inside
    finished = types(out).index("SUBAGENT_FINISHED")
    assert out[finished + 1]["type"] == "TOOL_CALL_RESULT" and "subagentRunId" not in out[finished + 1]


def test_a_sub_agents_sub_agent_names_its_parent_and_finishes_first():
    child = {"agent": ("a",), "via": "p1"}
    grandchild = {"agent": ("a", "b"), "via": "k1"}
    out = encoded([Event(Kind.TOOL_CALL, tool=call("p1", "a")),
                   Event(Kind.TOOL_CALL, tool=call("k1", "b"), **child),
                   text("deep", **grandchild),
                   Event(Kind.TOOL_RESULT, tool=call("p1", "a", error="it broke")), done()])
    subs = [e for e in out if e["type"].startswith("SUBAGENT")]
    assert subs == [
        {"type": "SUBAGENT_STARTED", "subagentRunId": "r-s2", "name": "a",
         "parentToolCallId": "p1"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "r-s4", "name": "b",
         "parentToolCallId": "k1", "parentSubagentRunId": "r-s2"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-s4"},
        {"type": "SUBAGENT_ERROR", "subagentRunId": "r-s2", "message": "it broke"},
    ]


def test_a_sub_agents_approval_is_an_interrupt_attributed_to_it():
    child = {"agent": ("a",), "via": "p1"}
    nested = Checkpoint((), (), (PendingCall("k1", "delete", "{}", "f"),))
    checkpoint = Checkpoint((), (), (PendingCall("p1", "a", "{}", "f", child=nested),))
    out = encoded([Event(Kind.TOOL_CALL, tool=call("p1", "a")),
                   Event(Kind.TOOL_CALL, tool=call("k1", "delete"), **child),
                   Event(Kind.TOOL_RESULT, tool=call("k1", "delete", paused=True), **child),
                   Event(Kind.TOOL_RESULT, tool=call("p1", "a", paused=True)),
                   Event(Kind.DONE, stop=Stop.PAUSED, checkpoint=checkpoint)])
    assert {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-s2",
            "outcome": {"type": "suspended"}} in out
    (interrupt,) = out[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == "k1" and interrupt["subagentRunId"] == "r-s2"


def test_sub_agents_that_name_each_others_calls_still_end_the_run():
    # Not a stream a run makes (a call is one agent's), but the encoder must not loop
    # on it: each sub-agent finishes once.
    a = {"agent": ("a",), "via": "k2"}
    b = {"agent": ("b",), "via": "k1"}
    out = encoded([Event(Kind.TOOL_CALL, tool=call("k1"), **a),
                   Event(Kind.TOOL_CALL, tool=call("k2"), **b), done()])
    assert types(out).count("SUBAGENT_FINISHED") == 2 and out[-1]["type"] == "RUN_FINISHED"


def test_compaction_is_a_custom_event():
    compacted = Compacted((), removed=4, tokens=900, summary="earlier", strategy="summarize")
    out = encoded([Event(Kind.COMPACTION, text="earlier", compaction=compacted), done()])
    assert out[1] == {"type": "CUSTOM", "name": "nacelle.compaction", "value": {
        "strategy": "summarize", "removed": 4, "tokens": 900, "summary": "earlier"}}


def test_usage_is_counted_as_agui_counts_it_and_output_is_the_result():
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100,
                  cache_creation_tokens=20, reasoning_tokens=3)
    out = encoded([done(usage=usage, output={"answer": 42})])
    assert out[-1]["usage"] == [{"inputTokens": 130, "outputTokens": 5, "totalTokens": 135,
                                 "reasoningTokens": 3, "cachedInputTokens": 100,
                                 "cacheWriteInputTokens": 20}]
    assert out[-1]["result"] == {"answer": 42}


def failing(exc):
    yield text("partial")
    raise exc


def test_a_run_that_raises_ends_with_run_error():
    out = encoded(failing(nacelle.StreamError("the stream broke")))
    assert out[-1] == {"type": "RUN_ERROR", "message": "the stream broke", "code": "StreamError"}
    hidden = encoded(failing(KeyError("/srv/secret/path")))
    assert hidden[-1] == {"type": "RUN_ERROR", "code": "internal_error",
                          "message": "the run failed; the server's log says why"}


def test_events_that_stop_without_done_end_with_run_error():
    out = encoded([text("cut")])
    assert out[-1] == {"type": "RUN_ERROR", "message": "the run ended without finishing",
                       "code": "incomplete"}


def test_closing_the_encoder_closes_the_run():
    closed = []

    def run():
        try:
            yield text("a")
            yield text("b")
        finally:
            closed.append(True)

    stream = encode(run(), thread_id="t", run_id="r")
    next(stream), next(stream), next(stream)
    stream.close()
    assert closed == [True]


def test_a_frame_is_one_data_line():
    assert frame({"type": "X", "delta": "a\nb\u2028"}) == (
        'data: {"type":"X","delta":"a\\nb\u2028"}\n\n'.encode())


# -- the real client reads the encoder's streams -----------------------------------------


def replaying(body):
    def app(environ, start_response):
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return [body]
    return app


@contextlib.contextmanager
def serving(app):
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.url.rstrip("/")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def client_reads_steps(app, runs, thread="t"):
    """What HttpAgent reports for ``runs`` runs read from ``app``."""
    prefix = os.environ.get("NACELLE_AGUI_CLIENT", "")
    if not shutil.which("node"):
        pytest.skip("node is not installed; the AG-UI client tests need it")
    if not prefix or not (Path(prefix) / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("NACELLE_AGUI_CLIENT does not name an npm prefix holding @ag-ui/client "
                    "(.ci/run installs it: npm install --prefix DIR @ag-ui/client@1.0.0)")
    with serving(app) as base:
        steps = [{"messages": [{"id": f"u{i}", "role": "user", "content": "go"}]}
                 for i in range(runs)]
        scenario = {"url": base + "/agui", "threadId": thread, "steps": steps}
        done_ = subprocess.run(["node", str(DRIVER)], input=json.dumps(scenario), text=True,
                               capture_output=True, timeout=120,
                               env=dict(os.environ, NACELLE_AGUI_CLIENT=prefix))
    assert done_.returncode == 0, done_.stderr
    report = json.loads(done_.stdout)
    assert report["warnings"] == []
    return report


def client_reads(events, thread="t"):
    body = b"".join(frame(e) for e in encode(events, thread_id=thread, run_id="r"))
    report = client_reads_steps(replaying(body), 1, thread)
    assert "error" not in report["steps"][0], report["steps"][0]
    return report


@pytest.mark.integration
def test_the_client_verifies_streamed_arguments_reasoning_and_sub_agents():
    child = {"agent": ("a",), "via": "p1"}
    grandchild = {"agent": ("a", "b"), "via": "k1"}
    report = client_reads([
        Event(Kind.THINKING, text="plan"), text("Asking."),
        Event(Kind.TOOL_INPUT, text='{"q":', tool=call("p1", "a", '{"q":')),
        Event(Kind.TOOL_INPUT, text='"x"}', tool=call("p1", "a", '{"q":"x"}')),
        Event(Kind.TOOL_CALL, tool=call("p1", "a", '{"q":"x"}')), turn(),
        text("Thinking.", **child), Event(Kind.TOOL_CALL, tool=call("k1", "b"), **child),
        turn(**child), Event(Kind.THINKING, text="deep", **grandchild),
        text("Deep.", **grandchild), turn(**grandchild),
        Event(Kind.TOOL_RESULT, tool=call("k1", "b", result="deep"), **child),
        text("Found.", **child), turn(**child),
        Event(Kind.TOOL_RESULT, tool=call("p1", "a", '{"q":"x"}', result="found")),
        text("It is x."), turn(), done()])
    messages = report["messages"]
    top = [m for m in messages if "subagentRunId" not in m]
    assert [m["role"] for m in top] == ["user", "reasoning", "assistant", "tool", "assistant"]
    assert top[2]["toolCalls"][0]["function"]["arguments"] == '{"q":"x"}'
    assert {m["subagentRunId"] for m in messages if "subagentRunId" in m} == {"r-s3", "r-s5"}


@pytest.mark.integration
def test_the_client_verifies_an_interrupt_and_a_pending_front_end_call():
    report = client_reads([
        Event(Kind.TOOL_CALL, tool=call("c1", "delete")),
        Event(Kind.TOOL_CALL, tool=call("c2", "add")), turn(),
        Event(Kind.TOOL_RESULT, tool=call("c2", result="1")),
        Event(Kind.TOOL_RESULT, tool=call("c1", "delete", paused=True)),
        paused_done(("c1", "delete"))])
    assert [i["id"] for i in report["steps"][0]["pendingInterrupts"]] == ["c1"]


# -- any stream: everything opened is closed, every continuation has its opener -------


AGENTS = [{}, {"agent": ("a",), "via": "p1"}, {"agent": ("a",), "via": "p2"},
          {"agent": ("a", "b"), "via": "k1"}]
# Each agent's own call ids (a call is one agent's): the run's p1 and p2 start the two
# "a" sub-agents, the first one's k1 starts "b".
CALLS = [["p1", "p2", "c1"], ["k1", "x1"], ["y1", "y2"], ["z1", "z2"]]


def random_events(draw_agent, draw_kind, draw_call, draw_flag, length):
    """A stream of ``length`` events of any kinds, agents and calls, then DONE."""
    events = []
    for _ in range(length):
        index = draw_agent()
        who = AGENTS[index]
        kind = draw_kind()
        ids = CALLS[index]
        call_id = ids[draw_call() % len(ids)]
        if kind == "text":
            events.append(text("x", **who))
        elif kind == "thinking":
            events.append(Event(Kind.THINKING, text="y", **who))
        elif kind == "input":
            events.append(Event(Kind.TOOL_INPUT, text='{"', tool=call(call_id, input='{"'), **who))
        elif kind == "call":
            events.append(Event(Kind.TOOL_CALL, tool=call(call_id), **who))
        elif kind == "result":
            paused, failed = draw_flag(), draw_flag()
            events.append(Event(Kind.TOOL_RESULT, tool=call(
                call_id, result="r", paused=paused, error="e" if failed else None), **who))
        elif kind == "turn":
            events.append(turn(**who))
        else:
            events.append(Event(Kind.COMPACTION, text="s", **who))
    return events + [done()]


KINDS = ["text", "thinking", "input", "call", "result", "turn", "compaction"]


def check_stream(out):
    """The verifier's rules (@ag-ui/client's verifyEvents), for one run."""
    assert out[0]["type"] == "RUN_STARTED" and out[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    messages, reasoning, calls_, steps, subs, closed_subs = {}, set(), set(), set(), set(), set()
    for event in out[1:-1]:
        kind, owner = event["type"], event.get("subagentRunId")
        assert kind not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR")
        if kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in messages
            messages[event["messageId"]] = owner
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert messages.get(event["messageId"], "none") == owner
            if kind == "TEXT_MESSAGE_END":
                del messages[event["messageId"]]
        elif kind in ("REASONING_START", "REASONING_MESSAGE_START"):
            assert (kind, event["messageId"]) not in reasoning
            reasoning.add((kind, event["messageId"]))
        elif kind in ("REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            assert ("REASONING_MESSAGE_START", event["messageId"]) in reasoning
            if kind == "REASONING_MESSAGE_END":
                reasoning.remove(("REASONING_MESSAGE_START", event["messageId"]))
        elif kind == "REASONING_END":
            reasoning.remove(("REASONING_START", event["messageId"]))
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in calls_
            calls_.add(event["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in calls_
            if kind == "TOOL_CALL_END":
                calls_.remove(event["toolCallId"])
        elif kind == "STEP_STARTED":
            assert (owner, event["stepName"]) not in steps
            steps.add((owner, event["stepName"]))
        elif kind == "STEP_FINISHED":
            steps.remove((owner, event["stepName"]))
        elif kind == "SUBAGENT_STARTED":
            assert event["subagentRunId"] not in subs | closed_subs
            assert event.get("parentSubagentRunId") in subs | closed_subs | {None}
            subs.add(event["subagentRunId"])
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            subs.remove(event["subagentRunId"])
            closed_subs.add(event["subagentRunId"])
        if owner is not None and not kind.startswith("SUBAGENT"):
            assert owner in subs  # attributed work belongs to a running sub-agent
    if out[-1]["type"] == "RUN_FINISHED":
        assert not (messages or reasoning or calls_ or steps or subs)


try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover - hypothesis is a test extra
    given = None

if given is not None:
    @settings(max_examples=150, deadline=None)
    @given(st.data())
    def test_any_stream_opens_before_it_continues_and_closes_all_before_run_finished(data):
        events = random_events(
            lambda: data.draw(st.integers(0, len(AGENTS) - 1)),
            lambda: data.draw(st.sampled_from(KINDS)),
            lambda: data.draw(st.integers(0, 2)),
            lambda: data.draw(st.booleans()),
            data.draw(st.integers(0, 30)))
        check_stream(encoded(events))


@pytest.mark.integration
def test_the_client_verifies_forty_random_streams():
    import random

    rng = random.Random(35)
    streams = [random_events(lambda: rng.randrange(len(AGENTS)), lambda: rng.choice(KINDS),
                             lambda: rng.randrange(3), lambda: rng.random() < 0.3,
                             rng.randrange(40)) for _ in range(40)]
    bodies = [b"".join(frame(e) for e in encode(s, thread_id="t", run_id=f"r{i}"))
              for i, s in enumerate(streams)]

    def app(environ, start_response):
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return [bodies.pop(0)]

    report = client_reads_steps(app, len(streams))
    assert len(report["steps"]) == 40
    assert all("error" not in s for s in report["steps"]), [
        s["error"] for s in report["steps"] if "error" in s]
