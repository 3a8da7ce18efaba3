"""OpenTelemetry for a run: :class:`Instrumentation`, an observer emitting the GenAI
semantic conventions as spans and metrics.

``Agent(..., observers=[Instrumentation()])`` gives each run this trace::

    invoke_agent [{agent_name}]      INTERNAL   run.start .. run.end
    ├── chat {model}                 CLIENT     request.start .. request.end
    ├── execute_tool {tool}          INTERNAL   tool.start .. tool.end (current there)
    ├── execute_tool {subagent}      INTERNAL   (side by side: tools run in parallel)
    │   └── invoke_agent {subagent}  INTERNAL   a sub-agent's run, and its own tree
    └── chat {model}                 CLIENT

A sub-agent's run (``subagent_tool``) reaches the parent run's observers with a run
id of its own, its ``run.start`` naming the parent run and the call (``parent_run``,
``via``): its ``invoke_agent`` span is a child of that call's ``execute_tool`` span,
named (and ``gen_ai.agent.name``) for the sub-agent tool, and its own chat and tool
spans sit under it, so the trace is the tree of agents.

Followed: the GenAI conventions of open-telemetry/semantic-conventions **v1.41.0**
(``docs/gen-ai/gen-ai-spans.md``, ``gen-ai-agent-spans.md``, ``gen-ai-metrics.md``,
``model/gen-ai/registry.yaml``), the last release holding them; since they moved to
open-telemetry/semantic-conventions-genai (no release yet, everything Development),
whose registry keeps every attribute name used here and whose metrics add the two
this module also records, ``gen_ai.invoke_agent.duration`` and
``gen_ai.execute_tool.duration``.

Where the conventions leave a choice, the choices made:

- **Parents are explicit.** A run is a generator interleaving with the caller's code,
  so no span is made current across a yield: chat and tool spans name the agent span
  as parent; the agent span's parent is whatever was current at ``run.start``. A
  tool span alone is made current (``context.attach``) on the tool's own thread from
  ``tool.start`` to ``tool.end``, so an instrumented HTTP client a tool uses lands
  under it.
- ``gen_ai.provider.name`` comes from the backend's name: ``anthropic``, ``openai``,
  ``groq``, ``deepseek``, ``mistral_ai``, ``x_ai`` and ``gcp.gemini`` are the
  registry's values; OpenRouter is ``openrouter`` and other servers (vLLM, Ollama,
  llama.cpp, LM Studio, Together) their name in lower case with ``_`` for anything
  but a letter or digit — custom values, which the registry allows. The agent span
  takes the provider of its first request (a Fallback's or chat backend's own name
  says nothing about the provider).
- ``gen_ai.usage.input_tokens`` includes cache reads and writes, as the registry
  says; nacelle's ``Usage.input_tokens`` counts only full-rate input, so the three
  are summed. Cache and reasoning counts go in ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens`` and ``gen_ai.usage.reasoning.output_tokens``.
- ``gen_ai.response.finish_reasons`` maps a turn's Stop to the output-messages
  schema's FinishReason: END ``stop``, TOOLS ``tool_call``, MAX_TOKENS and CONTEXT
  ``length``, REFUSAL ``content_filter``, OTHER ``error``; the run-level stops on the
  agent span (ITERATIONS, BUDGET, LOOP, PAUSED, INVALID_OUTPUT) keep nacelle's value.
- ``error.type`` (span status ERROR): an APIError's HTTP status (``"400"``), any
  other exception's class name (``TransportError``, ``Cancelled``); a failed tool
  call is tool.end's ``error_type``: the class name of the exception the tool raised
  (``LookupError``), else ``unknown_tool``, ``invalid_input``, ``hook_denied``,
  ``refused`` or ``cancelled``, and ``tool_error`` from an observation without one (a
  recording made before it existed); a span still open at ``run.end`` (a tool thread
  abandoned on cancel) ``abandoned``.
- Retries are span events named ``retry`` (``nacelle.retry.attempt``, ``.delay``,
  ``.level``, ``error.type``): on the open chat span when the transport resent it, on
  the agent span when ``Retry`` reran the turn. ``fallback``, ``compaction`` and
  ``pause`` are agent-span events too; a tool's ``ToolContext.progress`` reports are
  ``progress`` events on its tool span (``nacelle.progress.value``, ``.total`` when
  known, ``.message``).
- Content (``gen_ai.system_instructions``, ``gen_ai.input.messages``,
  ``gen_ai.output.messages``, ``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``) only with ``capture_content=True``, or when it is None
  and ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``; recorded as
  JSON strings in the messages schemas (span attributes hold no structures yet).
  Only then is ``events`` true, since the output messages are assembled from the
  run's events; a chat span then ends when its turn's events are in, at the time
  ``request.end`` was observed. Input messages are the run's start plus what each
  turn added, so a compaction inside the run is not reflected in them.
- Tool spans end at ``tool.start`` plus the call's own ``duration``: ``tool.end`` may
  be observed after the next request started.

Metrics: ``gen_ai.client.operation.duration`` (s), ``gen_ai.client.token.usage``
({token}, ``gen_ai.token.type`` input/output) and
``gen_ai.client.operation.time_to_first_chunk`` (s) per request, with the spec's
bucket advice; ``gen_ai.invoke_agent.duration`` and ``gen_ai.execute_tool.duration``
(s) per run and call.

Outer ring (the core never imports it; an observer is handed in): imports the
standard library and nacelle's core modules; opentelemetry (the ``otel`` extra) and
``nacelle.__version__`` only when an Instrumentation is made, so ``import nacelle``
never loads it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ._loggers import get_logger
from . import bounded_json
from .errors import ConfigError
from .events import Kind, Stop
from .messages import Image, Message, Reasoning, Role, Text, ToolCall, ToolResult
from .observe import Observation

if TYPE_CHECKING:  # typing only: the extra is imported when an Instrumentation is made
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["Instrumentation"]

log = get_logger(__name__)

CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "groq": "groq",
              "deepseek": "deepseek", "mistral": "mistral_ai", "xai": "x_ai",
              "gemini": "gcp.gemini", "openrouter": "openrouter"}
_FINISH = {Stop.END: "stop", Stop.TOOLS: "tool_call", Stop.MAX_TOKENS: "length",
           Stop.CONTEXT: "length", Stop.REFUSAL: "content_filter", Stop.OTHER: "error"}
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                     20.48, 40.96, 81.92)
_TOKEN_BUCKETS = tuple(float(4 ** n) for n in range(14))  # 1, 4, 16 .. 67108864
_AGENT_BUCKETS = _DURATION_BUCKETS + (163.84, 327.68, 655.36)


def provider_name(backend: str) -> str:
    """``gen_ai.provider.name`` for a backend's (or endpoint's) name."""
    key = re.sub(r"[^a-z0-9]+", "_", backend.lower()).strip("_")
    return _PROVIDERS.get(key.replace("_", ""), key or "unknown")


def finish_reason(stop: Optional[Stop]) -> str:
    """The spec's FinishReason for a Stop (a run-level stop keeps its own value)."""
    if stop is None:
        return "error"
    return _FINISH.get(stop, str(stop.value))


