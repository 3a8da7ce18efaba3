"""nacelle.serve.vercel: the UI message stream encoder, from hand-built events, chunk by
chunk (the AI SDK's own client reads it in tests/test_serve_chat_route.py)."""

import json
import logging

import pytest

from nacelle.errors import StreamError
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage
from nacelle.messages import Image, Text
from nacelle.serve.encode import usage_json
from nacelle.serve.vercel import encode

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def chunks(data):
    """The encoder's bytes as chunk objects; the last line must be ``data: [DONE]``."""
    text = b"".join(data).decode("utf-8")
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") and "\n" not in e for e in events), events
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: "):]) for e in events[:-1]]


def types(found):
    return [c["type"] for c in found]


def tool(call_id="c1", name="lookup", input='{"city": "Paris"}', **fields):
    return ToolEvent(call_id, 0, name, input, **fields)


def turn(stop=Stop.TOOLS):
    return Event(Kind.TURN, stop=stop)


def done(stop=Stop.END):
    return Event(Kind.DONE, stop=stop)


# -- the encoder ----------------------------------------------------------------------


def test_a_text_run_is_one_step_of_one_text_block_between_start_and_finish():
    usage = Usage(12, 5, cost=0.00042, priced=True)
    found = chunks(encode([Event(Kind.TEXT, text="Hel"), Event(Kind.TEXT, text="lo"),
                           turn(Stop.END), Event(Kind.DONE, stop=Stop.END, usage=usage)],
                          message_id="m1"))
    assert found == [{"type": "start", "messageId": "m1"}, {"type": "start-step"},
                     {"type": "text-start", "id": "text-1"},
                     {"type": "text-delta", "id": "text-1", "delta": "Hel"},
                     {"type": "text-delta", "id": "text-1", "delta": "lo"},
                     {"type": "text-end", "id": "text-1"}, {"type": "finish-step"},
                     {"type": "finish", "finishReason": "stop", "messageMetadata": {
                         "stop": "end", "usage": {
                             "input_tokens": 12, "output_tokens": 5, "cache_read_tokens": 0,
                             "cache_creation_tokens": 0, "reasoning_tokens": 0, "total": 17,
                             "cost": 0.00042, "priced": True}}}]


def test_reasoning_and_text_are_separate_blocks_each_closed_before_the_next():
    found = chunks(encode([Event(Kind.THINKING, text="hmm"), Event(Kind.TEXT, text="A"),
                           Event(Kind.THINKING, text="more"), turn(Stop.END), done()]))
    assert types(found) == ["start", "start-step", "reasoning-start", "reasoning-delta",
                            "reasoning-end", "text-start", "text-delta", "text-end",
                            "reasoning-start", "reasoning-delta", "reasoning-end",
                            "finish-step", "finish"]
    assert [c["id"] for c in found if "id" in c] == ["reasoning-1"] * 3 + ["text-2"] * 3 + ["reasoning-3"] * 3
    assert found[0] == {"type": "start"}  # no message id given, none sent


def test_streamed_tool_input_is_one_start_then_a_delta_per_event_then_the_parsed_input():
    events = [Event(Kind.TEXT, text="Looking."),
              Event(Kind.TOOL_INPUT, text='{"city":', tool=tool(input='{"city":')),
              Event(Kind.TOOL_INPUT, text=' "Paris"}', tool=tool(input='{"city": "Paris"}')),
              Event(Kind.TOOL_CALL, tool=tool()), turn(),
              Event(Kind.TOOL_RESULT, tool=tool(result="sunny")),
              Event(Kind.TEXT, text="Sunny."), turn(Stop.END), done()]
    found = chunks(encode(events))
    assert types(found) == ["start", "start-step", "text-start", "text-delta", "text-end",
                            "tool-input-start", "tool-input-delta", "tool-input-delta",
                            "tool-input-available", "tool-output-available", "finish-step",
                            "start-step", "text-start", "text-delta", "text-end",
                            "finish-step", "finish"]
    assert found[5] == {"type": "tool-input-start", "toolCallId": "c1", "toolName": "lookup"}
    assert [c["inputTextDelta"] for c in found[6:8]] == ['{"city":', ' "Paris"}']
    assert found[8] == {"type": "tool-input-available", "toolCallId": "c1",
                        "toolName": "lookup", "input": {"city": "Paris"}}
    assert found[9] == {"type": "tool-output-available", "toolCallId": "c1", "output": "sunny"}


def test_a_call_without_streamed_input_is_announced_whole():
    found = chunks(encode([Event(Kind.TOOL_CALL, tool=tool(input="")), turn(),
                           Event(Kind.TOOL_RESULT, tool=tool(input="", result="ok")), done()]))
    assert types(found)[1:5] == ["start-step", "tool-input-start", "tool-input-available",
                                 "tool-output-available"]
    assert found[3]["input"] == {}


