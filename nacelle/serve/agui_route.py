"""``POST /agui``: an AG-UI ``RunAgentInput`` in, the run's AG-UI events out.

The routes (``routes.py``) check the request as for every POST — Host, ``authorize``,
``max_body``, ``max_runs``, JSON under bounds — and hand the body here; :func:`start`
answers with the run's SSE bytes (``agui.py`` encodes, ``agui_input.py`` reads the
input), or raises :class:`Refusal` for a 400.

A thread's paused run is kept in the server's store, keyed by the principal and the
``threadId`` (a digest, so any thread id fits the store's names and no principal
reaches another's thread). The next input on that thread resumes it, as AG-UI's
interrupts have it (https://docs.ag-ui.com/concepts/interrupts): its ``resume``
entries answer the approval interrupts — ``{"interruptId", "status": "resolved",
"payload": {"approved": true | false, "editedArgs": {...}, "reason": "..."}}`` (a bare
``true``/``false`` payload too), ``"status": "cancelled"`` refuses the call — and its
``tool`` messages answer the calls of the front end's tools; a forwarding sub-agent's
paused call is answered by its own call id, as ``Agent.resume`` takes it (its interrupt
names the call and the sub-agent's run). The checkpoint is taken
from the store, so a thread resumes once; answers that do not cover every waiting call
(the spec's rule 3), name a call that is not waiting, or an input that answers nothing
while calls wait (rule 4), end in ``RUN_ERROR`` — as the spec asks — with the
checkpoint put back, so the thread can be answered again. So is an edited input the
tool's schema refuses. A thread with no paused run takes no ``resume``.

Tools the front end declares (``tools``) join the Agent's for the run, each a tool
whose calls the run pauses on: the model's call goes out (``TOOL_CALL_START`` /
``_ARGS`` / ``_END``), the run ends waiting for the client (``RUN_FINISHED`` with
``pendingToolCallIds``), and the ``tool`` message the next input carries is the
call's result when the run resumes. A declared tool named as one of the Agent's own is
a 400. Their schemas are the client's: validated as untrusted (bounded regex and
work, no ``$ref`` fetched), as an MCP server's are. A resumed run whose front end no
longer declares a tool of its paused run gets a stand-in that takes any input.

A thread without a paused run starts from the input's ``messages``: the client sends
the whole conversation each time (AG-UI's clients keep it), so nothing else is stored.
A resuming input's messages are read only for its ``tool`` answers: the run goes on
from its checkpoint, and a message a person typed meanwhile belongs in the next input.

Two choices where the interrupts page asks more than a checkpoint needs. It asks for
``MESSAGES_SNAPSHOT`` before an interrupt, so that an agent that resumes by replaying
the conversation has it; here the server resumes from its checkpoint, the client
already holds every message the stream built, and a snapshot would carry ids of the
server's making in place of the client's own. And a resume sent twice (rule 5,
idempotency) finds the checkpoint taken the first time and ends in ``RUN_ERROR``:
the approved call runs once, which is what the rule protects.

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import copy
import hashlib
from typing import (
    Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple,
)

from .._loggers import get_logger
from ..agent import Agent
from ..checkpoint import PAUSE, Checkpoint
from ..context import CancelEvent, ToolContext
from ..errors import CheckpointError, ConfigError, NacelleError, Unsupported
from ..events import Event, Kind, Stop
from ..messages import Role, ToolMedia, ToolResult
from ..tools import expand_tools, tools_by_name
from .agui import encode, frame, run_error
from .agui_input import ClientToolSpec, InputError, ResumeEntry, RunInput, parse_input

__all__ = ["ClientTool", "Refusal", "start", "thread_name"]

log = get_logger(__name__)


class Refusal(Exception):
    """The request is refused before a run starts: ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Unresolved(NacelleError):
    """The input does not answer the thread's paused run as the spec's rules ask."""


def thread_name(principal: str, thread_id: str) -> str:
    """The store's name for a principal's thread: a digest, a valid name for any id."""
    joined = "\0".join(("agui", principal, thread_id)).encode("utf-8", "surrogatepass")
    return "agui-" + hashlib.sha256(joined).hexdigest()[:40]


