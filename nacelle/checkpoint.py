"""Checkpoint and PAUSE: a run stopped for a person's approval, as a value.

An ``approve`` callback may return :data:`PAUSE` for a call. The round's other calls
run as usual, the paused ones are closed with ``ToolEvent.paused=True``, and the run
ends with DONE, ``Stop.PAUSED`` and ``event.checkpoint``. ``checkpoint.dumps(key=None)``
turns it into JSON text any process can keep; ``Checkpoint.loads(text, key=None)``
reads it back, and ``Agent.resume(checkpoint, decisions)`` runs the paused calls as
decided and goes on with the next model turn.

What the JSON holds (``"version": 2``; version 1, the same without ``child``,
still loads), and why each field is needed:

- ``messages``: the conversation up to and including the assistant message that
  asked for the paused calls, in ``nacelle.dumps`` form (lossless: Reasoning state
  and ProviderBlocks included, so the provider accepts the replay). The model's next
  request is this conversation plus the round's results.
- ``results``: the ToolResults of the round's calls that already finished (ran, were
  refused or denied). They are what makes "a call never runs twice" true: on resume
  they are recorded as they are, and only the pending calls run.
- ``pending``: the paused calls, each ``{"id", "name", "input", "fingerprint",
  "inject"}``. ``fingerprint`` is the sha256 of the tool name, a NUL and the canonical
  JSON of the input (sorted keys, no spaces): what a person approved is that call
  with that input, so a checkpoint whose conversation was edited to run something
  else is refused even without a key. ``inject`` holds what the before-hooks appended
  when they allowed the call: the hooks are asked once, before the pause, and never
  again on resume (asking twice could prompt a person twice or count a call twice),
  so their injects are kept here and added to the result when the call runs. A call
  resumed with an edited input is another call, which the hooks never saw: it is asked
  of them as a fresh call (they may deny it) and its old injects are dropped.
- ``child`` (on a pending call, version 2): a call that paused from inside — a
  sub-agent (``subagent_tool``) whose own approval returned PAUSE — carries that
  nested run's checkpoint here, in this same form (it may nest further). The person
  decides on the nested run's calls (:meth:`Checkpoint.waiting` lists every call
  awaiting a decision, at any depth); on resume the call runs again as a resumed
  call, which goes on with the nested run instead of starting afresh, so nothing the
  nested run already did runs twice. The nested checkpoint is part of the signed
  body and is verified as the top one is, so changing it fails as for a flat one.
- ``usage``, ``iterations`` and ``tool_calls``: the run's spend, its model requests
  and its local calls so far, so ``max_iterations`` and a ``Budget`` continue from
  where the paused run stood instead of starting afresh.
- ``repeats``: the loop guard's count of calls per fingerprint so far, so a model
  that repeats itself across a pause is caught as it would have been without one
  (optional: a checkpoint without it resumes with the counts at zero).
- ``tools``: the names of the tools the pausing run had. A resuming Agent lacking
  one cannot honour the conversation (the model was told those tools exist), so
  resuming is refused with :class:`~nacelle.errors.CheckpointError`.
- ``signature`` (with a key only): HMAC-SHA256 of the canonical JSON of every other
  field. The key is a non-empty str or bytes (an empty one is a ConfigError). A checkpoint usually passes through hands the process does not trust (a
  queue, a browser, a ticket); with a key, any change — an input, a pending id, a
  count — is refused, as is a checkpoint with no signature. The comparison is
  constant-time. Without a key nothing is signed and a signature present is ignored:
  the fingerprints still catch an edited call, not a forged one.

A malformed text, an unknown version, a bad or missing signature (with a key), a
fingerprint that does not match its call, or a pending call the conversation's last
message does not hold raises :class:`~nacelle.errors.CheckpointError`.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import bounded_json
from .errors import CheckpointError, ConfigError, ConversationError
from .events import Usage
from .messages import Message, Role, ToolCall, ToolResult, dumps as dump_messages
from .messages import _part_from_json as part_from_json, _part_to_json as part_to_json
from .messages import loads as load_messages
from ._pause import PAUSE as PAUSE
from ._pause import NestedPause as NestedPause
from ._pause import _Pause as _Pause
from ._pause import canonical as canonical
from ._pause import fingerprint as fingerprint

__all__ = ["PAUSE", "Checkpoint", "NestedPause", "PendingCall", "fingerprint"]

VERSION = 2
#: The versions :meth:`Checkpoint.loads` reads.
READS = (1, 2)


@dataclass(frozen=True)
class PendingCall:
    """A paused call: its id, tool name, raw input, fingerprint, the before-hooks'
    injects and, for a call that paused from inside (a sub-agent's approval), the
    nested run's checkpoint (see the module docstring)."""

    id: str
    name: str
    input: str
    fingerprint: str
    inject: Tuple[str, ...] = ()
    child: Optional["Checkpoint"] = None


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class Checkpoint:
    """A paused run; see the module docstring for each field and why it is kept."""

    messages: Tuple[Message, ...]
    results: Tuple[ToolResult, ...]
    pending: Tuple[PendingCall, ...]
    usage: Usage = Usage()
    iterations: int = 0
    tool_calls: int = 0
    tools: Tuple[str, ...] = ()
    repeats: Tuple[Tuple[str, int], ...] = ()  # (fingerprint, calls so far), sorted

    def __repr__(self) -> str:
        return (f"<Checkpoint {len(self.messages)} messages, {len(self.results)} results, "
                f"pending={[p.name for p in self.pending]!r}, iterations={self.iterations}>")

    def waiting(self) -> Tuple[PendingCall, ...]:
        """Every call awaiting a person's decision, at any depth, in order: a pending
        call of this run, or, for one that paused from inside, the calls its nested
        checkpoint waits for. ``Agent.resume`` takes decisions keyed by these ids."""
        found: List[PendingCall] = []
        for pending in self.pending:
            if pending.child is not None:
                found.extend(pending.child.waiting())
            else:
                found.append(pending)
        return tuple(found)

    def calls(self) -> List[ToolCall]:
        """The finished local calls of the conversation's last message, in call order."""
        last = self.messages[-1] if self.messages else None
        if last is None or last.role is not Role.ASSISTANT:
            return []
        return [p for p in last.parts if isinstance(p, ToolCall) and p.finished]

    def verify(self) -> None:
        """Refuse a checkpoint whose pending calls do not match its conversation."""
        import hmac  # checkpoints only: not loaded with the core

        calls = {c.id: c for c in self.calls()}
        if not self.pending:
            raise CheckpointError("the checkpoint has no pending call")
        answered = {r.id for r in self.results}
        for pending in self.pending:
            call = calls.get(pending.id)
            if call is None:
                raise CheckpointError(f"pending call {pending.id!r} is not a call of the "
                                      "conversation's last message")
            if pending.id in answered:
                raise CheckpointError(f"call {pending.id!r} is both pending and answered")
            if (call.name != pending.name or call.input != pending.input
                    or not hmac.compare_digest(fingerprint(call.name, call.input).encode(),
                                               pending.fingerprint.encode("utf-8"))):
                raise CheckpointError(f"pending call {pending.id!r} ({pending.name}) does not "
                                      "match its fingerprint: the checkpoint was changed")
        unknown = answered - set(calls)
        if unknown:
            raise CheckpointError(f"results for calls the conversation does not hold: "
                                  f"{sorted(unknown)!r}")
        missing = set(calls) - answered - {p.id for p in self.pending}
        if missing:
            raise CheckpointError(f"calls with neither a result nor a pending entry: "
                                  f"{sorted(missing)!r}")
        for pending in self.pending:
            if pending.child is not None:
                pending.child.verify()

    def to_json(self) -> Dict[str, Any]:
        """The checkpoint as a JSON value, unsigned."""
        return {
            "version": VERSION,
            "messages": json.loads(dump_messages(self.messages)),
            "results": [_result_json(r) for r in self.results],
            "pending": [_pending_json(p) for p in self.pending],
            "usage": dataclasses.asdict(self.usage),
            "iterations": self.iterations,
            "tool_calls": self.tool_calls,
            "tools": list(self.tools),
            "repeats": dict(self.repeats),
        }

    def dumps(self, key: Union[str, bytes, None] = None) -> str:
        """JSON text; with ``key``, signed with HMAC-SHA256."""
        body = self.to_json()
        if key is not None:
            body["signature"] = _sign(body, signing_key(key))
        return json.dumps(body, ensure_ascii=False, indent=1)

    @classmethod
    def loads(cls, text: Union[str, bytes], key: Union[str, bytes, None] = None) -> "Checkpoint":
        """Read :meth:`dumps` text; with ``key``, its signature must be there and match."""
        import hmac

        secret = None if key is None else signing_key(key)
        try:
            body = bounded_json.loads(text, what="checkpoint",
                                      max_depth=bounded_json.DOCUMENT_DEPTH)
        except ValueError as exc:
            raise CheckpointError(f"a checkpoint must be JSON: {exc}") from None
        if not isinstance(body, dict):
            raise CheckpointError("a checkpoint must be a JSON object")
        version = body.get("version")
        if isinstance(version, bool) or version not in READS:
            raise CheckpointError(f"unknown checkpoint version {version!r} "
                                  f"(this nacelle reads versions {READS[0]} to {READS[-1]})")
        signature = body.pop("signature", None)
        if secret is not None:
            if not isinstance(signature, str):
                raise CheckpointError("the checkpoint is not signed, and a key was given")
            # Bytes: compare_digest refuses a str with non-ASCII characters, and a
            # forged signature may hold anything.
            if not hmac.compare_digest(signature.encode("utf-8"), _sign(body, secret).encode()):
                raise CheckpointError("the checkpoint's signature does not match: it was "
                                      "changed, or signed with another key")
        try:
            checkpoint = _from_json(body, nested=version >= 2)
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - any malformed field is one failure
            raise CheckpointError(f"a malformed checkpoint: {type(exc).__name__}: {exc}") from None
        checkpoint.verify()
        return checkpoint


def _pending_json(pending: PendingCall) -> Dict[str, Any]:
    out: Dict[str, Any] = {"id": pending.id, "name": pending.name, "input": pending.input,
                           "fingerprint": pending.fingerprint, "inject": list(pending.inject)}
    if pending.child is not None:
        child = pending.child.to_json()
        del child["version"]  # the top's version covers the whole document
        out["child"] = child
    return out


def _from_json(body: Dict[str, Any], *, nested: bool) -> Checkpoint:
    """A checkpoint (and the nested ones under its pending calls) from its JSON."""
    return Checkpoint(
        messages=tuple(load_messages(json.dumps(body["messages"]))),
        results=tuple(_result_from_json(r, i) for i, r in enumerate(body["results"])),
        pending=tuple(_pending_from_json(p, nested) for p in body["pending"]),
        usage=Usage(**body["usage"]),
        iterations=_count(body["iterations"]),
        tool_calls=_count(body["tool_calls"]),
        tools=tuple(str(t) for t in body["tools"]),
        repeats=_repeats(body.get("repeats", {})),
    )


def _pending_from_json(raw: Dict[str, Any], nested: bool) -> PendingCall:
    child = raw.get("child")
    if child is not None and not (nested and isinstance(child, dict)):
        raise CheckpointError("a pending call's child must be a nested checkpoint object "
                              "(version 2)")
    return PendingCall(str(raw["id"]), str(raw["name"]), str(raw["input"]),
                       str(raw["fingerprint"]), tuple(str(i) for i in raw.get("inject", ())),
                       None if child is None else _from_json(child, nested=True))


def _result_json(result: ToolResult) -> Dict[str, Any]:
    """A settled result as the checkpoint writes it: its media parts, when it has
    any, in ``nacelle.messages.dumps``'s form (absent otherwise, as before they were)."""
    out: Dict[str, Any] = {"id": result.id, "name": result.name, "result": result.result,
                           "failed": result.failed}
    if result.content:
        out["content"] = [part_to_json(p) for p in result.content]
    return out


def _result_from_json(raw: Any, index: int) -> ToolResult:
    content = raw.get("content", [])
    if not isinstance(content, list):
        raise CheckpointError(f"results[{index}].content must be a list")
    part = {"type": "tool_result", "id": str(raw["id"]), "name": str(raw["name"]),
            "result": str(raw["result"]), "failed": bool(raw["failed"]), "content": content}
    try:
        read = part_from_json(part, f"results[{index}]")
    except ConversationError as exc:
        raise CheckpointError(f"a malformed checkpoint: {exc}") from None
    assert isinstance(read, ToolResult)
    return read


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CheckpointError(f"a count must be a non-negative integer, got {value!r}")
    return int(value)


def _repeats(value: Any) -> Tuple[Tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise CheckpointError(f"repeats must be a JSON object, got {value!r}")
    return tuple(sorted((str(k), _count(v)) for k, v in value.items()))


def signing_key(key: Any) -> bytes:
    """The signing key as bytes: the check every ``key=`` that signs a checkpoint
    passes. An empty key is refused: HMAC takes it, and anyone can then forge a
    signature with the same empty key — most likely a secret read from an unset
    environment variable, which would turn signing off without a word."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    elif not isinstance(key, (bytes, bytearray)):
        raise ConfigError(f"a checkpoint key must be a str or bytes, got {type(key).__name__}")
    if not key:
        raise ConfigError("a checkpoint key must not be empty: an empty key signs nothing "
                          "(is the variable that holds the secret unset?)")
    return bytes(key)


def _sign(body: Dict[str, Any], secret: bytes) -> str:
    import hashlib
    import hmac

    return hmac.new(secret, canonical(body).encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Resume:
    """What ``Agent.resume`` hands the loop (``Request.resume``): the checkpoint, and
    per pending call id True (run it) or the refusal the model reads. Edited inputs
    are already in the request's conversation, as what ran."""

    checkpoint: Checkpoint
    decisions: Dict[str, Union[bool, str]]
    #: Per pending call that paused from inside: the decisions for its nested run's
    #: calls, as given to ``Agent.resume`` (the call's own decision is then True).
    nested: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
