"""The tool loop: event order, concurrency, exclusivity, pairing, every way a call
closes, iterations, max_tokens, resume turns, usage, cancellation — through
ScriptedBackend, with real tools on real threads."""

import json
import threading
import time

import pytest

import nacelle
from nacelle import (
    Agent, Cancelled, Event, Finish, HookPoint, HookResult, Kind, Message, Reasoning, Role,
    Stop, StreamError, Text, Thinking, ToolCall, ToolContext, ToolResult, ToolSink, Usage,
    run_tool, user_text,
)
from nacelle.backend import Request, RunContext
from nacelle.events import ToolEvent
from nacelle.loop import run
from nacelle.testing import ScriptedBackend, Turn


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def calls(name, *inputs, prefix="c"):
    return tuple(ToolCall(f"{prefix}{i}", name, json.dumps(x)) for i, x in enumerate(inputs))


@nacelle.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@nacelle.tool
def nap(seconds: float, ctx: ToolContext) -> str:
    """Sleep, waking early when cancelled."""
    ctx.cancelled.wait(seconds)
    return f"slept {seconds}"


@nacelle.tool
def fail(message: str) -> str:
    """Always raises."""
    raise ValueError(message)


def agent_for(turns, **options):
    backend = ScriptedBackend(turns)
    options.setdefault("tools", [echo, nap, fail])
    return Agent(backend, "You test.", **options), backend


def kinds(events):
    return [e.kind for e in events]


def results(events):
    return [e.tool for e in events if e.kind is Kind.TOOL_RESULT]


# -- event order --------------------------------------------------------------------

def test_events_come_in_the_documented_order():
    turn1 = assistant(Reasoning("hmm"), Text("Let me look."), *calls("echo", {"text": "a"}, {"text": "b"}))
    agent, backend = agent_for([Turn(turn1, usage=Usage(10, 5)), Turn(assistant(Text("Done.")), usage=Usage(20, 3))],
                               thinking=Thinking(show=True))
    events = list(agent.stream([user_text("go")]))
    assert kinds(events) == [
        Kind.THINKING, Kind.TEXT, Kind.TOOL_INPUT, Kind.TOOL_INPUT, Kind.TOOL_CALL,
        Kind.TOOL_CALL, Kind.TURN, Kind.TOOL_RESULT, Kind.TOOL_RESULT, Kind.TEXT, Kind.TURN,
        Kind.DONE,
    ]
    assert [e.tool.index for e in events if e.kind is Kind.TOOL_CALL] == [0, 1]
    assert events[6].stop is Stop.TOOLS and events[6].usage == Usage(10, 5)
    assert {r.id: r.result for r in results(events)} == {"c0": "a", "c1": "b"}
    backend.assert_consumed()


def test_a_call_id_reused_in_a_later_turn_is_a_new_call():
    # Some providers number calls afresh every turn ("call_0", "call_1", ...).
    turn1 = assistant(ToolCall("call_0", "echo", '{"text": "first"}'))
    turn2 = assistant(ToolCall("call_0", "echo", '{"text": "second"}'))
    agent, backend = agent_for([turn1, turn2, assistant(Text("done"))])
    finished = []
    worker = threading.Thread(target=lambda: finished.append(list(agent.stream([user_text("go")]))),
                              daemon=True)
    worker.start()
    worker.join(10)
    assert finished, "the run hung on a reused call id"
    events = finished[0]
    assert [r.result for r in results(events)] == ["first", "second"]
    assert events[-1].stop is Stop.END
    assert backend.requests[2].messages[-1].parts == (ToolResult("call_0", "echo", "second"),)


@nacelle.tool
def stubborn(seconds: float, label: str) -> str:
    """Sleeps through cancellation, then answers with its label."""
    time.sleep(seconds)
    return label


@pytest.mark.slow
def test_a_late_result_from_an_earlier_turn_does_not_close_a_new_call_with_the_same_id():
    # Turn 1's call times out at 1.2 s and answers anyway at 1.8 s, while turn 2's
    # call with the same id runs from 1.2 s to 2.1 s (its own timeout: 2.4 s).
    turn1 = assistant(ToolCall("call_0", "stubborn", '{"seconds": 1.8, "label": "late"}'))
    turn2 = assistant(ToolCall("call_0", "stubborn", '{"seconds": 0.9, "label": "mine"}'))
    agent, backend = agent_for([turn1, turn2, assistant(Text("done"))], tools=[stubborn],
                               tool_timeout=1.2)
    events = list(agent.stream([user_text("go")]))
    first, second = results(events)
    assert first.error == "timed out after 1.2 s"
    assert (second.result, second.error) == ("mine", None)
    assert backend.requests[2].messages[-1].parts == (ToolResult("call_0", "stubborn", "mine"),)


