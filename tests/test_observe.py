"""Observers: what a run reports and when — through a real backend on a loopback
server, real tools on their threads, Retry and Fallback — an observer that fails,
the DEBUG line per request, and the Recorder's JSON lines."""

import json
import logging
import threading

import pytest

import nacelle
from nacelle import Agent, Kind, Stop, ToolContext, Usage, user_text
from nacelle.backends import anthropic, openrouter
from nacelle.errors import APIError, NacelleError
from nacelle.observe import KINDS, Observation, Observers, Recorder, load
from nacelle.testing import FakeServer, Reply, ScriptedBackend
from nacelle.testing.wire import anthropic_stream, openrouter_stream


class Seen:
    """An observer keeping every observation, with the thread it arrived on."""

    def __init__(self, events=False):
        self.events = events
        self.items = []
        self.lock = threading.Lock()

    def __call__(self, observation):
        with self.lock:
            self.items.append((observation, threading.current_thread().name))

    def kinds(self):
        return [o.kind for o, _ in self.items]

    def of(self, kind):
        return [o for o, _ in self.items if o.kind == kind]


@nacelle.tool(read_only=True)
def lookup(city: str, ctx: ToolContext) -> str:
    """Look a city up."""
    ctx.cancelled.wait(0.05)
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"{city}: sunny"


TOOL_TURN = anthropic_stream([], tool_calls=[("toolu_1", "lookup", '{"city": "Paris"}'),
                                             ("toolu_2", "lookup", '{"city": "Atlantis"}')],
                             usage={"input_tokens": 50, "output_tokens": 20})
ANSWER_TURN = anthropic_stream(["Paris is ", "sunny."], model="claude-opus-5-20261101",
                               message_id="msg_answer",
                               usage={"input_tokens": 90, "output_tokens": 6,
                                      "cache_read_input_tokens": 40})


def observed_run(server, *replies, observers=None, **options):
    seen = Seen()
    server.queue("/v1/messages", *replies)
    backend = anthropic.Backend(api_key="sk-ant-secret-key", base_url=server.url,
                                model="claude-opus-5", **options)
    agent = Agent(backend, "You answer.", tools=[lookup], observers=observers or [seen])
    result = agent.run([user_text("Weather in Paris?")])
    return result, seen


@pytest.mark.slow
def test_a_run_reports_its_start_each_request_each_tool_and_its_end_in_order():
    with FakeServer() as server:
        result, seen = observed_run(
            server, Reply(chunks=TOOL_TURN, headers={"request-id": "req_1"}),
            Reply(chunks=ANSWER_TURN, headers={"request-id": "req_2"}))
    kinds = seen.kinds()
    assert kinds[:4] == ["run.start", "request.start", "request.first_byte", "request.end"]
    assert sorted(kinds[4:8]) == ["tool.end", "tool.end", "tool.start", "tool.start"]
    assert kinds[8:] == ["request.start", "request.first_byte", "request.end", "run.end"]
    assert set(kinds) <= set(KINDS)
    assert len({o.run_id for o, _ in seen.items}) == 1
    start = seen.of("run.start")[0].data
    assert start["backend"] == "anthropic" and start["model"] == "claude-opus-5"
    assert start["system"] == "You answer." and start["tools"] == (("lookup", "Look a city up."),)
    assert start["messages"] == (user_text("Weather in Paris?"),) and not start["resumed"]
    end = seen.of("run.end")[0].data
    assert end["stop"] is Stop.END and end["turns"] == 2 and end["error"] is None
    assert end["usage"] == result.usage


