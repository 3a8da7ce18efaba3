"""The Chat Completions backend against real servers: fakellm and llama.cpp's server.

The chat backend's other tests replay bodies we recorded or wrote; a body we wrote
can only hold what we thought a server sends. These run ``nacelle.Agent`` over
``chat.Backend`` against two programs written by other people, started on loopback
for this module: fakellm (a mock that answers from rules: exact text and tool calls,
no usage in its streams) and ``llama-server`` (a real inference server, with its own
chat templates, tool-call parser, grammars, usage and cancellation) running a tiny
model the tests write themselves (``tests/servers/tiny_gguf.py``).

Each server's tests skip with the reason when it cannot run here: fakellm needs
Python 3.10+, and llama-server is a binary that ``bash .ci/run llama-server`` builds
and ``NACELLE_LLAMA_SERVER`` points at. They are also marked ``fakellm`` and
``llamacpp`` so either can be run alone (``python -m pytest -m llamacpp``).
"""

import json
import threading
import time
from typing import Literal

import pytest

import nacelle
from servers import fakellm as fakellm_server
from servers import llamacpp as llamacpp_server

chat = pytest.importorskip("nacelle.backends.chat", reason="nacelle.backends.chat not available")


def kinds(events):
    return [event.kind for event in events]


def text_of(events):
    return "".join(event.text for event in events if event.kind is nacelle.Kind.TEXT)


def parts(messages, kind):
    return [part for message in messages for part in message.parts if isinstance(part, kind)]


# --- fakellm ---------------------------------------------------------------------

RULES = """\
version: 1
rules:
  - name: greeting
    when: {messages_contain: "fakellm-greeting"}
    respond: {content: "Hello from fakellm, one word at a time."}
  - name: weather_call
    when: {turn: 1, messages_contain: "fakellm-weather", tools_include: "weather"}
    respond:
      tool_calls:
        - {name: weather, arguments: {city: "Oslo"}}
  - name: weather_answer
    when: {turn: 2, tool_result_contains: "Oslo: 3 degrees"}
    respond: {content: "It is 3 degrees in Oslo."}
  - name: two_calls
    when: {turn: 1, messages_contain: "fakellm-two-cities"}
    respond:
      tool_calls:
        - {name: weather, arguments: {city: "Bergen"}}
        - {name: weather, arguments: {city: "Tromso"}}
  - name: two_answers
    when: {turn: 2, tool_result_contains: "Tromso: -4 degrees"}
    respond: {content: "Bergen is mild and Tromso is cold."}
"""

FORECAST = {"Oslo": 3, "Bergen": 9, "Tromso": -4}


@nacelle.tool
def weather(city: str) -> str:
    """Today's temperature in a city.

    Args:
        city: The city's name.
    """
    return f"{city}: {FORECAST[city]} degrees"


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    fakellm_server.require()
    server = fakellm_server.serve(RULES, tmp_path_factory.mktemp("fakellm"))
    yield server
    server.stop()


@pytest.fixture
def fake_agent(fake):
    fake.reset()  # the rules count turns per conversation, in the server
    return nacelle.Agent(chat.Backend(model="gpt-test", base_url=fake.base_url),
                         "You are a test.", tools=[weather], max_iterations=4)


@pytest.mark.slow
@pytest.mark.fakellm
def test_fakellm_text_arrives_as_its_word_deltas_and_the_run_ends_complete(fake_agent):
    events = list(fake_agent.stream([nacelle.user_text("fakellm-greeting, please")]))
    deltas = [e.text for e in events if e.kind is nacelle.Kind.TEXT]
    assert deltas == ["Hello", " from", " fakellm,", " one", " word", " at", " a", " time."]
    assert kinds(events)[-2:] == [nacelle.Kind.TURN, nacelle.Kind.DONE]
    assert events[-1].stop is nacelle.Stop.END


@pytest.mark.fakellm
def test_fakellm_sends_no_usage_in_a_stream_and_the_run_reports_zero_tokens(fake_agent):
    result = fake_agent.run([nacelle.user_text("fakellm-greeting again")])
    assert result.text == "Hello from fakellm, one word at a time."
    assert result.usage.input_tokens == 0 and result.usage.output_tokens == 0


