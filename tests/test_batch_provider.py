"""nacelle.batch.ProviderBatch: model turns of many runs as one provider batch a round,
against the Anthropic and OpenAI batch APIs of a FakeServer (``testing/batches.py``,
shaped from the API references and SDK types), with a FakeClock for the polling."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import batch, tool
from nacelle.backends import anthropic, chat, openai
from nacelle.batch import ProviderBatch
from nacelle.errors import APIError, ConfigError, StreamError
from nacelle.pricing import Price, batch_priced
from nacelle.testing import FakeClock, FakeServer, Reply
from nacelle.testing.batches import anthropic_message, chat_completion, openai_response

ROOT = Path(__file__).resolve().parent.parent
RUNS = 50


class Calls:
    """Counts each tool call by its conversation, so a call run twice shows."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []

    def tool(self):
        @tool
        def lookup(item: int, step: int) -> str:
            """Look an item up."""
            with self.lock:
                self.seen.append((item, step))
            return f"item {item} step {step}"
        return lookup


def _conversation_of(text):
    return int(text.split("#")[1].split()[0])


def answer(endpoint, params):
    """Two tool rounds, then the answer: three turns a conversation."""
    if endpoint == "/v1/messages":
        first = params["messages"][0]["content"]
        prompt = first if isinstance(first, str) else first[0]["text"]
        steps = sum(1 for m in params["messages"] for b in (m["content"] if isinstance(
            m["content"], list) else []) if b.get("type") == "tool_result")
        make = anthropic_message
    elif endpoint == "/v1/responses":
        items = params["input"]
        prompt = next(i for i in items if i.get("role") == "user")["content"]
        prompt = prompt if isinstance(prompt, str) else prompt[0]["text"]
        steps = sum(1 for i in items if i.get("type") == "function_call_output")
        make = openai_response
    else:
        messages = params["messages"]
        prompt = next(m for m in messages if m["role"] == "user")["content"]
        prompt = prompt if isinstance(prompt, str) else prompt[0]["text"]
        steps = sum(1 for m in messages if m["role"] == "tool")
        make = chat_completion
    item = _conversation_of(prompt)
    if steps < 2:
        return make(tool_calls=[(f"call_{item}_{steps}", "lookup",
                                 {"item": item, "step": steps})])
    return make(f"answer {item}")


def backend_for(kind, server, price=None):
    if kind == "anthropic":
        return anthropic.Backend("test-key", model="claude-opus-5", base_url=server.url)
    if kind == "openai":
        return openai.Backend("test-key", model="gpt-5-mini", base_url=server.url + "/v1",
                              pricing=price or Price(0.25, 2.0))
    return chat.openai("gpt-5-mini", api_key="test-key", base_url=server.url + "/v1",
                       pricing=price or Price(0.25, 2.0))


def prompts(n=RUNS):
    return [f"conversation #{i} please" for i in range(n)]


def run(kind, server, calls, *, n=RUNS, clock=None, poll=30.0, **options):
    backend = backend_for(kind, server)
    agent = nacelle.Agent(backend, "Use the tool twice.", tools=[calls.tool()])
    clock = clock or FakeClock()
    pool = ProviderBatch(backend, poll=poll, clock=clock)
    items = sorted(batch.run_many(agent, prompts(n), executor=pool, progress=False, **options),
                   key=lambda item: item.index)
    return items, pool, clock


@pytest.mark.parametrize("kind", ["anthropic", "openai", "chat"])
def test_fifty_tool_using_conversations_go_out_in_as_many_batches_as_rounds(kind):
    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer, polls=2)
        items, pool, clock = run(kind, server, calls)
        assert server.unexpected == []
    assert [item.error for item in items] == [None] * RUNS
    assert [item.result.text for item in items] == [f"answer {i}" for i in range(RUNS)]
    assert [len(b.requests) for b in fake.created] == [RUNS, RUNS, RUNS]
    assert pool.rounds == 3 and pool.batches == 3
    assert sorted(calls.seen) == sorted((i, s) for i in range(RUNS) for s in (0, 1))
    assert all(count == 1 for count in fake.answered.values())
    # Every batch was polled until it ended: two polls in progress, each 30 s apart.
    assert clock.sleeps == [30.0, 30.0] * 3
    endpoint = {"anthropic": "anthropic", "openai": "/v1/responses",
                "chat": "/v1/chat/completions"}[kind]
    assert {b.kind for b in fake.created} == {endpoint}