def test_failed_and_refused_calls_end_as_output_errors_with_the_text_the_model_read():
    events = [Event(Kind.TOOL_CALL, tool=tool("a")), Event(Kind.TOOL_CALL, tool=tool("b")),
              Event(Kind.TOOL_CALL, tool=tool("c")), turn(),
              Event(Kind.TOOL_RESULT, tool=tool("a", error="no such city")),
              Event(Kind.TOOL_RESULT, tool=tool("b", refused=True, error="denied by policy")),
              Event(Kind.TOOL_RESULT, tool=tool("c", refused=True)), done(Stop.END)]
    errors = [c for c in chunks(encode(events)) if c["type"] == "tool-output-error"]
    assert [(c["toolCallId"], c["errorText"]) for c in errors] == [
        ("a", "no such city"), ("b", "denied by policy"), ("c", "the call was refused")]


def test_a_paused_call_is_an_approval_request_named_by_the_call_and_the_run_finishes_on_tool_calls():
    events = [Event(Kind.TEXT, text="Sending."), Event(Kind.TOOL_CALL, tool=tool("p1", "send")),
              turn(), Event(Kind.TOOL_RESULT, tool=tool("p1", "send", paused=True)),
              done(Stop.PAUSED)]
    found = chunks(encode(events))
    assert types(found)[-4:] == ["tool-input-available", "tool-approval-request", "finish-step", "finish"]
    assert found[-3] == {"type": "tool-approval-request", "approvalId": "p1", "toolCallId": "p1"}
    assert found[-1]["finishReason"] == "tool-calls"
    assert found[-1]["messageMetadata"]["stop"] == "paused"


def test_a_resumed_call_is_not_announced_again_and_a_refused_one_is_denied():
    events = [Event(Kind.TOOL_CALL, tool=tool("yes")), Event(Kind.TOOL_CALL, tool=tool("no")),
              Event(Kind.TOOL_RESULT, tool=tool("yes", result="done")),
              Event(Kind.TOOL_RESULT, tool=tool("no", refused=True, error="not today")),
              Event(Kind.TEXT, text="OK."), turn(Stop.END), done()]
    found = chunks(encode(events, message_id="m1", resumed={"yes": True, "no": False}))
    assert found[:3] == [{"type": "start", "messageId": "m1"},
                         {"type": "tool-output-available", "toolCallId": "yes", "output": "done"},
                         {"type": "tool-output-denied", "toolCallId": "no"}]
    assert types(found)[3:] == ["start-step", "text-start", "text-delta", "text-end",
                                "finish-step", "finish"]


def test_input_that_is_not_json_and_input_cut_off_end_as_input_errors():
    events = [Event(Kind.TOOL_CALL, tool=tool("bad", input='{"city": ')),
              Event(Kind.TOOL_INPUT, text='{"ci', tool=tool("cut", input='{"ci')),
              turn(Stop.MAX_TOKENS), Event(Kind.TOOL_RESULT, tool=tool("bad", error="bad JSON")),
              done(Stop.MAX_TOKENS)]
    found = chunks(encode(events))
    input_errors = [c for c in found if c["type"] == "tool-input-error"]
    assert [(c["toolCallId"], c["input"]) for c in input_errors] == [("bad", '{"city": '), ("cut", None)]
    assert "not JSON" in input_errors[0]["errorText"] and "cut off" in input_errors[1]["errorText"]
    assert found[-1]["finishReason"] == "length"


def test_a_server_tool_is_marked_provider_executed():
    events = [Event(Kind.TOOL_CALL, tool=tool("s1", "web_search", '{"q": "x"}', server="anthropic")),
              Event(Kind.TOOL_RESULT, tool=tool("s1", "web_search", '{"q": "x"}', result="r",
                                                server="anthropic")),
              turn(Stop.END), done()]
    found = chunks(encode(events))
    assert all(c.get("providerExecuted") is True for c in found if c["type"].startswith("tool-"))


def test_a_tool_result_with_images_adds_a_file_chunk_per_image():
    result = tool(result="screenshot", content=(Text("screenshot"), Image("image/png", PNG_B64)))
    found = chunks(encode([Event(Kind.TOOL_CALL, tool=tool()), Event(Kind.TOOL_RESULT, tool=result),
                           done()]))
    files = [c for c in found if c["type"] == "file"]
    assert files == [{"type": "file", "mediaType": "image/png",
                      "url": "data:image/png;base64," + PNG_B64}]


def test_forwarded_sub_agent_events_are_transient_data_and_never_end_the_stream():
    events = [Event(Kind.TOOL_CALL, tool=tool("t1", "research")),
              Event(Kind.TEXT, text="digging", agent=("researcher",), via="t1"),
              Event(Kind.DONE, stop=Stop.END, agent=("researcher",), via="t1"),
              Event(Kind.TOOL_RESULT, tool=tool("t1", "research", result="found")),
              done()]
    found = chunks(encode(events))
    data = [c for c in found if c["type"] == "data-subagent"]
    assert data[0] == {"type": "data-subagent", "transient": True,
                       "data": {"agent": ["researcher"], "via": "t1", "kind": "text",
                                "text": "digging"}}
    assert data[1]["data"]["stop"] == "end"
    assert types(found)[-3:] == ["tool-output-available", "finish-step", "finish"]