def test_a_request_reports_where_it_went_its_status_ids_usage_and_time_to_first_token():
    with FakeServer() as server:
        url, port = server.url, server.port
        _, seen = observed_run(server, Reply(chunks=TOOL_TURN, headers={"request-id": "req_1"}),
                               Reply(chunks=ANSWER_TURN, headers={"request-id": "req_2"}))
    starts, firsts, ends = seen.of("request.start"), seen.of("request.first_byte"), seen.of("request.end")
    start = starts[1].data
    assert start["provider"] == "anthropic" and start["model"] == "claude-opus-5"
    assert start["url"] == url + "/v1/messages"
    assert (start["server_address"], start["server_port"]) == ("127.0.0.1", port)
    assert start["max_tokens"] == nacelle.DEFAULT_MAX_TOKENS
    assert start["profile"] is nacelle.CallProfile.AGENT_TURN
    assert firsts[1].data["status"] == 200 and firsts[1].data["request_id"] == "req_2"
    end = ends[1].data
    assert end["status"] == 200 and end["error"] is None and end["stop"] is Stop.END
    assert end["usage"] == Usage(input_tokens=90, output_tokens=6, cache_read_tokens=40,
                                 cost=end["usage"].cost, priced=end["usage"].priced)
    assert (end["request_id"], end["response_id"]) == ("req_2", "msg_answer")
    assert end["response_model"] == "claude-opus-5-20261101"
    assert 0 <= end["ttft"] <= end["latency"]
    assert ends[0].data["ttft"] is None  # a turn of local calls streams no delta
    assert {o.data["span"] for o in (starts[0], firsts[0], ends[0])} == {starts[0].data["span"]}
    assert starts[0].data["span"] != starts[1].data["span"]


def test_tools_report_on_their_own_threads_with_paired_spans_and_their_outcome():
    with FakeServer() as server:
        _, seen = observed_run(server, Reply(chunks=TOOL_TURN), Reply(chunks=ANSWER_TURN))
    tool_items = [(o, thread) for o, thread in seen.items if o.kind.startswith("tool.")]
    assert all(thread.startswith("nacelle-tool-lookup") for _, thread in tool_items)
    by_span = {}
    for observation, thread in tool_items:
        by_span.setdefault(observation.data["span"], []).append((observation, thread))
    assert len(by_span) == 2
    for pair in by_span.values():
        (start, start_thread), (end, end_thread) = pair
        assert (start.kind, end.kind) == ("tool.start", "tool.end")
        assert start_thread == end_thread
        assert start.data["description"] == "Look a city up."
        assert end.data["duration"] >= 0.04
    ends = {o.data["id"]: o.data for o in seen.of("tool.end")}
    assert ends["toolu_1"]["result"] == "Paris: sunny" and ends["toolu_1"]["error"] is None
    assert "no such city" in ends["toolu_2"]["error"]
    assert (ends["toolu_1"]["error_type"], ends["toolu_2"]["error_type"]) == (None, "LookupError")


@pytest.mark.slow
def test_a_retried_request_reports_the_retry_with_its_delay_and_failure():
    with FakeServer() as server:
        _, seen = observed_run(server, Reply.json(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            status=529, headers={"retry-after": "0"}),
                               Reply(chunks=ANSWER_TURN), max_retries=1)
    assert seen.kinds()[:4] == ["run.start", "request.start", "request.retry", "request.first_byte"]
    retry = seen.of("request.retry")[0].data
    assert retry["attempt"] == 1 and retry["level"] == "http" and retry["delay"] >= 0
    assert isinstance(retry["error"], APIError) and retry["error"].status == 529


OVERLOADED = Reply.json({"type": "error", "error": {"type": "overloaded_error",
                                                    "message": "Overloaded"}},
                        status=529, headers={"retry-after": "0"})


def attempts(seen):
    return [(o.kind, o.data["attempt"]) for o in seen.of("request.start") + seen.of("request.end")]


def test_each_request_says_which_attempt_it_is_counting_the_transports_resends():
    with FakeServer() as server:
        _, seen = observed_run(server, OVERLOADED, OVERLOADED, Reply(chunks=TOOL_TURN),
                               Reply(chunks=ANSWER_TURN), max_retries=2)
    # The first turn was sent three times inside one request; the second, once.
    assert attempts(seen) == [("request.start", 1), ("request.start", 1),
                              ("request.end", 3), ("request.end", 1)]


def test_a_turn_retry_continues_the_count_in_its_next_request():
    with FakeServer() as server:
        seen = Seen()
        server.queue("/v1/messages", OVERLOADED, OVERLOADED, Reply(chunks=ANSWER_TURN))
        backend = anthropic.Backend(api_key="sk-ant-x", base_url=server.url, max_retries=1)
        retrying = nacelle.Retry(backend, nacelle.RetryOptions(attempts=2, base=0.0))
        Agent(retrying, "sys", observers=[seen]).run([user_text("hi")])
    starts = [o.data["attempt"] for o in seen.of("request.start")]
    ends = [(o.data["attempt"], o.data["error"] is None) for o in seen.of("request.end")]
    assert starts == [1, 3] and ends == [(2, False), (3, True)]
    assert [o.data["level"] for o in seen.of("request.retry")] == ["http", "turn"]