@pytest.mark.fakellm
def test_fakellm_tool_call_runs_the_tool_and_its_result_reaches_the_next_rule(fake_agent, fake):
    result = fake_agent.run([nacelle.user_text("fakellm-weather in the capital?")])
    assert result.text == "It is 3 degrees in Oslo."
    assert result.turns == 2 and result.stop is nacelle.Stop.END
    (call,) = parts(result.messages, nacelle.ToolCall)
    (answer,) = parts(result.messages, nacelle.ToolResult)
    assert (call.name, json.loads(call.input)) == ("weather", {"city": "Oslo"})
    assert call.id.startswith("call_") and answer.id == call.id
    assert (answer.result, answer.failed) == ("Oslo: 3 degrees", False)
    # The second request matched the rule that needs the tool's result in it.
    assert [r["matched_rule"] for r in fake.stats()["recent"][:2]] == ["weather_answer",
                                                                         "weather_call"]


@pytest.mark.fakellm
def test_fakellm_two_calls_in_one_turn_run_and_go_back_in_call_order(fake_agent):
    events = list(fake_agent.stream([nacelle.user_text("fakellm-two-cities today")]))
    calls = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_CALL]
    assert [(c.index, json.loads(c.input)["city"]) for c in calls] == [(0, "Bergen"),
                                                                        (1, "Tromso")]
    assert len({c.id for c in calls}) == 2
    done = events[-1]
    results = parts(done.messages, nacelle.ToolResult)
    assert [r.result for r in results] == ["Bergen: 9 degrees", "Tromso: -4 degrees"]
    assert [r.id for r in results] == [c.id for c in calls]
    assert text_of(events) == "Bergen is mild and Tromso is cold."


# --- llama.cpp's server ----------------------------------------------------------

@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    llamacpp_server.require()
    server = llamacpp_server.serve(tmp_path_factory.mktemp("llama"))
    yield server
    server.stop()


def llama_agent(server, **options):
    backend = chat.llamacpp(base_url=server.base_url)
    return nacelle.Agent(backend, "You are a test.", **options)


