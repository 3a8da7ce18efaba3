"""The Gemini stream accumulator: decoded SSE events in, nacelle events and one
:class:`~nacelle.backend.TurnEnd` out.

Pure: :class:`Accumulator` is fed one SSE event (:meth:`~Accumulator.feed`) or one
parsed chunk (:meth:`~Accumulator.feed_chunk`) at a time and returns the events to
yield now; :meth:`Accumulator.finish` closes the turn. It speaks ``backends._turn``'s
Accumulator protocol.

With ``?alt=sse`` every ``data:`` line of ``streamGenerateContent`` is one whole
``GenerateContentResponse`` (https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse;
the google-genai SDK's ``types.GenerateContentResponse``): ``candidates`` (nacelle asks
for one) whose ``content.parts`` carry this chunk's new output, ``usageMetadata``,
``modelVersion``, ``responseId`` and, when the prompt itself was blocked,
``promptFeedback``. What they become:

- A ``text`` part is one TEXT event (half a surrogate pair held for the next,
  ``_stream.Deltas``); a part with ``thought: true`` one THINKING event. Consecutive
  parts of one kind are one Text or Reasoning part of the message, as the SDK's
  ``response.text`` joins them; a ``thoughtSignature`` (which may come on a part of
  its own with empty text, https://ai.google.dev/gemini-api/docs/thought-signatures)
  closes the part it came on. A thought's signature is its Reasoning's ``state``; a
  text's is a ProviderBlock ``{"thoughtSignature"}`` right after the Text, which
  ``wire.py`` puts back on that part.
- A ``functionCall`` part (``{"id", "name", "args"}``) comes whole in one chunk: it is
  one TOOL_INPUT with the whole ``args`` as JSON text (written as ``json.dumps``
  writes it by default, as a user of the SDK's ``args`` dict would), then at once its
  TOOL_CALL
  (``server`` empty; ``_stream.ToolInputs``). The API may leave ``id`` out; a call
  without one gets ``call_`` and 16 random hex digits, kept in the conversation and
  sent back on the call and its response, so it stays the same for the rest of the
  run. Its signature is a ProviderBlock ``{"thoughtSignature", "call"}``.
- Any other part (``executableCode``, ``codeExecutionResult``, ``inlineData`` the
  model made) is a ProviderBlock ``{"part": ...}``, replayed as it came. Code the
  model runs in Gemini's sandbox (the native ``code_execution`` tool) is also a
  server-side TOOL_CALL (``server`` "gemini", name ``code_execution``, input its
  language and code), closed by the TOOL_RESULT of the ``codeExecutionResult`` after
  it (an outcome other than ``OUTCOME_OK`` is a failed result), or by a failed one
  when the turn ends or the stream fails first.
- Google Search grounding (``groundingMetadata``) becomes the ``citations`` of the
  turn's last Text part.
- The end is the chunk whose candidate has a ``finishReason``: ``STOP`` is END (TOOLS
  when a call came), ``MAX_TOKENS`` MAX_TOKENS, the safety family (``SAFETY``,
  ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, ``IMAGE_SAFETY``
  and the other ``*_SAFETY`` / ``*_RECITATION`` reasons) REFUSAL, anything else
  OTHER. A chunk with ``promptFeedback.blockReason`` and no candidate ends the turn
  as REFUSAL. A body that ends before either raises :class:`StreamTruncated`.
- Usage is the last ``usageMetadata`` (each chunk repeats the counts so far), mapped
  so the fields mean what they do on every backend: ``promptTokenCount`` counts the
  cached part (``cachedContentTokenCount``), which is subtracted to get full-rate
  input; ``toolUsePromptTokenCount`` is input too; ``thoughtsTokenCount`` is billed as
  output and is not part of ``candidatesTokenCount``, so output is their sum and the
  thoughts its reasoning share (https://ai.google.dev/api/generate-content#UsageMetadata).
- An ``{"error": {"code", "message", "status"}}`` chunk (Google's error shape,
  https://ai.google.dev/gemini-api/docs/troubleshooting) raises :class:`StreamError`
  carrying the code; 408, 429 and 5xx, and the statuses ``RESOURCE_EXHAUSTED``,
  ``UNAVAILABLE``, ``INTERNAL`` and ``DEADLINE_EXCEEDED``, are retryable, with a
  ``RetryInfo`` detail's ``retryDelay`` as ``retry_after``.
- The structure is checked, not trusted: a chunk that is not a JSON object, or a
  part whose text or call name is not a string, is a :class:`StreamError`. Fields
  this module does not know are ignored, as the API adds new ones.

May import: the standard library, nacelle's core, ``backends._stream`` and ``wire``
beside it. Never ``requests``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..._loggers import get_logger
from ...backend import TurnEnd
from ...errors import StreamError, StreamTruncated
from ...events import Event, Kind, Stop, ToolEvent, Usage, _delta as _delta_event
from ...messages import Citation, Part, ProviderBlock, Reasoning, Text, ToolCall
from ...sse import SSEEvent, parse_json
from .._stream import Deltas, Tagging, ToolInputs, token_count, transient_code, well_formed
from .wire import PROTOCOL, dumps

__all__ = ["Accumulator", "stop_for", "usage_from"]

logger = get_logger(__name__)

_TEXT = Kind.TEXT

#: ``Candidate.FinishReason`` values that mean the answer was withheld.
_REFUSALS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                       "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"})
_RETRY_STATUSES = frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL",
                             "DEADLINE_EXCEEDED"})
_SECONDS = re.compile(r"\A(\d+(?:\.\d+)?)s\Z")
_UNANSWERED = "Gemini ended the turn without a result for this code execution"
_FAILED = "the stream failed before Gemini sent a result for this code execution"


def _unchanged(text: str) -> str:
    return text


def stop_for(reason: str, calls: bool) -> Stop:
    """The Stop of a ``finishReason`` (see the module docstring)."""
    if reason == "STOP":
        return Stop.TOOLS if calls else Stop.END
    if reason == "MAX_TOKENS":
        return Stop.MAX_TOKENS
    if reason in _REFUSALS or reason.endswith("_SAFETY") or reason.endswith("_RECITATION"):
        return Stop.REFUSAL
    if calls and reason in ("", "FINISH_REASON_UNSPECIFIED"):
        return Stop.TOOLS
    return Stop.OTHER


class _Block:
    """One part of the message being built: text or thought (with its deltas), a call,
    or a ProviderBlock."""

    __slots__ = ("kind", "text", "signature", "part")

    def __init__(self, kind: str, part: Optional[Part] = None) -> None:
        self.kind = kind  # "text", "thought" or "part"
        self.text = Deltas()
        self.signature = ""
        self.part = part


class Accumulator(Tagging):
    """One streamed ``streamGenerateContent`` answer. Feed it with :meth:`feed` (an SSE
    event) or :meth:`feed_chunk` (a parsed chunk); close it with :meth:`finish`.

    ``scrub`` cleans every error text made from the server's data; ``price`` fills the
    cost of the turn's usage; ``name`` is how errors name the server; ``new_id`` makes
    the id of a call that came without one.
    """

    def __init__(self, *, scrub: Optional[Callable[[str], str]] = None,
                 price: Optional[Callable[[Usage], Usage]] = None, name: str = "Gemini",
                 new_id: Optional[Callable[[], str]] = None) -> None:
        self._scrub = scrub or _unchanged
        self._price = price
        self._name = name
        self._new_id = new_id or _new_call_id
        self.done = False
        self.response_id = ""
        self.response_model = ""
        self._blocks: List[_Block] = []
        self._open: Optional[_Block] = None
        self._made = _delta_event
        self._inputs = ToolInputs()
        self._reason = ""
        self._blocked = ""
        self._usage: Dict[str, Any] = {}
        self._running: Dict[str, int] = {}  # server-side calls announced, not answered
        self._server_calls = 0
        self._citations: Tuple[Citation, ...] = ()

    # -- feeding --------------------------------------------------------------

    def feed(self, sse: SSEEvent) -> List[Event]:
        """Take one SSE event: its ``data`` is one GenerateContentResponse."""
        data = sse.data
        if data[:1] != "{" and not data.strip():
            return []
        try:
            chunk = parse_json(data)
        except (ValueError, RecursionError) as exc:
            reason = str(exc)
        else:
            return self.feed_chunk(chunk)
        raise StreamError(f"{self._name} sent a data line that is not JSON "
                          f"({reason[:120]}): {self._scrub(data)[:80]!r}")

    def feed_chunk(self, chunk: Any) -> List[Event]:
        """Take one parsed chunk; return the events it carries."""
        # Every delta passes here: values are told apart by their exact JSON types
        # (what the parser makes), and what is rare is looked for only where it counts.
        if type(chunk) is not dict:
            raise StreamError(f"{self._name} sent a chunk that is not a JSON object")
        get = chunk.get
        error = get("error")
        if error is not None and type(error) is dict:
            raise self._error(error)
        value = get("responseId")
        if type(value) is str:
            self.response_id = value
        value = get("modelVersion")
        if type(value) is str:
            self.response_model = value
        usage = get("usageMetadata")
        if type(usage) is dict:
            self._usage = usage
        events: List[Event] = []
        candidates = get("candidates")
        candidate = candidates[0] if type(candidates) is list and candidates else None
        if type(candidate) is dict:
            content = candidate.get("content")
            parts = content.get("parts") if type(content) is dict else None
            for part in parts if type(parts) is list else ():
                if type(part) is dict and len(part) == 1:
                    # A bare text part while a text part is open, as nearly every
                    # chunk holds: read here as _part and _text would read it.
                    text, block = part.get("text"), self._open
                    if type(text) is str and block is not None and block.kind == "text":
                        text = block.text.add(text)
                        if text:
                            events.append(self._made(_TEXT, text))
                        continue
                events += self._part(part)
            grounding = candidate.get("groundingMetadata")
            if grounding is not None and type(grounding) is dict:
                self._citations = _citations(grounding)
            reason = candidate.get("finishReason")
            if reason and type(reason) is str:
                self._reason = reason
                self.done = True
        elif candidate is None:
            feedback = get("promptFeedback")
            if type(feedback) is dict and type(feedback.get("blockReason")) is str:
                self._blocked = feedback["blockReason"]
                self.done = True
        if self.done:
            events += self._close() + self._close_unanswered(_UNANSWERED)
        return events

    def _part(self, part: Any) -> List[Event]:
        if not isinstance(part, dict):
            raise StreamError(f"{self._name} sent a part that is not a JSON object")
        signature = part.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise StreamError(f"{self._name} sent a thoughtSignature that is not a string")
        if "functionCall" in part:
            return self._call(part["functionCall"], signature or "")
        if "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise StreamError(f"{self._name} sent a text part whose text is not a string")
            kind = "thought" if part.get("thought") is True else "text"
            return self._text(kind, text, signature or "")
        events = self._close()
        self._blocks.append(_Block("part", ProviderBlock(PROTOCOL, well_formed(dumps(
            {"part": part})))))
        code, result = part.get("executableCode"), part.get("codeExecutionResult")
        if isinstance(code, dict):
            events += self._server_call(code)
        elif isinstance(result, dict):
            events += self._server_result(result)
        return events

    def _server_call(self, code: Dict[str, Any]) -> List[Event]:
        """The code the model runs in Gemini's sandbox, as a server-side TOOL_CALL."""
        call_id = code.get("id")
        call_id = well_formed(call_id) if isinstance(call_id, str) and call_id else (
            self._new_id())
        index = self._server_calls
        self._server_calls += 1
        self._running[call_id] = index
        shown = {k: code[k] for k in ("language", "code") if isinstance(code.get(k), str)}
        return [Event(Kind.TOOL_CALL, tool=ToolEvent(
            id=call_id, index=index, name="code_execution",
            input=well_formed(json.dumps(shown, ensure_ascii=False)), server=PROTOCOL))]

    def _server_result(self, result: Dict[str, Any]) -> List[Event]:
        """Its outcome, closing the call it names (by ``id``) or the oldest open one."""
        call_id = result.get("id")
        if not (isinstance(call_id, str) and call_id in self._running):
            call_id = next(iter(self._running), None)
        if call_id is None:
            logger.warning("Gemini sent a codeExecutionResult with no open call; it is "
                           "kept in the message but not reported")
            return []
        index = self._running.pop(call_id)
        output = result.get("output")
        text = well_formed(output) if isinstance(output, str) else ""
        ok = result.get("outcome") in ("OUTCOME_OK", None)
        return [Event(Kind.TOOL_RESULT, tool=ToolEvent(
            id=call_id, index=index, name="code_execution", input="",
            result=text if ok else "",
            error=None if ok else (text or str(result.get("outcome"))[:80]),
            server=PROTOCOL))]

    def _close_unanswered(self, why: str) -> List[Event]:
        events = [Event(Kind.TOOL_RESULT, tool=ToolEvent(
            id=call_id, index=index, name="code_execution", input="", error=why,
            server=PROTOCOL)) for call_id, index in self._running.items()]
        self._running.clear()
        return events

    def _text(self, kind: str, text: str, signature: str) -> List[Event]:
        events: List[Event] = []
        block = self._open
        if block is None or block.kind != kind:
            events += self._close()
            if not text and not signature:
                return events
            block = self._open = _Block(kind)
            self._blocks.append(block)
        shown = block.text.add(text)
        if shown:
            events.append(self._made(_TEXT if kind == "text" else Kind.THINKING, shown))
        if signature:
            block.signature = signature
            events += self._close()
        return events

    def _close(self) -> List[Event]:
        """End the open text or thought part: U+FFFD for half a character it ended on."""
        block, self._open = self._open, None
        if block is None:
            return []
        held = block.text.end()
        if not held:
            return []
        return [Event(Kind.TEXT if block.kind == "text" else Kind.THINKING, text=held)]

    def _call(self, call: Any, signature: str) -> List[Event]:
        events = self._close()
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise StreamError(f"{self._name} sent a functionCall without a name")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise StreamError(f"{self._name} sent a functionCall whose id is not a string")
        call_id = call_id or self._new_id()
        args = call.get("args")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise StreamError(f"{self._name} sent a functionCall whose args is not an object")
        raw = well_formed(json.dumps(args, ensure_ascii=False))
        pending = self._inputs.start(call_id, call["name"])
        events.append(pending.add(raw))
        events += self._inputs.whole(pending, raw)
        self._blocks.append(_Block("part", ToolCall(pending.id, pending.name, raw)))
        if signature:
            self._blocks.append(_Block("part", ProviderBlock(PROTOCOL, well_formed(dumps(
                {"thoughtSignature": signature, "call": pending.id})))))
        return events

    # -- closing --------------------------------------------------------------

    def abandon(self) -> List[Event]:
        """Failed TOOL_RESULTs closing every code execution still open, for a stream
        that failed: the consumer saw them announced."""
        return self._close_unanswered(_FAILED)

    def finish(self) -> TurnEnd:
        """Close the turn at the end of the body; :class:`StreamTruncated` when it ended
        before a finishReason or a blocked prompt."""
        if not self.done:
            raise StreamTruncated(f"the {self._name} stream ended before a finishReason")
        parts = self._parts()
        if self._blocked:
            stop = Stop.REFUSAL
        else:
            calls = any(isinstance(p, ToolCall) for p in parts)
            stop = stop_for(self._reason, calls)
            if stop is Stop.OTHER:
                logger.debug("finishReason %r mapped to OTHER", self._reason)
        return TurnEnd(parts=parts, usage=self.usage(), stop=stop)

    def _parts(self) -> Tuple[Part, ...]:
        parts: List[Part] = []
        last_text = max((n for n, b in enumerate(self._blocks) if b.kind == "text"), default=-1)
        for number, block in enumerate(self._blocks):
            if block.part is not None:
                parts.append(block.part)
            elif block.kind == "thought":
                parts.append(Reasoning(block.text.text, block.signature, PROTOCOL))
            else:
                cited = self._citations if number == last_text else ()
                parts.append(Text(block.text.text, cited))
                if block.signature:
                    parts.append(ProviderBlock(PROTOCOL, dumps(
                        {"thoughtSignature": block.signature})))
        return tuple(parts)

    def usage(self) -> Usage:
        """The turn's usage, from the last usageMetadata (zero before any came)."""
        usage = usage_from(self._usage, self._name)
        if self._price is not None:
            usage = self._price(usage)
        return usage

    def _error(self, error: Dict[str, Any]) -> StreamError:
        code = error.get("code")
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code < 1000:
            code = None
        found = error.get("status")
        status = found if isinstance(found, str) else ""
        message = error.get("message")
        text = f"{self._name} sent an error"
        if code is not None or status:
            text += f" ({' '.join(str(x) for x in (code, status) if x)})"
        text += f": {message if isinstance(message, str) and message else 'no message'}"
        again = transient_code(code) or status in _RETRY_STATUSES
        return StreamError(self._scrub(text)[:2000], code=code, type=self._scrub(status)[:80],
                           retry_after=_retry_delay(error) if again else None,
                           retryable=again)


