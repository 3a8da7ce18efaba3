"""The agent tests/test_checkpoint.py pauses in one process and resumes in another.

Two tools, ``lookup`` (approved by the policy) and ``send`` (paused), each append a
line to the file named by ``NACELLE_SIDE_EFFECTS``, so a test counts what ran, in
which process, with which input. ``resume_main()`` is what the child process runs:
the checkpoint text on stdin, the decisions as JSON in ``argv[1]``; it prints what
the model saw on its next request and the run's stop as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import nacelle
from nacelle.messages import ToolCall, ToolResult
from nacelle.testing import ScriptedBackend, Turn

KEY = "test-signing-key"


def _note(line: str) -> None:
    with open(os.environ["NACELLE_SIDE_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {line}\n")


@nacelle.tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    _note(f"lookup {query}")
    return f"found {query}"


@nacelle.tool
def send(to: str, body: str) -> str:
    """Send a message.

    Args:
        to: Who gets it.
        body: What it says.
    """
    _note(f"send {to} {body}")
    return f"sent to {to}"


def policy(name: str, input: Dict[str, Any], ctx: Any) -> Any:
    return True if name == "lookup" else nacelle.PAUSE


def first_turn() -> Turn:
    return Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.Text("Looking up, then sending."),
        ToolCall("c1", "lookup", '{"query": "weather"}'),
        ToolCall("c2", "send", '{"to": "ann", "body": "hi"}'),
        ToolCall("c3", "send", '{"to": "bob", "body": "yo"}'),
    )), usage=nacelle.Usage(input_tokens=10, output_tokens=5))


def agent(turns: List[Any], **options: Any) -> nacelle.Agent:
    return nacelle.Agent(ScriptedBackend(turns), "You help.", tools=[lookup, send],
                         approve=policy, **options)


def resume_main() -> None:
    text = sys.stdin.read()
    decisions = json.loads(sys.argv[1])
    checkpoint = nacelle.Checkpoint.loads(text, key=KEY)
    backend = ScriptedBackend([Turn("All done.", usage=nacelle.Usage(input_tokens=20,
                                                                     output_tokens=2))])
    resumed = nacelle.Agent(backend, "You help.", tools=[lookup, send], approve=policy)
    kinds = []
    for event in resumed.resume(checkpoint, decisions):
        if event.kind in (nacelle.Kind.TOOL_CALL, nacelle.Kind.TOOL_RESULT):
            kinds.append([event.kind.value, event.tool.id, event.tool.input,
                          event.tool.result, event.tool.error, event.tool.refused])
        elif event.kind is nacelle.Kind.DONE:
            done = event
    seen = backend.requests[0].messages
    results = [[p.id, p.result, p.failed] for p in seen[-1].parts if isinstance(p, ToolResult)]
    calls = [[p.id, p.input] for p in seen[-2].parts if isinstance(p, ToolCall)]
    json.dump({"stop": done.stop.value, "results": results, "calls": calls, "events": kinds,
               "total": done.usage.total, "text": done.messages[-1].parts[0].text},
              sys.stdout)


# -- a delegating agent whose sub-agent pauses (nested checkpoints) -------------

def delegating_policy(name: str, input: Dict[str, Any], ctx: Any) -> Any:
    return True if name in ("lookup", "delegate") else nacelle.PAUSE


def delegating_agent(turns: List[Any]) -> nacelle.Agent:
    """A parent whose ``delegate`` tool runs a sub-agent with ``lookup`` and ``send``,
    forwarding its events; the sub-agent's ``send`` pauses. Parent and sub-agent
    share the scripted backend, as they would share a provider."""
    backend = ScriptedBackend(turns)
    worker = nacelle.Agent(backend, "You do errands.", tools=[lookup, send])
    delegate = nacelle.subagent_tool(worker, name="delegate", approve=delegating_policy,
                                     forward=True)
    return nacelle.Agent(backend, "You delegate.", tools=[delegate, lookup],
                         approve=delegating_policy)


def delegating_turns() -> List[Any]:
    return [
        Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
            ToolCall("p1", "delegate", '{"task": "greet ann"}'),
            ToolCall("p2", "lookup", '{"query": "ann"}'),
        )), usage=nacelle.Usage(input_tokens=10, output_tokens=5)),
        Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
            ToolCall("c1", "lookup", '{"query": "address"}'),
            ToolCall("c2", "send", '{"to": "ann", "body": "hi"}'),
        )), usage=nacelle.Usage(input_tokens=100, output_tokens=50)),
    ]


def resume_nested_main() -> None:
    checkpoint = nacelle.Checkpoint.loads(sys.stdin.read(), key=KEY)
    decisions = json.loads(sys.argv[1])
    resumed = delegating_agent([
        Turn("Greeted ann.", usage=nacelle.Usage(input_tokens=200, output_tokens=3)),
        Turn("All done.", usage=nacelle.Usage(input_tokens=20, output_tokens=2)),
    ])
    events = []
    for event in resumed.resume(checkpoint, decisions):
        if event.kind is nacelle.Kind.DONE:
            done = event
        else:
            events.append([event.kind.value, list(event.agent), event.via,
                           event.tool.id if event.tool is not None else event.text])
    json.dump({"stop": done.stop.value, "total": done.usage.total, "events": events,
               "text": done.messages[-1].parts[0].text,
               "results": [[p.id, p.result] for p in done.messages[-2].parts
                           if isinstance(p, ToolResult)]}, sys.stdout)