def test_the_requests_are_the_backends_own_bodies_without_streaming():
    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer)
        run("anthropic", server, calls, n=2)
        created = [r for r in server.requests if r.path == "/v1/messages/batches"]
    sent = created[0].json()["requests"]
    assert [r["custom_id"] for r in sent] == ["n0-1", "n1-1"]
    params = sent[0]["params"]
    assert "stream" not in params and params["model"] == "claude-opus-5"
    assert params["tools"][0]["name"] == "lookup"
    assert created[0].headers["x-api-key"] == "test-key"
    assert len(fake.created) == 3


def test_an_openai_batch_uploads_its_requests_as_a_jsonl_file():
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer)
        run("openai", server, calls, n=2)
        upload = next(r for r in server.requests if r.path == "/v1/files")
        create = next(r for r in server.requests if r.path == "/v1/batches")
    assert upload.headers["content-type"].startswith("multipart/form-data")
    assert b'name="purpose"' in upload.body and b"batch" in upload.body
    line = json.loads(upload.body.split(b"\r\n\r\n", 2)[2].split(b"\n")[0])
    assert line["method"] == "POST" and line["url"] == "/v1/responses"
    assert line["custom_id"] == "n0-1" and "stream" not in line["body"]
    assert create.json()["endpoint"] == "/v1/responses"
    assert create.json()["completion_window"] == "24h"


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_an_expired_request_goes_again_in_the_next_round(kind):
    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer, expire=lambda custom_id, params: custom_id == "n3-1")
        items, pool, _ = run(kind, server, calls, n=5)
    assert [item.error for item in items] == [None] * 5
    assert items[3].result.text == "answer 3"
    # Conversation 3's first turn went out in round 1, expired, went again in round 2.
    assert [sorted(c for c, _ in b.requests) for b in fake.created][:2] == [
        ["n0-1", "n1-1", "n2-1", "n3-1", "n4-1"], ["n0-2", "n1-2", "n2-2", "n3-2", "n4-2"]]
    assert pool.rounds == 4 and sorted(calls.seen).count((3, 0)) == 1


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_an_errored_request_fails_its_own_run_with_the_providers_error(kind):
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer, error=lambda custom_id, params: (
            (400, "prompt is too long: 250000 tokens > 200000 maximum")
            if custom_id == "n7-2" else None))
        items, _, _ = run(kind, server, calls, n=10)
    failed = [item.index for item in items if item.error is not None]
    assert failed == [7]
    error = items[7].error
    assert isinstance(error, APIError) and "prompt is too long" in error.message
    assert all(item.result.text == f"answer {item.index}" for item in items if item.index != 7)


def test_an_anthropic_batch_refused_as_a_whole_is_sent_again_after_a_backoff():
    calls = Calls()
    clock = FakeClock()
    with FakeServer() as server:
        # Each create is tried four times by HTTP; five refusals fail the first round's
        # batch as a whole once, and the next round sends its requests again.
        fake = server.batches(answer, fail=5)
        items, pool, _ = run("anthropic", server, calls, n=4, clock=clock, poll=10.0)
    assert [item.result.text for item in items] == [f"answer {i}" for i in range(4)]
    assert len(fake.created) == 3 and pool.rounds == 4
    assert 10.0 in clock.sleeps  # the backoff before the round after the failure


def test_an_openai_batch_failed_as_a_whole_is_retried_and_the_retries_are_bounded():
    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer, fail=1)
        items, pool, clock = run("openai", server, calls, n=3, poll=5.0)
    assert [item.error for item in items] == [None] * 3
    assert len(fake.created) == 4 and pool.rounds == 4
    assert clock.sleeps[0] == 5.0

    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer, fail=100)
        items, pool, clock = run("openai", server, calls, n=3, poll=5.0)
    assert all(isinstance(item.error, StreamError) for item in items)
    assert "failed batch" in str(items[0].error) and "validation" in str(items[0].error)
    assert len(fake.created) == 4  # the first try and three retries
    assert [s for s in clock.sleeps if s > 5.0] == [10.0, 20.0]  # the backoff doubles
    assert calls.seen == []


