"""Code mode: one ``run_python(code)`` tool whose script calls the agent's tools.

A model that needs ten tool calls to do a job makes ten turns, and every turn sends
the whole conversation again with each call's input and result in it. In code mode it
writes one short program instead: the program runs in a box, calls the tools as
functions, keeps what it needs in variables and prints only the answer, so the
conversation holds one call and one short result (the measured saving is in the
README, "Running untrusted work"). The pattern is Anthropic's "code execution with
MCP" (https://www.anthropic.com/engineering/code-execution-with-mcp) and
Cloudflare's "Code Mode" (https://blog.cloudflare.com/code-mode/).

The script runs in the given box (:mod:`nacelle.sandbox.bridge` is the program) and
reaches the tools only through a bridge: its standard input and output, a pipe to the
host. Each call it makes is run on the host by :func:`nacelle.toolcalls.run_tool`, the
path every model call takes — its input validated against the tool's schema, the
run's before-hooks, its approval, the tool, its after-hooks — and is reported in the
run's stream as a TOOL_CALL and its TOOL_RESULT whose ``via`` is the ``run_python``
call's id (``ToolContext.emit``). The hooks and the approval are the run's own: the
ones of the Agent running ``run_python`` (outside a run, a call is run without any).
A refused or failed call raises ``ToolError`` in the script with the reason; an
approval that answers ``nacelle.PAUSE`` refuses too, since a script cannot wait for
a person. A script may make at most ``max_calls`` calls.

The tool's result is the script's output and, when there is any, its standard error
and a non-zero exit code, bounded like ``run_command``'s. A script that runs past
``timeout`` seconds is killed with everything it started.

Outer ring: imports the standard library, the core (``events``, ``messages``,
``context``, ``toolcalls``, ``tools``, ``bounded_json``) and the siblings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any, Dict, Iterable, Optional

from ..bounded_json import loads
from ..context import ToolContext
from ..errors import ConfigError
from ..events import Event, Kind, ToolEvent
from ..messages import ToolCall
from ..toolcalls import ToolSink, run_tool
from ..tools import expand_tools, tools_by_name
from ..toolsets.shell import CommandTimedOut, _Capture
from .process import Feed

__all__ = ["CodeMode", "code_mode"]

MAX_LINE = 4_000_000  # one bridge message, in bytes


def code_mode(tools: Iterable[Any], box: Any, *, timeout: float = 120.0,
              max_calls: int = 200, max_output: int = 30_000) -> "CodeMode":
    """One ``run_python`` tool running scripts in ``box`` that call ``tools``; see the
    module docstring."""
    return CodeMode(tools, box, timeout=timeout, max_calls=max_calls, max_output=max_output)


def _signature(tool: Any) -> str:
    props = (tool.schema or {}).get("properties") or {}
    required = set((tool.schema or {}).get("required") or ())
    args = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        args.append(f"{name}: {kind}" + ("" if name in required else " = ..."))
    call = tool.name if tool.name.isidentifier() else f"call_tool({tool.name!r}, "
    head = f"{call}({', '.join(args)})" if tool.name.isidentifier() else \
        f"{call}{', '.join(args)})"
    summary = " ".join(str(tool.description or "").split())[:300]
    return f"- {head} -> str: {summary}"


class CodeMode:
    """The ``run_python`` tool; made by :func:`code_mode`."""

    name = "run_python"
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string",
                                "description": "A Python 3 program; print what you need."}},
        "required": ["code"],
        "additionalProperties": False,
    }
    read_only = False
    destructive = True
    idempotent = False
    open_world = True

    def __init__(self, tools: Iterable[Any], box: Any, *, timeout: float, max_calls: int,
                 max_output: int) -> None:
        if not callable(getattr(box, "_start", None)):
            raise ConfigError(f"code mode runs its script in a box of nacelle.sandbox, "
                              f"not {box!r}")
        self.tools = tools_by_name(expand_tools(tools))
        if self.name in self.tools:
            raise ConfigError("a tool given to code mode is itself named run_python")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.box = box
        self.timeout = float(timeout)
        self.max_calls = max_calls
        self.max_output = max_output
        listing = "\n".join(_signature(t) for t in self.tools.values())
        self.description = (
            "Run a Python 3 program in an isolated box and return what it prints. Use it "
            "to make several tool calls in one step: inside the program each tool below "
            "is a function taking keyword arguments and returning its result as text; a "
            "refused or failed call raises ToolError. Keep intermediate results in "
            "variables and print only what you need.\n" + listing)

    def __repr__(self) -> str:
        return f"code_mode({list(self.tools)}, {self.box!r})"

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        code = input.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ValueError("code must be a non-empty string")
        python = self.box.python() if callable(getattr(self.box, "python", None)) \
            else (sys.executable if type(self.box).__name__ == "Local" else "python3")
        with open(os.path.join(os.path.dirname(__file__), "bridge.py"), encoding="utf-8") as f:
            client = f.read()
        setup = json.dumps({"code": code, "tools": list(self.tools)}) + "\n"
        feed = Feed(setup.encode("utf-8"))
        bridge = _Bridge(self, feed, ctx)
        done = self.box._start([python, "-I", "-c", client], stdin=feed,
                               timeout=self.timeout, ctx=ctx, stdout=bridge)
        err = _Capture(self.max_output)
        err.add(done.stderr.encode("utf-8"))
        report = self._report(done.exit_code, bridge.out, err)
        if done.timed_out:
            raise CommandTimedOut(f"the script ran past {self.timeout:g} seconds and was "
                                  f"killed. Output before it was stopped:\n{report}")
        return report

    def _report(self, code: int, out: _Capture, err: _Capture) -> str:
        note = f"output over the {self.max_output}-character limit"
        parts = [out.text(self.max_output, note)] if out.total else []
        if err.total:
            parts.append("stderr:\n" + err.text(self.max_output, note))
        if code != 0:
            parts.append(f"exit code: {code}")
        return "\n".join(parts) if parts else "(no output)"


class _Bridge:
    """The host's end of the bridge: reads the script's messages as the box's stdout
    (in the loop that watches the deadline), runs each call, answers on ``feed``."""

    def __init__(self, mode: CodeMode, feed: Feed, ctx: Any) -> None:
        self.mode = mode
        self.feed = feed
        self.ctx = ctx
        self.out = _Capture(mode.max_output)
        self.buffer = bytearray()
        self.calls = 0
        emit = getattr(ctx, "emit", None)
        self.emit = emit if callable(emit) else (lambda event: None)
        policy = getattr(ctx, "policy", None)  # the round's sink: the run's hooks, approval
        self.policy: Optional[ToolSink] = policy if isinstance(policy, ToolSink) else None
        self.via = str(getattr(ctx, "call_id", "") or "run_python")

    def add(self, chunk: bytes) -> None:
        self.buffer += chunk
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                if len(self.buffer) > MAX_LINE:
                    self.out.add(bytes(self.buffer))
                    self.buffer.clear()
                return
            line = bytes(self.buffer[:end])
            del self.buffer[:end + 1]
            self._hear(line)

    def _hear(self, line: bytes) -> None:
        try:
            message = loads(line, what="a bridge message")
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self.out.add(line + b"\n")  # not ours: show it as output
            return
        if isinstance(message.get("out"), str):
            self.out.add(message["out"].encode("utf-8"))
        elif isinstance(message.get("call"), str):
            self._answer(self._call(message["call"], message.get("input")))

    def _answer(self, reply: Dict[str, str]) -> None:
        self.feed.write((json.dumps(reply) + "\n").encode("utf-8"))

    def _call(self, name: str, arguments: Any) -> Dict[str, str]:
        if self.calls >= self.mode.max_calls:
            return {"error": f"the script made more than {self.mode.max_calls} tool calls"}
        if not isinstance(arguments, dict):
            return {"error": "a tool takes keyword arguments"}
        index = self.calls
        self.calls += 1
        call = ToolCall(f"{self.via}.{index}", name, json.dumps(arguments))
        self.emit(Event(Kind.TOOL_CALL, tool=ToolEvent(call.id, index, name, call.input),
                        via=self.via))
        sink = self.policy.for_round() if self.policy is not None else ToolSink()
        sub = ToolContext(call.id, index, name, getattr(self.ctx, "cancelled", None),
                          getattr(self.ctx, "deadline", None),
                          clock=getattr(self.ctx, "clock", time.monotonic),
                          observer=getattr(self.ctx, "observer", None))
        sub.emit = self.emit
        # What a bridged call spends on model requests of its own counts in the run's.
        sub.spend = getattr(self.ctx, "spend", sub.spend)
        sub.budget = getattr(self.ctx, "budget", None)
        result = run_tool(self.mode.tools.get(name), call, index, sink, sub)
        paused = False
        for event in sink.drain():
            if event.tool is not None and event.tool.paused:
                paused = True
                reason = "it needs a person's approval, which a script cannot wait for"
                event = dataclasses.replace(event, tool=dataclasses.replace(
                    event.tool, paused=False, refused=True, error=reason, result=reason))
            self.emit(dataclasses.replace(event, via=self.via))
        if paused:
            return {"error": "the call was refused: it needs a person's approval, which a "
                             "script cannot wait for"}
        if result.failed:
            return {"error": result.result}
        return {"result": result.result}
