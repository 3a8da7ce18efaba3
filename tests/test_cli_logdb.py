"""The log database: its schema by version, search with and without FTS5, damage,
and writers at once."""

import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nacelle.cli import logdb
from nacelle.cli.logdb import Call, Entry, LogsError

ROOT = Path(__file__).resolve().parent.parent


def entry(prompt="hello", response="hi there", **fields):
    fields.setdefault("datetime_utc", "2026-01-02T03:04:05.000+00:00")
    return Entry(prompt=prompt, response=response, backend="anthropic", model="claude-x",
                 **fields)


@pytest.fixture(params=["fts5", "like"])
def search(request, monkeypatch):
    """Each search test runs with FTS5 and with the fallback forced."""
    if request.param == "fts5" and not logdb.has_fts5():
        pytest.skip("this Python's SQLite has no FTS5")
    monkeypatch.setattr(logdb, "_fts5", request.param == "fts5")
    return request.param


def test_a_new_log_is_private_and_at_the_current_version(tmp_path):
    path = str(tmp_path / "data" / "logs.db")
    logdb.record(path, entry())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "data").st_mode) == 0o700
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(logdb.MIGRATIONS)


def test_a_run_is_read_back_with_every_field(tmp_path):
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry(input_tokens=10, output_tokens=5, cache_read_tokens=3,
                             cache_creation_tokens=2, reasoning_tokens=1, cost=0.25,
                             duration_ms=1500, stop="end", session="work",
                             conversation_id="c1",
                             tool_calls=(Call("t1", "read_file", '{"path": "a"}', "text"),
                                         Call("t2", "run_command", "{}", "denied", True))))
    [got] = logdb.entries(path)
    assert got == {
        "id": 1, "datetime_utc": "2026-01-02T03:04:05.000+00:00", "prompt": "hello",
        "response": "hi there", "backend": "anthropic", "model": "claude-x",
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 3,
                  "cache_creation_tokens": 2, "reasoning_tokens": 1},
        "cost": 0.25, "duration_ms": 1500, "stop": "end", "error": None, "session": "work",
        "conversation_id": "c1", "resumed": False, "tool_calls": [
            {"call_id": "t1", "name": "read_file", "input": '{"path": "a"}', "result": "text",
             "failed": False},
            {"call_id": "t2", "name": "run_command", "input": "{}", "result": "denied",
             "failed": True}]}


def test_a_long_tool_input_and_result_are_cut_with_a_note(tmp_path):
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry(tool_calls=(Call("t", "write_file", "i" * 20_000, "r" * 5_000),)))
    [call] = logdb.entries(path)[0]["tool_calls"]
    assert call["input"] == "i" * 10_000 + "... (10,000 more characters)"
    assert call["result"] == "r" * 1_000 + "... (4,000 more characters)"


def test_the_latest_runs_come_oldest_first_and_zero_means_all(tmp_path):
    path = str(tmp_path / "logs.db")
    for i in range(5):
        logdb.record(path, entry(prompt=f"p{i}"))
    assert [e["prompt"] for e in logdb.entries(path)] == ["p2", "p3", "p4"]
    assert [e["prompt"] for e in logdb.entries(path, limit=1)] == ["p4"]
    assert [e["prompt"] for e in logdb.entries(path, limit=0)] == [f"p{i}" for i in range(5)]
    assert logdb.count(path) == 5


def test_a_version_1_log_is_migrated_and_keeps_its_runs(tmp_path):
    path = str(tmp_path / "logs.db")
    with sqlite3.connect(path) as db:  # the file the first schema made
        logdb.MIGRATIONS[0](db)
        db.execute("INSERT INTO responses (datetime_utc, prompt, response, backend, model, "
                   "input_tokens, output_tokens, cost, duration_ms, stop) "
                   "VALUES ('2025-01-01T00:00:00+00:00', 'old prompt', 'old answer', "
                   "'anthropic', 'claude-old', 7, 8, NULL, 900, 'end')")
        db.execute("INSERT INTO tool_calls (response_id, call_id, name, input, result) "
                   "VALUES (1, 't', 'read_file', '{}', 'ok')")
        db.execute("PRAGMA user_version = 1")
    db.close()
    logdb.record(path, entry(prompt="new prompt", cache_read_tokens=4, conversation_id="c"))
    old, new = logdb.entries(path)
    assert (old["prompt"], old["usage"]["input_tokens"], old["usage"]["cache_read_tokens"],
            old["conversation_id"], old["cost"]) == ("old prompt", 7, 0, None, None)
    assert old["tool_calls"][0]["name"] == "read_file"
    assert (new["prompt"], new["usage"]["cache_read_tokens"]) == ("new prompt", 4)
    assert old["resumed"] is False
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(logdb.MIGRATIONS)


def test_a_version_1_log_is_searchable_after_migrating(tmp_path, search):
    path = str(tmp_path / "logs.db")
    with sqlite3.connect(path) as db:
        logdb.MIGRATIONS[0](db)
        db.execute("INSERT INTO responses (datetime_utc, prompt, response, backend, model) "
                   "VALUES ('2025-01-01T00:00:00+00:00', 'about pelicans', 'yes', 'b', 'm')")
        db.execute("PRAGMA user_version = 1")
    db.close()
    assert [e["prompt"] for e in logdb.entries(path, query="pelicans")] == ["about pelicans"]