def _citations(grounding: Dict[str, Any]) -> Tuple[Citation, ...]:
    """Google Search grounding (``GroundingMetadata``: ``groundingChunks`` of ``web``
    sources, ``groundingSupports`` tying a ``segment`` of the answer to chunk indices;
    https://ai.google.dev/gemini-api/docs/google-search) as Citations: one per source a
    segment cites, its ``cited_text`` that segment; a source no segment cites, once,
    with none. ``state`` is the support (or the chunk) as JSON."""
    found = grounding.get("groundingChunks")
    chunks: List[Any] = found if isinstance(found, list) else []
    sources: List[Tuple[str, str]] = []
    for chunk in chunks:
        web = chunk.get("web") if isinstance(chunk, dict) else None
        web = web if isinstance(web, dict) else {}
        uri, title = web.get("uri"), web.get("title")
        sources.append((well_formed(uri) if isinstance(uri, str) else "",
                        well_formed(title) if isinstance(title, str) else ""))
    out: List[Citation] = []
    used = set()
    supports = grounding.get("groundingSupports")
    for support in supports if isinstance(supports, list) else ():
        if not isinstance(support, dict):
            continue
        segment = support.get("segment")
        text = segment.get("text") if isinstance(segment, dict) else None
        indices = support.get("groundingChunkIndices")
        for index in indices if isinstance(indices, list) else ():
            if type(index) is int and 0 <= index < len(sources):
                used.add(index)
                uri, title = sources[index]
                out.append(Citation(uri, title, well_formed(text) if isinstance(text, str)
                                    else "", well_formed(dumps(support))))
    out += [Citation(uri, title, "", well_formed(dumps(chunks[n])))
            for n, (uri, title) in enumerate(sources) if n not in used and uri]
    return tuple(out)


def _new_call_id() -> str:
    """A call id for a call Gemini sent without one (``secrets`` — which loads
    ``hmac``, ``base64`` and ``random`` — is imported here, not with the backend)."""
    import secrets

    return "call_" + secrets.token_hex(8)


def _retry_delay(error: Dict[str, Any]) -> Optional[float]:
    """The seconds of a ``google.rpc.RetryInfo`` detail's ``retryDelay`` ("30s")."""
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = detail.get("retryDelay")
            found = _SECONDS.match(delay) if isinstance(delay, str) else None
            if found:
                return min(float(found.group(1)), 600.0)
    return None


def usage_from(usage: Dict[str, Any], name: str = "Gemini") -> Usage:
    """Map ``usageMetadata`` onto :class:`Usage` (see the module docstring)."""
    cached = token_count(usage, "cachedContentTokenCount", name)
    thoughts = token_count(usage, "thoughtsTokenCount", name)
    prompt = token_count(usage, "promptTokenCount", name) + token_count(
        usage, "toolUsePromptTokenCount", name)
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=token_count(usage, "candidatesTokenCount", name) + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )
