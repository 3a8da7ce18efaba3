"""The Chat Completions stream accumulator: decoded chunks in, nacelle events and one
:class:`~nacelle.backend.TurnEnd` out, for every server the :class:`~.wire.Dialect`
describes (OpenRouter's included).

Pure: :class:`Accumulator` is fed one SSE event (:meth:`~Accumulator.feed`), one
``data`` payload (:meth:`~Accumulator.feed_data`) or one parsed chunk
(:meth:`~Accumulator.feed_chunk`) at a time and returns the events to yield now;
:meth:`Accumulator.finish` closes the turn. No I/O, so every pitfall of the dialect
is tested with plain dicts. It speaks ``backends._turn``'s Accumulator protocol.

Rules, each answering a way other clients went wrong:

- Keepalive comments (``: OPENROUTER PROCESSING``) never reach this module: the SSE
  decoder drops comments and dispatches nothing for an empty data buffer.
- ``delta.content`` becomes one TEXT event per non-empty delta and the dialect's
  reasoning fields (``reasoning_content`` on DeepSeek, vLLM and llama.cpp,
  ``reasoning`` on OpenRouter, Groq and Ollama; the first one present wins) one
  THINKING event each; null and empty values (sent on nearly every chunk) and the
  ``role`` repeated on each delta are ignored. Half a surrogate pair ending a delta
  waits for the next one, and becomes U+FFFD at the finish or ``[DONE]`` if its
  partner never came (``_stream.Deltas``). ``delta.refusal`` text is shown and
  kept as text: it is what the model said instead of an answer, and a turn that
  refused without calls ends with REFUSAL (OpenAI sends it, with finish ``stop``,
  when a structured-output request is refused).
- ``delta.content`` may also be a list of typed chunks, read on every dialect, in
  order: a ``text`` chunk is text, a ``thinking`` chunk (its ``thinking`` a list of
  text chunks) reasoning, any other type (a ``reference``) skipped. Mistral's
  reasoning models stream so while they think and then plain strings, the answer's
  first token sometimes in a text chunk (docs.mistral.ai/capabilities/reasoning/;
  the streaming example of github.com/mistralai/client-python/pull/511); a
  non-streamed answer's ``message.content`` is the same list.
- A field of the wrong JSON type is ignored like a null one (and logged), never
  shown: text that is not a string, a choice, delta or fragment that is not an
  object, a tool-call ``index`` that is not an int (a bool is not one). This
  dialect is spoken by many servers, each loose in its own way, and one odd field
  is no reason to lose an answer; what cannot be ignored — a chunk that is not an
  object, data that is not JSON — is a :class:`StreamError`. One shape is read
  rather than ignored: ``arguments`` sent as a JSON object instead of its text are
  written out as JSON text.
- ``reasoning_details`` fragments (where the dialect has them) are merged as they
  come, for the whole stream (a signature arrives after the text it signs): a
  fragment with the same ``type`` and ``index`` as an earlier item extends it
  (``text`` / ``summary`` / ``data`` concatenated, other keys filled where missing);
  a fragment without an index continues the previous item of the same text-like
  type; anything else is a new item. The merged list, even an empty one, is the
  turn's ``Reasoning.state`` (its JSON text), echoed unchanged by ``to_wire``.
- Tool-call fragments are keyed by ``index``; ``id`` and ``name`` are latched once
  (the first non-empty value wins, so servers repeating them on every fragment
  are fine) and only ``arguments`` are concatenated, never parsed before the end.
  A fragment without an index (llama.cpp and Ollama have sent whole calls so)
  continues the last call unless it brings a new ``id`` or ``name``. A fragment
  reusing an index with a *different* id starts a new call only when the arguments
  gathered so far are already a complete JSON value (a server numbering parallel
  calls alike); otherwise the id changed mid-call and the first one stands. Likewise
  a fragment that brings its id or name again *with* more arguments, when the call
  it would extend is already a complete JSON object, starts a new call: appended,
  those arguments could only break it. A call's ``extra_content`` (Gemini's thought
  signature) is kept in a ProviderBlock after the calls, for ``to_wire`` to send
  back. Missing ids are made from the turn's ``seed`` (the conversation's length),
  the call's position, name and arguments, so a replayed conversation gets the same
  ids; a duplicate id is passed on unchanged, each call with its own arguments (the
  loop makes a turn's ids unique, for every backend). Blank, ``null`` or ``""``
  arguments become ``"{}"``.
- Each non-empty ``arguments`` fragment is one TOOL_INPUT (``_stream.ToolInputs``):
  the call's id and name (as far as they came: OpenAI sends both in an index's
  first fragment only, and a server that sends no id gets one made at the end), its
  index among the turn's calls by first appearance, and the input so far; two calls
  whose fragments interleave (by ``index``) stream each its own. There is no event
  that ends one call, so a call's input is whole when a later call starts and its
  arguments so far are a complete JSON object — looked at once, then — or, for the
  rest, at the finish: then its TOOL_CALL comes (``server`` empty), its input
  exactly the ToolCall's, once every earlier call is whole too. A call whose
  arguments are not yet complete when the next one starts waits for the finish;
  one cut by ``length`` is never announced. A call announced is settled: arguments
  sent for it later (nothing but whitespace could keep it JSON) are dropped and
  logged, and a later finish does not make it unfinished.
- The finish is handled once, at ``[DONE]`` or at the end of the body: finish and
  usage chunks can repeat, and a repeated finish changes nothing. Calls run
  whenever any were gathered, whatever the finish says (servers answer ``stop``
  or null with calls), unless it is ``error`` or ``length``. ``stop`` → END,
  ``tool_calls`` → TOOLS (OTHER if no call arrived), ``length`` → MAX_TOKENS (calls
  whose arguments are not complete JSON are kept as ``finished=False``),
  ``content_filter`` → REFUSAL, ``error`` → :class:`StreamError`, no finish before
  ``[DONE]`` → END, anything else → OTHER.
- Usage comes from whichever chunk carries it (the last wins; Groq's
  ``x_groq.usage`` too), never from an unguarded ``choices[0]``. A count or cost
  that is not a plausible one (negative, fractional, NaN, absurdly large, not a
  number) counts as zero, with a logged warning. ``prompt_tokens`` is the whole
  prompt on every server: OpenRouter's docs' usage example reports 194 prompt
  tokens of which 100 are ``cache_write_tokens``, its caching guide 10339 of which
  10318 are ``cached_tokens``; OpenAI counts ``prompt_tokens_details.cached_tokens``
  inside it, DeepSeek ``prompt_cache_hit_tokens``. So cache reads and writes are
  subtracted to get full-rate input (never below zero). ``cost`` is read only where
  the dialect says the server reports dollars (OpenRouter's credits are US
  dollars); elsewhere ``price``, when given, fills it.
- Errors inside a 200 stream — a top-level ``error`` object, a choice-level
  ``error``, or ``finish_reason: "error"`` — raise :class:`StreamError` with its ``code``,
  ``retryable`` when the error's ``code`` (a number, or a string
  holding one) is 408, 429 or 5xx, or a word that means "try again"
  (``server_error``, ``rate_limit_exceeded``: ``_stream.transient_code``, the Responses
  accumulator's rule too). A body that
  ends with neither ``[DONE]`` nor a finish raises :class:`StreamTruncated`.
- Data lines are read with :func:`nacelle.sse.parse_json` (no NaN, no Infinity, no
  runaway nesting), and ``scrub`` cleans every error text made from what the
  server sent — an in-band error, a broken data line — so a key it echoed never
  reaches an exception; the backend passes the transport's scrubber, the one that
  cleans HTTP error bodies. Errors name the server as its dialect does.

May import: the standard library, nacelle's core, ``backends._stream`` and ``wire`` beside it. Never ``requests``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..._loggers import get_logger
from ...backend import TurnEnd
from ...errors import StreamError, StreamTruncated
from ...events import Event, Kind, Stop, Usage, _delta as _delta_event, _wire_cost
from ...messages import Part, ProviderBlock, Reasoning, Text, ToolCall
from ...sse import SSEEvent, parse_json
from .._stream import (
    Deltas, Tagging, ToolInput, ToolInputs, complete_json, token_count, transient_code,
    well_formed,
)
from .wire import Dialect, call_extra_block

__all__ = ["Accumulator", "usage_from"]

logger = get_logger(__name__)

_TEXT = Kind.TEXT

_STOPS = {
    "stop": Stop.END,
    "tool_calls": Stop.TOOLS,
    "length": Stop.MAX_TOKENS,
    "content_filter": Stop.REFUSAL,
}
_CONCATENATED = ("text", "summary", "data")
_CONTINUABLE = ("reasoning.text", "reasoning.summary")


class _Call:
    __slots__ = ("id", "name", "arguments", "extra", "input")

    def __init__(self, streamed: ToolInput) -> None:
        self.id = ""
        self.name = ""
        self.arguments = Deltas()
        self.extra: Any = None
        self.input = streamed  # its TOOL_INPUTs and early TOOL_CALL

    def latch(self, call_id: str, name: str, arguments: str, extra: Any) -> str:
        """Take one fragment; return the arguments to show now."""
        if call_id and not self.id:
            self.id = call_id
        if name and not self.name:
            self.name = name
        if call_id or name:
            self.input.rename(self.id, self.name)
        if extra is not None and self.extra is None:
            self.extra = extra
        return self.arguments.add(arguments) if arguments else ""

    @property
    def raw(self) -> str:
        return self.arguments.text


def _unchanged(text: str) -> str:
    return text


class Accumulator(Tagging):
    """One turn's stream state. Feed it with :meth:`feed` (an SSE event),
    :meth:`feed_data` (its ``data`` payload) or :meth:`feed_chunk` (a parsed chunk);
    close it with :meth:`finish`.

    ``scrub`` cleans every error text made from the server's data; ``seed`` makes
    the ids of calls that came without one; ``price`` fills the cost of a usage the
    server reported no dollars for (see the module docstring)."""

    def __init__(self, *, dialect: Dialect = Dialect(),
                 scrub: Optional[Callable[[str], str]] = None, seed: str = "",
                 price: Optional[Callable[[Usage], Usage]] = None) -> None:
        self.dialect = dialect
        self._name = dialect.name
        self._reasoning_fields = dialect.reasoning_fields
        self._read_details = dialect.reasoning_details
        self._scrub = scrub or _unchanged
        self._seed = seed
        self._price = price
        self.done = False
        self.provider = ""
        self.response_id = ""  # the completion's id and model, for observers
        self.response_model = ""
        self._text = Deltas()
        self._reasoning = Deltas()
        self._details: Optional[List[Dict[str, Any]]] = None
        self._order: List[str] = []  # "reasoning" / "text", by first appearance
        self._calls: List[_Call] = []
        self._by_index: Dict[int, _Call] = {}
        self._made = _delta_event
        self._inputs = ToolInputs()
        self._checked = 0  # calls before this one were looked at when a later one began
        self._finished = False  # the calls were settled at the finish
        self._finish: Optional[str] = None
        self._native_finish = ""
        self._usage: Optional[Dict[str, Any]] = None
        self._refused = False

    # -- feeding --------------------------------------------------------------

    def feed(self, sse: SSEEvent) -> List[Event]:
        """Take one SSE event; its name is not looked at (servers send none, or
        ``message``)."""
        data = sse.data
        if data[:1] == "{":  # a chunk, as nearly every event is: straight to the parser
            try:
                chunk = parse_json(data)
            except ValueError:
                pass  # feed_data names the error, outside this handler
            else:
                return self.feed_chunk(chunk)
        return self.feed_data(data)

    def feed_data(self, data: str) -> List[Event]:
        """Take one SSE ``data`` payload: a JSON chunk, or the ``[DONE]`` sentinel.

        An empty payload (a bare ``data:`` line) carries nothing and is skipped.
        """
        stripped = data.strip()
        if not stripped:
            return []
        if stripped == "[DONE]":
            self.done = True
            return self._end_texts() + self._settle_all()
        try:
            chunk = parse_json(data)
        except ValueError as exc:
            reason = str(exc)
        else:
            return self.feed_chunk(chunk)
        # Raised outside the handler, so no chained exception holds the raw line.
        raise StreamError(f"{self._name} sent a data line that is not JSON ({reason[:120]}): "
                          f"{self._scrub(data)[:80]!r}")

    def feed_chunk(self, chunk: Any) -> List[Event]:
        """Take one parsed chunk; return the TEXT / THINKING events it carries."""
        if type(chunk) is not dict:
            shown = json.dumps(chunk, ensure_ascii=False)[:4000]
            raise StreamError(f"{self._name} sent a chunk that is not a JSON object: "
                              f"{self._scrub(shown)[:80]!r}")
        # Every delta passes here: the common chunk (one choice, no usage, no error)
        # costs a handful of dict lookups.
        get = chunk.get
        if not self.response_id:
            self._name_response(get("id"), get("model"))
        provider = get("provider")
        if provider and type(provider) is str:
            self.provider = provider
        error = get("error")
        if error:
            raise self._stream_error(error)
        usage = get("usage")
        if usage is not None or "x_groq" in chunk:
            if type(usage) is not dict:
                extension = get("x_groq")  # Groq's place for the last chunk's usage
                usage = extension.get("usage") if type(extension) is dict else None
            if type(usage) is dict:
                self._usage = usage
        choices = get("choices")
        if type(choices) is not list or not choices:
            return []
        if len(choices) == 1:
            choice = choices[0]
            # The first choice only; an index of the wrong type is no first choice.
            if type(choice) is dict:
                index = choice.get("index", 0)
                if type(index) is int and index == 0:
                    return self._choice(choice)
            return []
        events: List[Event] = []
        for choice in choices:
            if type(choice) is dict and _first(choice.get("index", 0)):
                events.extend(self._choice(choice))
        return events

    def _name_response(self, response_id: Any, model: Any) -> None:
        if type(response_id) is str:
            self.response_id = self._scrub(response_id)[:200]
        if type(model) is str:
            self.response_model = self._scrub(model)[:200]

    def _choice(self, choice: Dict[str, Any]) -> List[Event]:
        get = choice.get
        if get("error"):
            raise self._stream_error(choice["error"])
        events: List[Event] = []
        delta = get("delta")
        if type(delta) is dict:
            # The common delta, ``content`` text and perhaps the repeated ``role``,
            # holds nothing else to look at.
            size = len(delta)
            content = delta.get("content") if size < 3 else None
            if type(content) is str and (size == 1 or "role" in delta):
                if content:  # as _add_text, in place
                    if "text" not in self._order:
                        self._order.append("text")
                    content = self._text.add(content)
                    if content:
                        events.append(self._made(_TEXT, content))
            else:
                self._delta(delta, events)
        finish = get("finish_reason")
        if finish and type(finish) is str and self._finish != "error":
            self._finish = finish
            native = get("native_finish_reason")
            if isinstance(native, str):
                self._native_finish = native
            events.extend(self._end_texts())
            if finish != "error":
                events.extend(self._settle_all())
        return events

    def _delta(self, delta: Dict[str, Any], events: List[Event]) -> None:
        """Read a delta of any shape: reasoning, reasoning details, text or refusal,
        tool-call fragments."""
        get = delta.get
        for field in self._reasoning_fields:
            if get(field) is not None:
                reasoning = self._text_of(delta, field)
                if reasoning:
                    self._add_reasoning(reasoning, events)
                    break
        if self._read_details:
            details = get("reasoning_details")
            if type(details) is list:
                self._seen("reasoning")
                if self._details is None:
                    self._details = []
                for fragment in details:
                    if type(fragment) is dict:
                        _merge_detail(self._details, fragment)
        for key in ("content", "refusal"):
            text = get(key)
            if text is None:
                continue
            if type(text) is list and key == "content":
                self._typed_chunks(text, events)
                continue
            if type(text) is not str:
                text = self._text_of(delta, key)  # logged and read as none
            if text:
                if key == "refusal":
                    self._refused = True
                self._add_text(text, events)
        calls = get("tool_calls")
        if calls is not None and type(calls) is list:
            for fragment in calls:
                if type(fragment) is dict:
                    self._tool_fragment(fragment, events)

    def _add_text(self, text: str, events: List[Event]) -> None:
        if "text" not in self._order:
            self._order.append("text")
        text = self._text.add(text)
        if text:
            events.append(self._made(_TEXT, text))

    def _add_reasoning(self, text: str, events: List[Event]) -> None:
        self._seen("reasoning")
        text = self._reasoning.add(text)
        if text:
            events.append(Event(Kind.THINKING, text=text))

    def _typed_chunks(self, chunks: List[Any], events: List[Event]) -> None:
        """``content`` as a list of typed chunks, in order: a ``text`` chunk is text, a
        ``thinking`` chunk (its ``thinking`` a list of text chunks, or a string) is
        reasoning, whatever the dialect's reasoning fields; any other chunk (a
        ``reference``, an image) or shape is skipped, and logged."""
        for chunk in chunks:
            kind = chunk.get("type") if type(chunk) is dict else None
            if kind == "text":
                text = chunk.get("text")
                if type(text) is str and text:
                    self._add_text(text, events)
                    continue
            elif kind == "thinking":
                words = _thinking_words(chunk.get("thinking"))
                if words:
                    self._add_reasoning(words, events)
                continue
            logger.debug("%s sent a content chunk nacelle does not read (%s); ignored",
                         self._name, kind if isinstance(kind, str) else type(chunk).__name__)

    def _end_texts(self) -> List[Event]:
        """U+FFFD for half a character a text or the reasoning ended on."""
        events = [Event(kind, text=held) for kind, held in (
            (Kind.THINKING, self._reasoning.end()), (Kind.TEXT, self._text.end())) if held]
        for call in self._calls:
            held = call.arguments.end()
            if held and not call.input.announced:
                events.append(call.input.add(held))
        return events

    def _seen(self, what: str) -> None:
        if what not in self._order:
            self._order.append(what)

    def _tool_fragment(self, fragment: Dict[str, Any], events: List[Event]) -> None:
        index = fragment.get("index")
        if type(index) is not int:  # a bool, a string, a list: read as no index at all
            if index is not None:
                logger.warning("%s sent a tool-call index that is not an int (%s); "
                               "read as none", self._name, type(index).__name__)
            index = None
        call_id = _string(fragment.get("id"))
        function = fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        name = _string(function.get("name"))
        arguments = self._arguments(function.get("arguments"))
        extra = fragment.get("extra_content")
        if index is not None:
            call = self._by_index.get(index)
            if call is None or _reuses_index(call, call_id) or _starts_again(
                    call, call_id, name, arguments):
                call = self._new_call(events)
                self._by_index[index] = call
        else:
            call = self._calls[-1] if self._calls else None
            if (
                call is None
                or (call_id and call.id and call_id != call.id)
                or (name and call.name and name != call.name)
                or _starts_again(call, call_id, name, arguments)
            ):
                call = self._new_call(events)
        if call.input.announced:
            # Its TOOL_CALL is out with its input as it was: nothing may change it now.
            if arguments.strip() or (call_id and call_id != call.id):
                logger.warning("%s sent more of a tool call after its arguments were "
                               "complete and the next call began; ignored", self._name)
            if extra is not None and call.extra is None:
                call.extra = extra
            return
        shown = call.latch(call_id, name, arguments, extra)
        if shown:
            events.append(call.input.add(shown))

    def _text_of(self, holder: Dict[str, Any], key: str) -> str:
        value = holder.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            logger.warning("%s sent a delta %s that is not text (%s); ignored", self._name,
                           key, type(value).__name__)
        return ""

    def _arguments(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict):  # a server that sends the object, not its text
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if value is not None:
            logger.warning("%s sent tool-call arguments that are neither text nor an "
                           "object (%s); ignored", self._name, type(value).__name__)
        return ""

    def _new_call(self, events: List[Event]) -> _Call:
        """A call begins: each earlier one not yet looked at is whole if its arguments
        are a complete JSON object — looked at once, here, so a long stream is never
        parsed again and again (an object cannot grow and stay JSON; a number could,
        which is why the last character must be its ``}``)."""
        for number in range(self._checked, len(self._calls)):
            call = self._calls[number]
            raw = call.raw
            if raw.rstrip().endswith("}") and complete_json(raw):
                events.extend(self._settle(call, number, raw))
        self._checked = len(self._calls)
        call = _Call(self._inputs.start())
        self._calls.append(call)
        return call

    def _settle(self, call: _Call, number: int, final: Optional[str]) -> List[Event]:
        """``call`` (the ``number``th) is finished, its input ``final`` (None: not
        JSON, left for the loop to announce): the TOOL_CALLs due now."""
        if final is not None and not call.id:
            call.input.rename(_made_id(self._seed, number, call.name, final), call.name)
        return self._inputs.whole(call.input, final)

    def _settle_all(self) -> List[Event]:
        """At the finish (once): every call not yet settled, in order, as
        :meth:`_parts` will read it; the first one cut by ``length`` stops there."""
        if self._finished:
            return []
        self._finished = True
        events: List[Event] = []
        for number, call in enumerate(self._calls):
            if call.input.settled:
                continue
            raw = call.raw
            whole = complete_json(raw)
            if self._finish == "length" and not whole:
                break
            events.extend(self._settle(call, number, raw if whole else (
                None if raw.strip() else "{}")))
        return events

    # -- closing --------------------------------------------------------------

    def abandon(self) -> List[Event]:
        """Nothing: a Chat Completions stream announces no server-side call."""
        return []

    def finish(self) -> TurnEnd:
        """Close the turn at ``[DONE]`` or at the end of the body.

        Raises :class:`StreamError` for a finish of ``error`` and
        :class:`StreamTruncated` when the body ended with neither ``[DONE]`` nor a
        finish.
        """
        if self._finish == "error":
            native = f" ({self._native_finish[:200]})" if self._native_finish else ""
            by = f" from {self.provider[:200]}" if self.provider else ""
            raise StreamError(self._scrub(
                f"{self._name} ended the response{by} with an error{native}"))
        if not self.done and self._finish is None:
            raise StreamTruncated(
                f"the {self._name} stream ended before [DONE] or a finish_reason"
            )
        stop = self._stop()
        return TurnEnd(parts=self._parts(stop), usage=self.usage(), stop=stop)

    def _stop(self) -> Stop:
        if self._finish == "length":
            return Stop.MAX_TOKENS
        if self._calls:
            return Stop.TOOLS
        if self._refused:
            return Stop.REFUSAL
        if self._finish is None:
            return Stop.END
        if self._finish == "tool_calls":
            logger.debug("finish_reason tool_calls with no tool call in the stream")
            return Stop.OTHER
        stop = _STOPS.get(self._finish, Stop.OTHER)
        if stop is Stop.OTHER:
            logger.debug("unknown finish_reason %r mapped to OTHER", self._finish)
        return stop

    def _parts(self, stop: Stop) -> Tuple[Part, ...]:
        parts: List[Part] = []
        for what in self._order:
            if what == "text":
                parts.append(Text(self._text.text))
            else:
                parts.append(self._reasoning_part())
        extras: List[Part] = []
        for number, call in enumerate(self._calls):
            raw = call.raw
            finished = True
            if call.input.announced and call.input.final is not None:
                raw = call.input.final  # as announced, whatever finish came after
            elif stop is Stop.MAX_TOKENS and not call.input.settled:
                finished = complete_json(raw)
            if finished and not raw.strip():
                raw = "{}"
            # A duplicate id is left for the loop, which renames for every backend.
            call_id = call.id or _made_id(self._seed, number, call.name, raw)
            parts.append(ToolCall(call_id, call.name, raw, finished))
            if call.extra is not None:
                extras.append(ProviderBlock(self.dialect.protocol,
                                            call_extra_block(call_id, call.extra)))
        return tuple(parts + extras)

    def _reasoning_part(self) -> Reasoning:
        text = self._reasoning.text
        if not text and self._details:
            # A provider that streams only details: show what they say in words.
            for item in self._details:
                words = item.get("text") or item.get("summary")
                if isinstance(words, str):
                    text += words
        state = ""
        if self._details is not None:
            # Fragments are joined by plain concatenation, which leaves a pair split
            # over two of them as two halves: made one character (or U+FFFD) here.
            state = well_formed(json.dumps(self._details, ensure_ascii=False,
                                           separators=(",", ":")))
        return Reasoning(well_formed(text), state, self.dialect.protocol)

    def usage(self) -> Usage:
        """The turn's usage so far, from the last chunk that carried one."""
        usage = usage_from(self._usage or {}, self.dialect)
        if self._price is not None and not self.dialect.cost_in_usage:
            usage = self._price(usage)
        return usage

    def _stream_error(self, error: Any) -> StreamError:
        if isinstance(error, dict):
            code = error.get("code")
            message = error.get("message")
        else:
            code, message = None, error
        text = f"{self._name} stream error"
        if isinstance(code, bool) or not isinstance(code, (str, int)) or (
                isinstance(code, int) and not -10**9 < code < 10**9):
            code = None  # an object, a list or an absurd number is no code
        if code is not None and code != "":
            text += f" {str(code)[:80]}"
        by = f" from {self.provider[:200]}" if self.provider else ""
        text += f"{by}: {message if isinstance(message, str) and message else 'no message'}"
        return StreamError(self._scrub(text), code=self._scrub(code) if isinstance(code, str)
                           else code, retryable=transient_code(code))


