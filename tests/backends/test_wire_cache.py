"""encode_body and the WireCache: every turn's bytes are exactly ``json.dumps`` of
``to_wire`` on every wire (breakpoints moving, merged roles, unfinished calls,
images, reasoning replay, random conversations), a turn encodes only what is new,
runs on threads share one cache safely, and what a conversation left goes with it."""

import gc
import json
import pickle
import threading
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nacelle import (
    ConfigError, Document, Finish, Image, Message, ProviderBlock, Reasoning, Request, Role, Stop, Text,
    ToolCall, ToolResult, assistant_text, user_text,
)
from nacelle.backend import RunContext
from nacelle.backends import anthropic, chat, openrouter
from nacelle.backends.anthropic import wire as anthropic_wire
from nacelle.backends.chat import wire as chat_wire
from nacelle.backends.gemini import wire as gemini_wire
from nacelle.backends.openai import wire as responses_wire
from nacelle.backends._http import Transport
from nacelle.backends._wire_cache import RUNS_PER_REQUEST, WireCache, split_frame
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

DETAILS = json.dumps([{"type": "reasoning.text", "text": "Think.", "index": 0,
                       "format": "anthropic-claude-v1", "signature": "sig=="}])
PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/"
         "PchI7wAAAABJRU5ErkJggg==")


class FakeTool:
    def __init__(self, name, description="Look something up."):
        self.name = name
        self.description = description
        self.schema = {"type": "object", "properties": {"q": {"type": "string"}},
                       "required": ["q"]}


