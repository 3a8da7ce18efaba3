"""The Anthropic stream accumulator: decoded SSE events in, nacelle events out.

:class:`Accumulator` is fed one event at a time — its SSE name and its parsed JSON
data — and returns the :class:`~nacelle.events.Event` values to yield now; once the
stream is over, :meth:`Accumulator.finish` gives the turn's
:class:`~nacelle.backend.TurnEnd`. It does no I/O, so it is tested with plain
dicts, and the HTTP code around it stays a few lines long.

What it makes of the stream:

- ``text_delta`` and ``thinking_delta`` become one TEXT or THINKING event each,
  exactly as the provider cut them. ``citations_delta`` is not modelled (a Text
  part holds text only). The ``signature_delta`` is kept in ``Reasoning.state``; a
  ``redacted_thinking`` block is kept whole, as JSON, in ``state``.
- ``tool_use`` input is the concatenation of every ``partial_json`` fragment, kept
  byte for byte as ``ToolCall.input`` (empty means ``{}``). Input that is not valid
  JSON is kept as written: running the call then fails with a result the model
  reads, instead of crashing the run. A call cut off by a ``max_tokens`` stop (whose
  ``content_block_stop`` may never come: open blocks are closed at ``message_delta``
  and ``message_stop``) becomes ``ToolCall(finished=False)``, which is kept for the
  reader but never run or sent back; so does a call left open with input that does
  not parse, whatever the stop.
- Server-side blocks (``server_tool_use``, ``web_search_tool_result``,
  ``mcp_tool_use``, ``mcp_tool_result``) and any block type this module does not
  know are kept whole as ``ProviderBlock("anthropic", json)`` in stream order, so
  the next request replays them. Calls and results among them also become
  TOOL_CALL / TOOL_RESULT events with ``server`` set (the MCP server's name, or
  ``anthropic`` for the provider's own tools), when their block is complete. A
  server-side call cut off mid-input is dropped: it can neither run nor be
  replayed.
- Usage starts from ``message_start`` and each ``message_delta`` overwrites the
  fields it carries: those counts are cumulative, and adding them double-counts.
- ``ping`` and unknown event types are ignored, as the API asks. An ``error``
  event raises :class:`~nacelle.errors.StreamError` carrying the provider's error
  type (``err.type``), marked transient for the types that mean "try again"
  (whether a retry happens is ``Retry``'s nothing-yielded rule). A stream that ends
  before ``message_stop`` raises :class:`~nacelle.errors.StreamTruncated` from
  :meth:`~Accumulator.finish`.

Outer-ring module: imports the standard library and nacelle's core only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..backend import TurnEnd
from ..errors import ConfigError, StreamError, StreamTruncated, transient
from ..events import Event, Kind, Stop, ToolEvent, Usage
from ..messages import ProviderBlock, Reasoning, Text, ToolCall

__all__ = ["Accumulator", "Pricing", "STOPS", "TRANSIENT_ERRORS"]

logger = logging.getLogger(__name__)

PROTOCOL = "anthropic"

STOPS = {
    "end_turn": Stop.END,
    "stop_sequence": Stop.END,
    "tool_use": Stop.TOOLS,
    "max_tokens": Stop.MAX_TOKENS,
    "model_context_window_exceeded": Stop.CONTEXT,
    "refusal": Stop.REFUSAL,
}

# In-band error types that mean "the same request may well succeed later".
TRANSIENT_ERRORS = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})

# Block types whose input streams as input_json_delta.
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


@dataclass(frozen=True)
class Pricing:
    """US dollars per million tokens, to fill ``Usage.cost``.

    ``cache_read`` and ``cache_write`` default to Anthropic's multipliers of the
    input price (0.1× for a read, 1.25× for a five-minute write).
    """

    input: float
    output: float
    cache_read: Optional[float] = None
    cache_write: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(
                    f"Pricing.{name} must be a number of dollars per million tokens,"
                    f" zero or more; got {value!r}"
                )
        if self.cache_read is None:
            object.__setattr__(self, "cache_read", self.input * 0.1)
        if self.cache_write is None:
            object.__setattr__(self, "cache_write", self.input * 1.25)

    def cost(self, usage: Usage) -> float:
        """The dollars ``usage`` costs at these prices."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_creation_tokens * self.cache_write
        ) / 1_000_000


class _Block:
    __slots__ = ("index", "start", "text", "signature", "raw", "closed", "cut")

    def __init__(self, index: int, start: Dict[str, Any]) -> None:
        self.index = index
        self.start = start
        self.text: List[str] = []
        self.signature = ""
        self.raw: List[str] = []
        self.closed = False
        self.cut = False  # a call whose input the message ended in the middle of

    @property
    def type(self) -> str:
        return str(self.start.get("type", ""))


