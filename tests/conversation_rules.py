"""What makes a conversation one every provider accepts, as plain assertions: a helper
for the compaction tests and the loop tests alike (import it, call it, read the
AssertionError)."""

from nacelle.messages import Reasoning, Role, ToolCall, ToolResult, _tool_ids


def check_conversation(messages):
    """Assert the rules nacelle promises of a conversation it sends:

    - it starts with a user message, and no two user messages follow each other;
    - every result answers a call made earlier (a ToolResult its ToolCall, a server
      tool's result block the block that opened it) — no orphan;
    - every finished call is answered, except the last assistant message's (pending);
    - ids are not answered twice.
    """
    messages = list(messages)
    assert messages, "an empty conversation"
    assert messages[0].role is Role.USER, f"starts with {messages[0].role!r}"
    for before, after in zip(messages, messages[1:]):
        assert not (before.role is Role.USER and after.role is Role.USER), \
            "two user messages in a row"
    last_assistant = max((i for i, m in enumerate(messages) if m.role is Role.ASSISTANT),
                         default=-1)
    opened, answered = set(), set()
    pending = set()
    for index, message in enumerate(messages):
        calls, results = _tool_ids(message)
        opened |= calls  # a server tool's use and result may share one message
        orphans = results - opened
        assert not orphans, f"message {index} answers calls never made: {sorted(orphans)}"
        twice = results & answered
        assert not twice, f"message {index} answers {sorted(twice)} again"
        answered |= results
        if index != last_assistant:
            pending |= {p.id for p in message.parts if isinstance(p, ToolCall) and p.finished}
    unanswered = pending - answered
    assert not unanswered, f"calls never answered: {sorted(unanswered)}"


def check_compacted(before, compacted, estimate):
    """Assert what every compaction keeps, given the conversation ``before``, the
    :class:`~nacelle.compaction.Compacted` made of it and the estimator it counts with:
    the result is valid, the last assistant message and everything after it are the same
    values, every kept assistant message is one of the originals (so its Reasoning is
    untouched), and ``tokens`` is the estimate saved."""
    after = compacted.messages
    check_conversation(after)
    last = max(i for i, m in enumerate(before) if m.role is Role.ASSISTANT)
    tail = tuple(before[last:])
    assert tuple(after[len(after) - len(tail):]) == tail, "the tail was rewritten"
    originals = {id(m) for m in before}
    for message in after:
        if message.role is Role.ASSISTANT:
            assert id(message) in originals, "an assistant message was rewritten"
        else:
            assert not any(isinstance(p, Reasoning) for p in message.parts)
    assert compacted.tokens == estimate(tuple(before)) - estimate(tuple(after))
    assert compacted.removed > 0


def results_of(messages):
    return [p for m in messages for p in m.parts if isinstance(p, ToolResult)]
