"""The Anthropic stream accumulator: decoded SSE events in, nacelle events out.

:class:`Accumulator` is fed one SSE event at a time (:meth:`Accumulator.feed`, or
:meth:`Accumulator.feed_event` with its name and parsed JSON data) and returns the
:class:`~nacelle.events.Event` values to yield now; once the stream is over,
:meth:`Accumulator.finish` gives the turn's :class:`~nacelle.backend.TurnEnd`. It
speaks ``backends._turn``'s Accumulator protocol, as every backend's does. It does no I/O, so it is tested with plain
dicts, and the HTTP code around it stays a few lines long.

What it makes of the stream:

- ``text_delta`` and ``thinking_delta`` become one TEXT or THINKING event each,
  exactly as the provider cut them — but for half a surrogate pair, held for the
  next delta or made U+FFFD when the block ends without it (``_stream.Deltas``). Each
  ``citations_delta`` adds its citation to the text block's ``Text.citations``
  (:class:`~nacelle.messages.Citation`: ``url``, ``title``, ``cited_text``, and the
  object whole in ``state`` for the replay; the shapes are the SDK's
  ``types/citation_*.py`` and the web search tool's ``web_search_result_location``,
  https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool).
  A citation that is not an object is ignored with a logged warning. The ``signature_delta`` is kept in ``Reasoning.state``; a
  ``redacted_thinking`` block is kept whole, as JSON, in ``state``.
- ``tool_use`` input is the concatenation of every ``partial_json`` fragment, kept
  byte for byte as ``ToolCall.input`` (empty means ``{}``). Input that is not valid
  JSON is kept as written: running the call then fails with a result the model
  reads, instead of crashing the run. A call cut off by a ``max_tokens`` stop (whose
  ``content_block_stop`` may never come: open blocks are closed at ``message_delta``
  and ``message_stop``) becomes ``ToolCall(finished=False)``, which is kept for the
  reader but never run or sent back; so does a call left open with input that does
  not parse, whatever the stop. Two local calls with the same id stay two parts
  with their own input; making ids unique is the loop's job, for every backend.
- Each non-empty ``input_json_delta`` of a ``tool_use`` block is one TOOL_INPUT
  (``_stream.ToolInputs``: the call's id, name, index among the turn's local calls,
  and the input so far); those of ``server_tool_use`` and ``mcp_tool_use`` blocks are
  not, as the provider runs them. At a ``tool_use`` block's ``content_block_stop``
  its input is whole: when it is JSON (or blank, read as ``{}``) its TOOL_CALL comes
  then, with ``server`` empty, its input exactly the ToolCall's — once every earlier
  local call has closed too, so its index is the loop's. A call left open (cut by
  ``max_tokens``) is never announced; one closed with input that is not JSON is
  announced by the loop at the turn's end, as before. The input streams as the
  model writes it because the request asks for fine-grained tool streaming
  (``wire.py``), with which the API no longer checks it is JSON before sending it.
- Server-side blocks (``server_tool_use``, ``web_search_tool_result``,
  ``mcp_tool_use``, ``mcp_tool_result``) and any block type this module does not
  know are kept whole as ``ProviderBlock("anthropic", json)`` in stream order, so
  the next request replays them. Calls and results among them also become
  TOOL_CALL / TOOL_RESULT events with ``server`` set (the MCP server's name, or
  ``anthropic`` for the provider's own tools), when their block is complete. A
  server-side call cut off mid-input is dropped: it can neither run nor be
  replayed.
- Every server-side TOOL_CALL is closed by exactly one TOOL_RESULT, as a local one
  is. A call still unanswered at ``message_stop`` is closed with a failed result
  saying no result came — unless the turn paused (``pause_turn``): then its result
  arrives in the next response, whose accumulator is given the open calls
  (``calls``). When the stream fails, :meth:`Accumulator.abandon` gives the failed
  results that close what is still open, for the backend to yield before the
  error. A result for no open call (a stray, or a second result for one call) is
  kept in the parts, since the provider sent it, but announces nothing: its
  TOOL_RESULT would close a call nobody saw, or close one twice. A second call
  with an id already used in the turn is a :class:`~nacelle.errors.StreamError`
  naming the id: there is no telling which call a result would answer.
- Usage starts from ``message_start`` and each ``message_delta`` overwrites the
  fields it carries: those counts are cumulative, and adding them double-counts. A
  count that is not a plausible one (negative, fractional, NaN, absurdly large, not
  a number) is ignored with a logged warning and the field keeps its last good
  value: usage is bookkeeping, and a broken count is no reason to lose the answer.
- A ``compaction`` block (server-side compaction) is kept whole as a ProviderBlock,
  its ``compaction_delta`` summary and ``encrypted_content`` added to it, to be sent
  back. ``context_management.applied_edits`` in a ``message_delta`` (what the
  provider's context editing cleared: ``compaction.context_edits``) becomes one
  COMPACTION event, its counts in the event's ``Compacted`` (``messages`` empty: the
  conversation kept here is unchanged).
- ``ping`` and unknown event types are ignored, as the API asks. An ``error``
  event raises :class:`~nacelle.errors.StreamError` carrying the provider's error
  type (``err.type``) and request id, retryable for the types that mean "try again"
  (whether a retry happens is ``Retry``'s nothing-yielded rule). A stream that ends
  before ``message_stop`` raises :class:`~nacelle.errors.StreamTruncated` from
  :meth:`~Accumulator.finish`.
- The stream's structure is checked, not trusted: a field of the wrong JSON type
  where the stream's meaning depends on it — an index that is not an int (a bool
  is not one), a block or delta that is not an object, text, a signature, input
  or an id that is not a string (``null`` included, so no reader ever sees the
  word "None") — is a :class:`~nacelle.errors.StreamError` naming the event and
  the field, never a ``TypeError`` from deep inside.
- ``scrub`` is applied to every error text built from what the provider sent, so
  a key echoed back inside an in-band error or a broken event never reaches an
  exception; the backend passes the transport's scrubber, the one that cleans HTTP
  error bodies.

Outer-ring module: imports the standard library, nacelle's core and
``backends._stream`` (what every accumulator shares) only.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ..._loggers import get_logger
from ...backend import TurnEnd
from ...errors import StreamError, StreamTruncated
from ...events import Event, Kind, Stop, ToolEvent, Usage, _delta as _delta_event, _wire_count
from ...messages import Citation, Part, ProviderBlock, Reasoning, Text, ToolCall
from ..._price import Price  # nacelle.pricing.Price, without the price table
from ...sse import SSEEvent, parse_json
from .._stream import Deltas, Tagging, ToolInput, ToolInputs, complete_json, well_formed

__all__ = ["Accumulator", "Pricing"]

logger = get_logger(__name__)

PROTOCOL = "anthropic"

_STOPS = {
    "end_turn": Stop.END,
    "stop_sequence": Stop.END,
    "tool_use": Stop.TOOLS,
    "max_tokens": Stop.MAX_TOKENS,
    "model_context_window_exceeded": Stop.CONTEXT,
    "refusal": Stop.REFUSAL,
}

# In-band error types that mean "the same request may well succeed later".
_TRANSIENT_ERRORS = frozenset({"overloaded_error", "rate_limit_error", "api_error",
                               "timeout_error"})

# Block types whose input streams as input_json_delta.
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})

# The usage fields read, by their wire name.
_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
           "cache_creation_input_tokens")

_TEXT, _THINKING = Kind.TEXT, Kind.THINKING

_NO_RESULT = "Anthropic sent no result for this server-side call"
_FAILED = "the stream failed before Anthropic sent a result for this server-side call"


def _unchanged(text: str) -> str:
    return text


#: The prices of a model, as ``anthropic.Pricing(input, output, cache_read=None,
#: cache_write=None)``: :class:`nacelle.pricing.Price` by its first-wave name.
Pricing = Price


class _Block:
    __slots__ = ("index", "start", "type", "text", "signature", "raw", "closed", "cut", "call",
                 "citations")

    def __init__(self, index: int, start: Dict[str, Any], kind: str) -> None:
        self.index = index
        self.start = start
        self.type = kind
        self.text = Deltas()
        self.signature = ""
        self.raw = Deltas()
        self.closed = False
        self.cut = False  # a call whose input the message ended in the middle of
        self.call: Optional[ToolInput] = None  # a local call's streamed input
        self.citations: List[Citation] = []


class Accumulator(Tagging):
    """One streamed Messages response, accumulated.

    ``calls`` maps the ids of server-side calls announced in an earlier, paused turn
    and still unanswered to their ``(name, server)``: their results arrive in this
    response, and are reported under the call's name (and closed as failed if they
    never come). ``pricing`` fills ``Usage.cost``. ``scrub`` cleans every error
    text made from the provider's data (see the module docstring).
    """

    def __init__(
        self,
        *,
        pricing: Optional[Pricing] = None,
        calls: Optional[Mapping[str, Tuple[str, str]]] = None,
        scrub: Optional[Callable[[str], str]] = None,
    ) -> None:
        self._pricing = pricing
        self._scrub = scrub or _unchanged
        # Server-side calls announced and not yet answered: id -> (index, name, server).
        self._open: Dict[str, Tuple[int, str, str]] = {
            call_id: (0, name, server) for call_id, (name, server) in (calls or {}).items()}
        self._started: Set[str] = set()  # ids of the server-side calls begun this turn
        self._answered: Set[str] = set()
        self._blocks: Dict[int, _Block] = {}
        self._made = _delta_event
        self._inputs = ToolInputs()  # the local calls, as their input streams
        self._usage: Dict[str, int] = {}
        self._stop_reason: Optional[str] = None
        self._stopped = False
        self._server_calls = 0
        self._edits_reported = False
        self.response_id = ""  # the message's id and model, for observers
        self.response_model = ""

    @property
    def done(self) -> bool:
        """True once ``message_stop`` arrived."""
        return self._stopped

    def feed(self, sse: SSEEvent) -> List[Event]:
        """Take one SSE event as it came; a scrubbed ``StreamError`` when its data is
        not JSON."""
        try:
            data = parse_json(sse.data)
        except ValueError as exc:
            reason = str(exc)
        else:
            return self.feed_event(sse.event, data)
        # Raised outside the handler, so the error carries no chained exception holding
        # the raw data line.
        raise StreamError(f"Anthropic sent a {self._scrub(sse.event)[:80]} event whose data "
                          f"is not JSON ({reason[:120]}): {self._scrub(sse.data)[:200]!r}")

    def feed_event(self, event: str, data: Any) -> List[Event]:
        """Take one SSE event (its name and parsed JSON data); return what to yield."""
        if event == "content_block_delta" and type(data) is dict and not self._stopped:
            # Nearly every event of a stream is a text delta or a piece of a call's
            # input: each takes the shortest path through the checks below (the same
            # checks, in the same order), and anything else about it goes the long
            # way, to _delta and its errors.
            index = data.get("index")
            block = self._blocks.get(index) if type(index) is int else None
            delta = data.get("delta")
            if block is not None and not block.closed and type(delta) is dict:
                kind = delta.get("type")
                if kind == "text_delta":
                    text = delta.get("text")
                    if type(text) is str:
                        shown = block.text.add(text)
                        return [self._made(_TEXT, shown)] if shown else []
                elif kind == "input_json_delta":
                    piece = delta.get("partial_json")
                    if type(piece) is str:
                        call = block.call
                        if call is not None:
                            return call.take(piece)  # its raw is the block's
                        block.raw.add(piece)
                        return []
            return self._delta(data)
        kind = event if event and event != "message" else ""
        if isinstance(data, dict) and not kind:
            named = data.get("type")
            kind = named if isinstance(named, str) else ""
        if kind == "error":
            raise self._stream_error(data)
        if self._stopped or kind in ("", "ping"):
            return []
        if not isinstance(data, dict):
            raise self._error(f"Anthropic sent a {kind[:80]} event whose data is not a JSON "
                              "object")
        if kind == "message_start":
            message = _object(data.get("message"))
            if message is None:
                raise self._error("Anthropic sent a message_start whose message is not an "
                                  "object")
            for field, value in (("response_id", message.get("id")),
                                 ("response_model", message.get("model"))):
                if isinstance(value, str):
                    setattr(self, field, self._scrub(value)[:200])
            self._merge_usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            return self._start(data)
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_stop":
            return self._close(self._block(data, kind))
        if kind == "message_delta":
            delta = _object(data.get("delta"))
            if delta is None:
                raise self._error("Anthropic sent a message_delta whose delta is not an object")
            reason = delta.get("stop_reason")
            if reason is not None:
                if not isinstance(reason, str):
                    raise self._error("Anthropic sent a stop_reason that is not a string")
                if reason:
                    self._stop_reason = reason
            self._merge_usage(data.get("usage"))
            return self._close_open() + self._edited(data.get("context_management"))
        if kind == "message_stop":
            self._stopped = True
            events = self._close_open()
            if self._stop_reason != "pause_turn":  # a paused call's result comes next turn
                events.extend(self._close_unanswered(_NO_RESULT))
            return events
        logger.debug("ignoring an unknown Anthropic stream event %r", self._scrub(kind)[:80])
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
        stop = _STOPS.get(reason, Stop.OTHER)
        if reason not in _STOPS:
            logger.debug("Anthropic stop reason %r mapped to Stop.OTHER",
                         self._scrub(reason)[:80])
        return TurnEnd(tuple(parts), self.usage, stop)

    def abandon(self) -> List[Event]:
        """Failed TOOL_RESULTs closing every server-side call still open, once.

        For a stream that failed: its error ends the turn, and the consumer, who saw
        those calls announced, must still see each of them closed.
        """
        return self._close_unanswered(_FAILED)

    @property
    def usage(self) -> Usage:
        """The usage reported so far (the last good value of each field)."""
        u = self._usage
        usage = Usage(
            input_tokens=u.get("input_tokens", 0),
            output_tokens=u.get("output_tokens", 0),
            cache_read_tokens=u.get("cache_read_input_tokens", 0),
            cache_creation_tokens=u.get("cache_creation_input_tokens", 0),
            reasoning_tokens=u.get("thinking_tokens", 0),
            # One-hour writes cost 2x input, five-minute writes 1.25x; the split comes
            # in usage.cache_creation, and what it does not claim is a 5-minute write.
            cache_write_1h_tokens=min(u.get("ephemeral_1h_input_tokens", 0),
                                      u.get("cache_creation_input_tokens", 0)),
        )
        if self._pricing is not None:
            usage = self._pricing.priced(usage)
        return usage

    # -- blocks ---------------------------------------------------------------------

    def _start(self, data: Dict[str, Any]) -> List[Event]:
        index = data.get("index")
        start = data.get("content_block")
        if type(index) is not int or not isinstance(start, dict):
            raise self._error("Anthropic sent a content_block_start without an integer index "
                              "and a content_block object")
        kind = start.get("type")
        if not isinstance(kind, str):
            raise self._error(f"Anthropic started content block {index} without a string type")
        if index in self._blocks:
            raise self._error(f"Anthropic started content block {index} twice")
        block = _Block(index, start, kind)
        if kind in _CALLS:
            self._check_call(block)
            if kind == "tool_use":
                block.call = self._inputs.start(start["id"], start["name"])
                block.raw = block.call.raw  # one copy of the input: the call's
        elif "tool_use_id" in start and not isinstance(start["tool_use_id"], str):
            raise self._error(f"Anthropic sent a {kind} block whose tool_use_id is not a string")
        self._blocks[index] = block
        if kind == "text":
            text = block.text.add(self._text(start, "text", kind))
            if text:
                return [Event(Kind.TEXT, text=text)]
        elif kind == "thinking":
            block.signature = self._text(start, "signature", kind)
            text = block.text.add(self._text(start, "thinking", kind))
            if text:
                return [Event(Kind.THINKING, text=text)]
        return []

    def _check_call(self, block: _Block) -> None:
        start = block.start
        for field in ("id", "name"):
            if not isinstance(start.get(field), str):
                raise self._error(f"Anthropic started a {block.type} block whose {field} is "
                                  "not a string")
        server = start.get("server_name")
        if server is not None and not isinstance(server, str):
            raise self._error(f"Anthropic started a {block.type} block whose server_name is "
                              "not a string")
        if block.type != "tool_use":
            call_id = start["id"]
            if call_id in self._started:
                raise self._error(f"Anthropic started two server-side calls with the id "
                                  f"{call_id!r} in one turn; their results cannot be told apart")
            self._started.add(call_id)

    def _delta(self, data: Dict[str, Any]) -> List[Event]:
        block = self._block(data, "content_block_delta")
        delta = data.get("delta")
        if not isinstance(delta, dict):
            raise self._error(f"Anthropic sent a content_block_delta for block {block.index} "
                              "whose delta is not an object")
        if block.closed:
            raise self._error(f"Anthropic sent a delta for content block {block.index} after "
                              "it was closed")
        kind = delta.get("type")
        if kind == "text_delta":
            text = block.text.add(self._text(delta, "text", kind, required=True))
            return [self._made(_TEXT, text)] if text else []
        if kind == "thinking_delta":
            text = block.text.add(self._text(delta, "thinking", kind, required=True))
            return [self._made(_THINKING, text)] if text else []
        if kind == "signature_delta":
            block.signature = self._text(delta, "signature", kind, required=True)  # set, never appended
        elif kind == "compaction_delta":  # a compaction block's summary, as it comes
            block.start = dict(block.start)  # the block's own copy, never the caller's
            for key in ("content", "encrypted_content"):
                value = delta.get(key)
                if isinstance(value, str):
                    held = block.start.get(key)
                    block.start[key] = (held if isinstance(held, str) else "") + value
        elif kind == "citations_delta":
            block.citations.append(_citation(delta.get("citation")))
        elif kind == "input_json_delta":
            piece = self._text(delta, "partial_json", kind, required=True)
            if block.call is not None:
                return block.call.take(piece)
            block.raw.add(piece)
        return []

    def _edited(self, management: Any) -> List[Event]:
        """One COMPACTION event for the edits the provider says it made to its view of
        the conversation (``context_management.applied_edits``), once a turn."""
        applied = management.get("applied_edits") if isinstance(management, dict) else None
        if not isinstance(applied, list) or not applied or self._edits_reported:
            return []
        self._edits_reported = True
        counts = {"cleared_tool_uses": 0, "cleared_thinking_turns": 0, "cleared_input_tokens": 0}
        for edit in applied:
            for key in counts:
                value = _wire_count(edit.get(key)) if isinstance(edit, dict) else None
                counts[key] += value or 0
        said = [f"{counts[key]} {what}" for key, what in (
            ("cleared_tool_uses", "tool uses"), ("cleared_thinking_turns", "thinking turns"))
            if counts[key]]
        # Only a run with context edits gets here: the compaction package loads now.
        from ...compaction.strategies import Compacted
        done = Compacted(messages=(), removed=counts["cleared_tool_uses"]
                         + counts["cleared_thinking_turns"],
                         tokens=counts["cleared_input_tokens"],
                         strategy="context edits: cleared " + (", ".join(said) or "nothing"))
        return [Event(Kind.COMPACTION, compaction=done)]

    def _text(self, holder: Dict[str, Any], field: str, where: Any,
              required: bool = False) -> str:
        value = holder.get(field)
        if isinstance(value, str):
            return value
        if value is None and not required:
            return ""
        raise self._error(f"Anthropic sent a {where} whose {field} is not a string")

    def _block(self, data: Dict[str, Any], kind: str) -> _Block:
        index = data.get("index")
        block = self._blocks.get(index) if type(index) is int else None
        if block is None:
            shown = index if type(index) is int else f"<{type(index).__name__}>"
            raise self._error(
                f"Anthropic sent {kind} for content block {shown}, which was never started")
        return block

    def _close(self, block: _Block, *, cut: bool = False) -> List[Event]:
        if block.closed:
            return []
        block.closed = True
        call = block.call
        if call is not None:
            held_input = call.end()  # its raw is the block's
        else:
            block.raw.end()
            held_input = []
        held = block.text.end()  # half a character the block ended on
        if held:
            return [Event(Kind.TEXT if block.type == "text" else Kind.THINKING, text=held)]
        if block.type in _CALLS:
            block.cut = cut
            if cut:
                return []
            if call is not None:
                return self._local_call(call, block.raw.text, held_input)
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
                    self._stop_reason == "max_tokens" or bool(block.raw.text.strip())
                    and not complete_json(block.raw.text))
                events.extend(self._close(block, cut=cut))
        return events

    def _local_call(self, call: ToolInput, raw: str, held: List[Event]) -> List[Event]:
        """A closed ``tool_use`` block: the TOOL_INPUT of the U+FFFD its input ended
        on, if any, and its TOOL_CALL when its input is JSON or blank (as
        :meth:`_part` will hold it)."""
        events = held
        final = raw if complete_json(raw) else (None if raw.strip() else "{}")
        return events + self._inputs.whole(call, final)

    def _server_call(self, block: _Block) -> List[Event]:
        raw = block.raw.text
        name = block.start["name"]
        server = block.start.get("server_name") or PROTOCOL
        call_id = block.start["id"]
        if call_id in self._open:  # announced in the paused turn this one continues
            return []
        index = self._server_calls
        self._server_calls += 1
        self._open[call_id] = (index, name, server)
        return [Event(Kind.TOOL_CALL, tool=ToolEvent(
            id=call_id, index=index, name=name, input=raw.strip() or "{}", server=server,
        ))]

    def _server_result(self, block: _Block) -> List[Event]:
        call_id = block.start["tool_use_id"]
        opened = self._open.pop(call_id, None)
        if opened is None:
            again = "a second result" if call_id in self._answered else "a result"
            logger.warning("Anthropic sent %s for server-side call %r, which has no open "
                           "call; it is kept in the message but not reported", again,
                           self._scrub(call_id)[:80])
            return []
        self._answered.add(call_id)
        index, name, server = opened
        content = block.start.get("content")
        text = _content_text(content)
        failed = block.start.get("is_error") is True or (
            isinstance(content, dict) and isinstance(content.get("type"), str)
            and content["type"].endswith("_error")
        )
        return [Event(Kind.TOOL_RESULT, tool=ToolEvent(
            id=call_id, index=index, name=name, input="", result="" if failed else text,
            error=(text or "the server-side tool failed") if failed else None, server=server,
        ))]

    def _close_unanswered(self, why: str) -> List[Event]:
        events = []
        for call_id, (index, name, server) in self._open.items():
            logger.warning("server-side call %r (%s) closed as failed: %s",
                           self._scrub(call_id)[:80], self._scrub(name)[:80], why)
            self._answered.add(call_id)
            events.append(Event(Kind.TOOL_RESULT, tool=ToolEvent(
                id=call_id, index=index, name=name, input="", error=why, server=server)))
        self._open.clear()
        return events

    def _part(self, block: _Block) -> Optional[Part]:
        if block.type == "text":
            text = block.text.text
            citations = tuple(block.citations) + tuple(
                _citation(c) for c in _listed(block.start.get("citations")))
            return Text(text, citations) if text else None
        if block.type == "thinking":
            return Reasoning(block.text.text, block.signature, PROTOCOL)
        if block.type == "redacted_thinking":
            return Reasoning("", _dumps(block.start), PROTOCOL)
        raw = block.raw.text
        if block.type == "tool_use":
            return ToolCall(block.start["id"], block.start["name"],
                            raw if raw.strip() else "{}", finished=not block.cut)
        if block.type in _CALLS:
            if block.cut:
                logger.debug("dropping server-side call %s cut off mid-input",
                             self._scrub(block.start["id"])[:80])
                return None
            whole = dict(block.start)
            whole["input"] = _parse_object(raw, whole.get("input"))
            return ProviderBlock(PROTOCOL, _dumps(whole))
        return ProviderBlock(PROTOCOL, _dumps(block.start))

    def _merge_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        fields = [(key, usage.get(key)) for key in _COUNTS]
        written = usage.get("cache_creation")
        if isinstance(written, dict):
            fields.append(("ephemeral_1h_input_tokens", written.get("ephemeral_1h_input_tokens")))
        details = usage.get("output_tokens_details")
        if isinstance(details, dict):
            fields.append(("thinking_tokens", details.get("thinking_tokens")))
        for key, value in fields:
            if value is None:
                continue
            count = _wire_count(value)
            if count is None:
                logger.warning("Anthropic reported a %s that is not a token count (%s); "
                               "keeping the last good value", key, type(value).__name__)
            else:
                self._usage[key] = count

    # -- errors -----------------------------------------------------------------------

    def _error(self, text: str) -> StreamError:
        return StreamError(self._scrub(text))

    def _stream_error(self, data: Any) -> StreamError:
        error = data.get("error") if isinstance(data, dict) else None
        error = error if isinstance(error, dict) else {}
        kind = error.get("type")
        kind = self._scrub(kind) if isinstance(kind, str) and kind else "error"
        message = error.get("message")
        message = message if isinstance(message, str) else ""
        request_id = data.get("request_id") if isinstance(data, dict) else None
        request_id = self._scrub(request_id) if isinstance(request_id, str) else ""
        text = f"Anthropic stream error {kind}"
        if message:
            text += f": {message}"
        if request_id:
            text += f" (request id {request_id})"
        return StreamError(self._scrub(text), type=kind, request_id=request_id,
                           retryable=kind in _TRANSIENT_ERRORS)


def _citation(value: Any) -> Citation:
    """A ``citations_delta``'s citation as a :class:`Citation`, its object kept whole."""
    if not isinstance(value, dict):
        logger.warning("Anthropic sent a citation that is not an object; it is kept empty")
        return Citation()
    fields = [value.get(key) for key in ("url", "title", "cited_text")]
    if fields[1] is None:
        fields[1] = value.get("document_title")  # a document's citation names its title so
    url, title, cited = (field if isinstance(field, str) else "" for field in fields)
    return Citation(well_formed(url), well_formed(title), well_formed(cited), _dumps(value))


def _listed(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _object(value: Any) -> Optional[Dict[str, Any]]:
    """``value`` when it is an object; an empty one for null or missing; else None."""
    if value is None:
        return {}
    return value if isinstance(value, dict) else None


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in content
    ):
        return "".join(b["text"] for b in content)
    if isinstance(content, dict) and isinstance(content.get("error_code"), str):
        code: str = content["error_code"]
        return code
    return _dumps(content)


def _parse_object(raw: str, fallback: Any) -> Any:
    if not raw.strip():
        return fallback if isinstance(fallback, dict) else {}
    try:
        value = parse_json(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        logger.debug("a server-side call's input is not a JSON object; kept as {}")
        return {}
    return value


def _dumps(value: Any) -> str:
    return well_formed(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
