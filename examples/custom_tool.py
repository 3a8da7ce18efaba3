"""Writing tools: a decorated function with typed, documented parameters, a tool that
uses its context to stop when cancelled, and a class-based tool.

    ANTHROPIC_API_KEY=... python examples/custom_tool.py
    python examples/custom_tool.py --offline

``--offline`` needs no key and no network: the example runs unchanged against
``nacelle.testing.FakeServer``, a loopback server speaking the Anthropic Messages
wire, which plays the scripted answers below (three tool calls, then the answer).
"""

import contextlib
import enum
import os
import sys
import time
from typing import Any, Dict, Iterator, List, Optional

import nacelle
from nacelle.backends import anthropic


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@nacelle.tool
def forecast(city: str, days: int = 3, unit: Unit = Unit.CELSIUS) -> List[Dict[str, Any]]:
    """Give a (made-up) forecast for a city.

    Args:
        city: The city, e.g. "Lisbon".
        days: How many days ahead, 1 to 7.
        unit: The temperature unit.
    """
    base = 21 if unit is Unit.CELSIUS else 70
    return [{"day": d + 1, "high": base + d} for d in range(days)]


@nacelle.tool
def slow_count(to: int, ctx: nacelle.ToolContext) -> str:
    """Count slowly to a number; stops early when the run is cancelled.

    Args:
        to: Where to stop counting.
    """
    for i in range(to):
        ctx.check()  # raises Cancelled once the run is cancelled or times out
        time.sleep(0.01)
    return f"counted to {to}"


class Glossary:
    """A class-based tool: any object with name, description, schema and run()."""

    name = "glossary"
    description = "Look a term up in the team glossary."
    schema = {
        "type": "object",
        "properties": {"term": {"type": "string", "description": "The term."}},
        "required": ["term"],
        "additionalProperties": False,
    }
    read_only = True
    terms = {"nacelle": "the housing that holds an engine"}

    def run(self, input: Dict[str, Any], ctx: nacelle.ToolContext) -> str:
        meaning: Optional[str] = self.terms.get(input["term"].lower())
        if meaning is None:
            raise KeyError(f"no glossary entry for {input['term']!r}")  # a failed result
        return meaning


def main() -> None:
    print(forecast.schema)
    agent = nacelle.Agent(anthropic.Backend(), "Answer with the tools.",
                          tools=[forecast, slow_count, Glossary()], tool_timeout=30)
    result = agent.run([nacelle.user_text("What is a nacelle, and the forecast for Lisbon?")])
    print(result.text)
    print(result.usage)


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """A loopback Anthropic server playing this example's script, named to the backend
    through ``ANTHROPIC_BASE_URL`` as a proxy would be."""
    from nacelle.testing import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    with FakeServer() as server:
        server.queue("/v1/messages", *[Reply(chunks=c) for c in [
            anthropic_stream([], tool_calls=[
                ("toolu_1", "glossary", '{"term": "Nacelle"}'),
                ("toolu_2", "forecast", '{"city": "Lisbon", "days": 2, "unit": "fahrenheit"}'),
                ("toolu_3", "slow_count", '{"to": 3}')]),
            anthropic_stream(["An engine housing; warm in Lisbon."])]])
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