def reference(wire, request, messages):
    return json.dumps(wire.to_wire(request, messages), ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


class Wire:
    """One wire as a backend drives it: the reference dict and encode_body."""

    def __init__(self, name, to_wire, encode):
        self.name = name
        self.to_wire = to_wire
        self.encode = encode

    def __repr__(self):
        return self.name


PROVIDER = {"order": ["anthropic"], "allow_fallbacks": False}
WIRES = [
    Wire("anthropic", lambda r, m: anthropic_wire.to_wire(r, m, model="claude-opus-5"),
         lambda r, m, c: anthropic_wire.encode_body(r, m, model="claude-opus-5", cache=c)),
    Wire("openrouter-anthropic",
         lambda r, m: openrouter.to_wire(r, m, model="anthropic/claude-sonnet-4.5",
                                         provider=PROVIDER),
         lambda r, m, c: chat_wire.encode_body(r, m, model="anthropic/claude-sonnet-4.5",
                                               dialect=openrouter.DIALECT,
                                               extra={"provider": PROVIDER}, cache=c)),
    Wire("openrouter-openai",
         lambda r, m: openrouter.to_wire(r, m, model="openai/gpt-5"),
         lambda r, m, c: chat_wire.encode_body(r, m, model="openai/gpt-5",
                                               dialect=openrouter.DIALECT, cache=c)),
    Wire("chat-openai",
         lambda r, m: chat_wire.to_wire(r, m, model="gpt-5-mini", dialect=chat.OPENAI),
         lambda r, m, c: chat_wire.encode_body(r, m, model="gpt-5-mini", dialect=chat.OPENAI,
                                               cache=c)),
    Wire("responses",
         lambda r, m: responses_wire.to_wire(r, m, model="gpt-5-mini"),
         lambda r, m, c: responses_wire.encode_body(r, m, model="gpt-5-mini", cache=c)),
    Wire("gemini-3",
         lambda r, m: gemini_wire.to_wire(r, m, model="gemini-3-pro-preview"),
         lambda r, m, c: gemini_wire.encode_body(r, m, model="gemini-3-pro-preview", cache=c)),
    Wire("gemini-2",
         lambda r, m: gemini_wire.to_wire(r, m, model="gemini-2.5-flash"),
         lambda r, m, c: gemini_wire.encode_body(r, m, model="gemini-2.5-flash", cache=c)),
    Wire("chat-deepseek",
         lambda r, m: chat_wire.to_wire(r, m, model="deepseek-chat", dialect=chat.DEEPSEEK),
         lambda r, m, c: chat_wire.encode_body(r, m, model="deepseek-chat",
                                               dialect=chat.DEEPSEEK, cache=c)),
]


def check(wire, request, messages, cache):
    """encode_body agrees with the reference: the same bytes, or the same error."""
    try:
        expected = reference(wire, request, messages)
    except ConfigError as refused:
        with pytest.raises(ConfigError) as caught:
            wire.encode(request, messages, cache)
        assert str(caught.value) == str(refused)
        return
    assert wire.encode(request, messages, cache) == expected


def reasoning():
    return (Reasoning("Think.", "EvsCsig==", "anthropic"),
            Reasoning("Think.", DETAILS, "openrouter"),
            Reasoning("Think.", "", "chat"))


def tool_turn(n, calls=2, text="Let me look."):
    return Message(Role.ASSISTANT, reasoning() + (Text(text),) + tuple(
        ToolCall(f"call_{n}_{i}", "lookup", json.dumps({"q": f"item {n}.{i}"}))
        for i in range(calls)) + (Finish(Stop.TOOLS),))


def results(n, calls=2):
    return Message(Role.USER, tuple(
        ToolResult(f"call_{n}_{i}", "lookup", f"result {n}.{i} — ünïcode", failed=i == 1)
        for i in range(calls)))


def request(system="Be brief.", tools=("lookup", "clock")):
    return Request(system, tools=tuple(FakeTool(name) for name in tools))


def turns(wire, request, steps, cache):
    """Grow one conversation step by step, checking every turn's body."""
    conversation = ()
    for step in steps:
        conversation = conversation + tuple(step)
        check(wire, request, conversation, cache)
    return conversation


# -- every turn's bytes ---------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_a_tool_loop_run_sends_the_reference_bytes_every_turn(wire):
    steps = [[user_text("What is in the catalogue?")]]
    steps += [[tool_turn(n), results(n)] for n in range(12)]
    steps.append([Message(Role.ASSISTANT, (Text("Done."), Finish(Stop.END)))])
    turns(wire, request(), steps, WireCache())


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_merged_roles_images_empty_and_unfinished_parts_match_every_turn(wire):
    steps = [
        [user_text("Look at this."), Message(Role.USER, (Image("image/png", PIXEL),
                                                         Text("and this")))],
        [tool_turn(0, 1), Message(Role.ASSISTANT, (Text(""), Finish(Stop.OTHER)))],
        [Message(Role.ASSISTANT, (Text("Resumed."),)), results(0, 1)],
        [Message(Role.ASSISTANT, (Finish(Stop.END),))],  # holds nothing to send
        [user_text("")],
        [Message(Role.ASSISTANT, (Text("cut"), ToolCall("cut_1", "lookup", '{"q": "x'),
                                  ToolCall("cut_2", "lookup", "   ", finished=False),
                                  Finish(Stop.MAX_TOKENS)))],
        # A result naming the unfinished call: dropped on the chat wires.
        [Message(Role.USER, (ToolResult("cut_2", "lookup", "late"), Text("go on")))],
        [tool_turn(1), results(1)],
        [Message(Role.USER, (ToolResult("call_1_0", "lookup", "again"),))],
        [Message(Role.ASSISTANT, (ToolCall("later", "lookup", "{}", finished=False),))],
        [results(2)],
    ]
    turns(wire, request(), steps, WireCache())


def media_results(n, calls=2):
    """Results carrying media: a screenshot, a PDF, a plain-text document."""
    return Message(Role.USER, tuple(
        ToolResult(f"call_{n}_{i}", "lookup", f"shot {n}.{i}", failed=i == 1, content=(
            Text(f"shot {n}.{i}"), Image("image/png", PIXEL),
            Document("application/pdf", "JVBERi0xLjQK", title=f"page {n}"),
            Document("text/plain", "bm90ZXM=")))
        for i in range(calls)) + (Text("What do you see?"),))


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_a_tools_media_are_part_of_every_turns_bytes(wire):
    steps = [[user_text("Look.")]]
    steps += [[tool_turn(n), media_results(n)] for n in range(4)]
    steps.append([Message(Role.ASSISTANT, (Text("Done."), Finish(Stop.END)))])
    cache = WireCache()
    conversation = turns(wire, request(), steps, cache)
    # The same ids and text with other media make other bytes, never the cached ones.
    changed = conversation[:-2] + (Message(Role.USER, tuple(
        ToolResult(f"call_3_{i}", "lookup", f"shot 3.{i}", failed=i == 1,
                   content=(Text(f"shot 3.{i}"), Image("image/gif", "R0lGODlh")))
        for i in range(2)) + (Text("What do you see?"),)),)
    check(wire, request(), changed, cache)
    assert b"image/gif" in bytes(wire.encode(request(), changed, cache))


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_an_unfinished_call_added_later_takes_back_a_result_sent_earlier(wire):
    cache = WireCache()
    r = request()
    early = [user_text("q"), Message(Role.USER, (ToolResult("ghost", "lookup", "boo"),))]
    steps = [early] + [[tool_turn(n), results(n)] for n in range(3)]
    steps.append([Message(Role.ASSISTANT, (ToolCall("ghost", "lookup", "{", finished=False),
                                           Text("oops")))])
    steps.append([results(9)])
    turns(wire, r, steps, cache)


def test_anthropic_server_tool_blocks_and_redacted_thinking_replay_byte_for_byte():
    wire = WIRES[0]
    use = json.dumps({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                      "input": {"query": "nacelle"}})
    found = json.dumps({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                        "content": []})
    text_block = json.dumps({"type": "text", "text": "cached?", "cache_control": {"type": "x"}})
    redacted = json.dumps({"type": "redacted_thinking", "data": "EmwKAhgB"})
    steps = [[user_text("search")],
             [Message(Role.ASSISTANT, (Reasoning("", redacted, "anthropic"),
                                       ProviderBlock("anthropic", use),
                                       Finish(Stop.OTHER)))],
             [Message(Role.ASSISTANT, (ProviderBlock("anthropic", found),
                                       ProviderBlock("anthropic", text_block),
                                       ProviderBlock("openrouter", "{}")))],
             [user_text("thanks")],
             [Message(Role.ASSISTANT, (Reasoning("only thinking", "sig", "anthropic"),))],
             [user_text("more")]]
    turns(wire, request(), steps, WireCache())


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_a_conversation_that_cannot_be_sent_raises_the_reference_error(wire):
    bad = (Message(Role.ASSISTANT, (ToolResult("x", "y", "z"),)) if wire.name != "anthropic"
           else Message(Role.ASSISTANT, (ProviderBlock("anthropic", "not json"),)))
    cache = WireCache()
    conversation = turns(wire, request(), [[user_text("a"), tool_turn(0)], [results(0)]], cache)
    check(wire, request(), conversation + (bad,), cache)
    check(wire, request(), conversation + (bad, user_text("b")), cache)


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_no_system_prompt_and_no_tools_still_match(wire):
    turns(wire, Request(""), [[user_text("one")], [assistant_text("two")],
                              [user_text("three")]], WireCache())


def test_a_body_frame_splits_around_its_messages():
    head, items, tail = split_frame({"model": "m", "messages": [{"a": 1}], "stream": True})
    assert (head, items, tail) == (b'{"model":"m","messages":[', [b'{"a":1}'],
                                   b'],"stream":true}')
    assert split_frame({"messages": []}) == (b'{"messages":[', [], b"]}")


# -- random conversations ---------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "toolu_1"])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
USER_PART = st.one_of(
    TEXT.map(Text),
    st.just(Image("image/png", PIXEL)),
    st.builds(ToolResult, IDS, st.just("lookup"), TEXT, st.booleans()),
)
ASSISTANT_PART = st.one_of(
    TEXT.map(Text),
    st.builds(ToolCall, IDS, st.just("lookup"),
              st.sampled_from(['{"q":"x"}', "", " ", "{", '{"b":[1,2],"a":null}', "[1]"]),
              st.booleans()),
    st.sampled_from(reasoning()),
    st.just(Finish(Stop.TOOLS)),
    st.just(ProviderBlock("anthropic", '{"type":"server_tool_use","id":"s","name":"w",'
                                       '"input":{}}')),
    st.just(ProviderBlock("chat", '{"call":"a","extra_content":{"google":{"sig":"x"}}}')),
)
MESSAGE = st.one_of(
    st.lists(USER_PART, max_size=3).map(lambda parts: Message(Role.USER, tuple(parts))),
    st.lists(ASSISTANT_PART, max_size=4).map(
        lambda parts: Message(Role.ASSISTANT, tuple(parts))),
)
STEPS = st.lists(st.lists(MESSAGE, min_size=1, max_size=3), min_size=1, max_size=10)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, fork_at=st.integers(0, 30), fork=st.lists(MESSAGE, min_size=1, max_size=3))
@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_random_conversations_and_their_forks_send_the_reference_bytes(wire, steps, fork_at,
                                                                      fork):
    cache = WireCache()
    r = request()
    conversation = turns(wire, r, steps, cache)
    # Another conversation from the same Request sharing a prefix of the same objects.
    check(wire, r, conversation[:fork_at] + tuple(fork), cache)
    check(wire, r, conversation, cache)
    # A new run (a new Request) over the same messages, its first turn from the table.
    check(wire, request(), conversation + tuple(fork), cache)


