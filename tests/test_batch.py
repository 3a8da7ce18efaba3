"""nacelle.batch: the same fifty runs on threads, processes, Dask and Ray; a failure kept
to its item; cancelling; resuming a killed batch; the progress line; best_of.

Every run reaches one EchoServer (``batch_server.py``) in this process over loopback,
from worker processes too, so each executor is checked against the same server-side
count of requests. Dask and Ray skip with the reason when they are not installed.
"""

import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

import nacelle
from nacelle import batch
from nacelle.batch import BatchItem, Progress, ProgressLine
from nacelle.batch.results import finished_indexes, record
from nacelle.backends import anthropic
from nacelle.testing import FakeServer, Reply, ScriptedBackend, Turn
from nacelle.testing.wire import anthropic_stream

from batch_server import EchoServer

pytestmark = pytest.mark.slow  # process pools, Dask and Ray

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "batch_worker.py"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
RUNS = 50
FAILING = 13


@pytest.fixture(scope="module")
def server():
    with EchoServer() as echo:
        yield echo


def http_agent(server):
    from nacelle.backends import anthropic

    backend = anthropic.Backend(api_key="sk-test", base_url=server.url, max_retries=0,
                                timeout=20, stall_timeout=20)
    return nacelle.Agent(backend, "You answer.")


def prompts(tag):
    return [f"fail {tag}" if i == FAILING else f"{tag} q{i}" for i in range(RUNS)]


@pytest.fixture(scope="module")
def dask_executor():
    distributed = pytest.importorskip(
        "distributed", reason="Dask's distributed is not installed (the test extra has it)")
    cluster = distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    try:
        yield client.get_executor()
    finally:
        client.close(timeout=10)
        cluster.close(timeout=10)


@pytest.fixture(scope="module")
def ray_pool():
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed (it is heavy and not in the test extra)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ENV["PYTHONPATH"]}})
    try:
        yield batch.ray_executor()
    finally:
        ray.shutdown()


def executor_for(kind, request):
    if kind == "threads":
        return None, None
    if kind == "processes":
        pool = ProcessPoolExecutor(2)
        return pool, pool
    if kind == "dask":
        return request.getfixturevalue("dask_executor"), None
    return request.getfixturevalue("ray_pool"), None


@pytest.mark.parametrize("kind", ["threads", "processes", "dask", "ray"])
def test_fifty_runs_give_the_same_results_on_every_executor(kind, server, request):
    executor, owned = executor_for(kind, request)
    try:
        items = list(batch.run_many(http_agent(server), prompts(kind), executor=executor,
                                    max_workers=4, progress=False))
    finally:
        if owned is not None:
            owned.shutdown()
    assert sorted(i.index for i in items) == list(range(RUNS))
    by_index = {i.index: i for i in items}
    for index, item in by_index.items():
        if index == FAILING:
            continue
        assert item.error is None, item
        assert item.result.text == f"answer to {kind} q{index}"
        assert item.result.usage.input_tokens == len(f"{kind} q{index}")
        assert item.result.stop is nacelle.Stop.END
    asked = [p for p in server.prompts() if p.startswith(kind) or p == f"fail {kind}"]
    assert sorted(asked) == sorted(prompts(kind)), "every run asked exactly once"
    totals = batch.summary(items)
    assert (totals.count, totals.failures) == (RUNS, 1)
    assert totals.usage.input_tokens == sum(len(p) for p in prompts(kind)
                                            if not p.startswith("fail"))


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_a_failing_run_is_an_item_with_its_error_and_the_batch_goes_on(kind, server, request):
    executor, owned = executor_for(kind, request)
    try:
        items = list(batch.run_many(http_agent(server), ["fail alone", "fine"],
                                    executor=executor, progress=False))
    finally:
        if owned is not None:
            owned.shutdown()
    failed = next(i for i in items if i.index == 0)
    assert not failed.ok and failed.result is None
    error = failed.error
    assert (isinstance(error, nacelle.APIError) and error.status == 400) or \
        (isinstance(error, str) and error.startswith("APIError")), error
    assert next(i for i in items if i.index == 1).result.text == "answer to fine"


