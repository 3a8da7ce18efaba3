"""Shared by the backend tests: what every wire promises about a local call's
arguments as they stream (TOOL_INPUT) and its TOOL_CALL given the moment its input is
whole, and the ways to feed a body to an accumulator — whole, one byte at a time, and
cut in two at every offset. Not a test module: imported by them."""

from nacelle.backends._stream import clean
from nacelle.events import Kind
from nacelle.messages import ToolCall
from nacelle.sse import SSEDecoder


def feeds(body):
    """The ways a body may arrive: whole, one byte per read, then cut in two at every
    offset (the cut falls inside every event, field and multi-byte character)."""
    yield [body]
    yield [body[i:i + 1] for i in range(len(body))]
    for cut in range(1, len(body)):
        yield [body[:cut], body[cut:]]


def replay(pieces, accumulator):
    """``pieces`` through the SSE decoder into ``accumulator``, every event and the
    TurnEnd cleaned as ``_turn.stream_turn`` yields them: (events, TurnEnd)."""
    decoder = SSEDecoder()
    events = []
    for piece in pieces:
        for sse in decoder.feed(piece):
            events += [clean(e) for e in accumulator.feed(sse)]
    for sse in decoder.close():
        events += [clean(e) for e in accumulator.feed(sse)]
    return events, clean(accumulator.finish())


def inputs(events):
    """The TOOL_INPUTs as (index, id, name, delta, input so far)."""
    return [(e.tool.index, e.tool.id, e.tool.name, e.text, e.tool.input)
            for e in events if e.kind is Kind.TOOL_INPUT]


def early_calls(events):
    """The local TOOL_CALLs a backend gave before its turn ended, as (id, index, name,
    input)."""
    return [(e.tool.id, e.tool.index, e.tool.name, e.tool.input) for e in events
            if e.kind is Kind.TOOL_CALL and not e.tool.server]


def check(events, end):
    """Assert what a consumer may rely on, whatever the stream: each TOOL_INPUT carries
    a delta and the input so far (the one before it plus the delta), comes before its
    call's TOOL_CALL, and carries the id and name that TOOL_CALL has (or none yet); each early
    TOOL_CALL is given once and is exactly the finished ToolCall the loop will give
    that index (id, name, input); a call that ended unfinished is never announced."""
    finished = [p for p in end.parts if isinstance(p, ToolCall) and p.finished]
    so_far, announced = {}, {}
    for event in events:
        tool = event.tool
        if event.kind is Kind.TOOL_INPUT:
            assert event.text and tool.server == "" and tool.result == ""
            assert tool.index not in announced, "a TOOL_INPUT after its TOOL_CALL"
            assert tool.input == so_far.get(tool.index, "") + event.text
            so_far[tool.index] = tool.input
        elif event.kind is Kind.TOOL_CALL and not tool.server:
            assert tool.index not in announced, "a call announced twice"
            announced[tool.index] = tool
            call = finished[tool.index]
            assert (tool.id, tool.name, tool.input) == (call.id, call.name, call.input)
    for event in events:  # an id or a name may come after the first deltas, never another
        if event.kind is Kind.TOOL_INPUT and event.tool.index in announced:
            called = announced[event.tool.index]
            assert event.tool.id in ("", called.id) and event.tool.name in ("", called.name)
    return announced