# -- the cache is used ------------------------------------------------------------------

class CountingCache(WireCache):
    def __init__(self):
        super().__init__()
        self.looked_up = []

    def encoded(self, table, message, encode, *args):
        self.looked_up.append(message)
        return super().encoded(table, message, encode, *args)


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_a_turn_encodes_only_the_new_messages_and_looks_up_only_the_tail(wire, monkeypatch):
    encoded = []
    for module, name in ((anthropic_wire, "_encoded_blocks"), (chat_wire, "_plain"),
                         (responses_wire, "_plain"), (gemini_wire, "_plain")):
        original = getattr(module, name)

        def spy(message, *args, _original=original):
            encoded.append(message)
            return _original(message, *args)

        monkeypatch.setattr(module, name, spy)
    cache = CountingCache()
    r = request()
    conversation = (user_text("start"),)
    check(wire, r, conversation, cache)
    assert encoded == list(conversation)
    for n in range(40):
        del encoded[:], cache.looked_up[:]
        new = (tool_turn(n), results(n))
        conversation += new
        check(wire, r, conversation, cache)
        assert [id(m) for m in encoded] == [id(m) for m in new]
        # The run's prefix is reused whole: only the tail is looked up, however long
        # the conversation — on Anthropic from the previous request's end (its
        # breakpoint moves), the two new messages and the one before them.
        assert len(cache.looked_up) <= 5, (n, len(cache.looked_up))