def test_an_error_that_does_not_pickle_comes_back_as_its_text():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} and {b}")

    assert batch._portable(Odd(1, 2)) == "Odd: 1 and 2"
    plain = ValueError("fine")
    assert batch._portable(plain) is plain


def test_a_batch_item_pickles_with_its_result_and_error():
    import pickle

    agent = nacelle.Agent(ScriptedBackend(["hi"]), "s")
    item = next(batch.run_many(agent, ["q"], progress=False))
    again = pickle.loads(pickle.dumps(item))
    assert again.result == item.result and again.index == 0
    failed = pickle.loads(pickle.dumps(BatchItem(3, error=nacelle.ConfigError("bad"))))
    assert str(failed.error) == "bad"


def test_closing_the_iterator_cancels_runs_in_progress_and_not_started():
    backend = ScriptedBackend([Turn(nacelle.assistant_text("fast"))] +
                              [Turn(nacelle.assistant_text("slow"), delay=30)] * 20)
    items = batch.run_many(nacelle.Agent(backend, "s"), ["q"] * 21, max_workers=2,
                           progress=False)
    first = next(items)
    started = time.monotonic()
    items.close()
    assert time.monotonic() - started < 5
    assert first.result.text == "fast"
    assert backend.remaining >= 15, "runs not started were cancelled, not run"


def test_keyboard_interrupt_cancels_the_batch_and_propagates():
    backend = ScriptedBackend([Turn(nacelle.assistant_text("fast"))] +
                              [Turn(nacelle.assistant_text("slow"), delay=30)] * 20)

    def interrupt(progress):
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        list(batch.run_many(nacelle.Agent(backend, "s"), ["q"] * 21, max_workers=2,
                            progress=interrupt))
    assert time.monotonic() - started < 5


def test_a_given_thread_pool_is_cancelled_through_the_shared_cancel_event():
    backend = ScriptedBackend([Turn(nacelle.assistant_text("fast"))] +
                              [Turn(nacelle.assistant_text("slow"), delay=30)] * 4)
    with ThreadPoolExecutor(2) as pool:
        items = batch.run_many(nacelle.Agent(backend, "s"), ["q"] * 5, executor=pool,
                               max_workers=2, progress=False)
        next(items)
        items.close()
        started = time.monotonic()
    assert time.monotonic() - started < 5


def settled(server, quiet=0.3, timeout=10):
    """The server's request count once it stopped changing (requests the killed client
    had sent may still be read after the kill)."""
    count, since, deadline = len(server.requests), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.02)
        if len(server.requests) != count:
            count, since = len(server.requests), time.monotonic()
    return count


def test_results_file_resumes_after_the_batch_process_is_killed(tmp_path):
    results = tmp_path / "results.jsonl"
    with EchoServer(delay=0.05) as echo:
        proc = subprocess.Popen([sys.executable, str(WORKER), echo.url, str(results),
                                 str(RUNS)], env=ENV, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if results.exists() and results.read_bytes().count(b"\n") >= 10:
                    break
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        kept = finished_indexes(results)
        assert 10 <= len(kept) < RUNS, "killed mid-way"
        first_phase = settled(echo)
        missing = sorted(set(range(RUNS)) - kept)
        with open(results, "ab") as handle:  # a write torn by the kill
            handle.write(b'{"index": %d, "stop": "en' % missing[0])
        done = subprocess.run([sys.executable, str(WORKER), echo.url, str(results), str(RUNS)],
                              env=ENV, stderr=subprocess.DEVNULL, timeout=60)
        assert done.returncode == 0
        second = [p for p in echo.prompts()[first_phase:] if p != "fail: torn body"]
    assert sorted(second) == sorted(f"q{i}" for i in missing), \
        "the rerun asked for exactly the runs the file lacked"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(line["index"] for line in lines) == list(range(RUNS))
    line = next(line for line in lines if line["index"] == 7)
    assert line["text"] == "answer to q7" and line["stop"] == "end"
    assert line["usage"]["input_tokens"] == 2 and line["error"] is None


def test_a_torn_last_line_is_cut_and_a_line_that_is_not_a_result_is_ignored(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"index": 0}\nnot json\n{"index": -1}\n{"index": 2}\n{"index": 3, "st')
    assert finished_indexes(path) == {0, 2}
    assert path.read_bytes().endswith(b'{"index": 2}\n')
    assert finished_indexes(tmp_path / "absent.jsonl") == set()


def test_a_results_line_nested_five_thousand_deep_is_not_a_result_and_is_done_again(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"index": 0}\n' + '{"index": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}\n")
    assert finished_indexes(path) == {0}


def test_a_record_holds_the_output_as_json_data_and_the_error_as_text():
    from dataclasses import dataclass

    @dataclass
    class Answer:
        city: str

    agent = nacelle.Agent(ScriptedBackend(["hi"]), "s")
    result = agent.run([nacelle.user_text("q")])
    import dataclasses as dc

    line = record(4, dc.replace(result, output=Answer("Paris")), None)
    assert line["output"] == {"city": "Paris"} and line["text"] == "hi"
    assert record(5, None, ValueError("no"))["error"] == "ValueError: no"
    json.dumps(line)


def read_all(fd, proc, timeout=30):
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the pty's other side closed
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out


def test_the_progress_line_redraws_in_place_on_a_terminal():
    main, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(WORKER), "scripted", "-", "200"], env=ENV,
                            stderr=secondary, stdout=subprocess.DEVNULL)
    os.close(secondary)
    try:
        out = read_all(main, proc).decode()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    assert proc.returncode == 0
    assert "\r" in out and "200/200 runs, 0 failed" in out
    assert out.rstrip("\r\n").count("\n") == 0, "one line, redrawn"