def test_usage_is_priced_at_the_batch_rate_and_the_summary_shows_the_streamed_cost():
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer)
        items, _, _ = run("anthropic", server, calls, n=4)
    done = batch.summary(items)
    # claude-opus-5: $5 in, $25 out per million; three turns of 10 in and 5 out each.
    streamed = 4 * 3 * (10 * 5 + 5 * 25) / 1e6
    assert done.streamed == pytest.approx(streamed)
    assert done.cost == pytest.approx(streamed / 2)
    assert items[0].result.usage.input_tokens == 30
    assert "streamed)" in str(done)


def test_the_batch_rate_is_half_the_price_for_anthropic_and_openai_only():
    usage = Price(3.0, 15.0).priced(nacelle.Usage(input_tokens=1000, output_tokens=1000))
    assert batch_priced(usage, "anthropic").cost == pytest.approx(usage.cost / 2)
    assert batch_priced(usage, "openai").cost == pytest.approx(usage.cost / 2)
    assert batch_priced(usage, "mistral") == usage
    assert batch_priced(nacelle.Usage(input_tokens=5), "anthropic").priced is False


def test_polling_honours_retry_after():
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer, polls=1, retry_after=45)
        _, _, clock = run("anthropic", server, calls, n=2, poll=30.0)
    assert clock.sleeps == [45.0, 45.0, 45.0]


def test_a_429_while_polling_is_waited_out_as_its_retry_after_says():
    calls = Calls()
    with FakeServer() as server:
        fake = server.batches(answer)
        server.queue("/v1/messages/batches/msgbatch_0001",
                     Reply.json({"type": "error", "error": {"type": "rate_limit_error",
                                                            "message": "slow down"}},
                                status=429, headers={"retry-after": "7"}))
        items, _, clock = run("anthropic", server, calls, n=2)
    assert [item.error for item in items] == [None, None]
    assert clock.sleeps[0] == 7.0 and len(fake.created) == 3


def test_the_progress_line_shows_rounds_and_the_batch_status():
    calls = Calls()
    seen = []
    with FakeServer() as server:
        server.batches(answer, polls=1)
        backend = backend_for("anthropic", server)
        agent = nacelle.Agent(backend, "Use the tool twice.", tools=[calls.tool()])
        pool = ProviderBatch(backend, clock=FakeClock())
        list(batch.run_many(agent, prompts(3), executor=pool, progress=seen.append))
    shown = [str(p) for p in seen]
    assert any("round 1: 1 batch in_progress (3 processing)" in s for s in shown)
    assert any("round 3: 1 batch ended (3 succeeded)" in s for s in shown)
    assert seen[-1].final and seen[-1].done == 3


def test_a_run_whose_deadline_passes_while_waiting_fails_alone():
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer, polls=10**9)
        backend = backend_for("anthropic", server)
        agent = nacelle.Agent(backend, "Use the tool twice.", tools=[calls.tool()],
                              budget=nacelle.Budget(seconds=0.3))
        pool = ProviderBatch(backend, poll=0.02)
        started = time.monotonic()
        items = list(batch.run_many(agent, prompts(2), executor=pool, progress=False))
    assert time.monotonic() - started < 10
    assert [item.error or item.result.stop for item in items] == [nacelle.Stop.BUDGET] * 2


def test_a_backend_without_a_batch_api_is_refused():
    from nacelle.testing import ScriptedBackend
    with pytest.raises(ConfigError, match="batch API"):
        ProviderBatch(ScriptedBackend([]))
    with pytest.raises(ConfigError, match="poll"):
        ProviderBatch(anthropic.Backend("k"), poll=-1)


CHILD = textwrap.dedent("""
    import os, sys
    import nacelle
    from nacelle import batch, tool
    from nacelle.backends import anthropic, openai
    from nacelle.batch import ProviderBatch
    from nacelle.pricing import Price

    effects = os.environ["EFFECTS"]

    @tool
    def lookup(item: int, step: int) -> str:
        '''Look an item up.'''
        with open(effects, "a") as handle:
            handle.write(f"{item} {step}\\n")
        return f"item {item} step {step}"

    if os.environ["KIND"] == "anthropic":
        backend = anthropic.Backend("test-key", model="claude-opus-5", base_url=os.environ["URL"])
    else:
        backend = openai.Backend("test-key", model="gpt-5-mini", base_url=os.environ["URL"] + "/v1",
                                 pricing=Price(0.25, 2.0))
    agent = nacelle.Agent(backend, "Use the tool twice.", tools=[lookup])
    prompts = [f"conversation #{i} please" for i in range(int(os.environ["RUNS"]))]
    done = batch.summary(batch.run_many(agent, prompts, results=os.environ["RESULTS"],
                                        executor=ProviderBatch(backend, poll=0.05),
                                        progress=False))
    print(done.count, done.failures, done.cost, done.streamed)
""")


