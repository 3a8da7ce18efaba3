"""The OpenAI Responses stream accumulator: decoded SSE events in, nacelle events and
one :class:`~nacelle.backend.TurnEnd` out.

Pure: :class:`Accumulator` is fed one SSE event (:meth:`~Accumulator.feed`) or one
parsed event (:meth:`~Accumulator.feed_event`) at a time and returns the events to
yield now; :meth:`Accumulator.finish` closes the turn. No I/O, so every pitfall is
tested with plain dicts. It speaks ``backends._turn``'s Accumulator protocol.

The events are those of ``ResponseStreamEvent`` in OpenAI's OpenAPI document; each
``data`` line is a JSON object whose ``type`` names it (the ``event:`` line repeats
it and is not needed). What they become:

- ``response.output_text.delta`` → one TEXT event per delta, exactly as cut (but
  for half a surrogate pair, held for the next delta, or U+FFFD when the item ends
  without it: ``_stream.Deltas``);
  ``response.refusal.delta`` too (a refusal is what the model said instead of an
  answer, so it is shown and kept as text), and the turn's stop becomes REFUSAL.
  ``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta``,
  which servers with open reasoning send) → one THINKING event each.
- Output items are kept by ``output_index`` in stream order. A ``reasoning`` item
  becomes ``Reasoning(text, state, "openai-responses")``: ``text`` its summaries
  joined by blank lines (each summary part is a paragraph of its own), ``state`` the
  item from ``response.output_item.done`` as compact JSON — the spec warns that the
  item in ``output_item.added`` may hold incomplete ``encrypted_content`` — which
  ``to_wire`` sends back unchanged. A ``message`` item is one Text part, a
  ``function_call`` a ToolCall (``call_id`` is its id; its arguments the
  ``arguments.delta`` fragments, replaced by the ``.done`` or ``output_item.done``
  text, which is the whole; a message's ``url_citation`` annotations, read from the
  finished item, are its Text's ``citations``), any other item type (a hosted tool's
  call, ``web_search_call`` or ``code_interpreter_call``) a ``ProviderBlock`` replayed as it
  came. Text that arrives only in ``output_item.done`` (no deltas) is shown then,
  and a response that streamed no item at all is read from the final event's
  ``output``.
- Each non-empty ``response.function_call_arguments.delta`` is one TOOL_INPUT
  (``_stream.ToolInputs``): the call's ``call_id`` and name (from
  ``output_item.added``), its index among the response's function calls, and the
  input so far. The call's input is whole at ``function_call_arguments.done`` or
  ``output_item.done``, whichever comes first: when it is JSON (or blank, read as
  ``{}``) and the call has its id and name, its TOOL_CALL comes then (``server``
  empty), its input exactly the ToolCall's, once every earlier call is whole too.
  A call announced is settled: it is finished with that input, whatever the
  arguments of a later event or the response's end say. Input that is not JSON is
  announced by the loop at the turn's end, with the calls after it.
- The end is ``response.completed`` (END, or TOOLS when a call came) or
  ``response.incomplete`` (``incomplete_details.reason``: ``max_output_tokens`` →
  MAX_TOKENS, ``content_filter`` → REFUSAL, anything else OTHER). A call of an
  incomplete response whose item never finished, or whose arguments are not
  complete JSON, is kept as ``ToolCall(finished=False)``. A ``data: [DONE]`` line
  (OpenAI sends none; some compatible servers do) is ignored. A body that ends
  before either raises :class:`StreamTruncated`.
- Usage comes from the final response's ``usage``: ``input_tokens`` counts the
  cached part (``input_tokens_details.cached_tokens``, and ``cache_write_tokens``
  where reported), so those are subtracted to get full-rate input, as on every
  backend; ``output_tokens_details.reasoning_tokens`` is the reasoning share of
  output. A count that is not a plausible one counts as zero, with a logged
  warning. ``price``, when given, fills the cost.
- ``response.failed`` (its ``response.error``) and ``error`` events raise
  :class:`StreamError` carrying the provider's ``code`` (``err.code``),
  ``retryable`` for the codes that mean "try again"
  (``server_error``, ``rate_limit_exceeded`` and the like, or an HTTP status of
  408, 429 or 5xx: ``_stream.transient_code``); ``insufficient_quota``, ``invalid_prompt``,
  ``context_length_exceeded`` and the rest are not. A rate-limit message's "try
  again in 1.5s" becomes ``err.retry_after``, which ``Retry`` honours.
- The structure is checked, not trusted: an event that is not a JSON object, a
  delta or id that is not a string where the stream's meaning depends on it, is a
  :class:`StreamError` naming the event and field. Event types this module does not
  know (``response.content_part.added``, annotations, ...) are ignored, as the API
  adds new ones.
- ``scrub`` cleans every error text made from what the server sent, so a key it
  echoed never reaches an exception; the backend passes the transport's scrubber.

May import: the standard library, nacelle's core, ``backends._stream`` and ``wire`` beside it. Never
``requests``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..._loggers import get_logger
from ...backend import TurnEnd
from ...errors import StreamError, StreamTruncated
from ...events import Event, Kind, Stop, Usage, _delta as _delta_event
from ...messages import Citation, Part, ProviderBlock, Reasoning, Text, ToolCall
from ...sse import SSEEvent, parse_json
from .._stream import (
    Deltas, Tagging, ToolInput, ToolInputs, complete_json, token_count, transient_code,
    well_formed,
)
from .wire import PROTOCOL

__all__ = ["Accumulator", "usage_from"]

logger = get_logger(__name__)

_TEXT = Kind.TEXT

_INCOMPLETE = {"max_output_tokens": Stop.MAX_TOKENS, "content_filter": Stop.REFUSAL}


_TRY_AGAIN = re.compile(r"(?i)try again in (\d+(?:\.\d+)?)\s*(ms|s)\b")

_THINKING_DELTAS = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")


def _unchanged(text: str) -> str:
    return text


def _compact(value: Any) -> str:
    return well_formed(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _url_citations(item: Optional[Dict[str, Any]]) -> Tuple[Citation, ...]:
    """The ``url_citation`` annotations of a finished message item's ``output_text``
    parts (``{"type": "url_citation", "url", "title", "start_index", "end_index"}``,
    openai-python's ``ResponseOutputText.Annotation``; the web search guide,
    developers.openai.com/api/docs/guides/tools-web-search), each a Citation whose
    ``cited_text`` is the span of the answer it marks. Other annotation types (file
    citations, container files) name no web page and are left out."""
    out: List[Citation] = []
    for part in (item or {}).get("content") or ():
        if not isinstance(part, dict) or part.get("type") != "output_text":
            continue
        raw = part.get("text")
        text = raw if isinstance(raw, str) else ""
        for note in part.get("annotations") or ():
            if not isinstance(note, dict) or note.get("type") != "url_citation":
                continue
            url, title = note.get("url"), note.get("title")
            start, end = note.get("start_index"), note.get("end_index")
            span = text[start:end] if type(start) is int and type(end) is int else ""
            out.append(Citation(url if isinstance(url, str) else "",
                                title if isinstance(title, str) else "", span, _compact(note)))
    return tuple(out)


class _Item:
    __slots__ = ("type", "id", "text", "summary", "arguments", "call_id", "name", "done",
                 "final", "call")

    def __init__(self, kind: str, item_id: str) -> None:
        self.type = kind
        self.id = item_id
        self.text = Deltas()  # message text / raw reasoning text
        self.summary: Dict[int, Deltas] = {}
        self.arguments = Deltas()
        self.call_id = ""
        self.name = ""
        self.done = False
        self.final: Optional[Dict[str, Any]] = None
        self.call: Optional[ToolInput] = None  # a function call's streamed input


class Accumulator(Tagging):
    """One streamed Responses API response. Feed it with :meth:`feed` (an SSE event)
    or :meth:`feed_event` (a parsed one); close it with :meth:`finish`.

    ``scrub`` cleans every error text made from the server's data; ``price`` fills
    the cost of the turn's usage (see the module docstring); ``name`` is how errors
    name the server.
    """

    def __init__(self, *, scrub: Optional[Callable[[str], str]] = None,
                 price: Optional[Callable[[Usage], Usage]] = None,
                 name: str = "OpenAI") -> None:
        self._scrub = scrub or _unchanged
        self._price = price
        self._name = name
        self.done = False
        self.response_id = ""
        self.response_model = ""
        self._items: Dict[int, _Item] = {}
        self._by_id: Dict[str, int] = {}
        self._made = _delta_event
        self._inputs = ToolInputs()
        self._status = ""
        self._reason = ""
        self._refused = False
        self._usage: Dict[str, Any] = {}

    # -- feeding --------------------------------------------------------------

    def feed(self, sse: SSEEvent) -> List[Event]:
        """Take one SSE event; its ``data`` JSON says what it is."""
        data = sse.data
        if data[:1] != "{" and (not data.strip() or data.strip() == "[DONE]"):
            return []
        try:
            event = parse_json(data)
        except (ValueError, RecursionError) as exc:
            reason = str(exc)
        else:
            return self.feed_event(event, sse.event)
        # Raised outside the handler, so no chained exception holds the raw line.
        raise StreamError(f"{self._name} sent a data line that is not JSON "
                          f"({reason[:120]}): {self._scrub(data)[:80]!r}")

    def feed_event(self, event: Any, name: str = "") -> List[Event]:
        """Take one parsed event; return the TEXT / THINKING events it carries."""
        if not isinstance(event, dict):
            raise StreamError(f"{self._name} sent an event that is not a JSON object: "
                              f"{self._scrub(_compact(event)[:4000])[:80]!r}")
        get = event.get
        kind = get("type")
        if kind == "response.output_text.delta":
            # The event nearly every one is: its item already made and named, read
            # here as _item_for and _text would read it.
            delta, index, item_id = get("delta"), get("output_index"), get("item_id")
            item = self._items.get(index) if type(index) is int else None
            if (item is not None and type(delta) is str and type(item_id) is str
                    and item.id == item_id):
                delta = item.text.add(delta)
                return [self._made(_TEXT, delta)] if delta else []
            return self._text(event, kind, refusal=False)
        if not isinstance(kind, str):
            kind = name if name and name != "message" else ""
        if kind == "response.output_text.delta":
            return self._text(event, kind, refusal=False)
        if kind == "response.refusal.delta":
            return self._text(event, kind, refusal=True)
        if kind in _THINKING_DELTAS:
            return self._thinking(event, kind)
        if kind == "response.function_call_arguments.delta":
            return self._arguments(event, kind)
        elif kind == "response.function_call_arguments.done":
            item = self._item_for(event, kind, "function_call")
            if isinstance(event.get("arguments"), str) and not self._settled(item):
                item.arguments.replace(event["arguments"])
            return self._whole(item)
        elif kind == "response.output_item.added":
            self._added(event, kind)
        elif kind == "response.output_item.done":
            return self._item_done(event, kind)
        elif kind in ("response.completed", "response.incomplete"):
            return self._end(event, kind)
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise self._error(error if isinstance(error, dict) else {}, "failed the response")
        elif kind == "error":
            nested = event.get("error")
            raise self._error(nested if isinstance(nested, dict) else event, "sent an error")
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            response = event.get("response")
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                self.response_id = response["id"]
            if isinstance(response, dict) and isinstance(response.get("model"), str):
                self.response_model = response["model"]
        return []

    def _arguments(self, event: Dict[str, Any], kind: str) -> List[Event]:
        delta = self._string(event, "delta", kind)
        item = self._item_for(event, kind, "function_call")
        if self._settled(item):
            return []  # its TOOL_CALL is out with its input as it was
        shown = item.arguments.add(delta)
        if shown and item.type == "function_call":
            return [self._call(item).add(shown)]
        return []

    def _call(self, item: _Item) -> ToolInput:
        """The function call's streamed input, begun at its first sight."""
        if item.call is None:
            item.call = self._inputs.start(item.call_id, item.name)
        return item.call

    @staticmethod
    def _settled(item: _Item) -> bool:
        return item.call is not None and item.call.settled

    def _whole(self, item: _Item) -> List[Event]:
        """A function call whose arguments are done: its TOOL_CALL (and those of later
        calls waiting for it) when its input is JSON or blank and it has its id and
        name; else nothing, the loop announcing it at the turn's end."""
        if item.type != "function_call" or not item.call_id or not item.name:
            return []
        call = self._call(item)
        raw = item.arguments.text
        final = raw if complete_json(raw) else (None if raw.strip() else "{}")
        if final is None:
            return []  # whether it finished depends on how the response ends
        return self._inputs.whole(call, final)

    def _text(self, event: Dict[str, Any], kind: str, *, refusal: bool) -> List[Event]:
        delta = self._string(event, "delta", kind)
        item = self._item_for(event, kind, "message")
        if refusal:
            self._refused = True
        delta = item.text.add(delta)
        return [self._made(_TEXT, delta)] if delta else []

    def _thinking(self, event: Dict[str, Any], kind: str) -> List[Event]:
        delta = self._string(event, "delta", kind)
        item = self._item_for(event, kind, "reasoning")
        if kind == "response.reasoning_text.delta":
            delta = item.text.add(delta)
        else:
            index = event.get("summary_index", 0)
            delta = item.summary.setdefault(index if type(index) is int else 0,
                                            Deltas()).add(delta)
        return [Event(Kind.THINKING, text=delta)] if delta else []

    def _added(self, event: Dict[str, Any], kind: str) -> None:
        raw = event.get("item")
        if not isinstance(raw, dict):
            raise StreamError(f"{self._name} sent a {kind} whose item is not an object")
        item = self._item_for(event, kind, self._string(raw, "type", kind), raw.get("id"))
        self._latch(item, raw, kind)
        if item.type == "function_call":
            self._call(item)  # numbered in the order the calls appear

    def _item_done(self, event: Dict[str, Any], kind: str) -> List[Event]:
        raw = event.get("item")
        if not isinstance(raw, dict):
            raise StreamError(f"{self._name} sent a {kind} whose item is not an object")
        item = self._item_for(event, kind, self._string(raw, "type", kind), raw.get("id"))
        self._latch(item, raw, kind)
        item.done = True
        item.final = raw
        events: List[Event] = []
        if item.type == "function_call" and isinstance(raw.get("arguments"), str) and (
                not self._settled(item)):
            item.arguments.replace(raw["arguments"])
        elif item.type == "message" and not item.text:
            # A server that sends the message whole, with no deltas: show it now.
            for part in raw.get("content") or ():
                if not isinstance(part, dict):
                    continue
                words = part.get("text") if part.get("type") == "output_text" else (
                    part.get("refusal") if part.get("type") == "refusal" else None)
                if part.get("type") == "refusal":
                    self._refused = True
                shown = item.text.add(words) if isinstance(words, str) else ""
                if shown:
                    events.append(Event(Kind.TEXT, text=shown))
        elif item.type == "reasoning" and not item.summary:
            for index, part in enumerate(raw.get("summary") or ()):
                words = part.get("text") if isinstance(part, dict) else None
                if isinstance(words, str) and words:
                    item.summary[index] = Deltas()
                    item.summary[index].replace(words)
        return events + self._end_texts(item) + self._whole(item)

    def _end_texts(self, item: _Item) -> List[Event]:
        """U+FFFD for half a character an item's text, reasoning or arguments ended on."""
        held = item.arguments.end()
        if held and item.type == "function_call" and not self._settled(item):
            return [self._call(item).add(held)]
        kind = Kind.TEXT if item.type == "message" else Kind.THINKING
        return [Event(kind, text=held) for held in (
            [item.text.end()] + [item.summary[k].end() for k in sorted(item.summary)]) if held]

    def _latch(self, item: _Item, raw: Dict[str, Any], kind: str) -> None:
        if item.type != "function_call":
            return
        for key in ("call_id", "name"):
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                raise StreamError(f"{self._name} sent a {kind} whose function_call {key} "
                                  f"is not a string")
            if value and not getattr(item, key):
                setattr(item, key, value)
                if item.call is not None and not item.call.settled:
                    item.call.rename(item.call_id, item.name)

    def _end(self, event: Dict[str, Any], kind: str) -> List[Event]:
        response = event.get("response")
        if not isinstance(response, dict):
            raise StreamError(f"{self._name} sent a {kind} without its response object")
        self._status = "completed" if kind == "response.completed" else "incomplete"
        details = response.get("incomplete_details")
        if isinstance(details, dict) and isinstance(details.get("reason"), str):
            self._reason = details["reason"]
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        self.done = True
        events: List[Event] = []
        for item in self._items.values():
            events += self._end_texts(item)
        output = response.get("output")
        if not self._items and isinstance(output, list):
            # A server that streamed no items reports them only here: read them so.
            for index, item in enumerate(output):
                events += self._item_done({"output_index": index, "item": item}, kind)
        return events

    def _item_for(self, event: Dict[str, Any], kind: str, item_type: str,
                  item_id: Any = None) -> _Item:
        """The item an event is about: by ``output_index`` (an int; a bool is not
        one), else by ``item_id``, made when it is new."""
        if item_id is None:
            item_id = event.get("item_id")
        if item_id is not None and not isinstance(item_id, str):
            raise StreamError(f"{self._name} sent a {kind} whose item id is not a string")
        index = event.get("output_index")
        if type(index) is not int:
            if index is not None:
                raise StreamError(f"{self._name} sent a {kind} whose output_index is not "
                                  f"an int")
            index = self._by_id.get(item_id or "", -1)
            if index < 0:
                index = max(self._items, default=-1) + 1
        item = self._items.get(index)
        if item is None:
            item = self._items[index] = _Item(item_type, item_id or "")
        elif item_id and not item.id:
            item.id = item_id
        if item_id:
            self._by_id.setdefault(item_id, index)
        return item

    def _string(self, holder: Dict[str, Any], key: str, kind: str) -> str:
        value = holder.get(key)
        if not isinstance(value, str):
            raise StreamError(f"{self._name} sent a {kind} whose {key} is not a string"
                              f" ({type(value).__name__})")
        return value

    # -- closing --------------------------------------------------------------

    def abandon(self) -> List[Event]:
        """Nothing: this backend asks for no server-side call to be announced."""
        return []

    def finish(self) -> TurnEnd:
        """Close the turn at the end of the body; :class:`StreamTruncated` when it
        ended before ``response.completed`` or ``response.incomplete``."""
        if not self.done:
            raise StreamTruncated(f"the {self._name} stream ended before response.completed "
                                  f"or response.incomplete")
        parts = self._parts()
        calls = any(isinstance(p, ToolCall) and p.finished for p in parts)
        if self._status == "incomplete":
            stop = _INCOMPLETE.get(self._reason, Stop.OTHER)
            if stop is Stop.OTHER:
                logger.debug("incomplete response (%r) mapped to OTHER", self._reason)
        elif calls:
            stop = Stop.TOOLS
        elif self._refused:
            stop = Stop.REFUSAL
        else:
            stop = Stop.END
        return TurnEnd(parts=parts, usage=self.usage(), stop=stop)

    def _parts(self) -> Tuple[Part, ...]:
        parts: List[Part] = []
        incomplete = self._status == "incomplete"
        for index in sorted(self._items):
            item = self._items[index]
            if item.type == "message":
                if item.text:
                    parts.append(Text(item.text.text, _url_citations(item.final)))
            elif item.type == "reasoning":
                words = "\n\n".join(item.summary[k].text for k in sorted(item.summary))
                state = _compact(item.final) if item.final is not None else ""
                parts.append(Reasoning(words or item.text.text, state, PROTOCOL))
            elif item.type == "function_call":
                raw = item.arguments.text
                finished = item.done and bool(item.call_id) and not (
                    incomplete and not complete_json(raw))
                if item.call is not None and item.call.final is not None:
                    raw, finished = item.call.final, True  # as announced
                if finished and not raw.strip():
                    raw = "{}"
                parts.append(ToolCall(item.call_id or item.id, item.name, raw, finished))
            elif item.final is not None:
                parts.append(ProviderBlock(PROTOCOL, _compact(item.final)))
        return tuple(parts)

    def usage(self) -> Usage:
        """The turn's usage, from the final response (zero before it came)."""
        usage = usage_from(self._usage, self._name)
        if self._price is not None:
            usage = self._price(usage)
        return usage

    def _error(self, error: Dict[str, Any], what: str) -> StreamError:
        code = error.get("code")
        if isinstance(code, bool) or not isinstance(code, (str, int)) or (
                isinstance(code, int) and not -10**9 < code < 10**9):
            code = None
        message = error.get("message")
        text = f"{self._name} {what}"
        if code is not None and code != "":
            text += f" ({str(code)[:80]})"
        text += f": {message if isinstance(message, str) and message else 'no message'}"
        again = transient_code(code)
        retry_after = None
        wait = _TRY_AGAIN.search(message) if again and isinstance(message, str) else None
        if wait:
            seconds = float(wait.group(1)) / (1000.0 if wait.group(2).lower() == "ms" else 1)
            retry_after = min(seconds, 600.0)
        return StreamError(self._scrub(text), code=self._scrub(code) if isinstance(code, str)
                           else code, retry_after=retry_after, retryable=again)


def usage_from(usage: Dict[str, Any], name: str = "OpenAI") -> Usage:
    """Map a Responses ``usage`` object onto :class:`Usage` (see the module docstring)."""
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    output = usage.get("output_tokens_details")
    output = output if isinstance(output, dict) else {}
    cached = token_count(details, "cached_tokens", name)
    written = token_count(details, "cache_write_tokens", name)
    return Usage(
        input_tokens=max(0, token_count(usage, "input_tokens", name) - cached - written),
        output_tokens=token_count(usage, "output_tokens", name),
        cache_read_tokens=cached,
        cache_creation_tokens=written,
        reasoning_tokens=token_count(output, "reasoning_tokens", name),
    )