def test_a_sub_agents_paused_call_is_asked_about_in_a_step_of_its_own_and_its_parent_is_not():
    inside = dict(agent=("errand",), via="d1")
    events = [Event(Kind.TOOL_CALL, tool=tool("d1", "errand")), turn(),
              Event(Kind.TOOL_CALL, tool=tool("e1", "send"), **inside),
              Event(Kind.TOOL_RESULT, tool=tool("e1", "send", paused=True), **inside),
              Event(Kind.TOOL_RESULT, tool=tool("d1", "errand", paused=True)),
              done(Stop.PAUSED)]
    found = chunks(encode(events))
    assert [c["type"] for c in found if c["type"] != "data-subagent"] == [
        "start", "start-step", "tool-input-start", "tool-input-available", "finish-step",
        "start-step", "tool-input-start", "tool-input-available", "tool-approval-request",
        "finish-step", "finish"]
    marked = [c for c in found if c.get("toolCallId") == "e1"]
    assert all(c.get("toolMetadata") == {"agent": ["errand"], "via": "d1"}
               for c in marked if c["type"].startswith("tool-input"))
    assert marked[-1] == {"type": "tool-approval-request", "approvalId": "e1", "toolCallId": "e1"}


def test_a_resumed_sub_agents_call_gets_its_outcome_on_the_part_the_client_shows():
    inside = dict(agent=("errand",), via="d1")
    events = [Event(Kind.TOOL_CALL, tool=tool("d1", "errand")),
              Event(Kind.TOOL_CALL, tool=tool("e1", "send"), **inside),
              Event(Kind.TOOL_RESULT, tool=tool("e1", "send", result="sent"), **inside),
              Event(Kind.TOOL_RESULT, tool=tool("d1", "errand", result="Sent.")),
              done()]
    found = [c for c in chunks(encode(events, resumed={"d1": True, "e1": True}))
             if c["type"] != "data-subagent"]
    assert found == [{"type": "start"},
                     {"type": "tool-output-available", "toolCallId": "e1", "output": "sent"},
                     {"type": "tool-output-available", "toolCallId": "d1", "output": "Sent."},
                     {"type": "finish", "finishReason": "stop",
                      "messageMetadata": {"stop": "end", "usage": usage_json(Usage())}}]


def test_a_failing_run_closes_its_open_parts_then_says_error_and_finishes_on_error(caplog):
    def events():
        yield Event(Kind.TEXT, text="Part")
        yield Event(Kind.TOOL_CALL, tool=tool())
        raise StreamError("the provider broke off")

    found = chunks(encode(events()))
    assert types(found)[-5:] == ["tool-input-available", "tool-output-error", "error",
                                 "finish-step", "finish"]
    assert found[-3] == {"type": "error", "errorText": "the provider broke off"}
    assert found[-1] == {"type": "finish", "finishReason": "error"}  # no DONE, no metadata

    def broken():
        yield Event(Kind.TEXT, text="x")
        raise KeyError("/srv/secret/path")

    with caplog.at_level(logging.ERROR, logger="nacelle.serve.vercel"):
        found = chunks(encode(broken()))
    assert found[-3] == {"type": "error", "errorText": "the run failed; the server's log says why"}
    assert "secret" not in json.dumps(found) and "KeyError" in caplog.text


def test_closing_the_stream_closes_the_run():
    closed = []

    def events():
        try:
            yield Event(Kind.TEXT, text="a")
            yield Event(Kind.TEXT, text="b")
        finally:
            closed.append(True)

    stream = encode(events())
    next(stream), next(stream)
    stream.close()
    assert closed == [True]


def test_a_run_without_a_done_still_finishes_and_a_lone_surrogate_is_replaced():
    found = chunks(encode(iter([Event(Kind.TEXT, text="a\ud83d")])))
    assert found[3]["delta"] == "a?"  # UTF-8 cannot hold half a pair
    assert found[-1] == {"type": "finish", "finishReason": "other"}
    assert chunks(encode([])) == [{"type": "start"}, {"type": "finish", "finishReason": "other"}]


@pytest.mark.parametrize("stop, reason", [(Stop.END, "stop"), (Stop.TOOLS, "tool-calls"),
                                          (Stop.PAUSED, "tool-calls"), (Stop.MAX_TOKENS, "length"),
                                          (Stop.CONTEXT, "length"), (Stop.REFUSAL, "content-filter"),
                                          (Stop.BUDGET, "other"), (Stop.ITERATIONS, "other")])
def test_the_run_stop_becomes_the_finish_reason(stop, reason):
    assert chunks(encode([done(stop)]))[-1]["finishReason"] == reason