def test_the_progress_line_prints_sparse_plain_lines_into_a_pipe():
    done = subprocess.run([sys.executable, str(WORKER), "scripted", "-", "200"], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "\r" not in done.stderr
    assert 2 <= len(lines) <= 12
    assert lines[-1].startswith("nacelle batch: 200/200 runs, 0 failed")


def test_a_progress_callable_gets_the_numbers_and_a_final_call():
    seen = []
    backend = ScriptedBackend(["a", "b", Turn(nacelle.assistant_text("x"),
                                               error=nacelle.StreamError("cut"))])
    items = list(batch.run_many(nacelle.Agent(backend, "s"), ["q"] * 3, max_workers=1,
                                progress=seen.append))
    assert len(items) == 3 and [p.done for p in seen] == [1, 2, 3, 3]
    assert seen[-1].final and seen[-1].failures == 1 and seen[-1].total == 3
    assert all(isinstance(p, Progress) for p in seen)


def test_the_progress_line_throttles_redraws_on_a_terminal():
    class Terminal:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return True

        def write(self, text):
            self.text += text

        def flush(self):
            pass

    now = [0.0]
    stream = Terminal()
    line = ProgressLine(stream, clock=lambda: now[0])
    for done in range(1, 11):
        now[0] += 0.03
        line(Progress(done, 10, 0, now[0], 0.0))
    line(Progress(10, 10, 0, now[0], 0.0, final=True))
    assert 3 <= stream.text.count("\r") <= 5 and stream.text.endswith("\n")


def test_best_of_returns_the_highest_scoring_result_and_all_n():
    backend = ScriptedBackend(["a", "ccc", "bb", "dddd", "e"])
    best, results = batch.best_of(nacelle.Agent(backend, "s"), "q", 5,
                                  score=lambda r: len(r.text))
    assert best.text == "dddd"
    assert sorted(r.text for r in results) == ["a", "bb", "ccc", "dddd", "e"]


def test_best_of_raises_when_a_run_fails(server):
    with pytest.raises(nacelle.APIError):
        batch.best_of(http_agent(server), "fail best", 3, score=lambda r: 0)


def test_main_batch_reads_prompts_and_dumped_conversations(tmp_path):
    source = tmp_path / "in.jsonl"
    messages = json.loads(nacelle.dumps([nacelle.user_text("from messages")]))
    source.write_text(json.dumps({"prompt": "p"}) + "\n" +
                      json.dumps({"messages": messages}) + "\n")
    backend = ScriptedBackend(["one", "two"])
    out = tmp_path / "out.jsonl"
    totals = batch.main_batch(nacelle.Agent(backend, "s"), source, out, 1)
    assert (totals.count, totals.failures) == (2, 0)
    seen = sorted(r.messages[-1].text for r in backend.requests)
    assert seen == ["from messages", "p"]
    assert sorted(json.loads(x)["index"] for x in out.read_text().splitlines()) == [0, 1]
    again = batch.main_batch(nacelle.Agent(ScriptedBackend([]), "s"), source, out, 1)
    assert again.count == 0, "a rerun of a finished batch runs nothing"


def test_main_batch_refuses_a_line_that_is_not_a_conversation(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"prompt": "p"}\n\n')
    with pytest.raises(nacelle.ConfigError, match="line 2"):
        batch.main_batch(nacelle.Agent(ScriptedBackend([]), "s"), source, tmp_path / "o", 1)


def test_main_batch_refuses_a_line_nested_five_thousand_deep_naming_it(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"prompt": "p"}\n{"messages": ' + "[" * 5000 + "]" * 5000 + "}\n")
    with pytest.raises(nacelle.ConfigError, match="line 2: .*nested deeper than 160 levels"):
        batch.main_batch(nacelle.Agent(ScriptedBackend([]), "s"), source, tmp_path / "o", 1)


def test_main_batch_refuses_results_in_its_own_input_file_and_leaves_the_input_whole(
        tmp_path):
    source = tmp_path / "in.jsonl"
    text = json.dumps({"prompt": "p"}) + "\n" + json.dumps({"prompt": "last"})  # no newline
    source.write_text(text)
    (tmp_path / "link.jsonl").symlink_to(source)
    backend = ScriptedBackend(["one", "two"])
    for output in (source, str(source), tmp_path / "link.jsonl", tmp_path / "." / "in.jsonl"):
        with pytest.raises(nacelle.ConfigError, match="same file"):
            batch.main_batch(nacelle.Agent(backend, "s"), source, output, 1)
    assert source.read_text() == text and backend.requests == []


def test_run_many_refuses_one_conversation_and_a_bad_progress():
    agent = nacelle.Agent(ScriptedBackend([]), "s")
    with pytest.raises(nacelle.ConfigError):
        batch.run_many(agent, "one prompt")
    with pytest.raises(nacelle.ConfigError):
        batch.run_many(agent, ["q"], progress="yes")
    with pytest.raises(nacelle.ConfigError):
        batch.run_many(agent, ["q"], max_workers=0)


def test_ray_executor_without_ray_names_the_extra(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_ray(name, *args):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_ray)
    with pytest.raises(nacelle.ConfigError, match=r"nacelle-sdk\[ray\]"):
        batch.ray_executor()


HIGH, LOW, EMOJI = "\ud83d", "\ude00", "\U0001f600"  # an emoji cut in two UTF-16 halves


def split_emoji_agent(server):
    """An Agent on the Anthropic backend whose answer streams an emoji's two halves in
    two deltas, as a server that cuts by UTF-16 code unit sends it."""
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hi " + HIGH, LOW + "!"])))
    return nacelle.Agent(anthropic.Backend("sk-ant-test-0123456789", base_url=server.url,
                                           max_retries=0), "Be brief.")


def test_an_answer_with_an_emoji_split_over_two_deltas_is_one_whole_result_line(tmp_path):
    results = tmp_path / "out.jsonl"
    with FakeServer() as server:
        done = list(batch.run_many(split_emoji_agent(server), ["Smile"], results=results,
                                   progress=False))
    assert [item.ok for item in done] == [True]
    assert json.loads(results.read_text(encoding="utf-8"))["text"] == "Hi " + EMOJI + "!"


def test_the_plain_progress_line_shows_each_provider_batch_round_and_polls_sparsely():
    stream, now = io.StringIO(), [0.0]
    line = ProgressLine(stream, clock=lambda: now[0])
    for seconds, status in ((0, "round 1: 1 batch in_progress"),
                            (5, "round 1: 1 batch in_progress (3 processing)"),
                            (40, "round 1: 1 batch in_progress (1 processing)"),
                            (41, "round 2: 1 batch in_progress")):
        now[0] = seconds
        line(Progress(0, 3, 0, seconds, 0.0, batch=status))
    shown = stream.getvalue().splitlines()
    assert [s.split(", ", 5)[-1] for s in shown] == [
        "round 1: 1 batch in_progress", "round 1: 1 batch in_progress (1 processing)",
        "round 2: 1 batch in_progress"]