class Accumulator:
    """One streamed Messages response, accumulated.

    ``calls`` maps the ids of server-side calls made in earlier turns to their
    ``(name, server)``, so a result that arrives a turn later (after a
    ``pause_turn``) is still reported under its call's name. ``pricing`` fills
    ``Usage.cost``.
    """

    def __init__(
        self,
        *,
        pricing: Optional[Pricing] = None,
        calls: Optional[Mapping[str, Tuple[str, str]]] = None,
    ) -> None:
        self._pricing = pricing
        self._calls: Dict[str, Tuple[str, str]] = dict(calls or {})
        self._call_index: Dict[str, int] = {}
        self._blocks: Dict[int, _Block] = {}
        self._usage: Dict[str, Any] = {}
        self._stop_reason: Optional[str] = None
        self._stopped = False
        self._server_calls = 0

    @property
    def stopped(self) -> bool:
        """True once ``message_stop`` arrived."""
        return self._stopped

    def feed(self, event: str, data: Any) -> List[Event]:
        """Take one SSE event (its name and parsed JSON data); return what to yield."""
        kind = event if event and event != "message" else ""
        if isinstance(data, dict) and not kind:
            kind = str(data.get("type", ""))
        if kind == "error":
            raise _stream_error(data)
        if self._stopped or kind in ("", "ping"):
            return []
        if not isinstance(data, dict):
            raise StreamError(f"Anthropic sent a {kind} event whose data is not a JSON object")
        if kind == "message_start":
            message = data.get("message") or {}
            self._merge_usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            return self._start(data)
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_stop":
            return self._close(self._block(data))
        if kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason"):
                self._stop_reason = delta["stop_reason"]
            self._merge_usage(data.get("usage"))
            return self._close_open()
        if kind == "message_stop":
            self._stopped = True
            return self._close_open()
        logger.debug("ignoring an unknown Anthropic stream event %r", kind)
        return []

    def finish(self) -> TurnEnd:
        """The turn's end; raises ``StreamTruncated`` if ``message_stop`` never came."""
        if not self._stopped:
            raise StreamTruncated(
                "the Anthropic stream ended before message_stop; the answer is incomplete"
            )
        parts = []
        for index in sorted(self._blocks):
            part = self._part(self._blocks[index])
            if part is not None:
                parts.append(part)
        reason = self._stop_reason or ""
        if reason == "pause_turn":
            return TurnEnd(tuple(parts), self.usage, Stop.OTHER, resume=True)
        stop = STOPS.get(reason, Stop.OTHER)
        if reason not in STOPS:
            logger.debug("Anthropic stop reason %r mapped to Stop.OTHER", reason)
        return TurnEnd(tuple(parts), self.usage, stop)

    @property
    def usage(self) -> Usage:
        """The usage reported so far (the last value of each field)."""
        u = self._usage
        details = u.get("output_tokens_details")
        details = details if isinstance(details, dict) else {}
        usage = Usage(
            input_tokens=_int(u.get("input_tokens")),
            output_tokens=_int(u.get("output_tokens")),
            cache_read_tokens=_int(u.get("cache_read_input_tokens")),
            cache_creation_tokens=_int(u.get("cache_creation_input_tokens")),
            reasoning_tokens=_int(details.get("thinking_tokens")),
        )
        if self._pricing is not None:
            usage = dataclasses.replace(usage, cost=self._pricing.cost(usage))
        return usage

    # -- blocks ---------------------------------------------------------------------

    def _start(self, data: Dict[str, Any]) -> List[Event]:
        index = data.get("index")
        start = data.get("content_block")
        if not isinstance(index, int) or not isinstance(start, dict):
            raise StreamError("Anthropic sent a content_block_start without an index or block")
        if index in self._blocks:
            raise StreamError(f"Anthropic started content block {index} twice")
        block = _Block(index, start)
        self._blocks[index] = block
        if block.type == "text" and start.get("text"):
            block.text.append(start["text"])
            return [Event(Kind.TEXT, text=start["text"])]
        if block.type == "thinking":
            block.signature = str(start.get("signature") or "")
            if start.get("thinking"):
                block.text.append(start["thinking"])
                return [Event(Kind.THINKING, text=start["thinking"])]
        return []

    def _delta(self, data: Dict[str, Any]) -> List[Event]:
        block = self._block(data)
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block.text.append(text)
            return [Event(Kind.TEXT, text=text)] if text else []
        if kind == "thinking_delta":
            text = str(delta.get("thinking", ""))
            block.text.append(text)
            return [Event(Kind.THINKING, text=text)] if text else []
        if kind == "signature_delta":
            block.signature = str(delta.get("signature", ""))  # set, never appended
        elif kind == "input_json_delta":
            block.raw.append(str(delta.get("partial_json", "")))
        return []

    def _block(self, data: Dict[str, Any]) -> _Block:
        block = self._blocks.get(data.get("index"))  # type: ignore[arg-type]
        if block is None:
            raise StreamError(
                f"Anthropic sent {data.get('type')} for content block {data.get('index')!r},"
                " which was never started"
            )
        return block

    def _close(self, block: _Block, *, cut: bool = False) -> List[Event]:
        if block.closed:
            return []
        block.closed = True
        if block.type in _CALLS:
            block.cut = cut
            if cut or block.type == "tool_use":
                return []
            return self._server_call(block)
        if "tool_use_id" in block.start:
            return self._server_result(block)
        return []

    def _close_open(self) -> List[Event]:
        # A message that ends with a block still open (a max_tokens stop inside a
        # tool call skips content_block_stop) closes it here. A call is cut off when
        # the output limit hit or its input does not parse; a proxy that merely
        # dropped the block's stop event leaves a whole call, which still runs.
        events: List[Event] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if not block.closed:
                cut = block.type in _CALLS and (
                    self._stop_reason == "max_tokens" or not _is_json("".join(block.raw)))
                events.extend(self._close(block, cut=cut))
        return events

    def _server_call(self, block: _Block) -> List[Event]:
        raw = "".join(block.raw)
        name = str(block.start.get("name", ""))
        server = str(block.start.get("server_name") or PROTOCOL)
        call_id = str(block.start.get("id", ""))
        self._calls[call_id] = (name, server)
        index = self._call_index[call_id] = self._server_calls
        self._server_calls += 1
        return [Event(Kind.TOOL_CALL, tool=ToolEvent(
            id=call_id, index=index, name=name, input=raw.strip() or "{}", server=server,
        ))]

    def _server_result(self, block: _Block) -> List[Event]:
        call_id = str(block.start.get("tool_use_id", ""))
        name, server = self._calls.get(call_id, ("", PROTOCOL))
        content = block.start.get("content")
        text = _content_text(content)
        failed = block.start.get("is_error") is True or (
            isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        )
        index = self._call_index.get(call_id, 0)
        return [Event(Kind.TOOL_RESULT, tool=ToolEvent(
            id=call_id, index=index, name=name, input="", result="" if failed else text,
            error=(text or "the server-side tool failed") if failed else None, server=server,
        ))]

    def _part(self, block: _Block):
        if block.type == "text":
            text = "".join(block.text)
            return Text(text) if text else None
        if block.type == "thinking":
            return Reasoning("".join(block.text), block.signature, PROTOCOL)
        if block.type == "redacted_thinking":
            return Reasoning("", _dumps(block.start), PROTOCOL)
        raw = "".join(block.raw)
        if block.type == "tool_use":
            return ToolCall(
                str(block.start.get("id", "")), str(block.start.get("name", "")),
                raw if raw.strip() else "{}", finished=not block.cut,
            )
        if block.type in _CALLS:
            if block.cut:
                logger.debug("dropping server-side call %s cut off mid-input",
                             block.start.get("id"))
                return None
            whole = dict(block.start)
            whole["input"] = _parse_object(raw, whole.get("input"))
            return ProviderBlock(PROTOCOL, _dumps(whole))
        return ProviderBlock(PROTOCOL, _dumps(block.start))

    def _merge_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key, value in usage.items():
            if value is not None:
                self._usage[key] = value


def _stream_error(data: Any) -> StreamError:
    error = data.get("error") if isinstance(data, dict) else None
    error = error if isinstance(error, dict) else {}
    kind = str(error.get("type") or "error")
    message = str(error.get("message") or "")
    request_id = str(data.get("request_id") or "") if isinstance(data, dict) else ""
    text = f"Anthropic stream error {kind}"
    if message:
        text += f": {message}"
    if request_id:
        text += f" (request id {request_id})"
    err = StreamError(text)
    err.type = kind  # type: ignore[attr-defined]
    err.request_id = request_id  # type: ignore[attr-defined]
    return transient(err) if kind in TRANSIENT_ERRORS else err


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "".join(str(b.get("text", "")) for b in content)
    if isinstance(content, dict) and "error_code" in content:
        return str(content["error_code"])
    return _dumps(content)


def _parse_object(raw: str, fallback: Any) -> Any:
    if not raw.strip():
        return fallback if isinstance(fallback, dict) else {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        logger.debug("a server-side call's input is not a JSON object; kept as {}")
        return {}
    return value


def _is_json(raw: str) -> bool:
    if not raw.strip():
        return True
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
