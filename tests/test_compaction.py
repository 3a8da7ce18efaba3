"""Compaction strategies over random conversations, the summary request they make, the
provider wordings of "the context is full", and the token estimate against recorded
counts."""

import json
import pickle
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nacelle
from nacelle.backend import CallProfile, Request, Thinking, TurnEnd
from nacelle.backends._http_errors import parse_error
from nacelle.compaction import (
    CLEARED, SUMMARY_PREFIX, Compacted, Compaction, clear_tool_results, drop_oldest,
    is_context_overflow, summarize, transcript,
)
from nacelle.context import RunContext
from nacelle.errors import APIError, ConfigError
from nacelle.events import Event, Kind, Usage
from nacelle.messages import (
    Document, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult, dumps, loads,
    user_text,
)
from nacelle.events import Stop
from nacelle.messages import assistant_text
from nacelle.testing import FakeServer, Reply, ScriptedBackend, Turn
from nacelle.testing.wire import anthropic_stream, openrouter_stream
from nacelle.token_estimate import IMAGE_TOKENS, estimate_tokens

from conversation_rules import check_compacted, check_conversation, results_of

DATA = Path(__file__).parent / "data" / "compaction"
REQUEST = Request(system="You are a coding agent.")
SUMMARY_USAGE = Usage(input_tokens=900, output_tokens=120)


def scripted_turn(text="The user wants X; we edited src/app.py; next: run the tests."):
    def turn(request, messages, ctx):
        yield Event(Kind.TEXT, text=text)
        yield TurnEnd((Text(text),), SUMMARY_USAGE)
    return turn


def never_called(request, messages, ctx):
    raise AssertionError("this strategy makes no model call")


def compact(strategy, messages, turn=never_called, request=REQUEST):
    return strategy(tuple(messages), request=request, ctx=RunContext(), turn=turn)


# -- random conversations ---------------------------------------------------------

words = st.text(alphabet="abcdefgh ijklmnop qrstuv wxyz.,é日", min_size=0, max_size=60)


@st.composite
def conversations(draw):
    """Rounds of a user message, zero to three tool rounds (one to three calls each,
    reasoning with signatures now and then), and an ending: an answer, a server tool
    used within one turn, or a paused server turn and its continuation. The last round
    may end on tool results or on pending calls instead."""
    ids = iter(range(10**6))
    messages = []

    def reasoning():
        if draw(st.booleans()):
            return (Reasoning(draw(words), state=f"sig-{next(ids)}", protocol="anthropic"),)
        return ()

    rounds = draw(st.integers(1, 5))
    for number in range(rounds):
        last = number == rounds - 1
        messages.append(user_text(draw(words) or "go on"))
        for _ in range(draw(st.integers(0, 3))):
            calls = tuple(ToolCall(f"call_{next(ids)}", "read", json.dumps({"path": draw(words)}))
                          for _ in range(draw(st.integers(1, 3))))
            text = (Text(draw(words)),) if draw(st.booleans()) else ()
            messages.append(Message(Role.ASSISTANT, reasoning() + text + calls))
            messages.append(Message(Role.USER, tuple(
                ToolResult(c.id, c.name, draw(words) * draw(st.integers(1, 30)),
                           failed=draw(st.booleans())) for c in calls)))
        ending = draw(st.sampled_from(
            ["answer", "server", "paused"] + (["results", "pending"] if last else [])))
        if ending == "results" and messages[-1].role is Role.USER and messages[-1].tool_results:
            continue
        if ending == "pending":
            calls = (ToolCall(f"call_{next(ids)}", "write", "{}"),)
            messages.append(Message(Role.ASSISTANT, reasoning() + calls))
            continue
        if ending in ("server", "paused"):
            server = f"srvtoolu_{next(ids)}"
            use = ProviderBlock("anthropic", json.dumps(
                {"type": "server_tool_use", "id": server, "name": "web_search", "input": {}}))
            found = ProviderBlock("anthropic", json.dumps(
                {"type": "web_search_tool_result", "tool_use_id": server, "content": []}))
            if ending == "server":
                messages.append(Message(Role.ASSISTANT, reasoning() + (use, found, Text("found it"))))
            else:
                messages.append(Message(Role.ASSISTANT, reasoning() + (use,)))
                messages.append(Message(Role.ASSISTANT, (found, Text("found it"))))
            continue
        messages.append(Message(Role.ASSISTANT, reasoning() + (Text(draw(words) or "done"),)))
    return tuple(messages)


