"""Writing tools: a decorated function with typed, documented parameters, a tool that
uses its context to stop when cancelled, and a class-based tool.

    ANTHROPIC_API_KEY=... python examples/custom_tool.py
"""

import enum
import time
from typing import Any, Dict, List, Optional

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


if __name__ == "__main__":
    main()
