"""Quick start: one agent, one tool, streamed to the terminal.

    ANTHROPIC_API_KEY=... python examples/quickstart.py
"""

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


if __name__ == "__main__":
    main()