def _wait_for(what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_killed_batch_resumes_polling_the_same_batch_and_runs_nothing_twice(tmp_path, kind):
    runs = 6
    results, effects = tmp_path / "results.jsonl", tmp_path / "effects.txt"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with FakeServer() as server:
        # The first round's batch ends at once; the second never, until the kill.
        fake = server.batches(answer, polls=lambda number: 0 if number == 1 else 10**9)
        env = dict(os.environ, PYTHONPATH=str(ROOT), URL=server.url, RUNS=str(runs), KIND=kind,
                   RESULTS=str(results), EFFECTS=str(effects))
        child = subprocess.Popen([sys.executable, str(script)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_for(lambda: len(fake.created) == 2 and results.exists()
                      and results.read_text().count("provider_batch") == 2)
            polled = len(server.requests)
            _wait_for(lambda: len(server.requests) > polled + 2)  # polling round 2
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert sorted(effects.read_text().split("\n")[:-1]) == sorted(
            f"{i} 0" for i in range(runs))
        fake.polls = 0
        again = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                               timeout=60)
        assert again.returncode == 0, again.stderr.decode()[-2000:]
        count, failures, cost, streamed = again.stdout.decode().split()
    assert (count, failures) == (str(runs), "0")
    # Round 2 was not sent again: its batch was polled and read; round 3 is new.
    assert len(fake.created) == 3
    assert all(n == 1 for n in fake.answered.values()) and len(fake.answered) == 3 * runs
    lines = effects.read_text().split("\n")[:-1]
    assert sorted(lines) == sorted(f"{i} {s}" for i in range(runs) for s in (0, 1))
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    finished = [row for row in rows if "index" in row]
    assert sorted(row["index"] for row in finished) == list(range(runs))
    # The usage of the turns before the kill is kept: three turns each.
    assert all(row["usage"]["input_tokens"] == 30 for row in finished)
    assert float(streamed) == pytest.approx(2 * float(cost))


def test_leaving_the_batch_while_a_round_is_polled_stops_every_run_and_the_poller():
    def quick_first(endpoint, params):
        if "#0 " in json.dumps(params):
            return anthropic_message("answer 0")
        return answer(endpoint, params)

    calls = Calls()
    with FakeServer() as server:
        server.batches(quick_first, polls=lambda number: 0 if number == 1 else 10**9)
        backend = backend_for("anthropic", server)
        agent = nacelle.Agent(backend, "Use the tool twice.", tools=[calls.tool()])
        pool = ProviderBatch(backend, poll=0.02)
        started = time.monotonic()
        for item in batch.run_many(agent, prompts(4), executor=pool, progress=False):
            assert item.index == 0 and item.result.text == "answer 0"
            break
    assert time.monotonic() - started < 10
    left = [t.name for t in threading.enumerate()
            if t.name.startswith(("nacelle-batch-run", "nacelle-provider-batch"))]
    # The first round's tools may or may not have run before the batch stopped; none
    # of the second round's did, as its batch never ended.
    assert left == [] and set(calls.seen) <= {(1, 0), (2, 0), (3, 0)}
    assert len(calls.seen) == len(set(calls.seen))


def test_a_poller_that_breaks_fails_every_waiting_run_instead_of_leaving_it_waiting():
    calls = Calls()
    with FakeServer() as server:
        server.batches(answer)
        backend = backend_for("anthropic", server)
        agent = nacelle.Agent(backend, "Use the tool twice.", tools=[calls.tool()])
        pool = ProviderBatch(backend, clock=FakeClock())

        def broken(batch_id, ctx):
            raise RuntimeError("the status could not be read")

        pool.wire.status = broken
        items = list(batch.run_many(agent, prompts(3), executor=pool, progress=False))
    assert len(items) == 3
    assert all("the status could not be read" in str(item.error) for item in items)