class ClientTool:
    """A tool the front end declared: its calls pause the run, and its result is the
    ``tool`` message the client sends back (``answers``, by call id)."""

    advisory = True  # the schema is the client's: validated as untrusted

    def __init__(self, spec: ClientToolSpec, answers: Mapping[str, ToolResult]) -> None:
        self.name = spec.name
        self.description = spec.description or f"{spec.name} (a tool of the application)"
        self.schema = spec.parameters
        self._answers = answers

    def __repr__(self) -> str:
        return f"ClientTool({self.name!r})"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> "str | Sequence[ToolMedia]":
        answer = self._answers.get(ctx.call_id)
        if answer is None:
            raise RuntimeError("the application did not answer this call")
        if answer.failed:
            raise RuntimeError(answer.result)
        return list(answer.content) if answer.content else answer.result


def start(data: Mapping[str, Any], *, principal: str, make_agent: Callable[[], Agent],
          take: Callable[[str], Optional[Checkpoint]],
          keep: Callable[[str, Checkpoint], None]) -> Tuple[Iterator[bytes], CancelEvent]:
    """The run ``data`` (a parsed ``RunAgentInput``) asks for, as SSE bytes, and the
    event that cancels it. ``take(name)`` removes and returns the thread's paused run
    (None: there is none), ``keep(name, checkpoint)`` stores one; ``make_agent()`` makes
    the Agent. Raises :class:`Refusal` for a 400."""
    try:
        run = parse_input(data)
    except InputError as exc:
        raise Refusal(400, str(exc)[:300]) from None
    agent = make_agent()
    own = {t.name for t in expand_tools(agent.tools)}
    clash = sorted(own & {t.name for t in run.tools})
    if clash:
        raise Refusal(400, f"tools[].name {clash[0]!r} is the name of one of the agent's own "
                           "tools; name the application's tool otherwise")
    name = thread_name(principal, run.thread_id)
    cancel = CancelEvent()
    checkpoint = take(name)
    if checkpoint is None:
        if run.resume:
            return _failed(run, _Unresolved("no run of this thread waits for an answer; "
                                            "send the input without resume")), cancel
        if not any(m.role is Role.USER for m in run.messages):
            raise Refusal(400, "messages must hold a user message for a new run to answer")
        tools = [ClientTool(spec, run.answers) for spec in run.tools]
        try:
            events = _with_client_tools(agent, tools).stream(run.messages, cancel=cancel)
        except (ConfigError, Unsupported) as exc:
            raise Refusal(400, str(exc)[:300]) from None
        return _items(events, run, name, keep, {t.name for t in tools}, (), ()), cancel
    try:
        tools = [ClientTool(spec, run.answers) for spec in run.tools]
        declared = {t.name for t in tools}
        tools += [ClientTool(ClientToolSpec(n, "", {"type": "object"}), run.answers)
                  for n in checkpoint.tools if n not in own and n not in declared]
        client = {t.name for t in tools}
        decisions, answered = _decisions(checkpoint, run, client)
        events = _with_client_tools(agent, tools).resume(checkpoint, decisions, cancel=cancel)
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the run can be answered again
        keep(name, checkpoint)
        if not isinstance(exc, (NacelleError, ValueError, TypeError)):
            log.exception("resuming a paused AG-UI thread failed")
        return _failed(run, exc), cancel
    announced = tuple({p.id for p in checkpoint.pending} | {p.id for p in checkpoint.waiting()})
    return _items(events, run, name, keep, client, announced, answered), cancel


def _decisions(checkpoint: Checkpoint, run: RunInput,
               client: Set[str]) -> Tuple[Dict[str, Any], Tuple[str, ...]]:
    """The decisions that resume ``checkpoint``, and the calls the client answered;
    _Unresolved when the input does not answer exactly the waiting calls."""
    entries: Dict[str, ResumeEntry] = {}
    for entry in run.resume:
        if entry.interrupt_id in entries:
            raise _Unresolved(f"resume answers interrupt {entry.interrupt_id[:60]!r} twice")
        entries[entry.interrupt_id] = entry
    decisions: Dict[str, Any] = {}
    answered: List[str] = []
    waiting: List[str] = []
    top = {p.id for p in checkpoint.pending}
    for pending in checkpoint.waiting():  # a sub-agent's waiting calls too, by their ids
        if pending.id in top and pending.name in client:
            if pending.id in run.answers:
                decisions[pending.id] = True
                answered.append(pending.id)
            else:
                waiting.append(f"the call {pending.id!r} of {pending.name} waits for a tool "
                               "message")
            continue
        if pending.id in entries:
            decisions[pending.id] = _decision(entries.pop(pending.id))
        else:
            waiting.append(f"interrupt {pending.id!r} ({pending.name}) has no resume entry")
    if entries:
        raise _Unresolved(f"resume names interrupt {sorted(entries)[0][:60]!r}, which no "
                          "paused call of this thread has")
    if waiting:
        raise _Unresolved("the thread's paused run waits for answers: " + "; ".join(waiting))
    return decisions, tuple(answered)