def error_type(error: Any) -> str:
    """``error.type`` for what ended an operation: an HTTP status, or a class name."""
    status = getattr(error, "status", None)
    if type(status) is int and status:
        return str(status)
    return type(error).__name__


@dataclass
class _Open:
    """One span begun and not yet ended, with what its metrics are recorded with."""

    span: "Span"
    started: int  # ns, the span's start time
    metric: Dict[str, Any] = field(default_factory=dict)
    thread: int = 0
    token: Any = None


@dataclass
class _Run:
    agent: _Open
    provider_set: bool = False
    spans: Dict[int, _Open] = field(default_factory=dict)
    calls: Dict[str, int] = field(default_factory=dict)  # a running call's id -> its span id
    request: Optional[int] = None  # the span id of the open request, for http retries
    history: List[Dict[str, Any]] = field(default_factory=list)
    output: List[Dict[str, Any]] = field(default_factory=list)  # the open turn's parts
    last: List[Dict[str, Any]] = field(default_factory=list)  # the last finished turn's
    pending: Optional[Tuple[_Open, int, str]] = None  # chat span, end ns, finish reason


class Instrumentation:
    """An observer emitting OpenTelemetry GenAI spans and metrics for each run it sees.

    ``tracer_provider`` and ``meter_provider`` default to the global ones.
    ``capture_content`` None reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    now. ``agent_name`` names the agent span and sets ``gen_ai.agent.name``. Needs
    opentelemetry-api (``pip install "nacelle-sdk[otel]"``); thread-safe.
    """

    def __init__(self, tracer_provider: Optional["TracerProvider"] = None,
                 meter_provider: Optional["MeterProvider"] = None,
                 capture_content: Optional[bool] = None, *,
                 agent_name: Optional[str] = None) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            raise ConfigError('nacelle.otel needs OpenTelemetry: pip install "nacelle-sdk[otel]"'
                              ) from None
        from . import __version__

        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"
        if agent_name is not None and (not isinstance(agent_name, str) or not agent_name):
            raise ConfigError(f"agent_name must be a non-empty string or None, got {agent_name!r}")
        self.capture_content = bool(capture_content)
        self.events = self.capture_content
        self.agent_name = agent_name
        self._tracer = trace.get_tracer("nacelle", __version__, tracer_provider)
        meter = metrics.get_meter("nacelle", __version__, meter_provider)
        histogram = meter.create_histogram
        self._duration = histogram("gen_ai.client.operation.duration", "s",
                                   "GenAI operation duration.",
                                   explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)
        self._tokens = histogram("gen_ai.client.token.usage", "{token}",
                                 "Number of input and output tokens used.",
                                 explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS)
        self._first_chunk = histogram(
            "gen_ai.client.operation.time_to_first_chunk", "s",
            "Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)
        self._agent_duration = histogram("gen_ai.invoke_agent.duration", "s",
                                         "GenAI agent invocation duration.",
                                         explicit_bucket_boundaries_advisory=_AGENT_BUCKETS)
        self._tool_duration = histogram("gen_ai.execute_tool.duration", "s",
                                        "GenAI tool execution duration.",
                                        explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)
        self._runs: Dict[str, _Run] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Instrumentation(capture_content={self.capture_content!r})"

    def __call__(self, observation: Observation) -> None:
        handler = getattr(self, "_on_" + observation.kind.replace(".", "_"), None)
        if handler is not None:
            handler(observation, observation.data)

    # -- the run --------------------------------------------------------------------

    def _on_run_start(self, o: Observation, data: Mapping[str, Any]) -> None:
        from opentelemetry.trace import SpanKind, set_span_in_context

        provider = provider_name(str(data.get("backend") or ""))
        attributes: Dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                      "gen_ai.provider.name": provider}
        if data.get("model"):
            attributes["gen_ai.request.model"] = str(data["model"])
        # A sub-agent's run (run.start names its parent run and call) is named for its
        # tool and sits under that call's execute_tool span.
        agent_name = str(data.get("agent") or "") or self.agent_name
        if agent_name:
            attributes["gen_ai.agent.name"] = agent_name
        if data.get("max_tokens"):
            attributes["gen_ai.request.max_tokens"] = int(data["max_tokens"])
        history = [_message(m) for m in data.get("messages") or ()]
        if self.capture_content:
            if data.get("system"):
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": str(data["system"])}])
            attributes["gen_ai.input.messages"] = _json(history)
        name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        started = _ns(o.time)
        parent = self._calling_span(data)
        span = self._tracer.start_span(name, None if parent is None else set_span_in_context(
            parent), kind=SpanKind.INTERNAL, attributes=attributes, start_time=started)
        metric = {k: v for k, v in attributes.items() if k in _AGENT_METRIC}
        with self._lock:
            self._runs[o.run_id] = _Run(_Open(span, started, metric), history=history)

    def _calling_span(self, data: Mapping[str, Any]) -> Optional["Span"]:
        """The execute_tool span of the call that started a sub-agent's run, if this
        observer saw it (None: the span current at run.start is the parent)."""
        if not data.get("parent_run"):
            return None
        with self._lock:
            parent = self._runs.get(str(data["parent_run"]))
            if parent is None:
                return None
            open_ = parent.spans.get(parent.calls.get(str(data.get("via") or ""), -1))
            return None if open_ is None else open_.span

    def _on_run_end(self, o: Observation, data: Mapping[str, Any]) -> None:
        with self._lock:
            run = self._runs.pop(o.run_id, None)
        if run is None:
            return
        self._finish_chat(run)
        for left in run.spans.values():  # a tool that never returned, a request cut off
            _fail(left.span, "abandoned", "still open when the run ended")
            left.span.end(_ns(o.time))
        span, error = run.agent.span, data.get("error")
        usage, stop = data.get("usage"), data.get("stop")
        if usage is not None:
            span.set_attributes(_usage(usage))
        if stop is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [finish_reason(stop)])
            if self.capture_content and run.last:
                span.set_attribute("gen_ai.output.messages", _json([{
                    "role": "assistant", "parts": run.last,
                    "finish_reason": finish_reason(stop)}]))
        metric = dict(run.agent.metric)
        if error is not None:
            metric["error.type"] = error_type(error)
            _fail(span, metric["error.type"], str(error))
        end = _ns(o.time)
        span.end(end)
        self._agent_duration.record((end - run.agent.started) / 1e9, metric)

    # -- requests -------------------------------------------------------------------

    def _on_request_start(self, o: Observation, data: Mapping[str, Any]) -> None:
        from opentelemetry.trace import SpanKind, set_span_in_context

        run = self._run(o)
        if run is None:
            return
        self._finish_chat(run)
        model = str(data.get("model") or "")
        attributes: Dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(str(data.get("provider") or "")),
            "server.address": str(data.get("server_address") or ""),
        }
        if data.get("server_port"):
            attributes["server.port"] = int(data["server_port"])
        if model:
            attributes["gen_ai.request.model"] = model
        if data.get("max_tokens"):
            attributes["gen_ai.request.max_tokens"] = int(data["max_tokens"])
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _json(run.history)
        if not run.provider_set:
            run.agent.span.set_attribute("gen_ai.provider.name",
                                         attributes["gen_ai.provider.name"])
            run.agent.metric["gen_ai.provider.name"] = attributes["gen_ai.provider.name"]
            run.provider_set = True
        started = _ns(o.time)
        span = self._tracer.start_span(f"chat {model}" if model else "chat",
                                       set_span_in_context(run.agent.span),
                                       kind=SpanKind.CLIENT, attributes=attributes,
                                       start_time=started)
        metric = {k: v for k, v in attributes.items() if k in _CHAT_METRIC}
        with self._lock:
            run.spans[data["span"]] = _Open(span, started, metric)
            run.request = data["span"]

    def _on_request_end(self, o: Observation, data: Mapping[str, Any]) -> None:
        run = self._run(o)
        if run is None:
            return
        with self._lock:
            open_ = run.spans.pop(data.get("span", -1), None)
            run.request = None
        if open_ is None:
            return
        span, metric, error = open_.span, open_.metric, data.get("error")
        if data.get("response_id"):
            span.set_attribute("gen_ai.response.id", str(data["response_id"]))
        if data.get("response_model"):
            metric["gen_ai.response.model"] = str(data["response_model"])
            span.set_attribute("gen_ai.response.model", metric["gen_ai.response.model"])
        stop, usage, ttft = data.get("stop"), data.get("usage"), data.get("ttft")
        reason = finish_reason(stop)
        if stop is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
        if ttft is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", float(ttft))
            self._first_chunk.record(float(ttft), metric)
        if usage is not None and error is None:
            span.set_attributes(_usage(usage))
            for kind, count in (("input", _input_tokens(usage)), ("output", usage.output_tokens)):
                self._tokens.record(count, {**metric, "gen_ai.token.type": kind})
        duration = dict(metric)
        if error is not None:
            duration["error.type"] = error_type(error)
            _fail(span, duration["error.type"], str(error))
        self._duration.record(float(data.get("latency") or 0.0), duration)
        end = _ns(o.time)
        if self.capture_content and error is None:
            # The turn's tool calls reach observers after request.end, so the span
            # waits for them (its TURN event) and ends at the time it ended.
            run.pending = (open_, end, reason)
        else:
            run.output.clear()
            span.end(end)

    def _on_request_retry(self, o: Observation, data: Mapping[str, Any]) -> None:
        run = self._run(o)
        if run is None:
            return
        with self._lock:
            request = run.spans.get(run.request) if run.request is not None else None
        at = request.span if request is not None and data.get("level") == "http" else run.agent.span
        at.add_event("retry", {"nacelle.retry.attempt": int(data.get("attempt") or 0),
                               "nacelle.retry.delay": float(data.get("delay") or 0.0),
                               "nacelle.retry.level": str(data.get("level") or ""),
                               "error.type": error_type(data.get("error"))},
                     timestamp=_ns(o.time))

    # -- tools ----------------------------------------------------------------------

    def _on_tool_start(self, o: Observation, data: Mapping[str, Any]) -> None:
        from opentelemetry import context
        from opentelemetry.trace import SpanKind, set_span_in_context

        run = self._run(o)
        if run is None:
            return
        name = str(data.get("name") or "")
        attributes: Dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": name,
                                      "gen_ai.tool.call.id": str(data.get("id") or ""),
                                      "gen_ai.tool.type": "function"}
        if data.get("description"):
            attributes["gen_ai.tool.description"] = str(data["description"])
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = str(data.get("input") or "")
        started = _ns(o.time)
        span = self._tracer.start_span(f"execute_tool {name}",
                                       set_span_in_context(run.agent.span),
                                       kind=SpanKind.INTERNAL, attributes=attributes,
                                       start_time=started)
        token = context.attach(set_span_in_context(span))
        metric = {k: v for k, v in attributes.items() if k in _TOOL_METRIC}
        with self._lock:
            run.spans[data["span"]] = _Open(span, started, metric, threading.get_ident(), token)
            run.calls[str(data.get("id") or "")] = data["span"]

    def _on_tool_progress(self, o: Observation, data: Mapping[str, Any]) -> None:
        run = self._run(o)
        if run is None:
            return
        with self._lock:
            open_ = run.spans.get(run.calls.get(str(data.get("id") or ""), -1))
        if open_ is None:
            return
        attributes: Dict[str, Any] = {"nacelle.progress.value": float(data.get("progress") or 0),
                                      "nacelle.progress.message": str(data.get("message") or "")}
        if data.get("total") is not None:
            attributes["nacelle.progress.total"] = float(data["total"])
        open_.span.add_event("progress", attributes, timestamp=_ns(o.time))

    def _on_tool_end(self, o: Observation, data: Mapping[str, Any]) -> None:
        from opentelemetry import context

        run = self._run(o)
        if run is None:
            return
        call_id = str(data.get("id") or "")
        with self._lock:
            open_ = run.spans.pop(data.get("span", -1), None)
            if run.calls.get(call_id) == data.get("span"):
                del run.calls[call_id]
        if open_ is None:
            return
        if open_.thread == threading.get_ident():
            context.detach(open_.token)
        span, metric = open_.span, dict(open_.metric)
        failed = data.get("error") is not None
        if data.get("refused") or failed:
            metric["error.type"] = str(data.get("error_type") or (
                "refused" if data.get("refused") else "tool_error"))
            _fail(span, metric["error.type"], str(data.get("error") or "refused"))
        elif self.capture_content and not data.get("paused"):
            span.set_attribute("gen_ai.tool.call.result", str(data.get("result") or ""))
        duration = float(data.get("duration") or 0.0)
        span.end(open_.started + int(duration * 1e9))
        self._tool_duration.record(duration, metric)

    # -- moments of the run ---------------------------------------------------------

    def _on_fallback(self, o: Observation, data: Mapping[str, Any]) -> None:
        self._agent_event(o, "fallback", {"nacelle.fallback.from": str(data.get("from") or ""),
                                          "nacelle.fallback.to": str(data.get("to") or ""),
                                          "error.type": error_type(data.get("error"))})

    def _on_compaction(self, o: Observation, data: Mapping[str, Any]) -> None:
        self._agent_event(o, "compaction", {
            "nacelle.compaction.reason": str(data.get("reason") or ""),
            "nacelle.compaction.removed": int(data.get("removed") or 0),
            "nacelle.compaction.tokens": int(data.get("tokens") or 0)})

    def _on_pause(self, o: Observation, data: Mapping[str, Any]) -> None:
        self._agent_event(o, "pause", {"nacelle.pause.pending": [
            str(p) for p in data.get("pending") or ()]})

    def _on_event(self, o: Observation, data: Mapping[str, Any]) -> None:
        run = self._run(o)
        event = data.get("event")
        if run is None or event is None:
            return
        with self._lock:
            if event.kind is Kind.TEXT:
                _append(run.output, "text", event.text)
            elif event.kind is Kind.THINKING:
                _append(run.output, "reasoning", event.text)
            elif event.kind is Kind.TOOL_CALL and event.tool is not None:
                run.output.append({"type": "tool_call", "id": event.tool.id,
                                   "name": event.tool.name, "arguments": _parsed(event.tool.input)})
            elif event.kind is Kind.TOOL_RESULT and event.tool is not None:
                run.history.append({"role": "tool", "parts": [{
                    "type": "tool_call_response", "id": event.tool.id,
                    "response": event.tool.error if event.tool.failed else event.tool.result}]})
        if event.kind is Kind.TURN:
            self._finish_chat(run)

    # -- helpers --------------------------------------------------------------------

    def _run(self, o: Observation) -> Optional[_Run]:
        with self._lock:
            return self._runs.get(o.run_id)

    def _agent_event(self, o: Observation, name: str, attributes: Dict[str, Any]) -> None:
        run = self._run(o)
        if run is not None:
            run.agent.span.add_event(name, attributes, timestamp=_ns(o.time))

    def _finish_chat(self, run: _Run) -> None:
        """End the chat span waiting for its turn's events, with its output messages."""
        with self._lock:
            pending, run.pending = run.pending, None
            output = list(run.output)
            if pending is not None:
                run.output.clear()
        if pending is None:
            return
        open_, end, reason = pending
        message = {"role": "assistant", "parts": output, "finish_reason": reason}
        open_.span.set_attribute("gen_ai.output.messages", _json([message]))
        with self._lock:
            run.history.append({"role": "assistant", "parts": output})
            run.last = output
        open_.span.end(end)


