"""The agent tests/test_serve_vercel.py serves at POST /api/chat, picked per request.

``make_agent(info)`` reads the ``useChat`` body: when the last message is the
assistant's (an answer to an approval) the model says "Sent."; otherwise the first word
of the last user message picks the script:

- ``hello``: two text deltas;
- ``tool``: reasoning, text and a ``lookup`` call (which runs without asking), then text;
- ``pause``: a ``send`` call, which approval pauses; the resumed run answers "Sent.";
- ``fail``: the model fails with a nacelle error after a text delta;
- ``slow S``: the model waits S seconds (a wait cancelling ends) before its text;
- ``shot``: the ``shot`` tool, which returns text and a PNG, then text;
- ``delegate``: the ``errand`` sub-agent (its events forwarded), whose own ``send``
  pauses; the resumed run finishes the sub-agent ("Sent."), then the parent;
- ``quietly``: the same through ``quiet_errand``, a sub-agent that forwards nothing.
"""

from __future__ import annotations

import json

import nacelle
from nacelle.errors import StreamError
from nacelle.messages import Message, Reasoning, Role, Text, ToolCall
from nacelle.testing import ScriptedBackend, Turn

USAGE = nacelle.Usage(12, 5)


@nacelle.tool
def lookup(city: str) -> str:
    """Look the weather up.

    Args:
        city: Where.
    """
    return f"sunny in {city}"


@nacelle.tool
def send(to: str) -> str:
    """Send something.

    Args:
        to: Who gets it.
    """
    return f"sent to {to}"


@nacelle.tool
def shot(page: str) -> list:
    """Take a screenshot.

    Args:
        page: Which page.
    """
    from browser import png  # a real PNG

    return [nacelle.Text(f"screenshot of {page}"), nacelle.Image.from_bytes(png())]


def approve(name, input, ctx):
    return nacelle.PAUSE if name == "send" else True


def calling(parts, call_id, name, arguments):
    return Turn(Message(Role.ASSISTANT, (*parts, ToolCall(call_id, name, json.dumps(arguments)))),
                usage=USAGE)


def script(words):
    word = words[0] if words else ""
    rest = " ".join(words[1:])
    if word == "tool":
        return [calling((Reasoning("Weather, so lookup."), Text("Looking.")), "c1", "lookup",
                        {"city": rest or "Paris"}),
                Turn("It is sunny.", usage=USAGE)]
    if word == "pause":
        return [calling((Text("I will send it."),), "p1", "send", {"to": rest or "ada"})]
    if word == "slow":
        return [Turn("Late.", usage=USAGE, delay=float(rest or 1))]
    if word == "fail":
        return [Turn("Part", error=StreamError("the provider broke off"))]
    if word == "delegate":
        return [calling((Text("Asking a helper."),), "d1", "errand", {"task": "send to ada"}),
                calling((Text("On it."),), "e1", "send", {"to": rest or "ada"})]
    if word == "quietly":
        return [calling((), "q1", "quiet_errand", {"task": "send to ada"}),
                calling((), "e1", "send", {"to": rest or "ada"})]
    if word == "shot":
        return [calling((), "s1", "shot", {"page": rest or "home"}), Turn("A gradient.", usage=USAGE)]
    return [Turn(Message(Role.ASSISTANT, (Text("Hello"), Text(", world"))), usage=USAGE)]


def make_agent(info):
    messages = info.body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "assistant":
        # A resumed sub-agent takes the first turn, its parent the second.
        turns = [Turn("Sent.", usage=USAGE), Turn("Delegated and sent.", usage=USAGE)]
    else:
        text = " ".join(p.get("text", "") for p in last.get("parts", ()) if p.get("type") == "text")
        turns = script(text.split())
    backend = ScriptedBackend(turns)
    errand = nacelle.subagent_tool(nacelle.Agent(backend, "Run errands.", tools=[send]),
                                   name="errand", approve=approve, forward=True)
    quiet = nacelle.subagent_tool(nacelle.Agent(backend, "Run errands.", tools=[send]),
                                  name="quiet_errand", approve=approve)
    return nacelle.Agent(backend, "Be brief.", tools=[lookup, send, shot, errand, quiet],
                         approve=approve, thinking=nacelle.Thinking(budget=1024, show=True))
