"""nacelle.otel.Instrumentation: a real Anthropic backend against a FakeServer, the
SDK's in-memory exporter and reader, and the GenAI conventions' names checked."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install "
                    "opentelemetry-sdk, in the test extra) is what these tests read spans with")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import nacelle  # noqa: E402
from nacelle.backends import anthropic  # noqa: E402
from nacelle.errors import APIError, ConfigError  # noqa: E402
from nacelle.observe import Observation  # noqa: E402
from nacelle.otel import Instrumentation, finish_reason, provider_name  # noqa: E402
from nacelle.testing.server import FakeServer, Reply  # noqa: E402
from nacelle.testing.wire import anthropic_stream  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PATH = "/v1/messages"

# What the conventions (v1.41.0 registry; see nacelle/otel.py) define for each span.
COMMON = {"gen_ai.operation.name", "gen_ai.provider.name", "error.type"}
INFERENCE = {"gen_ai.request.model", "gen_ai.request.max_tokens", "gen_ai.response.id",
             "gen_ai.response.model", "gen_ai.response.finish_reasons",
             "gen_ai.response.time_to_first_chunk", "gen_ai.usage.input_tokens",
             "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
             "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning.output_tokens",
             "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"}
ALLOWED = {
    "invoke_agent": COMMON | INFERENCE | {"gen_ai.agent.name"},
    "chat": COMMON | INFERENCE | {"server.address", "server.port"},
    "execute_tool": {"gen_ai.operation.name", "error.type", "gen_ai.tool.name",
                     "gen_ai.tool.call.id", "gen_ai.tool.type", "gen_ai.tool.description",
                     "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"},
}
CONTENT = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
           "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


class Telemetry:
    def __init__(self):
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrumentation(self, **kw):
        return Instrumentation(self.tracer_provider, self.meter_provider, **kw)

    def finished(self):
        return {s.name: s for s in self.spans.get_finished_spans()}

    def metrics(self):
        found = {}
        for resource in self.reader.get_metrics_data().resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = metric
        return found


@pytest.fixture
def telemetry():
    return Telemetry()


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def two_tool_run(server, telemetry, *, first=(), **kw):
    """A 529 the transport retries, a turn calling two tools side by side (one fails,
    one starts its own span), then the answer."""
    tracer = telemetry.tracer_provider.get_tracer("a tool's HTTP client")

    @nacelle.tool
    def weather(city: str, ctx: nacelle.ToolContext) -> str:
        """Weather for a city."""
        ctx.progress(1, 2, "asking the station")
        with tracer.start_as_current_span("GET /weather"):
            time.sleep(0.05)
        ctx.progress(2)
        return "sunny"

    @nacelle.tool
    def broken(city: str) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    overloaded = Reply.json({"type": "error", "error": {"type": "overloaded_error",
                                                        "message": "Overloaded"}},
                            status=529, headers={"retry-after": "0.01"})
    calls = [("toolu_1", "weather", '{"city": "Paris"}'), ("toolu_2", "broken", '{"city": "Rome"}')]
    server.queue(PATH, *first, overloaded,
                 Reply(chunks=anthropic_stream(["Checking."], tool_calls=calls,
                                               usage={"cache_read_input_tokens": 5})),
                 Reply(chunks=anthropic_stream(["Sunny in Paris."])))
    observer = telemetry.instrumentation(**kw)
    agent = nacelle.Agent(anthropic.Backend(api_key="sk-test", base_url=server.url),
                          "Be brief.", tools=[weather, broken], observers=[observer],
                          max_tokens=1000)
    result = agent.run([nacelle.user_text("Weather in Paris and Rome?")])
    assert result.text == "Sunny in Paris."
    return telemetry.spans.get_finished_spans()


def by_name(spans, name):
    return [s for s in spans if s.name == name]


def test_a_run_is_an_agent_span_with_its_chat_and_tool_spans_as_children(server, telemetry):
    spans = two_tool_run(server, telemetry)
    (agent,) = by_name(spans, "invoke_agent")
    chats = by_name(spans, "chat claude-opus-5")
    tools = by_name(spans, "execute_tool weather") + by_name(spans, "execute_tool broken")
    assert agent.kind is SpanKind.INTERNAL and agent.parent is None
    assert len(chats) == 2 and {c.kind for c in chats} == {SpanKind.CLIENT}
    assert len(tools) == 2 and {t.kind for t in tools} == {SpanKind.INTERNAL}
    for child in chats + tools:
        assert child.parent.span_id == agent.context.span_id
        assert child.context.trace_id == agent.context.trace_id
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert first.end_time <= min(t.start_time for t in tools)
    assert second.start_time >= max(t.start_time for t in tools)


def test_every_attribute_is_one_the_conventions_name_for_its_span(server, telemetry):
    for capture in (False, True):
        telemetry.spans.clear()
        for span in two_tool_run(server, telemetry, capture_content=capture):
            operation = span.attributes.get("gen_ai.operation.name")
            if operation is None:
                continue  # the tool's own span
            assert span.name.split(" ")[0] == operation
            assert set(span.attributes) <= ALLOWED[operation], span.name


def test_chat_spans_carry_the_request_the_response_and_the_usage(server, telemetry):
    spans = two_tool_run(server, telemetry)
    first, second = sorted(by_name(spans, "chat claude-opus-5"), key=lambda s: s.start_time)
    a = first.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == "claude-opus-5" and a["gen_ai.request.max_tokens"] == 1000
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
    assert a["gen_ai.response.id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert a["gen_ai.response.model"] == "claude-opus-5"
    assert a["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    # input tokens include the cache reads, as the registry says
    assert a["gen_ai.usage.input_tokens"] == 30 and a["gen_ai.usage.output_tokens"] == 12
    assert a["gen_ai.usage.cache_read.input_tokens"] == 5
    assert a["gen_ai.response.time_to_first_chunk"] > 0
    (agent,) = by_name(spans, "invoke_agent")
    assert agent.attributes["gen_ai.usage.input_tokens"] == 55
    assert agent.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert agent.attributes["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.agent.name" not in agent.attributes


def test_the_transports_retry_is_an_event_on_its_chat_span(server, telemetry):
    spans = two_tool_run(server, telemetry)
    first = min(by_name(spans, "chat claude-opus-5"), key=lambda s: s.start_time)
    (retry,) = first.events
    assert retry.name == "retry"
    assert dict(retry.attributes) == {"nacelle.retry.attempt": 1, "nacelle.retry.delay": 0.01,
                                      "nacelle.retry.level": "http", "error.type": "529"}
    assert first.status.status_code is StatusCode.UNSET


def test_tool_spans_carry_the_call_and_a_failure_its_error_type(server, telemetry):
    spans = two_tool_run(server, telemetry)
    (ok,) = by_name(spans, "execute_tool weather")
    (failed,) = by_name(spans, "execute_tool broken")
    assert dict(ok.attributes) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
        "gen_ai.tool.call.id": "toolu_1", "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Weather for a city."}
    assert ok.status.status_code is StatusCode.UNSET
    assert (ok.end_time - ok.start_time) / 1e9 >= 0.05
    assert failed.attributes["error.type"] == "RuntimeError"  # what the tool raised
    assert failed.status.status_code is StatusCode.ERROR and "boom" in failed.status.description


def test_a_tools_progress_reports_are_events_on_its_span(server, telemetry):
    spans = two_tool_run(server, telemetry)
    (ok,) = by_name(spans, "execute_tool weather")
    assert [(e.name, dict(e.attributes)) for e in ok.events] == [
        ("progress", {"nacelle.progress.value": 1.0, "nacelle.progress.total": 2.0,
                      "nacelle.progress.message": "asking the station"}),
        ("progress", {"nacelle.progress.value": 2.0, "nacelle.progress.message": ""})]
    assert ok.start_time <= ok.events[0].timestamp <= ok.events[1].timestamp <= ok.end_time
    (failed,) = by_name(spans, "execute_tool broken")
    assert list(failed.events) == []


def test_a_span_a_tool_starts_lands_under_its_execute_tool_span(server, telemetry):
    spans = two_tool_run(server, telemetry)
    (tool,) = by_name(spans, "execute_tool weather")
    (own,) = by_name(spans, "GET /weather")
    assert own.parent.span_id == tool.context.span_id


def test_a_400_fails_the_chat_span_and_the_run_with_the_status_as_error_type(server, telemetry):
    server.queue(PATH, Reply.json({"type": "error", "error": {
        "type": "invalid_request_error", "message": "max_tokens: too large"}}, status=400))
    agent = nacelle.Agent(anthropic.Backend(api_key="sk-test", base_url=server.url), "sys",
                          observers=[telemetry.instrumentation(agent_name="Weather")])
    with pytest.raises(APIError):
        agent.run([nacelle.user_text("hi")])
    spans = telemetry.finished()
    chat, agent_span = spans["chat claude-opus-5"], spans["invoke_agent Weather"]
    for span in (chat, agent_span):
        assert span.attributes["error.type"] == "400"
        assert span.status.status_code is StatusCode.ERROR
    assert agent_span.attributes["gen_ai.agent.name"] == "Weather"
    assert "gen_ai.usage.input_tokens" not in chat.attributes
    duration = telemetry.metrics()["gen_ai.client.operation.duration"].data.data_points
    assert [p.attributes["error.type"] for p in duration] == ["400"]
    agent_duration = telemetry.metrics()["gen_ai.invoke_agent.duration"].data.data_points
    assert agent_duration[0].attributes == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-opus-5", "gen_ai.agent.name": "Weather",
        "error.type": "400"}


def test_metrics_are_recorded_with_the_conventions_attributes(server, telemetry):
    two_tool_run(server, telemetry)
    metrics = telemetry.metrics()
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-opus-5", "gen_ai.response.model": "claude-opus-5",
            "server.address": "127.0.0.1", "server.port": server.port}
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.data.data_points
    assert dict(point.attributes) == base and point.count == 2
    tokens = metrics["gen_ai.client.token.usage"]
    assert tokens.unit == "{token}"
    sums = {p.attributes["gen_ai.token.type"]: (p.count, p.sum) for p in tokens.data.data_points}
    assert sums == {"input": (2, 55), "output": (2, 24)}
    assert metrics["gen_ai.client.operation.time_to_first_chunk"].data.data_points[0].count == 2
    tools = {p.attributes["gen_ai.tool.name"]: dict(p.attributes)
             for p in metrics["gen_ai.execute_tool.duration"].data.data_points}
    assert tools == {
        "weather": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
                    "gen_ai.tool.type": "function"},
        "broken": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "broken",
                   "gen_ai.tool.type": "function", "error.type": "RuntimeError"}}
    (run,) = metrics["gen_ai.invoke_agent.duration"].data.data_points
    assert run.count == 1 and metrics["gen_ai.invoke_agent.duration"].unit == "s"


def test_content_is_absent_unless_asked_and_events_stay_off(server, telemetry, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    assert telemetry.instrumentation().events is False
    for span in two_tool_run(server, telemetry):
        assert not CONTENT & set(span.attributes), span.name


def test_content_is_recorded_in_the_messages_schemas_when_asked(server, telemetry):
    assert telemetry.instrumentation(capture_content=True).events is True
    spans = two_tool_run(server, telemetry, capture_content=True)
    first, second = sorted(by_name(spans, "chat claude-opus-5"), key=lambda s: s.start_time)
    question = {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris and Rome?"}]}
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [question]
    answer = {"role": "assistant", "parts": [
        {"type": "text", "content": "Checking."},
        {"type": "tool_call", "id": "toolu_1", "name": "weather", "arguments": {"city": "Paris"}},
        {"type": "tool_call", "id": "toolu_2", "name": "broken", "arguments": {"city": "Rome"}}]}
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        dict(answer, finish_reason="tool_call")]
    history = json.loads(second.attributes["gen_ai.input.messages"])
    assert history[:2] == [question, answer]
    responses = {m["parts"][0]["id"]: m["parts"][0]["response"] for m in history[2:]}
    assert {m["role"] for m in history[2:]} == {"tool"}
    assert responses == {"toolu_1": "sunny", "toolu_2": "boom"}
    (agent,) = by_name(spans, "invoke_agent")
    assert json.loads(agent.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}]
    assert json.loads(agent.attributes["gen_ai.output.messages"]) == [{
        "role": "assistant", "parts": [{"type": "text", "content": "Sunny in Paris."}],
        "finish_reason": "stop"}]
    (tool,) = by_name(spans, "execute_tool weather")
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"city": "Paris"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "sunny"
    (failed,) = by_name(spans, "execute_tool broken")
    assert "gen_ai.tool.call.result" not in failed.attributes  # only a successful result
    assert first.end_time <= min(s.start_time for s in spans if s.name.startswith("execute"))


def test_the_environment_variable_turns_content_on(server, telemetry, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "True")
    spans = two_tool_run(server, telemetry)
    (agent,) = by_name(spans, "invoke_agent")
    assert "gen_ai.input.messages" in agent.attributes
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert telemetry.instrumentation(capture_content=False).capture_content is False


def test_a_tool_span_left_open_at_run_end_is_ended_with_an_error(telemetry):
    observer = telemetry.instrumentation()

    def observe(kind, **data):
        observer(Observation(kind, "run-1", time.time(), data))

    observe("run.start", backend="anthropic", model="m", system="", messages=(), tools=(),
            max_tokens=100, profile=None, resumed=False)
    thread = threading.Thread(target=observe, args=("tool.start",), kwargs=dict(
        span=7, id="toolu_9", index=0, name="stuck", input="{}", description=""))
    thread.start()
    thread.join()
    observe("run.end", stop=None, usage=nacelle.Usage(), turns=1,
            error=nacelle.Cancelled("the run was cancelled"))
    spans = telemetry.finished()
    stuck, agent = spans["execute_tool stuck"], spans["invoke_agent"]
    assert stuck.attributes["error.type"] == "abandoned"
    assert stuck.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "Cancelled"
    assert observer._runs == {}  # the run's state is dropped


def test_observations_of_an_unknown_run_are_ignored(telemetry):
    telemetry.instrumentation()(Observation("tool.end", "never-started", time.time(), {"span": 1}))
    assert telemetry.finished() == {}


@pytest.mark.parametrize("backend, expected", [
    ("anthropic", "anthropic"), ("openai", "openai"), ("OpenAI", "openai"),
    ("openrouter", "openrouter"), ("OpenRouter", "openrouter"), ("Groq", "groq"),
    ("DeepSeek", "deepseek"), ("Mistral", "mistral_ai"), ("xAI", "x_ai"),
    ("Gemini", "gcp.gemini"), ("vLLM", "vllm"), ("llama.cpp", "llama_cpp"),
    ("LM Studio", "lm_studio"), ("Ollama", "ollama"), ("", "unknown"),
])
def test_provider_names_follow_the_registry_or_a_lower_case_custom_value(backend, expected):
    assert provider_name(backend) == expected


def test_finish_reasons_map_turn_stops_to_the_schema_and_keep_run_stops():
    assert [finish_reason(s) for s in (nacelle.Stop.END, nacelle.Stop.TOOLS,
                                       nacelle.Stop.MAX_TOKENS, nacelle.Stop.REFUSAL)] == [
        "stop", "tool_call", "length", "content_filter"]
    assert finish_reason(nacelle.Stop.ITERATIONS) == "iterations"


def test_an_empty_agent_name_is_a_config_error(telemetry):
    with pytest.raises(ConfigError):
        telemetry.instrumentation(agent_name="")


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_an_agent_without_the_observer_imports_no_opentelemetry():
    done = run_python(
        "import sys, nacelle\n"
        "from nacelle.testing import ScriptedBackend\n"
        "agent = nacelle.Agent(ScriptedBackend([]), 'sys')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_instrumentation_without_opentelemetry_is_a_config_error_naming_the_extra():
    done = run_python(
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if it were not installed\n"
        "import nacelle, nacelle.otel\n"
        "try:\n"
        "    nacelle.otel.Instrumentation()\n"
        "except nacelle.ConfigError as exc:\n"
        "    print(exc)\n")
    assert done.returncode == 0, done.stderr
    assert 'pip install "nacelle-sdk[otel]"' in done.stdout


def test_calls_the_loop_failed_itself_carry_the_failure_kind_as_error_type(server, telemetry):
    @nacelle.tool
    def weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    def deny_rome(event):
        return nacelle.HookResult(deny="not Rome") if "Rome" in event.input else None

    calls = [("toolu_1", "nope", "{}"), ("toolu_2", "weather", '{"city": 5}'),
             ("toolu_3", "weather", '{"city": "Rome"}')]
    server.queue(PATH, Reply(chunks=anthropic_stream(["Checking."], tool_calls=calls)),
                 Reply(chunks=anthropic_stream(["Done."])))
    agent = nacelle.Agent(anthropic.Backend(api_key="sk-test", base_url=server.url), "Be brief.",
                          tools=[weather], observers=[telemetry.instrumentation()],
                          hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [deny_rome]})
    assert agent.run([nacelle.user_text("Weather?")]).text == "Done."
    kinds = {s.attributes["gen_ai.tool.call.id"]: s.attributes["error.type"]
             for s in telemetry.spans.get_finished_spans() if s.name.startswith("execute_tool")}
    assert kinds == {"toolu_1": "unknown_tool", "toolu_2": "invalid_input", "toolu_3": "hook_denied"}


def test_a_sub_agent_s_run_is_an_agent_span_under_the_execute_tool_span_that_started_it(
        telemetry):
    from nacelle.messages import Message, Role, Text, ToolCall
    from nacelle.testing import ScriptedBackend

    def asks(call_id, name):
        return Message(Role.ASSISTANT, (ToolCall(call_id, name, '{"task": "t"}'),))

    script = ScriptedBackend([asks("p1", "researcher"), asks("r1", "reader"),
                              Message(Role.ASSISTANT, (Text("read"),)),
                              Message(Role.ASSISTANT, (Text("found"),)),
                              Message(Role.ASSISTANT, (Text("done"),))])
    reader = nacelle.subagent_tool(nacelle.Agent(script, "read"), name="reader")
    researcher = nacelle.subagent_tool(nacelle.Agent(script, "research", tools=[reader]),
                                       name="researcher", approve=lambda *a: True)
    agent = nacelle.Agent(script, "lead", tools=[researcher],
                          observers=[telemetry.instrumentation()])
    assert agent.run([nacelle.user_text("go")]).text == "done"
    spans = telemetry.spans.get_finished_spans()
    (top,) = by_name(spans, "invoke_agent")
    (call_researcher,) = by_name(spans, "execute_tool researcher")
    (researcher_run,) = by_name(spans, "invoke_agent researcher")
    (call_reader,) = by_name(spans, "execute_tool reader")
    (reader_run,) = by_name(spans, "invoke_agent reader")
    chain = [top, call_researcher, researcher_run, call_reader, reader_run]
    for parent, child in zip(chain, chain[1:]):
        assert child.parent.span_id == parent.context.span_id, (parent.name, child.name)
        assert child.context.trace_id == top.context.trace_id
    assert researcher_run.attributes["gen_ai.agent.name"] == "researcher"
    assert "gen_ai.agent.name" not in top.attributes
    assert len(spans) == 5  # the scripted backend makes no requests, so no chat spans
