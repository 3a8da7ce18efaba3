"""The offline demo: the real Agent, the real Anthropic backend and the real
read-only local tools, talking to a scripted model on loopback.

``nacelle demo`` starts a :class:`~nacelle.testing.FakeServer` on 127.0.0.1 that
answers ``/v1/messages`` with three Anthropic-shaped streams — the model lists a
small project folder, reads a file in it, then answers — and runs an Agent against
it. Everything between the model and the terminal is the production path: the
HTTP transport, the SSE decoder, the accumulator, the tool loop, the tools and the
console renderer. It needs no key and no network.

The folder is made fresh in a temporary directory, so the tools' results are the
same on every machine and the scripted answer stays true.

Outer ring: imports the core, ``backends.anthropic``, ``toolsets`` and ``testing``.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Generator, Iterator, Tuple

from .agent import Agent
from .events import Event
from .messages import user_text

if TYPE_CHECKING:
    from .testing.server import FakeServer

__all__ = ["QUESTION", "demo_events", "demo_run"]

QUESTION = "What is this project, and what does its entry point do?"

_FILES = {
    "README.md": "# greeter\n\nA tiny command-line greeter.\n",
    "greet.py": (
        'import sys\n\n\ndef greet(name: str) -> str:\n'
        '    return f"Hello, {name}!"\n\n\n'
        'if __name__ == "__main__":\n'
        '    sys.stdout.write(greet(sys.argv[1] if len(sys.argv) > 1 else "world") + "\\n")\n'
    ),
    "tests/test_greet.py": (
        "from greet import greet\n\n\ndef test_greet():\n"
        '    assert greet("Ada") == "Hello, Ada!"\n'
    ),
}

_ANSWER = [
    "This is **greeter**, a tiny command-line greeter. ",
    "Its entry point, `greet.py`, defines `greet(name)`, which returns ",
    "`\"Hello, <name>!\"`; run as a script it greets the first argument, ",
    "or `world` when there is none. `tests/test_greet.py` checks that greeting.",
]


def _script(server: "FakeServer") -> None:
    from .testing import Reply
    from .testing.wire import anthropic_stream

    turns = [
        anthropic_stream(["I'll look at the project folder first."],
                         tool_calls=[("toolu_demo_1", "list_directory", '{"path": "."}')],
                         usage={"input_tokens": 1450, "output_tokens": 48,
                                "cache_creation_input_tokens": 1320}),
        anthropic_stream(["There is a README and a script; let me read the script."],
                         tool_calls=[("toolu_demo_2", "read_file", '{"path": "greet.py"}')],
                         usage={"input_tokens": 160, "output_tokens": 41,
                                "cache_read_input_tokens": 1320,
                                "cache_creation_input_tokens": 130}),
        anthropic_stream(_ANSWER,
                         usage={"input_tokens": 210, "output_tokens": 87,
                                "cache_read_input_tokens": 1450}),
    ]
    for chunks in turns:
        server.queue("/v1/messages", Reply(chunks=chunks))


def demo_events(root: Path, base_url: str) -> Generator[Event, None, None]:
    """The demo run's events against a server already scripted at ``base_url``."""
    from .backends import anthropic
    from .toolsets import LocalTools

    backend = anthropic.Backend(
        api_key="demo-key-for-a-loopback-server",
        base_url=base_url,
        pricing=anthropic.Pricing(input=5.0, output=25.0),
    )
    tools = LocalTools(root)
    try:
        agent = Agent(backend, "You are a careful assistant who reads before answering.",
                      tools=tools.read_only(), max_iterations=5)
        yield from agent.stream([user_text(QUESTION)])
    finally:
        tools.close()


@contextmanager
def demo_run() -> Iterator[Tuple[str, Iterator[Event]]]:
    """Set the demo up — its folder, its scripted server — and give the question and
    the run's event stream; everything is torn down on exit."""
    from .testing import FakeServer

    with tempfile.TemporaryDirectory(prefix="nacelle-demo-") as tmp:
        root = Path(tmp)
        for name, text in _FILES.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        with FakeServer() as server:
            _script(server)
            events = demo_events(root, server.url)
            try:
                yield QUESTION, events
            finally:
                events.close()
