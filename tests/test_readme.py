"""The README's Python examples run as written, against a scripted server on loopback.

Blocks that need the outside world (a stdio MCP server, a folder under /srv, a real
key) are left out by what they contain; every other block runs, in order, in one
namespace, as a reader would paste them.
"""

import re
from pathlib import Path


from nacelle.backends import anthropic
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

README = Path(__file__).resolve().parent.parent / "README.rst"
NEEDS_THE_WORLD = ("connect_stdio", "connect_http", "/srv/", "os.environ", "sk-ant-",
                   "openrouter.Backend(", "nacelle.Retry(backend")


def python_blocks():
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", text, re.M):
        lines = match.group(1).splitlines()
        blocks.append("\n".join(line[4:] for line in lines).strip() + "\n")
    return blocks


def test_the_readme_has_python_examples():
    assert len(python_blocks()) >= 5


def test_the_runnable_readme_examples_run(monkeypatch, capsys):
    runnable = [b for b in python_blocks() if not any(word in b for word in NEEDS_THE_WORLD)]
    assert any("agent.stream(" in b for b in runnable) and any("ScriptedBackend" in b for b in runnable)
    real = anthropic.Backend
    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream([], tool_calls=[
                         ("toolu_1", "word_count", '{"text": "to be or not"}')])),
                     *[Reply(chunks=anthropic_stream(["Four words."])) for _ in range(6)])
        monkeypatch.setattr(anthropic, "Backend",
                            lambda *a, **k: real("readme-key", base_url=server.url,
                                                 **{n: v for n, v in k.items() if n != "base_url"}))
        namespace = {"__name__": "readme"}
        for block in runnable:
            exec(compile(block, str(README), "exec"), namespace)
        requests = [r.json() for r in server.requests]
    out = capsys.readouterr().out
    assert "calling word_count" in out and "Four words." in out
    # The quick start (a tool call, then the answer), then the notebook: run(), and a
    # stream carrying that conversation forward.
    assert len(requests) == 4
    last = [block.get("text") for m in requests[3]["messages"] for block in m["content"]]
    assert last == ["Summarise PEP 8 in one line.", "Four words.", "And PEP 20?"]