STRATEGIES = {
    "clear_tool_results": lambda keep: clear_tool_results(keep_last=keep),
    "drop_oldest": lambda keep: drop_oldest(keep=max(1, keep)),
    "summarize": lambda keep: summarize(keep_last=keep),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(max_examples=120, deadline=None)
@given(messages=conversations(), keep=st.integers(0, 8))
def test_every_strategy_keeps_every_rule_on_random_conversations(name, messages, keep):
    check_conversation(messages)  # the generator's own promise
    saved = dumps(messages)
    compacted = compact(STRATEGIES[name](keep), messages, turn=scripted_turn())
    assert dumps(messages) == saved, "the conversation passed in was changed"
    if compacted is None:
        return
    assert compacted.strategy == name
    check_compacted(messages, compacted, estimate_tokens)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(messages=conversations(), keep=st.integers(0, 6))
def test_clear_tool_results_keeps_every_call_result_and_id(messages, keep):
    compacted = compact(clear_tool_results(keep_last=keep), messages)
    if compacted is None:
        return
    before, after = results_of(messages), results_of(compacted.messages)
    assert [(r.id, r.name, r.failed) for r in before] == [(r.id, r.name, r.failed) for r in after]
    changed = [i for i, (b, a) in enumerate(zip(before, after)) if b != a]
    assert all(after[i].result == CLEARED for i in changed)
    assert changed and max(changed) < len(before) - keep
    assert compacted.removed == sum(1 for b, a in zip(messages, compacted.messages) if b != a)
    assert [m.tool_calls for m in messages] == [m.tool_calls for m in compacted.messages]


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(messages=conversations(), keep=st.integers(1, 6))
def test_drop_oldest_keeps_the_first_message_and_says_how_many_it_left_out(messages, keep):
    compacted = compact(drop_oldest(keep=keep), messages)
    if compacted is None:
        return
    first = compacted.messages[0]
    assert first.parts[:-1] == messages[0].parts
    dropped = len(messages) - len(compacted.messages)
    assert first.parts[-1] == Text(f"[{dropped} earlier messages were left out to save context.]")
    assert compacted.removed == dropped + 1
    assert compacted.messages[1:] == messages[len(messages) - len(compacted.messages) + 1:]


def long_run():
    """A task, three tool rounds with signed reasoning, and the answer pending."""
    messages = [user_text("Fix the failing test in tests/test_app.py; do not touch setup.cfg.")]
    for n in range(3):
        messages.append(Message(Role.ASSISTANT, (
            Reasoning(f"thinking {n}", state=f"sig{n}", protocol="anthropic"),
            Text(f"Reading file {n}."), ToolCall(f"t{n}", "read", f'{{"path": "src/f{n}.py"}}'))))
        messages.append(Message(Role.USER, (ToolResult(f"t{n}", "read", "x = 1\n" * 400),)))
    return tuple(messages)


def screenshots_run():
    """Two rounds of a tool that answers with a screenshot alone, then an answer."""
    shot = Image("image/png", "A" * 40000)
    messages = [user_text("Check the page twice.")]
    for n in range(2):
        messages.append(Message(Role.ASSISTANT, (ToolCall(f"s{n}", "screenshot", "{}"),)))
        messages.append(Message(Role.USER, (ToolResult(f"s{n}", "screenshot", "", content=(shot,)),)))
    messages.append(Message(Role.ASSISTANT, (Text("Looked."),)))
    return tuple(messages)


def test_clear_tool_results_clears_an_old_screenshot_that_has_no_text():
    messages = screenshots_run()
    compacted = compact(clear_tool_results(keep_last=1), messages)
    assert compacted is not None
    cleared, kept = results_of(compacted.messages)
    assert (cleared.result, cleared.content) == (CLEARED, ())
    assert kept == messages[4].parts[0]
    assert estimate_tokens(compacted.messages) < estimate_tokens(messages) - IMAGE_TOKENS // 2


def test_the_transcript_names_a_tools_images_and_documents_and_a_users_document():
    messages = (
        Message(Role.USER, (Document("application/pdf", "JVBERi0=", "q3.pdf"),)),
        Message(Role.ASSISTANT, (ToolCall("a", "shot", "{}"),)),
        Message(Role.USER, (ToolResult("a", "shot", "the page", content=(
            Text("the page"), Image("image/png", "iVBORw0KGgo="),
            Document("text/plain", "aGk="))),)))
    text = transcript(messages)
    assert "[document application/pdf q3.pdf]" in text
    assert "[tool result shot a] the page\n[image image/png]\n[document text/plain]" in text
    assert "JVBERi0" not in text and "iVBOR" not in text


def test_the_estimate_counts_a_tools_images_and_documents_and_a_users_documents():
    from nacelle.token_estimate import PDF_PAGE_BYTES, PDF_PAGE_TOKENS

    bare = Message(Role.USER, (ToolResult("a", "shot", "x"),))
    shot = Message(Role.USER, (ToolResult("a", "shot", "x", content=(
        Text("x"), Image("image/png", "A" * 1000))),))
    assert estimate_tokens((shot,)) - estimate_tokens((bare,)) == IMAGE_TOKENS
    pdf = Document("application/pdf", "A" * (4 * PDF_PAGE_BYTES))  # three pages' bytes
    empty = estimate_tokens((Message(Role.USER, ()),))
    assert estimate_tokens((Message(Role.USER, (pdf,)),)) - empty == 3 * PDF_PAGE_TOKENS
    text = Document("text/plain", "A" * 4000)  # 3,000 bytes of text
    assert estimate_tokens((Message(Role.USER, (text,)),)) - empty == 750


def test_the_last_assistant_turn_keeps_its_reasoning_and_results_even_with_nothing_to_keep():
    messages = long_run()
    for strategy in (summarize(keep_last=0), drop_oldest(keep=1), clear_tool_results(keep_last=0)):
        compacted = compact(strategy, messages, turn=scripted_turn())
        check_compacted(messages, compacted, estimate_tokens)
        assert compacted.messages[-2] is messages[-2]
        assert compacted.messages[-2].parts[0] == Reasoning("thinking 2", "sig2", "anthropic")
        assert compacted.messages[-1] is messages[-1]


# -- summarize --------------------------------------------------------------------

def test_summarize_asks_one_bounded_toolless_compaction_request_and_returns_its_usage():
    backend = ScriptedBackend([Turn(Message(Role.ASSISTANT, (Text("  Task: fix test.  "),)),
                                    usage=SUMMARY_USAGE)])
    request = Request(system="You are a coding agent.", tools=(object(),),
                      thinking=Thinking(budget=4000), max_tokens=32000)
    messages = long_run()
    compacted = compact(summarize(keep_last=2), messages, turn=backend.turn, request=request)

    (sent,) = backend.requests
    assert sent.profile is CallProfile.COMPACTION
    assert sent.tools == () and sent.mcp == () and sent.output is None
    assert sent.thinking == Thinking()
    assert sent.max_tokens == 2048
    prompt = sent.system.lower()
    for topic in ("decisions", "file paths", "open tasks", "constraint"):
        assert topic in prompt, topic
    assert sent.system != request.system
    (ask,) = sent.messages
    assert ask.role is Role.USER and all(isinstance(p, Text) for p in ask.parts)
    assert "Fix the failing test" in ask.text and "thinking 0" not in ask.text
    assert compacted.summary == "Task: fix test."
    assert compacted.usage == SUMMARY_USAGE
    assert compacted.messages[0] == user_text(SUMMARY_PREFIX + "Task: fix test.")
    assert compacted.messages[1:] == messages[-2:]
    assert compacted.removed == len(messages) - 2
    check_compacted(messages, compacted, estimate_tokens)


def test_summarize_uses_the_given_backend_rather_than_the_runs_turn():
    cheap = ScriptedBackend(["short summary"])
    compacted = compact(summarize(backend=cheap), long_run(), turn=never_called)
    assert compacted.summary == "short summary"
    assert cheap.requests[0].profile is CallProfile.COMPACTION


def test_summarize_asks_one_turn_of_a_users_backend_that_has_only_a_turn():
    scripted = ScriptedBackend([Turn(Message(Role.ASSISTANT, (Text("from a turn"),)),
                                     usage=SUMMARY_USAGE)])
    turn_only = SimpleNamespace(name="mine", capabilities=scripted.capabilities,
                                turn=scripted.turn)
    compacted = compact(summarize(backend=turn_only), long_run(), turn=never_called)
    assert compacted.summary == "from a turn"
    assert compacted.usage.input_tokens == SUMMARY_USAGE.input_tokens


def test_a_summary_backend_without_a_turn_is_refused_when_the_strategy_is_made():
    with pytest.raises(ConfigError, match="turn"):
        summarize(backend=SimpleNamespace(stream=lambda request, ctx: iter(())))


def test_an_empty_summary_compacts_nothing():
    assert compact(summarize(), long_run(), turn=scripted_turn("   ")) is None


def test_the_transcript_cuts_long_results_and_leaves_reasoning_and_images_as_words():
    messages = (Message(Role.USER, (Text("look"), Image("image/png", "AAAA"))),
                Message(Role.ASSISTANT, (Reasoning("secret", "sig"), ToolCall("a", "read", "{}"))),
                Message(Role.USER, (ToolResult("a", "read", "y" * 100000, failed=True),)))
    text = transcript(messages)
    assert "secret" not in text and "AAAA" not in text and "[image image/png]" in text
    assert "[tool result read a failed]" in text and len(text) < 5000


# -- nothing to do, configuration -------------------------------------------------

@pytest.mark.parametrize("strategy", [summarize(), drop_oldest(), clear_tool_results()],
                         ids=["summarize", "drop_oldest", "clear_tool_results"])
def test_a_conversation_with_nothing_to_remove_is_left_alone(strategy):
    assert compact(strategy, (user_text("hi"),), turn=scripted_turn()) is None
    short = (user_text("hi"), Message(Role.ASSISTANT, (Text("hello"),)), user_text("and?"))
    assert compact(strategy, short, turn=scripted_turn()) is None or strategy == summarize()


def test_compaction_validates_its_threshold_and_defaults_to_clearing_tool_results():
    assert Compaction(100000).strategy == clear_tool_results()
    assert nacelle.Compaction is Compaction
    for bad in (0, -1, True, 1.5, "100"):
        with pytest.raises(ConfigError):
            Compaction(bad)
    with pytest.raises(ConfigError):
        Compaction(10, strategy="summarize")
    for bad in (-1, 1.0, None):
        with pytest.raises(ConfigError):
            clear_tool_results(keep_last=bad)
    with pytest.raises(ConfigError):
        drop_oldest(keep=0)
    with pytest.raises(ConfigError):
        summarize(max_tokens=0)


def test_strategies_and_their_results_pickle():
    for value in (summarize(keep_last=3), drop_oldest(keep=4), clear_tool_results(),
                  Compaction(5000, summarize(backend=ScriptedBackend(["s"])))):
        assert type(pickle.loads(pickle.dumps(value))) is type(value)
    compacted = compact(clear_tool_results(keep_last=0), long_run())
    assert pickle.loads(pickle.dumps(compacted)) == compacted
    assert "removed=" in repr(compacted) and "x = 1" not in repr(compacted)


# -- is_context_overflow -----------------------------------------------------------

OVERFLOWS = {
    "anthropic": (400, {"type": "error", "error": {"type": "invalid_request_error",
                  "message": "prompt is too long: 200251 tokens > 200000 maximum"},
                  "request_id": "req_011CWdepJvA2D819tdYYq4h7"}),
    "anthropic_413": (413, {"type": "error", "error": {"type": "request_too_large",
                      "message": "Request exceeds the maximum allowed number of bytes."}}),
    "openai_chat": (400, {"error": {"message": "This model's maximum context length is 8192 "
                    "tokens. However, your messages resulted in 8227 tokens. Please reduce the "
                    "length of the messages.", "type": "invalid_request_error",
                    "param": "messages", "code": "context_length_exceeded"}}),
    "openai_responses": (400, {"error": {"message": "Your input exceeds the context window of "
                         "this model. Please adjust your input and try again.",
                         "type": "invalid_request_error", "param": "input",
                         "code": "context_length_exceeded"}}),
    "openrouter": (400, {"error": {"message": "This endpoint's maximum context length is 131072 "
                   "tokens. However, you requested about 138956 tokens (7884 of text input, "
                   "131072 in the output). Please reduce the length of either one, or use the "
                   "\"middle-out\" transform to compress your prompt automatically.",
                   "code": 400, "metadata": {"provider_name": None}}}),
    "llamacpp": (400, {"error": {"code": 400, "message": "the request exceeds the available "
                 "context size. try increasing the context size or enable context shift",
                 "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}}),
    "llamacpp_500": (500, {"error": {"code": 500, "message": "Context size has been exceeded.",
                     "type": "server_error"}}),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is 16384 "
             "tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in "
             "the completion). Please reduce the length of the messages or completion.",
             "type": "BadRequestError", "param": None, "code": 400}),
    "gemini": (400, {"error": {"code": 400, "message": "The input token count (1200293) exceeds "
               "the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}),
}

NOT_OVERFLOWS = {
    "anthropic_max_tokens": (400, {"type": "error", "error": {"type": "invalid_request_error",
                             "message": "max_tokens: 64001 > 64000, which is the maximum allowed "
                             "number of output tokens for claude-sonnet-4-5"}}),
    "openai_max_tokens": (400, {"error": {"message": "max_tokens is too large: 100000. This "
                          "model supports at most 16384 completion tokens, whereas you provided "
                          "100000.", "type": "invalid_request_error", "code": None}}),
    "rate_limit": (429, {"type": "error", "error": {"type": "rate_limit_error",
                   "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
    "overloaded": (529, {"type": "error", "error": {"type": "overloaded_error",
                   "message": "Overloaded"}}),
    "server_error": (500, {"error": {"message": "Internal server error", "type": "server_error"}}),
}


def error_of(status, body):
    return parse_error(status, {}, json.dumps(body).encode())


@pytest.mark.parametrize("name", sorted(OVERFLOWS))
def test_a_full_context_is_recognised_in_each_providers_words(name):
    error = error_of(*OVERFLOWS[name])
    assert is_context_overflow(error)
    wrapped = RuntimeError("turn failed")
    wrapped.__cause__ = error
    assert is_context_overflow(wrapped)


@pytest.mark.parametrize("name", sorted(NOT_OVERFLOWS))
def test_other_refusals_are_not_taken_for_a_full_context(name):
    assert not is_context_overflow(error_of(*NOT_OVERFLOWS[name]))


def test_only_an_api_error_can_be_a_full_context():
    assert not is_context_overflow(ValueError("prompt is too long"))
    assert not is_context_overflow(APIError(404, "not_found_error", "prompt is too long"))


# -- estimate_tokens ---------------------------------------------------------------

def recorded_counts():
    return json.loads((DATA / "anthropic_counts.json").read_text(encoding="utf-8"))["cases"]


def estimate_of(case):
    tools = [SimpleNamespace(**tool) for tool in case["tools"]]
    return estimate_tokens(loads(json.dumps(case["messages"])), case["system"], tools)


@pytest.mark.parametrize("case", recorded_counts(), ids=lambda case: case["name"])
def test_the_estimate_is_within_its_stated_error_of_each_recorded_count(case):
    estimate, count = estimate_of(case), case["count"]
    if count < 100:
        assert abs(estimate - count) <= 5
    elif case["name"].startswith("forced_tool"):
        assert abs(estimate - count) <= 0.35 * count
    else:
        assert abs(estimate - count) <= 0.25 * count


def test_the_estimates_median_error_is_under_ten_percent():
    errors = [abs(estimate_of(c) - c["count"]) / c["count"] for c in recorded_counts()]
    assert statistics.median(errors) < 0.10


def test_the_estimate_charges_images_a_fixed_cost_and_counts_non_ascii_by_bytes():
    image = Message(Role.USER, (Image("image/png", "A" * 10**6),))
    assert estimate_tokens((image,)) - estimate_tokens((Message(Role.USER, ()),)) == IMAGE_TOKENS
    assert estimate_tokens((user_text("日" * 400),)) > 2 * estimate_tokens((user_text("a" * 400),))


def test_the_estimate_counts_reasoning_only_in_the_current_tool_cycle_and_never_signatures():
    thought = Reasoning("t" * 4000, state="s" * 4000, protocol="anthropic")
    call = ToolCall("c", "read", "{}")
    turn = [user_text("task"), Message(Role.ASSISTANT, (thought, call)),
            Message(Role.USER, (ToolResult("c", "read", "ok"),))]
    bare = [turn[0], Message(Role.ASSISTANT, (call,)), turn[2]]
    assert estimate_tokens(turn) - estimate_tokens(bare) == 1000
    later = turn + [Message(Role.ASSISTANT, (Text("done"),)), user_text("next")]
    assert estimate_tokens(later) == estimate_tokens(bare + later[3:])
    assert nacelle.estimate_tokens is estimate_tokens


def test_the_estimate_counts_tools_through_their_json():
    tool = SimpleNamespace(name="read", description="Read a file.",
                           schema={"type": "object", "properties": {"path": {"type": "string"}}})
    assert estimate_tokens((), tools=[tool]) > estimate_tokens(()) + 346
    assert isinstance(Compacted((), 1, 0).usage, Usage)


# -- in the loop ------------------------------------------------------------------

@nacelle.tool(read_only=True)
def read(path: str) -> str:
    """Read a file."""
    return "x = 1\n" * 400


def answered_run():
    """long_run() with its last call answered and a new question: a conversation that
    can be sent as it is."""
    messages = list(long_run())
    return tuple(messages[:-1]) + (
        Message(Role.USER, (ToolResult("t2", "read", "x = 1\n" * 400),
                            Text("Now make the change."))),)


def test_a_turn_whose_input_passed_the_threshold_compacts_before_the_next_request():
    backend = ScriptedBackend([
        Turn(Message(Role.ASSISTANT, (ToolCall("t9", "read", '{"path": "src/g.py"}'),)),
             usage=Usage(input_tokens=800, cache_read_tokens=300)),
        "Done.",
    ])
    agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read],
                          compaction=Compaction(1000, clear_tool_results(keep_last=1)))
    events = list(agent.stream(answered_run()))
    kinds = [e.kind for e in events]
    at = kinds.index(Kind.COMPACTION)
    assert kinds[at - 1] is Kind.TOOL_RESULT and kinds[at + 1:] == [Kind.TEXT, Kind.TURN, Kind.DONE]
    compacted = events[at].compaction
    assert compacted.strategy == "clear_tool_results" and compacted.removed == 3
    first, second = backend.requests
    check_conversation(second.messages)
    assert [r.result for r in results_of(second.messages)] == [CLEARED] * 3 + ["x = 1\n" * 400]
    assert estimate_tokens(second.messages) < estimate_tokens(first.messages)
    assert events[-1].stop is Stop.END
    assert events[-1].messages[:len(second.messages)] == second.messages


def test_a_summary_is_counted_in_the_runs_usage_and_shown_as_the_compaction_text():
    summary_usage = Usage(input_tokens=700, output_tokens=90)
    backend = ScriptedBackend([
        Turn(Message(Role.ASSISTANT, (ToolCall("t9", "read", '{"path": "src/g.py"}'),)),
             usage=Usage(input_tokens=5000, output_tokens=10)),
        Turn(assistant_text("We are fixing tests/test_app.py; setup.cfg is off limits."),
             usage=summary_usage),
        Turn(assistant_text("Done."), usage=Usage(input_tokens=400, output_tokens=5)),
    ])
    agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read],
                          compaction=Compaction(1000, summarize(keep_last=2)))
    events = list(agent.stream(answered_run()))
    [shown] = [e for e in events if e.kind is Kind.COMPACTION]
    assert shown.text == "We are fixing tests/test_app.py; setup.cfg is off limits."
    assert shown.usage == summary_usage
    _, summary_request, last = backend.requests
    assert summary_request.profile is CallProfile.COMPACTION and summary_request.tools == ()
    assert last.messages[0].parts[0].text.startswith(SUMMARY_PREFIX)
    check_conversation(last.messages)
    total = events[-1].usage
    assert (total.input_tokens, total.output_tokens) == (6100, 105)


def test_without_compaction_a_long_run_is_never_rewritten():
    backend = ScriptedBackend([
        Turn(Message(Role.ASSISTANT, (ToolCall("t9", "read", '{"path": "src/g.py"}'),)),
             usage=Usage(input_tokens=10 ** 6)),
        "Done.",
    ])
    agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read])
    events = list(agent.stream(answered_run()))
    assert Kind.COMPACTION not in [e.kind for e in events]
    assert backend.requests[1].messages[:len(answered_run())] == answered_run()


def test_a_turn_cut_by_a_full_context_is_asked_again_of_the_compacted_conversation():
    cut = Usage(input_tokens=190000, output_tokens=3)
    backend = ScriptedBackend([
        Turn(assistant_text("I will"), stop=Stop.CONTEXT, usage=cut),
        Turn(assistant_text("Done."), usage=Usage(input_tokens=900, output_tokens=2)),
    ])
    agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read],
                          compaction=Compaction(10 ** 6, clear_tool_results(keep_last=0)))
    result = agent.run(answered_run())
    assert result.stop is Stop.END and result.text == "Done."
    retried = backend.requests[1]
    assert results_of(retried.messages)[0].result == CLEARED
    check_conversation(retried.messages)
    # The cut turn is not in the conversation, but it was billed.
    assert not any(m.text == "I will" for m in result.messages)
    assert result.usage.input_tokens == 190900