def test_a_log_from_a_newer_version_is_refused_in_one_line(tmp_path):
    path = str(tmp_path / "logs.db")
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(logdb.MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(LogsError) as caught:
        logdb.record(path, entry())
    assert "newer nacelle" in str(caught.value) and "\n" not in str(caught.value)


def test_search_matches_every_word_in_the_prompt_or_the_answer(tmp_path, search):
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry("Tell me about pelicans", "They fly in groups."))
    logdb.record(path, entry("And penguins?", "Penguins do not fly."))
    logdb.record(path, entry("Something else", "Nothing to see."))
    assert [e["prompt"] for e in logdb.entries(path, query="fly")] == [
        "Tell me about pelicans", "And penguins?"]
    assert [e["prompt"] for e in logdb.entries(path, query="penguins fly")] == ["And penguins?"]
    assert [e["prompt"] for e in logdb.entries(path, query="PELICANS")] == [
        "Tell me about pelicans"]
    assert logdb.entries(path, query="walrus") == []
    assert [e["prompt"] for e in logdb.entries(path, query="fly", limit=1)] == ["And penguins?"]


def test_search_text_is_never_query_syntax(tmp_path, search):
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry('say "NEAR" AND -x OR *', "100% sure_thing"))
    logdb.record(path, entry("plain", "1000 surely"))
    for query in ('"NEAR"', "AND", "-x", "OR *", 'a"b', "(", "NEAR("):
        logdb.entries(path, query=query)  # no syntax error
    assert [e["prompt"] for e in logdb.entries(path, query="NEAR")] == ['say "NEAR" AND -x OR *']
    if search == "like":  # the wildcards of LIKE are matched as themselves
        assert [e["response"] for e in logdb.entries(path, query="100%")] == ["100% sure_thing"]
        assert [e["response"] for e in logdb.entries(path, query="e_t")] == ["100% sure_thing"]


def test_search_can_be_narrowed_to_a_model(tmp_path, search):
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry("hello one"))
    logdb.record(path, Entry("t", "hello two", "r", "openai", "gpt-x"))
    assert [e["prompt"] for e in logdb.entries(path, query="hello", model="gpt-x")] == [
        "hello two"]
    assert [e["prompt"] for e in logdb.entries(path, model="claude-x")] == ["hello one"]


def test_runs_written_without_fts5_are_found_once_fts5_is_back(tmp_path, monkeypatch):
    if not logdb.has_fts5():
        pytest.skip("this Python's SQLite has no FTS5")
    path = str(tmp_path / "logs.db")
    logdb.record(path, entry("indexed first"))
    monkeypatch.setattr(logdb, "_fts5", False)
    logdb.record(path, entry("written without the index"))
    monkeypatch.setattr(logdb, "_fts5", True)
    assert [e["prompt"] for e in logdb.entries(path, query="without")] == [
        "written without the index"]
    logdb.record(path, entry("after the rebuild, without"))
    assert len(logdb.entries(path, query="without")) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "table missing"])
def test_a_damaged_log_is_one_line_naming_the_file_and_how_to_move_it(tmp_path, damage):
    path = str(tmp_path / "logs.db")
    if damage == "garbage":
        Path(path).write_bytes(b"this is not a database\x00" * 100)
    else:
        for i in range(40):
            logdb.record(path, entry(prompt=f"p{i} " + "x" * 1000))
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if damage == "table missing":
                db.execute("DROP TABLE tool_calls")
        db.close()
        if damage == "truncated":
            data = Path(path).read_bytes()
            Path(path).write_bytes(data[:len(data) // 2])
    for attempt in (lambda: logdb.record(path, entry()), lambda: logdb.entries(path),
                    lambda: logdb.count(path)):
        with pytest.raises(LogsError) as caught:
            attempt()
        message = str(caught.value)
        assert "\n" not in message and path in message
        assert f"mv {path} {path}.damaged" in message


def test_threads_writing_at_once_all_land(tmp_path):
    path = str(tmp_path / "logs.db")
    failures = []

    def write(n):
        try:
            for i in range(10):
                logdb.record(path, entry(prompt=f"thread {n} run {i}"))
        except Exception as err:  # noqa: BLE001 - reported below
            failures.append(err)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert logdb.count(path) == 40


WRITER = """
import sys
from nacelle.cli import logdb
for i in range(10):
    logdb.record(sys.argv[1], logdb.Entry("t", f"process {sys.argv[2]} run {i}", "r", "b", "m"))
"""


def test_processes_writing_at_once_all_land(tmp_path):
    path = str(tmp_path / "logs.db")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, path, str(n)], env=env)
               for n in range(3)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    assert logdb.count(path) == 30
    assert len(logdb.entries(path, query="process", limit=0)) == 30


def test_processes_writing_to_a_new_log_at_once_all_get_their_entry_in(tmp_path):
    # Each new file switched to WAL by several processes at once: SQLite refuses some of
    # them without waiting (a lock deadlock), and they must open and write again. Before
    # that, about one process in ninety here logged nothing.
    code = ("import sys; from nacelle.cli.logdb import Entry, record; "
            "record(sys.argv[1], Entry('2026-12-02T00:00:00Z', 'p', 'r', 'b', 'm'))")
    for n in range(8):
        path = str(tmp_path / f"logs{n}.db")
        runs = [subprocess.Popen([sys.executable, "-c", code, path], stderr=subprocess.PIPE)
                for _ in range(5)]
        for run in runs:
            _, err = run.communicate(timeout=60)
            assert run.returncode == 0, err.decode()
        db = sqlite3.connect(path)
        try:
            assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 5
        finally:
            db.close()