def usage_from(usage: Dict[str, Any], dialect: Dialect = Dialect()) -> Usage:
    """Map a Chat Completions ``usage`` object onto :class:`Usage` (see the module
    docstring); ``cost`` only where ``dialect.cost_in_usage``."""
    name = dialect.name
    prompt = token_count(usage, "prompt_tokens", name)
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        details = {}
    cached = token_count(details, "cached_tokens", name) or token_count(
        usage, "prompt_cache_hit_tokens", name)
    written = token_count(details, "cache_write_tokens", name)
    completion = usage.get("completion_tokens_details")
    if not isinstance(completion, dict):
        completion = {}
    dollars, priced = 0.0, False
    if dialect.cost_in_usage:
        cost = usage.get("cost")
        found = _wire_cost(cost)
        if found is None and cost is not None:
            logger.warning("%s reported a cost that is not an amount of dollars "
                           "(%s); counted as 0", name, type(cost).__name__)
        dollars, priced = found or 0.0, found is not None
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=token_count(usage, "completion_tokens", name),
        cache_read_tokens=cached,
        cache_creation_tokens=written,
        reasoning_tokens=token_count(completion, "reasoning_tokens", name),
        cost=dollars,
        priced=priced,
    )


def _made_id(seed: str, number: int, name: str, arguments: str) -> str:
    """The id of a call that came without one: the same for the same conversation."""
    import hashlib  # a call that came without an id only: not loaded with the backend

    digest = hashlib.sha256(f"{seed}\0{number}\0{name}\0{arguments}".encode("utf-8"))
    return "call_" + digest.hexdigest()[:24]


