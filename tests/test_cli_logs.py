"""nacelle logs: every run of the command kept in logs.db, run as a real process against
a loopback FakeServer, and read back by the subcommand."""

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nacelle.cli import logdb
from nacelle.cli.logs import logs_command, render
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream
from test_cli import KEY, ROOT, nacelle
from test_cli_interactive import Terminal

pytestmark = pytest.mark.slow  # the runs are the nacelle command as a process


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def data(tmp_path, monkeypatch):
    """The data directory of the runs below, and of ``logs_command`` in this process."""
    directory = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(directory))
    return directory


def answer(*texts, tool_calls=()):
    return Reply(chunks=anthropic_stream(list(texts), tool_calls=tool_calls))


def run(*args, server, data, tmp_path):
    return nacelle(*args, "--root", str(tmp_path), server=server,
                   env={"XDG_DATA_HOME": str(data)})


def logs(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = logs_command(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_each_run_is_logged_and_logs_shows_the_last_three_oldest_first(server, data, tmp_path):
    for i in range(4):
        server.queue("/v1/messages", answer(f"Answer {i}."))
        out = run(f"Question {i}?", server=server, data=data, tmp_path=tmp_path)
        assert out.returncode == 0, out.stderr
    shown = nacelle("logs", env={"XDG_DATA_HOME": str(data)})
    assert shown.returncode == 0, shown.stderr
    assert [line for line in shown.stdout.splitlines() if line.startswith("Question")] == [
        "Question 1?", "Question 2?", "Question 3?"]
    for heading in ("## Prompt", "## Response", "Model: anthropic ", "Usage: in "):
        assert heading in shown.stdout
    assert "Answer 3." in shown.stdout and "stop: end" in shown.stdout
    code, text, _ = logs("-n", "0")
    assert code == 0 and text.count("## Prompt") == 4
    code, text, _ = logs("-n", "1")
    assert "Question 3?" in text and "Question 2?" not in text


def test_a_logged_run_keeps_its_model_usage_cost_and_tool_calls(server, data, tmp_path):
    (tmp_path / "notes.txt").write_text("the launch code is 42\n", encoding="utf-8")
    server.queue("/v1/messages",
                 answer("Let me look.", tool_calls=[("toolu_1", "read_file", '{"path": "notes.txt"}'),
                                                    ("toolu_2", "read_file", '{"path": "gone.txt"}')]),
                 answer("It says 42."))
    out = run("What do the notes say?", "--session", "work", server=server, data=data,
              tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    code, text, _ = logs("--json")
    [entry] = json.loads(text)
    assert sorted(entry) == sorted([
        "id", "datetime_utc", "prompt", "response", "backend", "model", "usage", "cost",
        "duration_ms", "stop", "error", "session", "conversation_id", "resumed", "tool_calls"])
    assert entry["prompt"] == "What do the notes say?"
    assert entry["response"] == "Let me look.\n\nIt says 42."
    assert entry["backend"] == "anthropic" and entry["model"]
    assert entry["usage"]["input_tokens"] > 0 and entry["usage"]["output_tokens"] > 0
    assert entry["cost"] is not None and entry["cost"] > 0
    assert entry["stop"] == "end" and entry["error"] is None
    assert entry["session"] == "work" and entry["conversation_id"] is None
    assert entry["datetime_utc"].endswith("+00:00") and entry["duration_ms"] >= 0
    first, second = entry["tool_calls"]
    assert (first["call_id"], first["name"], json.loads(first["input"]), first["failed"]) == (
        "toolu_1", "read_file", {"path": "notes.txt"}, False)
    assert "launch code is 42" in first["result"]
    assert second["failed"] is True and second["result"]


def test_no_request_header_or_key_is_kept(server, data, tmp_path):
    server.queue("/v1/messages", answer("Fine."))
    assert run("hi", server=server, data=data, tmp_path=tmp_path).returncode == 0
    assert KEY.encode() not in (data / "nacelle" / "logs.db").read_bytes()
    assert KEY not in logs("--json")[1]


@pytest.mark.parametrize("search", ["fts5", "like"])
def test_q_finds_runs_by_the_words_of_their_prompt_or_answer(server, data, tmp_path,
                                                              monkeypatch, search):
    for prompt, reply in (("Tell me about pelicans", "They glide."),
                          ("And about walruses", "They swim and glide less."),
                          ("Unrelated", "Nothing.")):
        server.queue("/v1/messages", answer(reply))
        assert run(prompt, server=server, data=data, tmp_path=tmp_path).returncode == 0
    if search == "fts5" and not logdb.has_fts5():
        pytest.skip("this Python's SQLite has no FTS5")
    monkeypatch.setattr(logdb, "_fts5", search == "fts5")
    code, text, _ = logs("-q", "glide", "--json")
    assert [e["prompt"] for e in json.loads(text)] == ["Tell me about pelicans",
                                                       "And about walruses"]
    code, text, _ = logs("-q", "about swim")
    assert "And about walruses" in text and "pelicans" not in text
    code, text, err = logs("-q", "nowhere")
    assert (code, text) == (0, "")


def test_the_help_says_how_search_works_without_fts5(data):
    out = nacelle("logs", "--help")
    assert out.returncode == 0
    assert "FTS5" in out.stdout and "LIKE" in out.stdout


def test_nacelle_help_lists_logs_and_the_no_log_flag():
    out = nacelle("--help")
    assert "  logs [-n N] [-q TEXT] [--json]" in out.stdout
    assert "--no-log" in out.stdout


def test_logs_off_stops_logging_and_on_starts_it_again(server, data, tmp_path):
    server.queue("/v1/messages", answer("one"), answer("two"), answer("three"),
                 answer("four"), answer("five"))
    assert run("first", server=server, data=data, tmp_path=tmp_path).returncode == 0
    off = nacelle("logs", "off", env={"XDG_DATA_HOME": str(data)})
    assert off.returncode == 0 and "logging is off" in off.stderr
    assert "logging: off" in logs("status")[1]
    assert run("second", server=server, data=data, tmp_path=tmp_path).returncode == 0
    assert run("third", "--log", server=server, data=data, tmp_path=tmp_path).returncode == 0
    assert logs("on")[0] == 0
    assert "logging: on" in logs("status")[1]
    assert run("fourth", "--no-log", server=server, data=data, tmp_path=tmp_path).returncode == 0
    assert run("fifth", server=server, data=data, tmp_path=tmp_path).returncode == 0
    code, text, _ = logs("-n", "0", "--json")
    assert [e["prompt"] for e in json.loads(text)] == ["first", "third", "fifth"]
    status = logs("status")[1]
    assert "runs: 3" in status and str(data / "nacelle" / "logs.db") in status


def test_logs_path_names_the_file_in_the_data_directory(data):
    out = nacelle("logs", "path", env={"XDG_DATA_HOME": str(data)})
    assert out.stdout == str(data / "nacelle" / "logs.db") + "\n"
    assert not (data / "nacelle" / "logs.db").exists()  # asking makes nothing
    assert logs()[2].startswith("no runs logged yet") and logs("--json")[1] == "[]\n"


def damage(path, how):
    if how == "garbage":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x00garbage, not SQLite\xff" * 200)
        return
    for i in range(40):
        logdb.record(str(path), logdb.Entry("t", f"p{i} " + "x" * 1000, "r", "b", "m"))
    with sqlite3.connect(str(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if how == "table missing":
            db.execute("DROP TABLE responses")
    db.close()
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


@pytest.mark.parametrize("how", ["garbage", "truncated", "table missing"])
def test_a_damaged_log_warns_once_and_the_run_still_succeeds(server, data, tmp_path, how):
    path = data / "nacelle" / "logs.db"
    damage(path, how)
    server.queue("/v1/messages", answer("Still here."))
    out = run("hi", server=server, data=data, tmp_path=tmp_path)
    assert out.returncode == 0 and out.stdout == "Still here.\n"
    warnings = [line for line in out.stderr.splitlines() if "not logged" in line]
    assert len(warnings) == 1 and "Traceback" not in out.stderr
    assert warnings[0].startswith("nacelle: warning: this run was not logged: ")
    assert str(path) in warnings[0] and f"mv {path} {path}.damaged" in warnings[0]


@pytest.mark.parametrize("how", ["garbage", "truncated", "table missing"])
def test_a_damaged_log_is_a_one_line_error_for_nacelle_logs(data, how):
    path = data / "nacelle" / "logs.db"
    damage(path, how)
    for argv in (["logs"], ["logs", "--json"], ["logs", "-q", "p1"], ["logs", "status"]):
        out = nacelle(*argv, env={"XDG_DATA_HOME": str(data)})
        assert out.returncode == 1, (argv, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("nacelle: error: ")
        assert str(path) in out.stderr and "move it aside" in out.stderr


def test_model_text_with_escape_sequences_is_shown_sanitised(server, data, tmp_path):
    server.queue("/v1/messages", answer("clear\x1b[2J\x1b]52;c;aGk=\x07 \u202eevil\r"))
    assert run("say \x1b[31mred", server=server, data=data, tmp_path=tmp_path).returncode == 0
    code, text, _ = logs()
    assert "\x1b" not in text and "\u202e" not in text and "\r" not in text
    assert "clear\\x1b[2J\\x1b]52;c;aGk=\\x07 \\u202eevil\\r" in text
    assert "say \\x1b[31mred" in text
    code, text, _ = logs("--json")
    assert "\x1b" not in text and "\u202e" not in text
    assert json.loads(text)[0]["response"] == "clear\x1b[2J\x1b]52;c;aGk=\x07 \u202eevil\r"


def test_a_rendered_run_shows_a_failed_run_and_an_unknown_cost():
    entry = {"id": 7, "datetime_utc": "2026-01-01T00:00:00.000+00:00", "prompt": "p",
             "response": "", "backend": "openai", "model": "m", "cost": None,
             "usage": {"input_tokens": 3, "output_tokens": 0, "cache_read_tokens": 0,
                       "cache_creation_tokens": 0, "reasoning_tokens": 0},
             "duration_ms": 1234, "stop": None, "error": "APIError: 500 boom", "session": None,
             "conversation_id": "abc", "tool_calls": []}
    text = render(entry)
    assert "# 2026-01-01T00:00:00.000+00:00  id 7, conversation abc" in text
    assert "cost unknown; 1.2 s; error: APIError: 500 boom" in text


def test_two_runs_at_once_are_both_logged(server, data, tmp_path):
    server.queue("/v1/messages", answer("A."), answer("B."))
    environ = {k: v for k, v in __import__("os").environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "NO_COLOR": "1",
                    "NACELLE_CONFIG": "/dev/null", "ANTHROPIC_BASE_URL": server.url,
                    "XDG_DATA_HOME": str(data)})
    runs = [subprocess.Popen([sys.executable, "-m", "nacelle", f"prompt {n}", "--root",
                              str(tmp_path)], env=environ, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True) for n in range(2)]
    for process in runs:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        assert b"not logged" not in err
    code, text, _ = logs("--json")
    assert sorted(e["prompt"] for e in json.loads(text)) == ["prompt 0", "prompt 1"]


def test_the_prompts_of_an_interactive_session_share_a_conversation_id(server, data, tmp_path):
    server.queue("/v1/messages", answer("Nice to meet you, Ada."), answer("Your name is Ada."))
    environ = {"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
               "NACELLE_CONFIG": "/dev/null", "ANTHROPIC_BASE_URL": server.url,
               "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(data), "TERM": "dumb",
               "INPUTRC": "/dev/null", "PATH": "/usr/bin:/bin"}
    term = Terminal("--root", str(tmp_path), env=environ)
    try:
        term.expect("> ")
        term.send("My name is Ada.\r")
        term.expect("Nice to meet you, Ada.")
        term.expect("> ")
        term.send("What is my name?\r")
        term.expect("Your name is Ada.")
        term.expect("> ")
        term.send("exit\r")
        assert term.wait() == 0
    finally:
        term.close()
    code, text, _ = logs("--json")
    first, second = json.loads(text)
    assert (first["prompt"], second["prompt"]) == ("My name is Ada.", "What is my name?")
    assert second["response"] == "Your name is Ada."
    assert first["conversation_id"] and first["conversation_id"] == second["conversation_id"]


def test_an_attached_file_is_not_logged_as_the_prompt(server, data, tmp_path):
    (tmp_path / "notes.txt").write_text("the attached material\n", encoding="utf-8")
    server.queue("/v1/messages", answer("A summary."))
    out = run("-a", str(tmp_path / "notes.txt"), "Summarise this", server=server, data=data,
              tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "the attached material" in json.dumps(server.requests[0].json())
    [entry] = json.loads(logs("--json")[1])
    assert entry["prompt"] == "Summarise this"


def test_a_paused_run_and_its_resumption_are_both_logged(server, data, tmp_path):
    env = {"XDG_DATA_HOME": str(data), "NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")}
    server.queue("/v1/messages",
                 answer("Writing.", tool_calls=[
                     ("toolu_1", "write_file", '{"path": "a.txt", "content": "one"}')]),
                 answer("Wrote a."))
    out = nacelle("--session", "job", "--pause", "write a", "--root", str(tmp_path),
                  server=server, env=env)
    assert out.returncode == 3, out.stderr
    out = nacelle("resume", "job", "--approve", "all", "--root", str(tmp_path), server=server,
                  env=env)
    assert out.returncode == 0, out.stderr
    paused, resumed = json.loads(logs("--json")[1])
    assert (paused["prompt"], paused["stop"], paused["resumed"]) == ("write a", "paused", False)
    assert (resumed["prompt"], resumed["response"], resumed["stop"]) == ("", "Wrote a.", "end")
    assert resumed["resumed"] is True and resumed["session"] == paused["session"] == "job"
    assert resumed["tool_calls"][0]["name"] == "write_file"
    assert "(a paused run, resumed with 'nacelle resume')" in logs()[1]


def test_a_negative_count_is_a_usage_error(data):
    code, out, err = logs("-n", "-1")
    assert (code, out) == (2, "") and err == "nacelle: error: -n must be 0 (all) or more\n"


def test_after_save_or_load_an_interactive_prompt_is_logged_under_the_new_session(
        server, data, tmp_path):
    server.queue("/v1/messages", answer("One."), answer("Two."), answer("Three."))
    environ = {"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
               "NACELLE_CONFIG": "/dev/null", "ANTHROPIC_BASE_URL": server.url,
               "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(data), "TERM": "dumb",
               "INPUTRC": "/dev/null", "PATH": "/usr/bin:/bin"}
    term = Terminal("--root", str(tmp_path), "--session", "first", env=environ)
    try:
        for line, expected in (("prompt one", "One."), ("/save second", "(saved as second"),
                               ("prompt two", "Two."), ("/load first", "(session first:"),
                               ("prompt three", "Three.")):
            term.expect("> ")
            term.send(line + "\r")
            term.expect(expected)
        term.expect("> ")
        term.send("exit\r")
        assert term.wait() == 0
    finally:
        term.close()
    code, text, _ = logs("--json", "-n", "0")
    assert code == 0
    assert [(e["prompt"], e["session"]) for e in json.loads(text)] == [
        ("prompt one", "first"), ("prompt two", "second"), ("prompt three", "first")]