def test_a_failed_request_and_run_report_the_error():
    with FakeServer() as server:
        seen = Seen()
        server.queue("/v1/messages", Reply.json(
            {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}},
            status=400, headers={"request-id": "req_bad"}))
        backend = anthropic.Backend(api_key="sk-ant-x", base_url=server.url)
        with pytest.raises(APIError):
            Agent(backend, "sys", observers=[seen]).run([user_text("hi")])
    end = seen.of("request.end")[0].data
    assert end["status"] == 400 and isinstance(end["error"], APIError)
    assert end["request_id"] == "req_bad" and end["usage"] == Usage()
    run_end = seen.of("run.end")[0].data
    assert run_end["stop"] is None and isinstance(run_end["error"], APIError)


def test_a_consumer_that_stops_reading_ends_the_request_and_the_run_as_cancelled():
    with FakeServer() as server:
        seen = Seen()
        server.queue("/v1/messages", Reply(chunks=anthropic_stream(["a", "b", "c"])))
        backend = anthropic.Backend(api_key="sk-ant-x", base_url=server.url)
        events = Agent(backend, "sys", observers=[seen]).stream([user_text("hi")])
        assert next(e for e in events if e.kind is Kind.TEXT).text == "a"
        events.close()
    assert isinstance(seen.of("request.end")[0].data["error"], nacelle.Cancelled)
    assert isinstance(seen.of("run.end")[0].data["error"], nacelle.Cancelled)


def test_a_chat_completions_request_reports_the_completions_id_and_model():
    with FakeServer() as server:
        seen = Seen()
        server.queue("/chat/completions", Reply(chunks=openrouter_stream(["Hi"])))
        backend = openrouter.Backend(api_key="sk-or-x", model="anthropic/claude-haiku-4.5",
                                     base_url=server.url)
        Agent(backend, "sys", observers=[seen]).run([user_text("hi")])
    end = seen.of("request.end")[0].data
    assert end["provider"] == "openrouter"
    assert end["response_id"] == "gen-1754800000-abcdefghijklmnop"
    assert end["response_model"] == "anthropic/claude-haiku-4.5"


def test_retry_and_fallback_report_turn_retries_and_switches():
    silent = nacelle.Message(nacelle.Role.ASSISTANT, ())  # fails before showing anything
    first = ScriptedBackend([nacelle.testing.Turn(silent, error=nacelle.TransportError("reset"))],
                            name="first")
    second = ScriptedBackend(["Hello."], name="second")
    seen = Seen()
    Agent(nacelle.Fallback([first, second]), "sys", observers=[seen]).run([user_text("hi")])
    [switch] = seen.of("fallback")
    assert (switch.data["from"], switch.data["to"]) == ("first", "second")
    assert isinstance(switch.data["error"], nacelle.TransportError)

    flaky = ScriptedBackend([nacelle.testing.Turn(silent, error=nacelle.TransportError("reset")),
                             "Hello."])
    seen = Seen()
    retrying = nacelle.Retry(flaky, nacelle.RetryOptions(attempts=2, base=0.0))
    Agent(retrying, "sys", observers=[seen]).run([user_text("hi")])
    [retry] = seen.of("request.retry")
    assert retry.data["level"] == "turn" and retry.data["attempt"] == 1


def test_a_pause_is_reported_with_the_paused_call_ids():
    backend = ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c1", "lookup", '{"city": "Paris"}'),))])
    seen = Seen()
    result = Agent(backend, "sys", tools=[lookup], approve=lambda *a: nacelle.PAUSE,
                   observers=[seen]).run([user_text("hi")])
    assert result.stop is Stop.PAUSED
    assert seen.of("pause")[0].data["pending"] == ("c1",)
    assert seen.of("tool.end")[0].data["paused"] is True


class Outage:
    class Refusal(Exception):
        """Nested, so its qualified name says where it lives."""