def _decision(entry: ResumeEntry) -> Any:
    """A resume entry as ``Agent.resume``'s decision: True, a refusal, or an edited input."""
    if entry.status == "cancelled":
        return "the user cancelled this call"
    payload = entry.payload
    if isinstance(payload, bool):
        return payload
    if not isinstance(payload, Mapping) or not isinstance(payload.get("approved"), bool):
        raise _Unresolved(f"the payload answering interrupt {entry.interrupt_id[:60]!r} must be "
                          "true, false or {\"approved\": true | false, ...}")
    if payload["approved"]:
        edited = payload.get("editedArgs")
        if edited is None:
            return True
        if not isinstance(edited, Mapping):
            raise _Unresolved("editedArgs must be an object: the call's whole new input")
        return dict(edited)
    reason = payload.get("reason")
    return reason if isinstance(reason, str) and reason.strip() else False


def _with_client_tools(agent: Agent, tools: Sequence[ClientTool]) -> Agent:
    """``agent`` for one run with the front end's tools added, each pausing its calls.

    A shallow copy with two fields replaced: an Agent holds configuration only, and its
    tools and approval are read per run, so the copy shares everything else unchanged.
    """
    if not tools:
        return agent
    wrapped = copy.copy(agent)
    wrapped.tools = tuple(agent.tools) + tuple(tools)
    tools_by_name(expand_tools(wrapped.tools))  # a clash or a refused name: ConfigError
    names = {t.name for t in tools}
    inner = agent.approve

    def approve(name: str, arguments: Dict[str, Any], ctx: ToolContext) -> object:
        if name in names:
            return PAUSE  # the application answers it, in the next input
        return True if inner is None else inner(name, arguments, ctx)

    wrapped.approve = approve
    return wrapped


def _items(events: Iterable[Event], run: RunInput, name: str,
           keep: Callable[[str, Checkpoint], None], client: Set[str],
           announced: Sequence[str], answered: Sequence[str]) -> Iterator[bytes]:
    encoded = encode(_kept(_logged(events), name, keep), thread_id=run.thread_id,
                     run_id=run.run_id, client_tools=client, announced=announced,
                     answered=answered)
    try:
        for event in encoded:
            yield frame(event)
    except Exception as exc:  # noqa: BLE001 - the encoder's own failure: a bug, logged
        log.exception("encoding an AG-UI run failed")
        yield frame(run_error(exc))
    finally:
        close = getattr(encoded, "close", None)
        if close is not None:
            close()


def _failed(run: RunInput, exc: BaseException) -> Iterator[bytes]:
    """A stream of one ``RUN_ERROR``, which the spec lets open a stream."""
    error = run_error(exc)
    if isinstance(exc, _Unresolved):
        error["code"] = "interrupt_unresolved"
    yield frame(error)


def _kept(events: Iterable[Event], name: str,
          keep: Callable[[str, Checkpoint], None]) -> Iterator[Event]:
    """The events, a paused run's checkpoint stored under the thread before its DONE."""
    for event in events:
        if (event.kind is Kind.DONE and not event.agent and event.stop is Stop.PAUSED
                and event.checkpoint is not None):
            try:
                keep(name, event.checkpoint)
            except Exception:  # noqa: BLE001 - the log gets the reason, not the client
                log.exception("the store failed to keep a paused AG-UI run")
                raise RuntimeError("the server could not keep the paused run") from None
        yield event


def _logged(events: Iterable[Event]) -> Iterator[Event]:
    """The events; a failure is logged here (the encoder turns it into RUN_ERROR)."""
    source = iter(events)
    try:
        yield from source
    except Exception as exc:
        if isinstance(exc, (NacelleError, CheckpointError)):
            log.info("an AG-UI run failed: %s: %s", type(exc).__name__, exc)
        else:
            log.exception("an AG-UI run failed")
        raise
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