def test_thinking_events_are_filtered_unless_show_is_set():
    agent, _ = agent_for([assistant(Reasoning("secret"), Text("hi"))])
    events = list(agent.stream([user_text("go")]))
    assert kinds(events) == [Kind.TEXT, Kind.TURN, Kind.DONE]
    # ...but the reasoning is still recorded for the provider.
    assert events[-1].messages[-1].parts[0] == Reasoning("secret")


def test_done_carries_the_conversation_with_finish_parts_and_results_in_call_order():
    turn1 = assistant(Text("x"), *calls("echo", {"text": "1"}, {"text": "2"}))
    agent, _ = agent_for([turn1, assistant(Text("ok"))])
    done = list(agent.stream([user_text("go")]))[-1]
    assert done.stop is Stop.END
    first, second, third, fourth = done.messages
    assert first == user_text("go")
    assert second.parts == turn1.parts + (Finish(Stop.TOOLS),)
    assert third == Message(Role.USER, (ToolResult("c0", "echo", "1"), ToolResult("c1", "echo", "2")))
    assert fourth.parts == (Text("ok"), Finish(Stop.END))


def test_done_usage_is_the_sum_of_turn_usages():
    turn1 = assistant(*calls("echo", {"text": "a"}))
    agent, _ = agent_for([Turn(turn1, usage=Usage(3, 4, 5, 6, 1, 0.25)),
                          Turn(assistant(Text("k")), usage=Usage(7, 8, 9, 10, 2, 0.5))])
    events = list(agent.stream([user_text("go")]))
    turns = [e.usage for e in events if e.kind is Kind.TURN]
    assert events[-1].usage == turns[0] + turns[1] == Usage(10, 12, 14, 16, 3, 0.75)


def test_the_model_sees_each_tool_result_on_its_next_turn():
    agent, backend = agent_for([assistant(*calls("echo", {"text": "seen"})), assistant(Text("ok"))])
    list(agent.stream([user_text("go")]))
    assert len(backend.requests) == 2
    assert backend.requests[0].messages == (user_text("go"),)
    last = backend.requests[1].messages[-1]
    assert last.parts == (ToolResult("c0", "echo", "seen"),)


def test_the_callers_conversation_is_never_mutated():
    conversation = [user_text("go")]
    snapshot = list(conversation)
    agent, _ = agent_for([assistant(*calls("echo", {"text": "a"})), assistant(Text("ok"))])
    done = list(agent.stream(conversation))[-1]
    assert conversation == snapshot and len(done.messages) == 4


# -- concurrency --------------------------------------------------------------------

@pytest.mark.slow
def test_eight_slow_calls_run_in_parallel():
    @nacelle.tool
    def sleepy(n: int) -> str:
        """Sleep 0.2 s."""
        time.sleep(0.2)
        return str(n)

    turn = assistant(*calls("sleepy", *({"n": i} for i in range(8))))
    agent, _ = agent_for([turn, assistant(Text("ok"))], tools=[sleepy])
    nacelle.validation.compile_schema(sleepy.schema)({"n": 1})  # the first import is not the loop's cost
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 0.6
    assert sorted(r.result for r in results(events)) == [str(i) for i in range(8)]


