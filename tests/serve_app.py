"""The agent tests/test_serve.py serves, in-process and under gunicorn and uvicorn.

``make_agent(info)`` picks a scripted model from the prompt's first word, so one app
serves every scenario:

- ``hello``: two text deltas, one priced turn;
- ``slow S``: a text delta, then the ``slow`` tool sleeping S seconds, then text;
- ``hang``: the ``hang`` tool, which waits for its cancellation and notes whether it
  saw it in the file named by ``NACELLE_SERVE_NOTES``;
- ``pause``: the ``send`` tool, which ``approve`` pauses; the resumed run (a POST to
  the decisions route) answers "Sent." and ``send`` notes each time it ran;
- ``protos``: two ``send`` calls whose ids are ``__proto__`` and ``constructor``,
  names a page must keep as plain keys;
- ``delegate NAME``: the ``errand`` sub-agent (its events forwarded), whose own
  ``send`` pauses; the resumed run finishes the sub-agent ("Sent."), then the parent;
- ``shot``: the ``shot`` tool, which returns its text, a small PNG and a PDF whose
  title is markup, then text;
- ``markdown``: an answer in Markdown (:data:`MARKDOWN`) holding markup and a script;
- ``think``: reasoning, then a short answer;
- ``cut``: an answer cut at the output limit (stop ``max_tokens``);
- ``wait S``: nothing for S seconds (cancelling ends the wait), then an answer;
- ``write``: a ``write_file`` call (paused, like ``send``) replacing ``notes.txt`` under
  the folder named by ``NACELLE_SERVE_ROOT``.

``wsgi`` and ``asgi`` are the apps gunicorn and uvicorn load: the store is the
directory named by ``NACELLE_SERVE_STORE`` and the keepalive ``NACELLE_SERVE_KEEPALIVE``.
"""

from __future__ import annotations

import json
import os
import time

import nacelle
from nacelle.messages import Message, Reasoning, Role, Text, ToolCall
from nacelle.serve import asgi_app, wsgi_app
from nacelle.sessions import FileStore
from nacelle.testing import ScriptedBackend, Turn

USAGE = nacelle.Usage(12, 5, cost=0.00042, priced=True)


def note(line: str) -> None:
    path = os.environ.get("NACELLE_SERVE_NOTES")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


@nacelle.tool
def slow(seconds: float) -> str:
    """Take a while.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return f"slept {seconds}"


@nacelle.tool
def hang(ctx: nacelle.ToolContext) -> str:
    """Wait until cancelled."""
    note("hang started")
    cancelled = ctx.cancelled.wait(20)
    note("hang cancelled" if cancelled else "hang timed out")
    return "stopped"


@nacelle.tool
def send(to: str) -> str:
    """Send something.

    Args:
        to: Who gets it.
    """
    note(f"send {to}")
    return f"sent to {to}"


@nacelle.tool
def shot(page: str) -> list:
    """Take a screenshot.

    Args:
        page: Which page.
    """
    from browser import png  # a real PNG, drawn by the gradient it holds

    return [nacelle.Text(f"screenshot of {page}"), nacelle.Image.from_bytes(png()),
            nacelle.Document.from_bytes(b"%PDF-1.4\n%%EOF\n", title="<b>Q3</b> report")]


@nacelle.tool
def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path: Where, under the root.
        content: What.
    """
    with open(os.path.join(os.environ["NACELLE_SERVE_ROOT"], path), "w", encoding="utf-8") as f:
        f.write(content)
    return f"wrote {path}"


MARKDOWN = """# Release notes

Some **bold**, some *emphasis*, `inline code` and a [link](https://example.com/docs "docs").
A [bad link](javascript:alert(1)) stays text, and so does <script>alert(1)</script>.

## Steps

1. Install it
2. Run it
   - with `--yes`
   - or without

```python
print("<b>hi</b>")
```

| Name | Size |
|------|-----:|
| a.txt | 12 |
| b.txt | 3 |

> Quoted ~~old~~ text.
"""


def approve(name, input, ctx):
    return nacelle.PAUSE if name in ("send", "write_file") else True


def calling(text, call_id, name, arguments):
    parts = ((Text(text),) if text else ()) + (ToolCall(call_id, name, json.dumps(arguments)),)
    return Turn(Message(Role.ASSISTANT, parts), usage=USAGE)


def script(prompt: str):
    word, _, rest = prompt.partition(" ")
    if word == "slow":
        return [calling("Working on it.", "c1", "slow", {"seconds": float(rest or 1)}),
                Turn("All done.", usage=USAGE)]
    if word == "hang":
        return [calling("", "h1", "hang", {})]
    if word == "protos":
        calls = tuple(ToolCall(call_id, "send", json.dumps({"to": call_id}))
                      for call_id in ("__proto__", "constructor"))
        return [Turn(Message(Role.ASSISTANT, calls), usage=USAGE)]
    if word == "shot":
        return [calling("Looking.", "s1", "shot", {"page": rest or "home"}),
                Turn("It is a gradient.", usage=USAGE)]
    if word == "delegate":
        return [calling("Asking a helper.", "d1", "errand", {"task": f"send to {rest}"}),
                calling("On it.", "e1", "send", {"to": rest or "ada"})]
    if word == "markdown":
        return [Turn(MARKDOWN, usage=USAGE)]
    if word == "think":
        return [Turn(Message(Role.ASSISTANT, (Reasoning("Weighing the question first."),
                                              Text("Forty-two."))), usage=USAGE)]
    if word == "cut":
        return [Turn("The list goes on: one, two, thr", usage=USAGE, stop=nacelle.Stop.MAX_TOKENS)]
    if word == "wait":
        return [Turn("Waited.", usage=USAGE, delay=float(rest or 1))]
    if word == "write":
        return [calling("Updating the notes.", "w1", "write_file",
                        {"path": "notes.txt", "content": "first\nsecond, changed\nthird\n"})]
    if word == "pause":
        return [calling("I will send it.", "p1", "send", {"to": rest or "ada"})]
    return [Turn(Message(Role.ASSISTANT, (Text("Hello"), Text(", world <b>!</b>"))), usage=USAGE)]


def make_agent(info):
    if info.path.endswith("/decisions"):
        # A resumed sub-agent takes the first turn, its parent the second.
        turns = [Turn("Sent.", usage=USAGE), Turn("Delegated and sent.", usage=USAGE)]
    else:
        turns = script(str(info.body.get("prompt", "")))
    backend = ScriptedBackend(turns)
    errand = nacelle.subagent_tool(nacelle.Agent(backend, "Run errands.", tools=[send]),
                                   name="errand", approve=approve, forward=True)
    # Reasoning reaches the stream only when shown (the page folds it).
    show = str(info.body.get("prompt", "")).startswith("think")
    return nacelle.Agent(backend, "Be brief.", tools=[slow, hang, send, shot, errand, write_file],
                         approve=approve, thinking=nacelle.Thinking(show=show))


def _options():
    return {"store": FileStore(os.environ.get("NACELLE_SERVE_STORE", "serve-store")),
            "keepalive": float(os.environ.get("NACELLE_SERVE_KEEPALIVE", "15"))}


wsgi = wsgi_app(make_agent, **_options()) if os.environ.get("NACELLE_SERVE_STORE") else None
asgi = asgi_app(make_agent, **_options()) if os.environ.get("NACELLE_SERVE_STORE") else None