@nacelle.tool
def flaky_lookup(city: str) -> str:
    """Look a city up, with an after-hook that may deny the answer."""
    if city == "Gotham":
        raise Outage.Refusal("the city will not answer")
    return f"{city}: rain"


def test_a_failed_call_reports_what_kind_of_failure_the_model_read():
    calls = [("c1", "no_such_tool", "{}"), ("c2", "lookup", '{"town": "Paris"}'),
             ("c3", "lookup", '{"city": "Rome"}'), ("c4", "lookup", '{"city": "Oslo"}'),
             ("c5", "flaky_lookup", '{"city": "Gotham"}'), ("c6", "flaky_lookup", '{"city": "Lima"}'),
             ("c7", "flaky_lookup", '{"city": "Kyiv"}')]
    backend = ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, tuple(
        nacelle.ToolCall(*call) for call in calls)), "Done."])

    def before(event):
        return nacelle.HookResult(deny="not Rome") if '"Rome"' in event.input else None

    def after(event):
        return nacelle.HookResult(deny="no Lima") if '"Lima"' in event.input else None

    seen = Seen()
    result = Agent(backend, "sys", tools=[lookup, flaky_lookup],
                   hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [before],
                          nacelle.HookPoint.AFTER_TOOL_CALL: [after]},
                   approve=lambda name, args, ctx: args.get("city") != "Oslo",
                   observers=[seen]).run([user_text("hi")])
    assert result.stop is Stop.END
    kinds = {o.data["id"]: o.data["error_type"] for o in seen.of("tool.end")}
    assert kinds == {"c1": "unknown_tool", "c2": "invalid_input", "c3": "hook_denied",
                     "c4": "refused", "c5": "Outage.Refusal", "c6": "hook_denied", "c7": None}
    assert all(o.data["error"] is not None for o in seen.of("tool.end") if o.data["id"] != "c7")