def test_max_parallel_tools_bounds_how_many_calls_run_at_once():
    running, peak, lock = [0], [0], threading.Lock()

    @nacelle.tool
    def counted() -> str:
        """Count concurrency."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return "ok"

    agent, _ = agent_for([assistant(*calls("counted", *({} for _ in range(6)))), assistant(Text("k"))],
                         tools=[counted], max_parallel_tools=2, loop_guard=0)
    list(agent.stream([user_text("go")]))
    assert peak[0] == 2


def test_calls_of_an_exclusive_tool_never_overlap_and_start_in_index_order():
    spans, lock = [], threading.Lock()

    @nacelle.tool(exclusive=True)
    def write(n: int) -> str:
        """Write."""
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.append((n, start, time.monotonic()))
        return str(n)

    agent, _ = agent_for([assistant(*calls("write", {"n": 0}, {"n": 1}, {"n": 2})), assistant(Text("k"))],
                         tools=[write])
    list(agent.stream([user_text("go")]))
    spans.sort(key=lambda s: s[1])
    assert [s[0] for s in spans] == [0, 1, 2]
    for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
        assert start >= end


def test_results_that_land_together_are_drained_sorted_by_index():
    sink = ToolSink()
    for index in (2, 0, 1):
        sink.report(Event(Kind.TOOL_RESULT, tool=ToolEvent(f"c{index}", index, "t", "{}")))
    assert [e.tool.index for e in sink.drain()] == [0, 1, 2]
    assert sink.drain() == []


@pytest.mark.slow
def test_results_of_out_of_order_finishes_keep_call_order_in_the_conversation():
    agent, _ = agent_for([assistant(*calls("nap", {"seconds": 0.3}, {"seconds": 0.0})), assistant(Text("k"))])
    events = list(agent.stream([user_text("go")]))
    assert [r.id for r in results(events)] == ["c1", "c0"]  # the fast one lands first
    assert [r.id for r in events[-1].messages[2].parts] == ["c0", "c1"]


def test_a_sink_accepts_only_the_first_result_for_a_call():
    sink = ToolSink()
    first = Event(Kind.TOOL_RESULT, tool=ToolEvent("c0", 0, "t", "{}", error="timed out"))
    assert sink.report(first) is True
    assert sink.report(Event(Kind.TOOL_RESULT, tool=ToolEvent("c0", 0, "t", "{}", result="late"))) is False
    assert sink.drain() == [first]


# -- every way a call closes --------------------------------------------------------

def closed_once(events):
    opened = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL]
    closed = [e.tool.id for e in events if e.kind is Kind.TOOL_RESULT]
    assert sorted(opened) == sorted(closed) and len(set(closed)) == len(closed)
    return {r.id: r for r in results(events)}


def run_one(call, **options):
    agent, backend = agent_for([assistant(call), assistant(Text("ok"))], **options)
    events = list(agent.stream([user_text("go")]))
    by_id = closed_once(events)
    seen = backend.requests[1].messages[-1].parts[0]
    return by_id[call.id], seen


def test_an_unknown_tool_is_a_failed_result_naming_it():
    result, seen = run_one(ToolCall("x", "nope", "{}"))
    assert result.failed and "no tool named 'nope'" in result.error
    assert seen == ToolResult("x", "nope", result.error, failed=True)


def test_invalid_json_is_a_failed_result_the_model_can_correct():
    result, seen = run_one(ToolCall("x", "echo", '{"text": '))
    assert result.failed and "not valid JSON" in result.error and "again" in result.error
    assert seen.failed and seen.result == result.error


def test_a_tool_input_nested_a_thousand_deep_is_a_failed_result_not_a_crash():
    deep = '{"text": ' + "[" * 1000 + "]" * 1000 + "}"
    result, seen = run_one(ToolCall("x", "echo", deep))
    assert result.failed and "nested deeper than 128 levels" in result.error
    assert seen.failed and seen.result == result.error


def test_the_same_deep_input_twice_is_fingerprinted_as_repeated_not_a_crash():
    deep = '{"text": ' + "[" * 1000 + "]" * 1000 + "}"
    turns = [assistant(ToolCall(f"c{i}", "echo", deep)) for i in range(4)] + [assistant(Text("ok"))]
    agent, _ = agent_for(turns)
    events = list(agent.stream([user_text("go")]))
    closed_once(events)
    assert events[-1].kind is Kind.DONE


def test_input_that_is_not_an_object_is_a_failed_result():
    result, _ = run_one(ToolCall("x", "echo", '["a"]'))
    assert "must be a JSON object" in result.error


def test_a_schema_violation_is_a_failed_result_naming_the_field():
    result, seen = run_one(ToolCall("x", "echo", '{"text": 5}'))
    assert result.failed and "text" in result.error and "string" in result.error
    assert seen.failed


def test_a_tool_that_raises_is_a_failed_result_with_its_message():
    result, seen = run_one(ToolCall("x", "fail", '{"message": "disk full"}'))
    assert result.error == "disk full" and not result.refused
    assert seen == ToolResult("x", "fail", "disk full", failed=True)


def test_a_refusal_is_a_failed_result_marked_refused():
    result, seen = run_one(ToolCall("x", "echo", '{"text": "a"}'), approve=lambda name, input, ctx: False)
    assert result.refused and result.failed and "did not approve" in result.error
    assert seen.failed


def test_approve_is_asked_with_the_parsed_input_and_a_call_context():
    asked = []

    def approve(name, input, ctx):
        asked.append((name, input, ctx.call_id))
        return True

    result, _ = run_one(ToolCall("x", "echo", '{"text": "a"}'), approve=approve)
    assert asked == [("echo", {"text": "a"}, "x")] and result.result == "a"


def test_an_approve_that_raises_refuses():
    def approve(name, input, ctx):
        raise RuntimeError("policy service down")

    result, _ = run_one(ToolCall("x", "echo", '{"text": "a"}'), approve=approve)
    assert result.refused


def test_approve_is_called_from_several_threads_at_once():
    inside, peak, lock = [0], [0], threading.Lock()

    def approve(name, input, ctx):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.1)
        with lock:
            inside[0] -= 1
        return True

    agent, _ = agent_for([assistant(*calls("echo", *({"text": str(i)} for i in range(4)))), assistant(Text("k"))],
                         approve=approve)
    events = list(agent.stream([user_text("go")]))
    assert peak[0] > 1
    assert all(not r.failed for r in results(events))


def test_a_hook_deny_is_final_and_is_what_the_model_reads():
    approved = []
    hooks = {HookPoint.BEFORE_TOOL_CALL: [lambda e: HookResult(deny="not on Sundays")]}
    result, seen = run_one(ToolCall("x", "echo", '{"text": "a"}'), hooks=hooks,
                           approve=lambda *a: approved.append(a) or True)
    assert result.error == "not on Sundays" and not result.refused
    assert seen.result == "not on Sundays" and approved == []


def test_a_before_hook_exception_denies():
    def broken(event):
        raise KeyError("boom")

    result, _ = run_one(ToolCall("x", "echo", '{"text": "a"}'), hooks={"before_tool_call": [broken]})
    assert result.failed and "failed" in result.error and "KeyError" in result.error


def test_inject_is_appended_and_capped_at_max_inject_bytes():
    hooks = {HookPoint.AFTER_TOOL_CALL: [lambda e: HookResult(inject="é" * 20_000)]}
    result, seen = run_one(ToolCall("x", "echo", '{"text": "out"}'), hooks=hooks)
    assert result.result.startswith("out\n\n")
    injected = result.result[len("out\n\n"):]
    assert injected == "é" * (nacelle.MAX_INJECT // 2)
    assert len(injected.encode()) <= nacelle.MAX_INJECT
    assert seen.result == result.result


def test_hook_retry_is_true_after_a_deny_of_the_same_tool_in_the_run():
    seen = []

    def once(event):
        seen.append(event.retry)
        return None if event.retry else HookResult(deny="think again")

    agent, _ = agent_for([assistant(*calls("echo", {"text": "a"})),
                          assistant(*calls("echo", {"text": "b"}, prefix="d")), assistant(Text("k"))],
                         hooks={HookPoint.BEFORE_TOOL_CALL: [once]})
    events = list(agent.stream([user_text("go")]))
    assert seen == [False, True]
    assert [r.failed for r in results(events)] == [True, False]


@pytest.mark.slow
def test_a_call_past_its_timeout_is_closed_cancelled_and_its_late_result_dropped(caplog):
    saw_cancel, finished = threading.Event(), threading.Event()

    @nacelle.tool
    def stubborn(ctx: ToolContext) -> str:
        """Notices the cancel but answers anyway, late."""
        if ctx.cancelled.wait(5):
            saw_cancel.set()
        time.sleep(0.1)
        finished.set()
        return "too late"

    caplog.set_level("DEBUG", logger="nacelle.toolcalls")
    agent, backend = agent_for([assistant(ToolCall("x", "stubborn", "{}")), assistant(Text("k"))],
                               tools=[stubborn], tool_timeout=0.2)
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 1.0
    result = closed_once(events)["x"]
    assert result.error == "timed out after 0.2 s" and result.duration >= 0.2
    assert saw_cancel.wait(1.0)
    assert backend.requests[1].messages[-1].parts == (ToolResult("x", "stubborn", "timed out after 0.2 s", True),)
    assert finished.wait(2)
    deadline = time.monotonic() + 2
    while "late result for call x" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "dropped a late result for call x" in caplog.text


def test_the_iteration_cap_closes_unrun_calls_as_discarded_and_answers_them():
    ran = []

    @nacelle.tool
    def mark() -> str:
        """Record a run."""
        ran.append(1)
        return "ok"

    agent, backend = agent_for([assistant(*calls("mark", {})), assistant(*calls("mark", {}, {}, prefix="d"))],
                               tools=[mark], max_iterations=2)
    events = list(agent.stream([user_text("go")]))
    by_id = closed_once(events)
    assert len(ran) == 1 and len(backend.requests) == 2
    assert by_id["d0"].discarded and by_id["d1"].discarded and "not run" in by_id["d0"].error
    done = events[-1]
    assert done.stop is Stop.ITERATIONS
    assert done.messages[-1].parts == tuple(
        ToolResult(i, "mark", by_id[i].error, failed=True) for i in ("d0", "d1"))


def test_a_max_tokens_turn_does_not_run_its_calls_and_ends_the_run():
    ran = []

    @nacelle.tool
    def mark() -> str:
        """Record a run."""
        ran.append(1)
        return "ok"

    turn = Turn(assistant(Text("a"), ToolCall("x", "mark", "{}"), ToolCall("y", "mark", '{"cut', finished=False)),
                stop=Stop.MAX_TOKENS)
    agent, backend = agent_for([turn], tools=[mark])
    events = list(agent.stream([user_text("go")]))
    assert ran == []
    assert [e.tool.id for e in events if e.kind is Kind.TOOL_CALL] == ["x"]  # the cut call gets none
    assert closed_once(events)["x"].discarded
    done = events[-1]
    assert done.stop is Stop.MAX_TOKENS
    assert done.messages[1].parts[-1] == Finish(Stop.MAX_TOKENS)
    assert ToolCall("y", "mark", '{"cut', finished=False) in done.messages[1].parts
    assert done.messages[2].parts == (ToolResult("x", "mark", closed_once(events)["x"].error, True),)
    backend.assert_consumed()


def test_a_resume_turn_is_recorded_and_followed_at_once_by_another_turn():
    pause = Turn(assistant(Text("searching...")), stop=Stop.OTHER, resume=True)
    agent, backend = agent_for([pause, assistant(Text("found it"))])
    events = list(agent.stream([user_text("go")]))
    assert kinds(events) == [Kind.TEXT, Kind.TURN, Kind.TEXT, Kind.TURN, Kind.DONE]
    assert backend.requests[1].messages[-1].parts == (Text("searching..."), Finish(Stop.OTHER))
    assert events[-1].stop is Stop.END


def test_a_resume_turn_counts_as_an_iteration():
    pause = Turn(assistant(Text("...")), stop=Stop.OTHER, resume=True)
    agent, backend = agent_for([pause, pause], max_iterations=1)
    events = list(agent.stream([user_text("go")]))
    assert events[-1].stop is Stop.ITERATIONS and len(backend.requests) == 1


def test_a_paused_turn_with_local_calls_is_refused_before_any_call_is_announced():
    pause = Turn(assistant(ToolCall("c1", "mark", "{}")), stop=Stop.OTHER, resume=True)
    agent, _ = agent_for([pause])
    seen = []
    with pytest.raises(StreamError, match="paused a turn that asked for local tools"):
        for event in agent.stream([user_text("go")]):
            seen.append(event)
    assert [e for e in seen if e.kind is Kind.TOOL_CALL] == []


def test_a_turn_without_turn_end_is_a_stream_error():
    def turn(request, messages, ctx):
        yield Event(Kind.TEXT, text="hi")

    with pytest.raises(StreamError, match="without its TurnEnd"):
        list(run(Request("s", (user_text("go"),)), RunContext(), turn, backend="broken"))


# -- cancellation -------------------------------------------------------------------

def test_closing_the_stream_cancels_a_running_tool_without_waiting_for_it():
    entered, seen_cancel, release = threading.Event(), threading.Event(), threading.Event()

    @nacelle.tool
    def block(ctx: ToolContext) -> str:
        """Block until cancelled, then linger."""
        entered.set()
        if ctx.cancelled.wait(5):
            seen_cancel.set()
        release.wait(5)
        return "late"

    turn = assistant(ToolCall("x", "block", "{}"), ToolCall("y", "echo", '{"text": "quick"}'))
    agent, _ = agent_for([turn, assistant(Text("k"))], tools=[block, echo])
    stream = agent.stream([user_text("go")])
    for event in stream:
        if event.kind is Kind.TOOL_RESULT:  # the quick call answered; the other one runs on
            break
    assert entered.wait(2)
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 0.5  # close did not wait for the tool
    assert seen_cancel.wait(0.5)
    release.set()


def test_a_cancelled_context_closes_open_calls_then_raises_cancelled():
    ctx = RunContext()
    agent, backend = agent_for([assistant(ToolCall("x", "nap", '{"seconds": 5}')), assistant(Text("k"))])
    stream = run(agent.request([user_text("go")]), ctx, backend.turn)
    seen = []
    with pytest.raises(Cancelled):
        for event in stream:
            seen.append(event)
            if event.kind is Kind.TURN:
                threading.Timer(0.1, ctx.cancel).start()
    assert seen[-1].kind is Kind.TOOL_RESULT and seen[-1].tool.error.startswith("cancelled")


def test_a_turn_error_while_cancelled_becomes_cancelled():
    ctx = RunContext()

    def turn(request, messages, ctx_):
        ctx_.cancel()
        raise OSError("connection closed by the cancel callback")
        yield  # pragma: no cover

    with pytest.raises(Cancelled):
        list(run(Request("s", (user_text("go"),)), ctx, turn))


# -- run_tool directly --------------------------------------------------------------

def test_run_tool_reports_the_event_and_returns_the_result():
    sink = ToolSink()
    result = run_tool(echo, ToolCall("c", "echo", '{"text": "hi"}'), 3, sink, ToolContext("c", 3, "echo"))
    assert result == ToolResult("c", "echo", "hi")
    (event,) = sink.drain()
    assert event.kind is Kind.TOOL_RESULT and event.tool.index == 3 and event.tool.result == "hi"
    assert event.tool.duration >= 0


def test_run_tool_asks_no_hook_or_approval_for_invalid_input():
    asked = []
    sink = ToolSink(approve=lambda *a: asked.append("approve") or True,
                    hooks={HookPoint.BEFORE_TOOL_CALL: [lambda e: asked.append("hook")]})
    result = run_tool(echo, ToolCall("c", "echo", '{"text": 1}'), 0, sink, ToolContext())
    assert result.failed and asked == []


def test_run_tool_runs_hooks_approval_tool_and_after_hooks_in_order():
    order = []

    class Recorder:
        name, description = "rec", "records"
        schema = {"type": "object", "properties": {}, "additionalProperties": False}

        def run(self, input, ctx):
            order.append("tool")
            return "r"

    sink = ToolSink(
        approve=lambda *a: order.append("approve") or True,
        hooks={HookPoint.BEFORE_TOOL_CALL: [lambda e: order.append("before")],
               HookPoint.AFTER_TOOL_CALL: [lambda e: order.append(("after", e.result))]})
    run_tool(Recorder(), ToolCall("c", "rec", "{}"), 0, sink, ToolContext())
    assert order == ["before", "approve", "tool", ("after", "r")]


# -- duplicate call ids ---------------------------------------------------------------

def test_two_calls_with_one_id_in_a_turn_both_run_and_the_later_is_renamed():
    agent, backend = agent_for([
        assistant(ToolCall("x", "echo", '{"text": "first"}'), ToolCall("x", "echo", '{"text": "second"}'),
                  ToolCall("x_2", "echo", '{"text": "third"}')),
        assistant(Text("done")),
    ])
    events = list(agent.stream([user_text("go")]))
    by_id = closed_once(events)
    assert {i: r.result for i, r in by_id.items()} == {"x": "first", "x_3": "second", "x_2": "third"}
    sent = backend.requests[1].messages
    assert [p.id for p in sent[-2].parts if isinstance(p, ToolCall)] == ["x", "x_3", "x_2"]
    assert [p.id for p in sent[-1].parts] == ["x", "x_3", "x_2"]
    assert events[-1].stop is Stop.END


def test_a_renamed_conversation_replays_with_the_same_ids():
    agent, _ = agent_for([
        assistant(ToolCall("x", "echo", '{"text": "a"}'), ToolCall("x", "echo", '{"text": "b"}')),
        assistant(Text("done")),
    ])
    first = agent.run([user_text("go")]).messages
    again, backend = agent_for([assistant(Text("still"))])
    replayed = nacelle.loads(nacelle.dumps(first)) + [user_text("more")]
    again.run(replayed)
    assert backend.requests[0].messages[:len(first)] == first


# -- budgets at the turn boundary -----------------------------------------------------

def test_a_token_budget_stops_the_run_at_the_turn_that_passed_it():
    agent, backend = agent_for([
        Turn(assistant(*calls("echo", {"text": "a"})), usage=Usage(60, 10)),
        Turn(assistant(*calls("echo", {"text": "b"}, prefix="d")), usage=Usage(60, 10)),
        assistant(Text("never")),
    ], budget=nacelle.Budget(tokens=100))
    events = list(agent.stream([user_text("go")]))
    done = events[-1]
    assert done.stop is Stop.BUDGET and done.usage == Usage(120, 20)
    assert len(backend.requests) == 2
    unrun = closed_once(events)["d0"]
    assert unrun.discarded and unrun.error == "not run: the run's budget of 100 tokens was spent"
    assert done.messages[-1].parts == (ToolResult("d0", "echo", unrun.error, True),)


def test_a_tool_call_budget_refuses_the_turn_that_would_pass_it():
    agent, backend = agent_for([
        assistant(*calls("echo", {"text": "a"}, {"text": "b"})),
        assistant(*calls("echo", {"text": "c"}, prefix="d")),
        assistant(Text("never")),
    ], budget=nacelle.Budget(tool_calls=2))
    events = list(agent.stream([user_text("go")]))
    by_id = closed_once(events)
    assert by_id["c0"].result == "a" and by_id["c1"].result == "b"
    assert by_id["d0"].discarded and "2 tool calls" in by_id["d0"].error
    assert events[-1].stop is Stop.BUDGET


def test_a_budget_must_be_a_budget():
    with pytest.raises(nacelle.ConfigError, match="budget must be a nacelle.Budget"):
        agent_for([], budget=10)


@pytest.mark.slow
def test_a_turn_cut_by_the_time_budget_ends_the_run_with_budget_and_the_last_whole_turn():
    agent, backend = agent_for([
        assistant(*calls("echo", {"text": "a"})),
        Turn(assistant(Text("slow")), delay=5.0),
    ], budget=nacelle.Budget(seconds=0.5))
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 3.0
    done = events[-1]
    assert done.stop is Stop.BUDGET and kinds(events).count(Kind.TURN) == 1
    assert done.messages[-1].parts == (ToolResult("c0", "echo", "a"),)


# -- the loop guard ---------------------------------------------------------------------

def _same_call_each_turn(count, name="echo", text="again"):
    return [assistant(ToolCall(f"t{n}", name, json.dumps({"text": text})))
            for n in range(count)] + [assistant(Text("done"))]


def test_the_loop_guard_refuses_the_third_identical_call_and_stops_the_run_at_the_sixth():
    agent, backend = agent_for(_same_call_each_turn(7))
    events = list(agent.stream([user_text("go")]))
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [r.result for r in results[:2]] == ["again", "again"]
    assert all(r.refused and "you are repeating yourself" in r.error for r in results[2:5])
    assert "call 3 of echo" in results[2].error and "call 5 of echo" in results[4].error
    sixth = results[5]
    assert sixth.discarded and sixth.error == (
        "not run: the run stopped because echo was called 6 times with the same input")
    assert events[-1].stop is Stop.LOOP
    assert len(results) == 6 and len(backend.requests) == 6


def test_the_loop_guard_counts_calls_by_canonical_input_not_by_the_text_the_model_wrote():
    turns = [assistant(ToolCall(f"t{n}", "echo", text)) for n, text in enumerate(
        ['{"text": "a"}', '{ "text":"a" }', '{"text":"a"}'])] + [assistant(Text("done"))]
    agent, _ = agent_for(turns)
    events = list(agent.stream([user_text("go")]))
    third = [e.tool for e in events if e.kind is Kind.TOOL_RESULT][2]
    assert third.refused and events[-1].stop is Stop.END


def test_different_inputs_are_not_repeats():
    turns = [assistant(ToolCall(f"t{n}", "echo", json.dumps({"text": str(n)})))
             for n in range(8)] + [assistant(Text("done"))]
    agent, _ = agent_for(turns)
    events = list(agent.stream([user_text("go")]))
    assert not any(e.tool.refused for e in events if e.kind is Kind.TOOL_RESULT)
    assert events[-1].stop is Stop.END


def test_a_loop_guard_of_zero_lets_a_model_repeat_itself():
    agent, _ = agent_for(_same_call_each_turn(7), loop_guard=0)
    events = list(agent.stream([user_text("go")]))
    assert not any(e.tool.failed for e in events if e.kind is Kind.TOOL_RESULT)
    assert events[-1].stop is Stop.END


def test_the_loop_guard_counts_identical_calls_within_one_turn_too():
    agent, _ = agent_for([assistant(*calls("echo", *({"text": "x"} for _ in range(4)))),
                          assistant(Text("done"))], loop_guard=2)
    events = list(agent.stream([user_text("go")]))
    assert events[-1].stop is Stop.LOOP
    results = sorted((e.tool for e in events if e.kind is Kind.TOOL_RESULT), key=lambda t: t.index)
    # The run ends in that turn, so its calls that would have run are not run either.
    assert [(r.refused, r.discarded) for r in results] == [
        (False, True), (True, False), (True, False), (False, True)]
    # Every call the consumer saw is closed once, and the conversation records them all.
    assert len(results) == 4
    assert len(events[-1].messages[-1].parts) == 4


def test_the_loop_guard_must_be_a_whole_number():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(nacelle.ConfigError, match="loop_guard"):
            agent_for([], loop_guard=bad)


def test_max_iterations_defaults_to_fifty_model_requests():
    agent, backend = agent_for([assistant(ToolCall(f"t{n}", "echo", json.dumps({"text": str(n)})))
                                for n in range(60)])
    events = list(agent.stream([user_text("go")]))
    assert events[-1].stop is Stop.ITERATIONS and len(backend.requests) == 50


def test_a_cost_budget_needs_a_backend_that_knows_prices():
    backend = ScriptedBackend([], capabilities=nacelle.Capabilities())
    with pytest.raises(nacelle.ConfigError, match="a cost budget needs prices"):
        Agent(backend, "sys", budget=nacelle.Budget(cost=1.0))
    Agent(backend, "sys", budget=nacelle.Budget(tokens=10))


# -- toolsets -----------------------------------------------------------------------

class ChangingToolset:
    """A toolset whose list a tool changes, as a server's list may change mid-run."""

    def __init__(self, later):
        self.grown = False
        self.later = later

    def current(self):
        return [grow_tool(self), echo] + (self.later if self.grown else [])


