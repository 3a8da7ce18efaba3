"""The CLI's sessions module: where sessions live and ``nacelle sessions``."""

import io
import os

import pytest

from nacelle.cli.sessions import data_dir, latest, sessions_command, sessions_dir
from nacelle.messages import assistant_text, user_text
from nacelle.sessions import FileStore


def run(argv, directory):
    out, err = io.StringIO(), io.StringIO()
    code = sessions_command(argv, str(directory), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def store(tmp_path):
    store = FileStore(tmp_path / "sessions")
    store.save("older", [user_text("first question"), assistant_text("first answer")])
    store.save("newer", [user_text("second question"), assistant_text("second answer")])
    os.utime(store.path("older"), (1_000_000, 1_000_000))
    return store


def test_the_data_directory_follows_xdg_data_home_and_ignores_a_relative_one(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert data_dir() == str(tmp_path / "nacelle")
    assert sessions_dir("") == str(tmp_path / "nacelle" / "sessions")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == str(tmp_path / "home" / ".local" / "share" / "nacelle")
    assert sessions_dir("~/s") == str(tmp_path / "home" / "s")


def test_list_shows_the_latest_session_first_with_its_first_message(store, tmp_path):
    code, out, err = run([], tmp_path / "sessions")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("newer\t2 messages\tsecond question")
    assert lines[1].startswith("older\t2 messages\tfirst question")
    assert run(["list"], tmp_path / "sessions")[1] == out
    assert latest(store) == "newer"


def test_list_of_a_missing_directory_says_so_and_creates_nothing(tmp_path):
    code, out, err = run(["list"], tmp_path / "none")
    assert code == 0 and out == "" and "no saved sessions" in err
    assert not (tmp_path / "none").exists()


def test_show_prints_the_conversation(store, tmp_path):
    code, out, _ = run(["show", "older"], tmp_path / "sessions")
    assert code == 0
    assert out == "[user] first question\n[assistant] first answer\n"


def test_delete_removes_a_session_and_an_unknown_name_is_one_line(store, tmp_path):
    code, _, err = run(["delete", "older"], tmp_path / "sessions")
    assert code == 0 and "deleted older" in err
    assert store.names() == ["newer"]
    code, _, err = run(["delete", "ghost"], tmp_path / "sessions")
    assert code == 1 and err.count("\n") == 1 and "ghost" in err
    code, _, err = run(["show", "../x"], tmp_path / "sessions")
    assert code == 1 and err.startswith("nacelle: error: ")


def test_an_unreadable_session_is_listed_as_unreadable(store, tmp_path):
    with open(store.path("broken"), "w", encoding="utf-8") as handle:
        handle.write("{not json")
    code, out, _ = run([], tmp_path / "sessions")
    assert code == 0 and "broken\t(unreadable:" in out


def test_list_shows_paused_runs_and_delete_discards_one(store, tmp_path):
    import nacelle
    from nacelle.testing import ScriptedBackend

    @nacelle.tool
    def send(to: str) -> str:
        """Send."""
        return "sent"

    backend = ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c1", "send", '{"to": "ann"}'),))])
    done = nacelle.Agent(backend, "sys", tools=[send], approve=lambda *a: nacelle.PAUSE).run(
        [user_text("tell ann")])
    store.save_checkpoint("nightly", done.checkpoint)
    code, out, _ = run(["list"], tmp_path / "sessions")
    assert code == 0
    assert out.splitlines()[-1] == "nightly\tpaused\t1 call(s) waiting: nacelle resume nightly"
    assert store.checkpoint_names() == ["nightly"] and "nightly" not in store.names()
    code, _, err = run(["delete", "nightly"], tmp_path / "sessions")
    assert code == 0 and err == "deleted nightly and its paused run\n"
    assert store.checkpoint_names() == []


def test_list_and_show_show_a_sessions_escape_sequences_literally(tmp_path):
    store = FileStore(tmp_path / "sessions")
    store.save("hostile", [user_text("q\x1b]52;c;eA==\x07"),
                           assistant_text("a\x1b[2J\x1bc\x9b2J\u202e\r")])
    for argv in ([], ["show", "hostile"]):
        code, out, err = run(argv, tmp_path / "sessions")
        assert code == 0 and err == ""
        assert not {"\x1b", "\x07", "\x9b", "\u202e", "\r"} & set(out)
    assert "q\\x1b]52;c;eA==\\x07" in out and "a\\x1b[2J\\x1bc\\x9b2J\\u202e\\r" in out
