"""The provider's own context editing (compaction.context_edits) on the Anthropic wire,
and refused where a backend has none.

Shapes: the context editing page (``context_management.edits`` of
``clear_tool_uses_20250919`` with trigger / keep / clear_at_least / exclude_tools /
clear_tool_inputs, ``clear_thinking_20251015`` with keep; the response's
``context_management.applied_edits`` with cleared_tool_uses, cleared_thinking_turns
and cleared_input_tokens; https://platform.claude.com/docs/en/build-with-claude/
context-editing), the compaction page and the SDK's ``BetaCompact20260112Edit``,
``BetaCompactionBlock`` and ``BetaCompactionContentBlockDelta`` (content,
encrypted_content; https://platform.claude.com/docs/en/build-with-claude/compaction).
"""

import io

import pytest

import nacelle
from nacelle import Agent, ConfigError, Kind, Unsupported, user_text
from nacelle.backends import anthropic, chat, openai
from nacelle.compaction import (
    ClearThinking, ClearToolUses, Compact, Compaction, ContextEdits, clear_tool_results,
    context_edits,
)
from nacelle.console import Renderer
from nacelle.messages import ProviderBlock
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import sse_event

KEY = "sk-test-0123456789"


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def stream(blocks, management=None):
    out = [sse_event({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-opus-5", "usage": {"input_tokens": 900, "output_tokens": 1}}},
        "message_start")]
    for index, (start, deltas) in enumerate(blocks):
        out.append(sse_event({"type": "content_block_start", "index": index,
                              "content_block": start}, "content_block_start"))
        out += [sse_event({"type": "content_block_delta", "index": index, "delta": d},
                          "content_block_delta") for d in deltas]
        out.append(sse_event({"type": "content_block_stop", "index": index},
                             "content_block_stop"))
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 5}}
    if management is not None:
        delta["context_management"] = management
    out.append(sse_event(delta, "message_delta"))
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return out


def text(words):
    return ({"type": "text", "text": ""}, [{"type": "text_delta", "text": words}])


def test_each_edit_goes_out_as_context_management_with_its_beta_headers(server):
    server.queue("/v1/messages", Reply(chunks=stream([text("ok")])))
    edits = context_edits(
        ClearToolUses(trigger=30000, keep=2, clear_at_least=5000, exclude_tools=["memory"],
                      clear_inputs=True),
        ClearThinking(keep="all"), Compact(trigger=150000, instructions="Keep file paths."))
    Agent(anthropic.Backend(KEY, base_url=server.url), "s", compaction=edits).run(
        [user_text("hi")])
    sent = server.requests[0]
    assert sent.json()["context_management"] == {"edits": [
        {"type": "clear_thinking_20251015", "keep": "all"},  # first, as the API asks
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000},
         "keep": {"type": "tool_uses", "value": 2},
         "clear_at_least": {"type": "input_tokens", "value": 5000},
         "exclude_tools": ["memory"], "clear_tool_inputs": True},
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150000},
         "instructions": "Keep file paths."}]}
    assert sent.headers["anthropic-beta"].split(",") == ["context-management-2025-06-27",
                                                         "compact-2026-01-12"]


def test_the_defaults_send_the_bare_edit_types(server):
    server.queue("/v1/messages", Reply(chunks=stream([text("ok")])))
    agent = Agent(anthropic.Backend(KEY, base_url=server.url), "s",
                  compaction=context_edits(clear_thinking=ClearThinking(keep=2)))
    agent.run([user_text("hi")])
    sent = server.requests[0]
    assert sent.json()["context_management"]["edits"] == [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
        {"type": "clear_tool_uses_20250919"}]
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"


def test_what_the_provider_cleared_is_one_compaction_event_the_console_shows(server):
    applied = {"applied_edits": [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 8,
         "cleared_input_tokens": 50000},
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 3,
         "cleared_input_tokens": 12000}]}
    server.queue("/v1/messages", Reply(chunks=stream([text("done")], applied)))
    agent = Agent(anthropic.Backend(KEY, base_url=server.url), "s",
                  compaction=context_edits(clear_thinking=True))
    events = list(agent.stream([user_text("hi")]))
    edited = [e for e in events if e.kind is Kind.COMPACTION]
    assert len(edited) == 1
    done = edited[0].compaction
    assert (done.removed, done.tokens, done.messages) == (11, 62000, ())
    assert done.strategy == "context edits: cleared 8 tool uses, 3 thinking turns"
    assert events[-1].messages[-1].text == "done"  # the conversation kept is unchanged
    out = io.StringIO()
    Renderer(out=out, color=False).render(events)
    assert ("-- context edits: cleared 8 tool uses, 3 thinking turns: 62,000 input tokens "
            "saved") in out.getvalue()


def test_a_compaction_block_is_kept_whole_and_sent_back(server):
    block = ({"type": "compaction", "content": ""}, [
        {"type": "compaction_delta", "content": "The user asked for ", "encrypted_content": None},
        {"type": "compaction_delta", "content": "a summary.", "encrypted_content": "EqMB"}])
    server.queue("/v1/messages", Reply(chunks=stream([block, text("Go on.")])),
                 Reply(chunks=stream([text("ok")])))
    agent = Agent(anthropic.Backend(KEY, base_url=server.url), "s",
                  compaction=context_edits(clear_tool_uses=False, compact=True))
    result = agent.run([user_text("hi")])
    kept = result.messages[-1].parts[0]
    assert isinstance(kept, ProviderBlock)
    agent.run(list(result.messages) + [user_text("more")])
    replayed = server.requests[1].json()["messages"][1]["content"][0]
    assert replayed == {"type": "compaction", "content": "The user asked for a summary.",
                        "encrypted_content": "EqMB"}


def test_backends_without_context_editing_refuse_it_at_construction():
    for backend in (openai.Backend(api_key=KEY, model="gpt-5.5"),
                    chat.Backend(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)):
        with pytest.raises(Unsupported, match="clear_tool_uses"):
            Agent(backend, "s", compaction=context_edits())
        Agent(backend, "s", compaction=Compaction(1000, clear_tool_results()))


def test_clearing_thinking_is_refused_for_an_agent_that_does_not_think():
    backend = anthropic.Backend(KEY)
    with pytest.raises(ConfigError, match="thinking"):
        Agent(backend, "s", thinking=nacelle.Thinking(effort=nacelle.Effort.NONE),
              compaction=context_edits(clear_thinking=True))
    Agent(backend, "s", thinking=nacelle.Thinking(effort=nacelle.Effort.NONE),
          compaction=context_edits())


def test_context_edits_are_checked_and_keep_a_fallback_for_the_loop():
    for bad in (lambda: context_edits(False), lambda: context_edits("yes"),
                lambda: ClearToolUses(keep=0), lambda: ClearToolUses(exclude_tools="memory"),
                lambda: ClearThinking(keep="most"), lambda: Compact(instructions=3),
                lambda: context_edits(fallback=3)):
        with pytest.raises(ConfigError):
            bad()
    edits = context_edits()
    assert isinstance(edits, ContextEdits) and isinstance(edits, nacelle.Compaction)
    assert edits.strategy((), request=None, ctx=None, turn=None) is None
    backed = context_edits(fallback=Compaction(5000, clear_tool_results(keep_last=1)))
    assert backed.threshold == 5000 and backed.strategy == clear_tool_results(keep_last=1)
    assert repr(edits) == "context_edits(ClearToolUses(trigger=None, keep=None, " \
        "clear_at_least=None, exclude_tools=(), clear_inputs=False))"