def test_an_observer_that_raises_is_logged_once_and_never_breaks_the_run(caplog):
    calls = []

    def broken(observation):
        calls.append(observation.kind)
        raise RuntimeError("exporter down")

    seen = Seen()
    backend = ScriptedBackend(["Hello."])
    with caplog.at_level(logging.WARNING, logger="nacelle.observe"):
        result = Agent(backend, "sys", observers=[broken, seen]).run([user_text("hi")])
    assert result.stop is Stop.END and calls == ["run.start", "run.end"]
    assert seen.kinds() == ["run.start", "run.end"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "exporter down" in caplog.text


def test_events_reach_only_the_observers_that_ask_for_them():
    quiet, loud = Seen(), Seen(events=True)
    Agent(ScriptedBackend(["Hello."]), "sys", observers=[quiet, loud]).run([user_text("hi")])
    assert "event" not in quiet.kinds()
    shown = [o.data["event"].kind for o in loud.of("event")]
    assert shown == [Kind.TEXT, Kind.TURN, Kind.DONE]


def test_without_observers_or_debug_logging_nothing_is_built(caplog):
    with caplog.at_level(logging.INFO, logger="nacelle.observe"):
        assert Observers.make([]) is None
    with caplog.at_level(logging.DEBUG, logger="nacelle.observe"):
        assert Observers.make([]) is not None


def test_at_debug_every_request_is_logged_with_its_status_latency_and_tokens(caplog):
    with FakeServer() as server, caplog.at_level(logging.DEBUG, logger="nacelle.observe"):
        server.queue("/v1/messages", Reply(chunks=ANSWER_TURN, headers={"request-id": "req_9"}))
        backend = anthropic.Backend(api_key="sk-ant-secret-key", base_url=server.url,
                                    model="claude-opus-5")
        Agent(backend, "sys").run([user_text("hi")])
    [line] = [r.getMessage() for r in caplog.records if r.name == "nacelle.observe"]
    assert line.startswith("anthropic claude-opus-5: 200 in ")
    assert "request id req_9" in line and "136 tokens" in line
    assert "sk-ant-secret-key" not in caplog.text


def test_observers_must_be_callables_in_a_sequence():
    with pytest.raises(nacelle.ConfigError, match="sequence of observers"):
        Agent(ScriptedBackend([]), "sys", observers=Seen())
    with pytest.raises(nacelle.ConfigError, match="must be callable"):
        Agent(ScriptedBackend([]), "sys", observers=["log"])


# -- the Recorder ------------------------------------------------------------------

def test_the_recorder_writes_a_runs_observations_and_events_as_json_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    with FakeServer() as server, Recorder(path) as recorder:
        _, _ = observed_run(server, Reply(chunks=TOOL_TURN), Reply(chunks=ANSWER_TURN),
                            observers=[recorder])
    records = load(path)
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end"
    # 6 TOOL_INPUTs (each input in 3 fragments), 2 calls, 2 TURNs, 2 results, 2 texts, DONE
    assert kinds.count("event") == 15
    end = next(r for r in records if r["kind"] == "request.end")["data"]
    assert end["usage"]["input_tokens"] == 50 and end["stop"] == "tools"
    failed = next(r for r in records if r["kind"] == "tool.end"
                  and r["data"]["id"] == "toolu_2")["data"]
    assert "no such city" in failed["error"]
    done = [r for r in records if r["kind"] == "event"][-1]["data"]["event"]
    assert done["kind"] == "done" and done["stop"] == "end"
    assert "sk-ant-secret-key" not in path.read_text()


def test_runs_recorded_into_one_file_are_told_apart_by_run_id(tmp_path):
    path = tmp_path / "runs.jsonl"
    recorder = Recorder(path, events=False)
    for _ in range(2):
        Agent(ScriptedBackend(["Hi."]), "sys", observers=[recorder]).run([user_text("hi")])
    recorder.close()
    records = load(path)
    assert len({r["run_id"] for r in records}) == 2
    assert [r["kind"] for r in records] == ["run.start", "run.end"] * 2


def test_loading_skips_a_torn_last_line_and_refuses_a_broken_one(tmp_path, caplog):
    good = json.dumps({"kind": "run.start", "run_id": "r", "time": 1.0, "data": {}})
    torn = tmp_path / "torn.jsonl"
    torn.write_text(good + "\n" + good[:20])
    with caplog.at_level(logging.WARNING):
        assert len(load(torn)) == 1
    assert "cut short" in caplog.text
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n" + good + "\n")
    with pytest.raises(NacelleError, match="broken.jsonl, line 1: not JSON"):
        load(broken)
    alien = tmp_path / "alien.jsonl"
    alien.write_text('{"hello": 1}\n')
    with pytest.raises(NacelleError, match="line 1: not a recorded observation"):
        load(alien)


def test_loading_a_line_nested_five_thousand_deep_is_an_error_naming_it(tmp_path):
    good = json.dumps({"kind": "run.start", "run_id": "r", "time": 1.0, "data": {}})
    deep = tmp_path / "deep.jsonl"
    deep.write_text(good + "\n" + '{"data": ' + "[" * 5000 + "]" * 5000 + "}\n")
    with pytest.raises(NacelleError, match="deep.jsonl, line 2: .*nested deeper than 160"):
        load(deep)


def test_an_observation_is_a_read_only_value():
    observation = Observation("run.start", "r1", 1.0, {"a": 1})
    assert "keys=['a']" in repr(observation)
    seen = Seen()
    Observers([seen], "r1")("run.start", {"a": 1})
    with pytest.raises(TypeError):
        seen.items[0][0].data["a"] = 2


def test_the_recorder_writes_messages_in_dumps_form_usage_with_its_uncached_cost_and_only_set_event_fields(tmp_path):
    path = tmp_path / "run.jsonl"
    with Recorder(path) as recorder:
        Agent(ScriptedBackend([nacelle.testing.Turn(
            "Hi.", usage=Usage(input_tokens=10, cache_read_tokens=90, cost=0.001, priced=True))]),
            "sys", observers=[recorder]).run([user_text("hello")])
    records = load(path)
    start = records[0]["data"]
    assert nacelle.loads(json.dumps(start["messages"])) == [user_text("hello")]
    text = next(r for r in records if r["kind"] == "event")["data"]["event"]
    assert text == {"kind": "text", "text": "Hi."}
    done = records[-2]["data"]["event"]
    assert done["kind"] == "done" and "cost_without_cache" in done["usage"]
    assert nacelle.loads(json.dumps(done["messages"]))[-1].text == "Hi."


def test_a_tools_media_are_observed_as_parts_and_recorded_once_with_tool_end_holding_a_summary(tmp_path):
    picture = nacelle.Image("image/png", "iVBORw0KGgoAAAANSUhEUg==")
    paper = nacelle.Document("application/pdf", "JVBERi0xLjQK", "paper.pdf")

    @nacelle.tool
    def snap() -> list:
        """A captioned picture and a paper."""
        return ["the view", picture, paper]

    path = tmp_path / "run.jsonl"
    seen = Seen()
    with Recorder(path) as recorder:
        Agent(ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, (
            nacelle.ToolCall("c1", "snap", "{}"),)), "seen"]),
            "sys", tools=[snap], observers=[recorder, seen]).run([user_text("look")])
    (end,) = seen.of("tool.end")
    assert end.data["content"] == (nacelle.Text("the view"), picture, paper)
    assert end.data["content"][1] is picture  # the tool's own objects, not copies
    records = load(path)
    (recorded_end,) = [r["data"] for r in records if r["kind"] == "tool.end"]
    assert recorded_end["result"] == "the view"
    assert recorded_end["content"] == [
        {"type": "text", "text": "the view"},
        {"type": "image", "media_type": "image/png", "bytes": 16},
        {"type": "document", "media_type": "application/pdf", "bytes": 9, "title": "paper.pdf"}]
    (result,) = [r["data"]["event"]["tool"] for r in records
                 if r["kind"] == "event" and r["data"]["event"]["kind"] == "tool_result"]
    assert result["content"] == [
        {"type": "text", "text": "the view"},
        {"type": "image", "media_type": "image/png", "data": picture.data},
        {"type": "document", "media_type": "application/pdf", "data": paper.data,
         "title": "paper.pdf"}]
    text = path.read_text()
    assert text.count(picture.data) == 2  # the TOOL_RESULT event and DONE's conversation