_AGENT_METRIC = frozenset({"gen_ai.operation.name", "gen_ai.provider.name",
                           "gen_ai.request.model", "gen_ai.agent.name"})
_CHAT_METRIC = frozenset({"gen_ai.operation.name", "gen_ai.provider.name",
                          "gen_ai.request.model", "server.address", "server.port"})
_TOOL_METRIC = frozenset({"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.type"})


def _ns(seconds: float) -> int:
    return int(seconds * 1e9) if seconds else time.time_ns()


def _fail(span: "Span", kind: str, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, description[:500]))


def _input_tokens(usage: Any) -> int:
    return int(usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens)


def _usage(usage: Any) -> Dict[str, int]:
    found = {"gen_ai.usage.input_tokens": _input_tokens(usage),
             "gen_ai.usage.output_tokens": int(usage.output_tokens)}
    for name, value in (("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens),
                        ("gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_tokens),
                        ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)):
        if value:
            found[name] = int(value)
    return found


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parsed(text: str) -> Any:
    """Tool arguments as an object, as the schema wants, or the text when not JSON (or
    nested too deep to read: the exporter's encoder recurses too)."""
    try:
        return bounded_json.loads(text, what="tool input")
    except ValueError:
        return text


def _append(parts: List[Dict[str, Any]], kind: str, text: str) -> None:
    if parts and parts[-1]["type"] == kind:
        parts[-1]["content"] += text
    else:
        parts.append({"type": kind, "content": text})


def _message(message: Any) -> Dict[str, Any]:
    """A nacelle Message in the input-messages schema (ChatMessage and its parts)."""
    if not isinstance(message, Message):
        return {"role": "user", "parts": [{"type": "text", "content": str(message)}]}
    parts = [_part(p) for p in message.parts]
    kept = [p for p in parts if p is not None]
    results = all(isinstance(p, ToolResult) for p in message.parts) and message.parts
    role = "tool" if results else ("assistant" if message.role is Role.ASSISTANT else "user")
    return {"role": role, "parts": kept}


def _part(part: Any) -> Optional[Dict[str, Any]]:
    if isinstance(part, Text):
        return {"type": "text", "content": part.text}
    if isinstance(part, Reasoning):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name,
                "arguments": _parsed(part.input)}
    if isinstance(part, ToolResult):
        return {"type": "tool_call_response", "id": part.id, "response": part.result}
    if isinstance(part, Image):
        return {"type": "blob", "modality": "image", "mime_type": part.media_type,
                "content": part.data}
    return None  # Finish and provider blocks say nothing a reader of the trace needs