def grow_tool(toolset):
    @nacelle.tool(name="grow")
    def grow() -> str:
        """Change the toolset's list."""
        toolset.grown = True
        return "grown"
    return grow


def test_a_toolset_is_asked_again_before_each_turn_so_the_next_turn_sees_its_new_list():
    toolset = ChangingToolset([nap])
    agent, backend = agent_for([assistant(ToolCall("a", "grow", "{}")),
                                assistant(ToolCall("b", "nap", '{"seconds": 0}')),
                                assistant(Text("done"))], tools=[toolset, fail])
    events = list(agent.stream([user_text("go")]))
    assert [[t.name for t in r.tools] for r in backend.requests] == [
        ["grow", "echo", "fail"], ["grow", "echo", "nap", "fail"],
        ["grow", "echo", "nap", "fail"]]
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(r.result, r.error) for r in results] == [("grown", None), ("slept 0.0", None)]
    assert events[-1].stop is Stop.END


def test_a_toolset_whose_new_list_is_invalid_keeps_the_last_list(caplog):
    agent, backend = agent_for([assistant(ToolCall("a", "grow", "{}")),
                                assistant(Text("done"))], tools=[ChangingToolset([echo])])
    assert list(agent.stream([user_text("go")]))[-1].stop is Stop.END
    assert [t.name for t in backend.requests[1].tools] == ["grow", "echo"]
    assert "the last list stays" in caplog.text


