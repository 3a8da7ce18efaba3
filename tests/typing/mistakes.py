"""Mistakes a user's type checker must catch, one a line, each marked ``# E: <what> [code]``.

tests/typing/test_mistakes.py runs mypy --strict on this file and expects an error,
with that error code, on every marked line and nowhere else: the unmarked lines are
right uses (every kind of tool, toolset, policy and serving argument nacelle makes),
which must check clean. The file is never run.
"""

import dataclasses
from pathlib import Path
from typing import Any, Dict

import nacelle
import nacelle.mcp
import nacelle.policy
import nacelle.serve
import nacelle.sessions
from nacelle.backends import chat
from nacelle.testing import Cassette, FakeServer, Reply, ScriptedBackend, anthropic_stream
from nacelle.toolsets import LocalTools, web_fetch, web_search


@nacelle.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@nacelle.tool(read_only=True, timeout=5.0)
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


@dataclasses.dataclass
class Weather:
    city: str
    temp_c: float


backend = ScriptedBackend(['{"city": "Paris", "temp_c": 21}'])

# A tool keeps its function's signature and return type when called directly.
add(1, "2")  # E: a str for an int parameter [arg-type]
shout(loud=True)  # E: a parameter the function does not have [call-arg]
add(1, 2).upper()  # E: an int has no upper() [attr-defined]
nacelle.tool(read_onyl=True)  # E: a misspelt option of @tool [call-overload]

# The Agent takes a Backend, not a model name.
nacelle.Agent("claude-sonnet-4-5", "You help.")  # E: a str is not a Backend [call-overload]
nacelle.Agent(backend, "You help.", max_tokns=100)  # E: a misspelt option [call-overload]

# Structured output: the run's output has the type asked for, and may be None.
agent = nacelle.Agent(backend, "You report the weather.", output=Weather)
result = agent.run([nacelle.user_text("Paris?")])
result.output.city  # E: None when the run ended without a valid answer [union-attr]
if result.output is not None:
    result.output.temperature  # E: Weather has no temperature [attr-defined]
count: int = agent.run([], output=str).output or 0  # E: a str for an int [assignment]
nacelle.Agent(backend, "You help.").run([]).output.city  # E: no output= gives None [attr-defined]
agent.resume_run(result.checkpoint, {})  # E: the checkpoint may be None [arg-type]

# The chat presets are typed functions.
chat.ollama(modle="llama3")  # E: a misspelt keyword [call-arg]
chat.openai("gpt-5-mini", timeout="10")  # E: a str for a float option [arg-type]
chat.llamacpp(dialect=None)  # E: a preset's dialect is its own [call-arg]

# The test doubles and the tool sets are typed.
ScriptedBackend("hello", nme="x")  # E: a misspelt keyword [call-arg]
FakeServer().queue("/v1/messages", "not a Reply")  # E: a str for a Reply [arg-type]
Reply(chunks=anthropic_stream(["Hi"]), status="200")  # E: a str for an int status [arg-type]
Cassette(Path("c.json"), record="yes")  # E: a str for a bool [arg-type]
LocalTools("/tmp/work", allow_bash="no")  # E: a str for a bool [arg-type]
web_fetch(True)  # E: allow_private is keyword-only [misc]
tools: list[int] = LocalTools("/tmp/work").tools()  # E: tools are not ints [assignment]
web_search("http://localhost:8888")[0].run({}, None)  # E: run needs a ToolContext [arg-type]

# Events: every field has a precise type.
for event in agent.stream([nacelle.user_text("Paris?")]):
    event.messages[0].txt  # E: a Message has no txt [attr-defined]
    event.output.city  # E: a stream's output is not typed: narrow it first [attr-defined]
    if event.checkpoint is not None:
        event.checkpoint.dumps(key=1)  # E: a checkpoint key is text or bytes [arg-type]
    if event.compaction is not None:
        event.compaction.tokens.upper()  # E: the tokens removed are a count [attr-defined]

# What an Agent is given: tools (not bare functions), an approval and hooks of the right shape.


def lookup(city: str) -> str:
    return city


nacelle.Agent(backend, "You help.", tools=[lookup])  # E: a function not made a tool [list-item]
nacelle.Agent(backend, "You help.", approve=lambda name: True)  # E: approve takes 3 [arg-type]
nacelle.Agent(backend, "You help.", hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [print, 1]})  # E: a hook is a callable [list-item]


# Right: every kind of tool and toolset nacelle makes, and the policies, type-check.
def audit(event: nacelle.HookEvent) -> None:
    return None


with LocalTools("/tmp/work") as local:
    client = nacelle.mcp.connect_http("https://example.com/mcp")
    nacelle.Agent(
        backend, "You help.",
        tools=[add, shout, *local.tools(), *web_fetch(), *client.tools(),
               nacelle.subagent_tool(agent, name="weather")],
        approve=nacelle.policy.secure(local.tools()),
        hooks={nacelle.HookPoint.AFTER_TOOL_CALL: [audit]})
    nacelle.Agent(backend, "You help.", tools=client.tools(live=True))

# Resuming takes a decision per call; serving takes an Agent or what makes one.
if result.checkpoint is not None:
    agent.resume_run(result.checkpoint, {"call_1": 1.5})  # E: a float is no decision [dict-item]
    agent.resume_run(result.checkpoint, {"call_1": True, "call_2": "not now",
                                         "call_3": {"city": "Oslo"}})
nacelle.serve.wsgi_app(lambda info, more: agent)  # E: make_agent takes 0 or 1 [arg-type]
nacelle.serve.wsgi_app(lambda: agent)
nacelle.serve.wsgi_app(agent)
nacelle.serve.wsgi_app(agent, store=nacelle.sessions.MemoryStore())
nacelle.serve.asgi_app(agent, store="sessions/")  # E: a path is not a Store [arg-type]
nacelle.policy.secure([lookup])  # E: a function not made a tool [list-item]


# A tool class of one's own is a Tool when it has the four members, plain or computed.
class Glossary:
    description = "Look a term up."
    schema: Dict[str, Any] = {"type": "object", "properties": {"term": {"type": "string"}}}

    @property
    def name(self) -> str:
        return "glossary"

    def run(self, input: Dict[str, Any], ctx: nacelle.ToolContext) -> str:
        return str(input["term"])


class Unfinished:
    name = "unfinished"
    description = "It has no schema."

    def run(self, input: Dict[str, Any], ctx: nacelle.ToolContext) -> str:
        return ""


nacelle.Agent(backend, "You help.", tools=[Glossary()])
nacelle.Agent(backend, "You help.", tools=[Unfinished()])  # E: a tool needs a schema [list-item]