def test_anthropic_rebuilds_only_the_two_marked_blocks_of_the_tail(monkeypatch):
    built = []
    original = anthropic_wire._block

    def spy(part):
        built.append(part)
        return original(part)

    monkeypatch.setattr(anthropic_wire, "_block", spy)
    cache = WireCache()
    r = request()
    conversation = (user_text("start"),)
    anthropic_wire.encode_body(r, conversation, cache=cache)
    for n in range(20):
        new = (tool_turn(n), results(n))
        conversation += new
        del built[:]
        anthropic_wire.encode_body(r, conversation, cache=cache)
        parts = sum(len(m.parts) for m in new)
        assert len(built) <= parts + 2


def test_a_turn_without_a_cache_is_the_plain_json_dumps():
    r = request()
    messages = (user_text("hi"), tool_turn(0), results(0))
    assert anthropic_wire.encode_body(r, messages) == reference(WIRES[0], r, messages)
    assert chat_wire.encode_body(r, messages, model="m") == json.dumps(
        chat_wire.to_wire(r, messages, model="m"), ensure_ascii=False,
        separators=(",", ":")).encode()


# -- threads, lifetimes, copies -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_runs_on_threads_sharing_one_backend_cache_each_get_their_own_bytes(wire):
    cache = anthropic.Backend("k")._wire_cache if wire.name == "anthropic" else WireCache()
    shared_request = request()
    shared_prefix = (user_text("shared"), tool_turn(99), results(99))
    failures = []
    start = threading.Barrier(6)

    def run(index):
        try:
            r = shared_request if index % 2 else request()
            conversation = shared_prefix
            start.wait()
            for n in range(25):
                conversation += (tool_turn(n, 1 + (index + n) % 3, f"thread {index}"),
                                 results(n, 1 + (index + n) % 3))
                body = wire.encode(r, conversation, cache)
                if body != reference(wire, r, conversation):
                    failures.append((index, n))
        except Exception as exc:  # pragma: no cover - reported below
            failures.append((index, exc))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert all(len(runs) <= RUNS_PER_REQUEST for _, runs in cache._runs.values())


@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_what_a_conversation_left_goes_when_it_is_collected(wire):
    cache = WireCache()
    r = request()
    conversation = turns(wire, r, [[user_text("a")]] + [[tool_turn(n), results(n)]
                                                         for n in range(5)], cache)
    first = weakref.ref(conversation[0])
    assert cache._runs and any(cache._tables.values())
    del conversation, r
    gc.collect()
    assert first() is None  # the cache kept no message alive
    assert cache._runs == {}
    assert all(table == {} for table in cache._tables.values())