def test_a_tool_reports_its_progress_to_observers_on_its_own_thread():
    @nacelle.tool
    def crunch(ctx: ToolContext) -> str:
        """Crunch in steps."""
        for step in (1, 2):
            ctx.progress(step, 2, f"step {step}")
        return "done"

    seen = Seen()
    backend = ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c1", "crunch", "{}"),)), "Crunched."])
    Agent(backend, "sys", tools=[crunch], observers=[seen]).run([user_text("go")])
    reports = [(o, thread) for o, thread in seen.items if o.kind == "tool.progress"]
    assert [(o.data["progress"], o.data["total"], o.data["message"]) for o, _ in reports] == [
        (1, 2, "step 1"), (2, 2, "step 2")]
    assert all(o.data["id"] == "c1" and o.data["name"] == "crunch" for o, _ in reports)
    assert all(thread.startswith("nacelle-tool-crunch") for _, thread in reports)
    kinds = seen.kinds()
    assert kinds.index("tool.start") < kinds.index("tool.progress") < kinds.index("tool.end")


def test_progress_outside_a_run_is_only_a_log_line(caplog):
    with caplog.at_level(logging.DEBUG, logger="nacelle.context"):
        ToolContext("c9", 0, "solo").progress(3, None, "three")
    assert "tool solo (c9): progress 3 three" in caplog.text


def test_a_recording_of_a_long_streamed_argument_grows_with_its_length_not_its_square(tmp_path):
    # Each TOOL_INPUT is written with its delta and the call's id, index and name; the
    # input so far (its deltas joined) is not written again on every delta.
    text = "word " * 4000  # 20,000 characters, streamed in about 2,900 deltas
    arguments = json.dumps({"city": text})
    path = tmp_path / "run.jsonl"
    with FakeServer() as server, Recorder(path) as recorder:
        observed_run(server, Reply(chunks=anthropic_stream(
            [], tool_calls=[("toolu_1", "lookup", arguments)])),
            Reply(chunks=ANSWER_TURN), observers=[recorder])
    inputs = [r["data"]["event"] for r in load(path) if r["kind"] == "event"
              and r["data"]["event"]["kind"] == "tool_input"]
    assert len(inputs) > 2000
    assert "".join(e["text"] for e in inputs) == arguments
    assert inputs[-1]["tool"] == {"id": "toolu_1", "index": 0, "name": "lookup"}
    assert path.stat().st_size < 200 * len(inputs) + 10 * len(arguments)
