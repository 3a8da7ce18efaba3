"""subagent_tool: hand a self-contained task to a fresh run of another agent.

``subagent_tool(base)`` is a Tool whose every call is a new run of ``base``'s
configuration (its backend, system prompt or ``system``, its tools minus any tool
named like the sub-agent tool itself, which is the recursion guard) with its own
conversation, holding only the task. The parent sees only the final text: the
sub-agent's tool traffic stays out of the parent's context window, which is the
point of delegating.

Approvals are denied unless ``approve`` is given: a sub-agent runs out of the user's
sight, so it must not inherit a right to act. An ``approve`` that returns
``nacelle.PAUSE`` makes the call fail, saying which calls paused and did not run: a
nested run has no checkpoint the parent's could carry, so its partial text is not
passed off as an answer. Its hooks are ``base``'s. The nested
run's spend is passed to ``on_usage`` (also when it fails part way), since it never
appears in the parent's TURN events. The nested run is cancelled with the call: a
timeout or a cancelled parent run sets the call's ``ctx.cancelled``, which is the
nested run's cancel event.

A ``base`` with structured output (``output=``) makes a typed sub-agent: the child
keeps its ``output``, mode and retries, and the tool returns the validated answer as
JSON text (``output.to_jsonable``), which is all a parent model can read; a child run
that ends without a valid answer is a failed call saying how it stopped.

The child Agent is built when the tool is made, so a configuration the backend
cannot serve fails there, not in the middle of a parent run.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Optional, Tuple

from .agent import Agent
from .errors import ConfigError
from .events import Kind, Stop, Usage
from .messages import Role, user_text
from .output import to_jsonable
from .context import ToolContext
from .tools import NAME_PATTERN

__all__ = ["SubagentTool", "subagent_tool"]

log = logging.getLogger(__name__)

DEFAULT_DESCRIPTION = (
    "Hand a self-contained task to a sub-agent that works on it with its own fresh "
    "context and tools, and returns only its final answer. Describe the task fully: "
    "the sub-agent sees nothing of this conversation."
)


def deny_all(name: str, input: Dict[str, Any], ctx: ToolContext) -> bool:
    """The sub-agent's default approval: nothing that needs approval runs."""
    return False


class SubagentTool:
    """The Tool :func:`subagent_tool` returns."""

    exclusive = False
    read_only = False
    destructive = True  # whatever its tools may do
    idempotent = False
    open_world = True

    def __init__(self, agent: Agent, name: str, description: str,
                 on_usage: Optional[Callable[[Usage], Any]]) -> None:
        self.agent = agent
        self.name = name
        self.description = description
        self.on_usage = on_usage
        self.schema = {
            "type": "object",
            "properties": {"task": {"type": "string",
                                    "description": "The task, with everything needed to do it."}},
            "required": ["task"],
            "additionalProperties": False,
        }

    def __repr__(self) -> str:
        return f"<SubagentTool {self.name!r} over {self.agent!r}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        spent = Usage()
        text, stop, output = "", None, None
        paused: Tuple[str, ...] = ()
        try:
            for event in self.agent.stream([user_text(input["task"])], cancel=ctx.cancelled):
                if event.kind is Kind.TURN:
                    spent += event.usage
                elif event.kind is Kind.DONE:
                    stop = event.stop
                    output = event.output
                    if event.checkpoint is not None:
                        paused = tuple(p.name for p in event.checkpoint.pending)
                    text = next((m.text for m in reversed(event.messages)
                                 if m.role is Role.ASSISTANT), "")
        finally:
            if self.on_usage is not None and spent != Usage():
                try:
                    self.on_usage(spent)
                except Exception:  # noqa: BLE001 - accounting must not fail the call
                    log.warning("on_usage failed for %s", self.name, exc_info=True)
        if stop is Stop.PAUSED:
            # A nested run has no checkpoint of its own to resume: its text so far is
            # no answer, and the parent model must know the paused calls did not run.
            raise RuntimeError(
                f"the sub-agent paused for a person's approval of {', '.join(paused)}, "
                "which a sub-agent cannot wait for: those calls did not run, and it has "
                "no answer")
        if output is not None:
            return json.dumps(to_jsonable(output), ensure_ascii=False)
        if self.agent.output is not None and stop is not None:
            raise RuntimeError(f"the sub-agent stopped ({stop.value}) without a valid answer")
        if not text and stop is not None and not stop.complete:
            raise RuntimeError(f"the sub-agent stopped ({stop.value}) without an answer")
        return text


def subagent_tool(
    agent: Agent,
    *,
    name: str = "subagent",
    description: Optional[str] = None,
    system: Optional[str] = None,
    max_iterations: int = 0,
    approve: Optional[Callable[..., bool]] = None,
    on_usage: Optional[Callable[[Usage], Any]] = None,
) -> SubagentTool:
    """A Tool that runs ``agent``'s configuration on a task; see the module docstring."""
    if not isinstance(agent, Agent):
        raise ConfigError(f"subagent_tool needs a nacelle.Agent, got {type(agent).__name__}")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if on_usage is not None and not callable(on_usage):
        raise ConfigError(f"on_usage must be callable, got {type(on_usage).__name__}")
    child = Agent(
        agent.backend,
        system if system is not None else agent.system,
        thinking=agent.thinking,
        max_tokens=agent.max_tokens,
        max_iterations=max_iterations,
        tools=[t for t in agent.tools if getattr(t, "name", None) != name],
        mcp=agent.mcp,
        approve=approve if approve is not None else deny_all,
        hooks=agent.hooks,
        max_parallel_tools=agent.max_parallel_tools,
        tool_timeout=agent.tool_timeout,
        max_result_chars=agent.max_result_chars,
        output=agent.output,
        output_mode=agent.output_mode,
        output_retries=agent.output_retries,
        logger=agent.logger,
    )
    return SubagentTool(child, name, description if description is not None else DEFAULT_DESCRIPTION,
                        on_usage)