def _merge_detail(details: List[Dict[str, Any]], fragment: Dict[str, Any]) -> None:
    kind = fragment.get("type")
    target: Optional[Dict[str, Any]] = None
    if "index" in fragment:
        for item in details:
            if item.get("type") == kind and item.get("index") == fragment["index"]:
                target = item
                break
    elif details and details[-1].get("type") == kind and kind in _CONTINUABLE \
            and "index" not in details[-1]:
        target = details[-1]
    if target is None:
        details.append(dict(fragment))
        return
    for key, value in fragment.items():
        if key in _CONCATENATED and isinstance(value, str):
            current = target.get(key)
            target[key] = (current if isinstance(current, str) else "") + value
        elif target.get(key) is None:
            target[key] = value


def _thinking_words(thinking: Any) -> str:
    """The text of a thinking chunk's ``thinking``: its text chunks joined, or itself."""
    if type(thinking) is str:
        return thinking
    if type(thinking) is not list:
        return ""
    return "".join(item["text"] for item in thinking
                   if type(item) is dict and item.get("type", "text") == "text"
                   and type(item.get("text")) is str)


def _first(index: Any) -> bool:
    return type(index) is int and index == 0


def _reuses_index(call: _Call, call_id: str) -> bool:
    return bool(call_id and call.id and call_id != call.id and complete_json(call.raw))


def _starts_again(call: _Call, call_id: str, name: str, arguments: str) -> bool:
    # Parsing the gathered arguments on every fragment would cost quadratic time for
    # a provider that repeats the id on each one; only a call whose last fragment
    # ends an object can be complete, so that is looked at first.
    return bool(
        (call_id or name) and arguments.strip() and call.arguments
        and call.arguments.last.rstrip().endswith("}") and complete_json(call.raw)
    )


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""
