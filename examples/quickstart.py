"""Quick start: one agent, one tool, streamed to the terminal.

    ANTHROPIC_API_KEY=... python examples/quickstart.py
    python examples/quickstart.py --offline

``--offline`` needs no key and no network: the example runs unchanged against
``nacelle.testing.FakeServer``, a loopback server speaking the Anthropic Messages
wire, which plays the scripted answers below (a word_count call, then the answer).
"""

import contextlib
import os
import sys
from typing import Iterator

import nacelle
from nacelle.backends import anthropic


@nacelle.tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return len(text.split())


def main() -> None:
    agent = nacelle.Agent(anthropic.Backend(), "You are concise.", tools=[word_count])
    question = nacelle.user_text("How many words are in 'to be or not to be'?")
    for event in agent.stream([question]):
        if event.kind is nacelle.Kind.TEXT:
            print(event.text, end="", flush=True)
        elif event.kind is nacelle.Kind.TOOL_CALL and event.tool:
            print(f"\n[calling {event.tool.name} {event.tool.input}]")
        elif event.kind is nacelle.Kind.DONE and event.stop:
            print(f"\n[{event.stop.value}; {event.usage.total} tokens]")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """A loopback Anthropic server playing this example's script, named to the backend
    through ``ANTHROPIC_BASE_URL`` as a proxy would be."""
    from nacelle.testing import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    with FakeServer() as server:
        server.queue("/v1/messages", *[Reply(chunks=c) for c in [
            anthropic_stream([], tool_calls=[
                ("toolu_1", "word_count", '{"text": "to be or not to be"}')]),
            anthropic_stream(["Six ", "words."])]])
        os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="offline-example")
        yield


if __name__ == "__main__":
    if "--offline" in sys.argv[1:]:
        with offline():
            main()
    elif not os.environ.get("ANTHROPIC_API_KEY"):
        sys.exit(f"{sys.argv[0]}: set ANTHROPIC_API_KEY to run this against Anthropic, "
                 "or pass --offline to run it against a scripted loopback server")
    else:
        main()