def test_a_cache_pickles_and_copies_empty_and_a_backend_still_pickles():
    cache = WireCache()
    r = request()
    messages = (user_text("a"),)
    anthropic_wire.encode_body(r, messages, cache=cache)
    copied = pickle.loads(pickle.dumps(cache))
    assert isinstance(copied, WireCache) and copied._runs == {} and copied._tables == {}
    backend = pickle.loads(pickle.dumps(anthropic.Backend("k")))
    assert isinstance(backend._wire_cache, WireCache)
    assert pickle.loads(pickle.dumps(openrouter.Backend("k", model="a/b")))._wire_cache
    assert pickle.loads(pickle.dumps(chat.ollama("m")))._wire_cache


def test_the_transport_sends_an_encoded_body_as_it_is():
    body = anthropic_wire.encode_body(request(), (user_text("grüß dich"),), cache=WireCache())
    with FakeServer() as server:
        server.queue("/v1/messages", Reply(chunks=anthropic_stream(["hi"])))
        transport = Transport(server.url, {"x-api-key": "k"}, name="anthropic")
        ctx = RunContext()
        list(transport.events(transport.post_stream("/v1/messages", body, ctx), ctx))
        assert server.requests[0].body == body


def test_an_agent_run_sends_each_turn_byte_for_byte_what_to_wire_builds():
    import nacelle

    @nacelle.tool
    def lookup(q: str) -> str:
        """Look it up."""
        return f"found {q}"

    with FakeServer() as server:
        for n in range(3):
            server.queue("/v1/messages", Reply(chunks=anthropic_stream(
                [], tool_calls=[(f"toolu_{n}", "lookup", '{"q": "x"}')])))
        server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Done."])))
        backend = anthropic.Backend("k", base_url=server.url)
        agent = nacelle.Agent(backend, "Be brief.", tools=[lookup])
        result = agent.run([user_text("go")])
        request = agent.request([user_text("go")])
        sent = [r.body for r in server.requests]
    assert len(sent) == 4
    for index, body in enumerate(sent):
        # Turn N sent the conversation as it stood: the first message, then two per turn.
        conversation = result.messages[:1 + 2 * index]
        assert body == reference(
            Wire("a", lambda r, m: anthropic_wire.to_wire(r, m, model=backend.model), None),
            request, conversation)


def test_a_responses_agent_run_sends_each_turn_byte_for_byte_what_to_wire_builds():
    import nacelle
    from nacelle.backends import openai
    from nacelle.testing.wire import responses_stream

    @nacelle.tool
    def lookup(q: str) -> str:
        """Look it up."""
        return f"found {q} — ünïcode"

    with FakeServer() as server:
        for n in range(3):
            server.queue("/responses", Reply(chunks=responses_stream(
                [], tool_calls=[(f"call_{n}", "lookup", '{"q": "x"}')])))
        server.queue("/responses", Reply(chunks=responses_stream(["Done."])))
        backend = openai.Backend("k", model="gpt-5-mini", base_url=server.url)
        agent = nacelle.Agent(backend, "Be brief.", tools=[lookup])
        result = agent.run([user_text("go")])
        request = agent.request([user_text("go")])
        sent = [r.body for r in server.requests]
    assert len(sent) == 4
    assert pickle.loads(pickle.dumps(backend))._wire_cache
    for index, body in enumerate(sent):
        conversation = result.messages[:1 + 2 * index]
        assert body == reference(
            Wire("r", lambda r, m: responses_wire.to_wire(r, m, model=backend.model), None),
            request, conversation)


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_a_long_conversation_keeps_one_collected_object_per_message_in_the_cache(wire):
    # Each live message's entry is one object the collector tracks (a weak reference
    # carrying the id and the encoded value), not a tuple, a closure and its cells:
    # a 10,000-message conversation's first turn made enough of those to start a
    # full collection of the whole heap within the turn.
    cache = WireCache()
    conversation = tuple(user_text(f"message {n}") if n % 2 == 0 else assistant_text("ok")
                         for n in range(2001))
    check(wire, request(), conversation[:1], cache)  # the wire's modules and frame made
    gc.collect()
    gc.collect()  # as below
    before = len(gc.get_objects())
    check(wire, request(), conversation, cache)
    # A tuple whose items are all untracked is untracked by a collection; CPython 3.13
    # may look at a tuple of such tuples before its items in the same pass, so a
    # second pass untracks what the first left.
    gc.collect()
    gc.collect()
    kept = len(gc.get_objects()) - before
    # the first message's entry was made by the first check
    assert len(conversation) - 1 <= kept <= len(conversation) + 200, kept
    assert all(len(table) <= len(conversation) for table in cache._tables.values())