def test_an_agent_with_a_toolset_checks_its_tools_and_names_it_in_its_repr():
    agent, _ = agent_for([], tools=[ChangingToolset([])])
    assert "ChangingToolset" in repr(agent)
    with pytest.raises(nacelle.ConfigError, match="two tools are named 'echo'"):
        agent_for([], tools=[ChangingToolset([]), echo])


def test_events_forwarded_from_another_thread_are_taken_whole_and_in_order_before_the_result():
    sink = ToolSink()
    count = 20_000

    def call():
        for n in range(count):
            sink.forward(Event(Kind.TEXT, text=str(n), via="c0"))
        sink.report(Event(Kind.TOOL_RESULT, tool=ToolEvent("c0", 0, "t", "{}")))

    thread = threading.Thread(target=call)
    thread.start()
    taken, batches = [], 0
    while True:
        forwarded, results = sink.take()
        taken += forwarded
        batches += bool(forwarded)
        if results:
            assert [e.tool.id for e in results] == ["c0"]
            break
        if not forwarded:
            sink.wait(5)
    thread.join()
    assert [e.text for e in taken] == [str(n) for n in range(count)]
    assert sink.take() == ([], [])
    assert batches < count  # handed over in batches, not one wake-up per event


def test_a_forwarded_event_wakes_a_waiting_reader_at_once_and_drain_keeps_its_order():
    sink = ToolSink()
    threading.Timer(0.05, lambda: sink.forward(Event(Kind.TEXT, text="x", via="c0"))).start()
    started = time.monotonic()
    sink.wait(10)
    assert time.monotonic() - started < 5
    sink.report(Event(Kind.TOOL_RESULT, tool=ToolEvent("c1", 1, "t", "{}")))
    sink.forward(Event(Kind.TEXT, text="y", via="c0"))
    assert [e.text or e.tool.id for e in sink.drain()] == ["x", "y", "c1"]


def test_an_event_forwarded_without_via_is_refused():
    with pytest.raises(ValueError):
        ToolSink().forward(Event(Kind.TEXT, text="x"))