def test_a_context_that_cannot_be_compacted_further_ends_the_run_as_the_provider_said():
    backend = ScriptedBackend([Turn(assistant_text("I"), stop=Stop.CONTEXT)])
    agent = nacelle.Agent(backend, "sys", compaction=Compaction(1000))
    assert agent.run([user_text("hi")]).stop is Stop.CONTEXT


def test_compaction_must_be_a_compaction():
    with pytest.raises(ConfigError, match="compaction must be a nacelle.Compaction"):
        nacelle.Agent(ScriptedBackend([]), "sys", compaction=1000)


def overflowing_backend(kind, server):
    if kind == "anthropic":
        from nacelle.backends import anthropic

        return (anthropic.Backend(api_key="sk-ant-test", base_url=server.url, max_retries=0),
                "/v1/messages", OVERFLOWS["anthropic"],
                anthropic_stream(["Done."]))
    from nacelle.backends import openrouter

    return (openrouter.Backend(api_key="sk-or-test", model="openai/gpt-5", base_url=server.url,
                               max_retries=0),
            "/chat/completions", OVERFLOWS["openrouter"], openrouter_stream(["Done."]))


@pytest.mark.parametrize("kind", ["anthropic", "openrouter"])
def test_a_context_length_400_is_compacted_and_the_turn_sent_once_more_smaller(kind):
    with FakeServer() as server:
        backend, path, (status, body), stream = overflowing_backend(kind, server)
        server.queue(path, Reply.json(body, status=status), Reply(chunks=stream))
        agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read],
                              compaction=Compaction(10 ** 6, clear_tool_results(keep_last=1)))
        events = list(agent.stream(answered_run()))
        server.assert_consumed()
    refused, retried = server.requests
    assert len(retried.body) < len(refused.body) / 2
    assert "x = 1" in refused.body.decode() and retried.body.decode().count("x = 1") == 400
    assert CLEARED in retried.body.decode()
    compaction = next(e for e in events if e.kind is Kind.COMPACTION)
    assert compaction.compaction.removed == 2
    assert events[-1].stop is Stop.END
    check_conversation(events[-1].messages)


@pytest.mark.parametrize("kind", ["anthropic", "openrouter"])
def test_a_context_length_400_without_compaction_fails_the_run(kind):
    with FakeServer() as server:
        backend, path, (status, body), _ = overflowing_backend(kind, server)
        server.queue(path, Reply.json(body, status=status))
        agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read])
        with pytest.raises(APIError) as raised:
            agent.run(answered_run())
    assert raised.value.status == 400 and is_context_overflow(raised.value)


def test_a_second_full_context_after_compacting_fails_the_run():
    with FakeServer() as server:
        backend, path, (status, body), _ = overflowing_backend("anthropic", server)
        server.queue(path, Reply.json(body, status=status), Reply.json(body, status=status))
        agent = nacelle.Agent(backend, "You are a coding agent.", tools=[read],
                              compaction=Compaction(10 ** 6, clear_tool_results(keep_last=1)))
        with pytest.raises(APIError):
            agent.run(answered_run())
        server.assert_consumed()