def post_json(server, path, body):
    import requests

    response = requests.post(f"http://127.0.0.1:{server.port}{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def prompt_tokens(server, messages, tools=()):
    """How many tokens the server's own template and tokenizer make of a request."""
    body = {"messages": messages}
    if tools:
        body["tools"] = list(tools)
    prompt = post_json(server, "/apply-template", body)["prompt"]
    return len(post_json(server, "/tokenize", {"content": prompt, "add_special": False})["tokens"])


CALLS = []


@nacelle.tool
def pick_colour(colour: Literal["red", "green", "blue"], count: int) -> str:
    """Pick a colour and a number of them.

    Args:
        colour: Which colour.
        count: How many.
    """
    CALLS.append((colour, count))
    return f"{count} x {colour}"


@pytest.mark.llamacpp
def test_llama_server_text_streams_in_deltas_and_usage_comes_from_its_final_chunk(llama):
    agent = llama_agent(llama, max_tokens=12)
    events = list(agent.stream([nacelle.user_text("Say something.")]))
    deltas = [e.text for e in events if e.kind is nacelle.Kind.TEXT]
    assert len(deltas) >= 2  # streamed, not one block
    assert all(d and d.isprintable() and d.isascii() for d in deltas)  # the model's alphabet
    done = events[-1]
    assert done.kind is nacelle.Kind.DONE and done.stop is nacelle.Stop.MAX_TOKENS
    usage = done.usage
    assert usage.output_tokens == 12
    # Billed input plus the server's prompt-cache reads is the whole prompt, as the
    # server's own template and tokenizer count it.
    wire = [{"role": "system", "content": "You are a test."},
            {"role": "user", "content": "Say something."}]
    assert usage.input_tokens + usage.cache_read_tokens == prompt_tokens(llama, wire)
    assert usage.input_tokens > 0


@pytest.mark.llamacpp
def test_llama_server_prompt_cache_reads_are_counted_apart_from_billed_input(llama):
    agent = llama_agent(llama, max_tokens=4)
    conversation = [nacelle.user_text("Repeat after me: the same prompt twice.")]
    first = agent.run(conversation).usage
    second = agent.run(conversation).usage
    whole = first.input_tokens + first.cache_read_tokens
    assert second.input_tokens + second.cache_read_tokens == whole
    assert second.cache_read_tokens > first.cache_read_tokens  # the slot kept the prefix


@pytest.mark.llamacpp
def test_llama_server_tool_call_runs_the_tool_with_schema_valid_arguments_and_takes_its_result(
        llama):
    CALLS.clear()
    agent = llama_agent(llama, tools=[pick_colour], max_tokens=160, max_iterations=3)
    result = agent.run([nacelle.user_text("Pick a colour.")])
    # Turn 1 is the call the grammar shaped; turn 2 ends on its own. The tiny model
    # ends a turn only once a tool result is in its context, so a natural end shows
    # the server took the result and rendered it into the prompt.
    assert len(CALLS) == 1
    colour, count = CALLS[0]
    assert colour in ("red", "green", "blue") and isinstance(count, int)
    assert result.turns == 2 and result.stop is nacelle.Stop.END
    (call,) = parts(result.messages, nacelle.ToolCall)
    (answer,) = parts(result.messages, nacelle.ToolResult)
    assert call.name == "pick_colour" and call.finished
    assert json.loads(call.input) == {"colour": colour, "count": count}
    assert call.id and answer.id == call.id
    assert (answer.result, answer.failed) == (f"{count} x {colour}", False)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


@pytest.mark.llamacpp
def test_llama_server_text_cut_by_max_tokens_stops_with_max_tokens(llama):
    result = llama_agent(llama, max_tokens=5).run([nacelle.user_text("Go on.")])
    assert result.stop is nacelle.Stop.MAX_TOKENS
    assert result.usage.output_tokens == 5 and result.turns == 1
    assert 1 <= len(result.text) <= 5 * 4  # five tokens of at most four characters


@pytest.mark.llamacpp
def test_llama_server_tool_call_cut_by_max_tokens_is_kept_unfinished_and_never_run(llama):
    # The call takes at least 63 of the model's tokens, and the server has announced
    # it (name and the arguments' first brace) by the 45th at the latest, so 52 cuts
    # it after it was announced and before its arguments could be complete.
    CALLS.clear()
    agent = llama_agent(llama, tools=[pick_colour], max_tokens=52, max_iterations=3)
    events = list(agent.stream([nacelle.user_text("Pick a colour.")]))
    assert nacelle.Kind.TOOL_CALL not in kinds(events)
    assert CALLS == []
    done = events[-1]
    assert done.stop is nacelle.Stop.MAX_TOKENS and done.usage.output_tokens == 52
    (call,) = parts(done.messages, nacelle.ToolCall)
    assert (call.name, call.finished) == ("pick_colour", False)
    assert call.input.startswith("{")


@pytest.mark.slow
@pytest.mark.llamacpp
def test_llama_server_run_cancelled_from_another_thread_mid_stream_raises_cancelled_promptly(
        llama):
    cancel = nacelle.CancelEvent()
    agent = llama_agent(llama, max_tokens=1500)
    stream = agent.stream([nacelle.user_text("Talk for a long time.")], cancel=cancel)
    seen, set_at = 0, None
    with pytest.raises(nacelle.Cancelled):
        for event in stream:
            if event.kind is nacelle.Kind.TEXT:
                seen += 1
                if set_at is None:
                    setter = threading.Thread(target=cancel.set)
                    set_at = time.monotonic()
                    setter.start()
                    setter.join()
    waited = time.monotonic() - set_at
    assert waited < 5.0
    # The run stopped long before the answer's end. (Not after exactly one delta: the
    # deltas already decoded from one read of the body are handed over first.)
    assert seen < 1500 // 2
    # The server is free again: a new turn gets its whole answer.
    after = llama_agent(llama, max_tokens=3).run([nacelle.user_text("Still there?")])
    assert after.usage.output_tokens == 3

