"""The interactive session, run as a real process on a pseudo-terminal against a
loopback FakeServer: the conversation carried, approvals at the terminal, Ctrl-C,
history, slash commands and the spinner."""

import fcntl
import os
import pty
import re
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from nacelle.sessions import FileStore
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

pytestmark = pytest.mark.slow  # every test runs the command on a pseudo-terminal

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-ant-cli-test-key-0123456789"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


class Terminal:
    """``python -m nacelle ARGS`` with a pty as its controlling terminal."""

    def __init__(self, *args, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: never return into pytest
            try:
                os.execve(sys.executable, [sys.executable, "-m", "nacelle", *args], env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        self.raw = b""
        self.seen = 0  # where the next expect starts looking
        self.status = None

    @property
    def text(self):
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def _read(self, timeout):
        import select

        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child has gone and the pty is closed
            data = b""
        if not data:
            raise EOFError(f"the terminal closed; it showed:\n{self.text}")
        self.raw += data
        return True

    def expect(self, wanted, timeout=30):
        """Wait until ``wanted`` shows after the last match; return the text up to it."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.text.find(wanted, self.seen)
            if at != -1:
                before = self.text[self.seen:at]
                self.seen = at + len(wanted)
                return before
            left = deadline - time.monotonic()
            assert left > 0, f"{wanted!r} never showed; the terminal showed:\n{self.text}"
            self._read(min(left, 0.5))

    def send(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status) if hasattr(
                    os, "waitstatus_to_exitcode") else status >> 8
                break
            assert time.monotonic() < deadline, f"nacelle did not exit:\n{self.text}"
            try:
                self._read(0.1)
            except EOFError:
                pass
        return self.status

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def terminal(server, tmp_path):
    opened = []

    def start(*args, env=None):
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_", "XDG_"))}
        environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
                        "NACELLE_CONFIG": os.devnull, "ANTHROPIC_BASE_URL": server.url,
                        "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
                        "TERM": "dumb", "INPUTRC": os.devnull})
        environ.update(env or {})
        term = Terminal("--root", str(tmp_path), *args, env=environ)
        opened.append(term)
        return term

    yield start
    for term in opened:
        term.close()


def request_texts(request):
    return [block.get("text") for m in request.json()["messages"] for block in m["content"]]


def test_the_interactive_session_carries_the_conversation(server, terminal):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(["Nice to meet you, Ada."])),
                 Reply(chunks=anthropic_stream(["Your name is Ada."])))
    term = terminal()
    term.expect("> ")
    term.send("My name is Ada.\r")
    term.expect("Nice to meet you, Ada.")
    term.expect("> ")
    term.send("What is my name?\r")
    term.expect("Your name is Ada.")
    term.expect("> ")
    term.send("exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[1])[:3] == [
        "My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]


def test_the_interactive_session_survives_a_failed_run(server, terminal):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], error=("invalid_request_error", "bad"))),
                 Reply(chunks=anthropic_stream(["Recovered."])))
    term = terminal()
    term.expect("> ")
    term.send("one\r")
    term.expect("nacelle: error: StreamError")
    term.expect("> ")
    term.send("two\r")
    term.expect("Recovered.")
    term.expect("> ")
    term.send("\x04")  # Ctrl-D at an empty prompt leaves
    assert term.wait() == 0


def test_ctrl_c_cancels_the_run_and_returns_to_the_prompt(server, terminal):
    server.queue("/v1/messages",
                 Reply(chunks=[(anthropic_stream(["slow"])[0], 0.0), (b": wait\n\n", 30.0)]),
                 Reply(chunks=anthropic_stream(["Second answer."])))
    term = terminal()
    term.expect("> ")
    term.send("first\r")
    assert server.wait_requests(1, timeout=20)
    time.sleep(0.3)
    term.send("\x03")
    term.expect("(cancelled)")
    term.expect("> ")
    term.send("second\r")
    term.expect("Second answer.")
    term.expect("> ")
    term.send("exit\r")
    assert term.wait() == 0


def test_a_write_at_the_terminal_shows_the_diff_and_a_no_refuses_it(server, terminal, tmp_path):
    (tmp_path / "x.txt").write_text("old line\n", encoding="utf-8")
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "write_file", '{"path": "x.txt", "content": "new line\\n"}')])),
                 Reply(chunks=anthropic_stream(["Understood."])))
    term = terminal("Write x")
    shown = term.expect("Allow write_file")
    assert "--- a/x.txt" in shown and "-old line" in shown and "+new line" in shown
    term.expect("ne[v]er: ")
    term.send("n\r")
    term.expect("refused write_file")
    term.expect("Understood.")
    assert term.wait() == 0
    assert (tmp_path / "x.txt").read_text() == "old line\n"


def test_always_at_the_terminal_approves_the_rest_of_the_run(server, terminal, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "write_file", '{"path": "a.txt", "content": "1"}')])),
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_2", "write_file", '{"path": "b.txt", "content": "2"}')])),
                 Reply(chunks=anthropic_stream(["Both written."])))
    term = terminal("Write two files")
    term.expect("ne[v]er: ")
    term.send("a\r")
    term.expect("Both written.")
    assert term.wait() == 0
    assert term.text.count("Allow write_file") == 1
    assert (tmp_path / "a.txt").read_text() == "1" and (tmp_path / "b.txt").read_text() == "2"


def test_an_interactive_session_is_saved_after_each_answer(server, terminal, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(["Noted."])),
                 Reply(chunks=anthropic_stream(["Blue."])))
    env = {"NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")}
    term = terminal("--session", "chat", env=env)
    term.expect("> ")
    term.send("My colour is blue.\r")
    term.expect("Noted.")
    term.expect("> ")
    term.send("exit\r")
    assert term.wait() == 0
    term = terminal("--session", "chat", env=env)
    term.expect("(session chat: 2 messages so far)")
    term.expect("> ")
    term.send("What is my colour?\r")
    term.expect("Blue.")
    term.expect("> ")
    term.send("exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[1])[:3] == ["My colour is blue.", "Noted.",
                                                     "What is my colour?"]
    assert len(FileStore(tmp_path / "sessions").load("chat")) == 4


def test_history_is_kept_across_sessions_in_the_data_directory(server, terminal, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["One."])),
                 Reply(chunks=anthropic_stream(["Again."])))
    term = terminal()
    term.expect("> ")
    term.send("remember me\r")
    term.expect("One.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    history = tmp_path / "data" / "nacelle" / "history"
    assert "remember me" in history.read_text()
    assert history.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*history*"))
    term = terminal()
    term.expect("> ")
    term.send("\x10")  # Ctrl-P: the previous line of history, /exit
    term.expect("/exit")
    term.send("\x10")  # and the one before it
    term.expect("remember me")
    term.send("\r")
    term.expect("Again.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[1]) == ["remember me"]


def test_a_trailing_backslash_continues_the_prompt(server, terminal):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Got both."])))
    term = terminal()
    term.expect("> ")
    term.send("line one\\\r")
    term.expect("... ")
    term.send("line two\r")
    term.expect("Got both.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[0]) == ["line one\nline two"]


def test_slash_commands_help_cost_clear_model_save_and_load(server, terminal, tmp_path):
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream([f"Answer {i}."]))
                                   for i in range(3)])
    env = {"NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")}
    term = terminal(env=env)
    term.expect("> ")
    term.send("/help\r")
    term.expect("/model NAME")
    term.expect("> ")
    term.send("first\r")
    term.expect("Answer 0.")
    term.expect("> ")
    term.send("/cost\r")
    term.expect("this session: 37 tokens (in 25, out 12), $")
    term.expect("> ")
    term.send("/save keep\r")
    term.expect("(saved as keep")
    term.expect("> ")
    term.send("/clear\r")
    term.expect("(conversation cleared)")
    term.expect("> ")
    term.send("/model claude-other-1\r")
    term.expect("(model: claude-other-1)")
    term.expect("> ")
    term.send("second\r")
    term.expect("Answer 1.")
    term.expect("> ")
    term.send("/load keep\r")
    term.expect("(session keep: 2 messages)")
    term.expect("> ")
    term.send("third\r")
    term.expect("Answer 2.")
    term.expect("> ")
    term.send("/nonsense\r")
    term.expect("unknown command /nonsense")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[1]) == ["second"]
    assert server.requests[1].json()["model"] == "claude-other-1"
    # /save made keep the current session, so the answer after /clear was saved there
    assert request_texts(server.requests[2])[:3] == ["second", "Answer 1.", "third"]
    assert len(FileStore(tmp_path / "sessions").load("keep")) == 4


def test_load_of_a_mistyped_name_says_so_and_keeps_the_conversation(server, terminal, tmp_path):
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream([f"Answer {i}."]))
                                   for i in range(2)])
    FileStore(tmp_path / "sessions").save("project-notes", [])
    term = terminal(env={"NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")})
    term.expect("> ")
    term.send("first\r")
    term.expect("Answer 0.")
    term.expect("> ")
    term.send("/load project-note\r")
    shown = term.expect("(the conversation is unchanged)")
    assert "no session named project-note in" in shown
    assert "did you mean project-notes?" in shown
    term.expect("> ")
    term.send("second\r")
    term.expect("Answer 1.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[1]) == ["first", "Answer 0.", "second"]
    assert not (tmp_path / "sessions" / "project-note.json").exists()


def test_slash_skills_and_memory_list_what_the_flags_loaded(server, terminal, tmp_path):
    folder = tmp_path / "skills" / "tea"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: tea\ndescription: Brew\n  tea.\n---\nbody\n")
    (tmp_path / "mem" / "notes").mkdir(parents=True)
    (tmp_path / "mem" / "notes" / "me.md").write_text("tea")
    term = terminal("--skills", str(tmp_path / "skills"), "--memory", str(tmp_path / "mem"))
    term.expect("> ")
    term.send("/skills\r")
    term.expect("tea: Brew tea.")
    term.expect("> ")
    term.send("/memory\r")
    term.expect("(1 files)")
    term.expect("/memories/notes/me.md  3 bytes")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert server.requests == []


def test_slash_skills_and_memory_say_how_to_load_them_when_not_given(server, terminal):
    term = terminal()
    term.expect("> ")
    term.send("/skills\r")
    term.expect("(no skills: start with --skills DIR)")
    term.expect("> ")
    term.send("/memory\r")
    term.expect("(no memory: start with --memory DIR)")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0


def test_ctrl_c_at_the_prompt_drops_the_line_and_leaves_a_prompt(server, terminal):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Clean."])))
    term = terminal()
    term.expect("> ")
    time.sleep(0.3)  # readline has the terminal (a Ctrl-C racing its set-up can be lost)
    term.send("half a thou")
    term.expect("half a thou")
    time.sleep(0.3)
    term.send("\x03")
    term.expect("^C")
    term.expect("> ")
    term.send("whole\r")
    term.expect("Clean.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert request_texts(server.requests[0]) == ["whole"]


def test_ctrl_c_at_an_approval_cancels_the_run_and_leaves_a_prompt(server, terminal, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "edit_file",
                      '{"path": "a.txt", "old_text": "one", "new_text": "two"}')])),
                 Reply(chunks=anthropic_stream(["After."])))
    (tmp_path / "a.txt").write_text("line one\n", encoding="utf-8")
    term = terminal()
    term.expect("> ")
    term.send("edit it\r")
    shown = term.expect("Allow edit_file")
    assert "-line one" in shown and "+line two" in shown
    term.expect("ne[v]er: ")
    term.send("\x03")
    term.expect("(cancelled)")
    term.expect("> ")
    term.send("next\r")
    term.expect("After.")
    assert term.text.count("(cancelled)") == 1, term.text
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    assert (tmp_path / "a.txt").read_text() == "line one\n"


def test_a_spinner_turns_on_the_terminal_until_the_first_token(server, terminal):
    first, *rest = anthropic_stream(["Slow answer."])
    server.queue("/v1/messages", Reply(chunks=[(first, 1.5)] + [(c, 0.0) for c in rest]))
    term = terminal()
    term.expect("> ")
    term.send("take your time\r")
    term.expect("waiting for the model")
    term.expect("Slow answer.")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0


MARKDOWN = ["# Plan\n", "Some **bold** and `code`.\n", "```\n", "**raw**\n", "```\n"]


def test_markdown_is_drawn_on_a_terminal_line_by_line(server, terminal):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(MARKDOWN)))
    term = terminal(env={"NO_COLOR": ""})
    term.expect("> ")
    term.send("plan it\r")
    term.expect("raw")
    term.expect("> ")
    term.send("/exit\r")
    assert term.wait() == 0
    shown = term.raw.decode()
    assert "\x1b[1m\x1b[4mPlan\x1b[0m" in shown and "# Plan" not in shown
    assert "\x1b[1mbold" in shown and "\x1b[36mcode\x1b[0m" in shown
    assert "\x1b[36m**raw**\x1b[0m" in shown  # a code block's lines are shown as written


def test_a_one_prompt_run_draws_markdown_on_a_terminal_and_not_with_no_color(server, terminal):
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream(MARKDOWN)) for _ in range(2)])
    term = terminal("plan it", env={"NO_COLOR": ""})
    assert term.wait() == 0
    assert "\x1b[1m\x1b[4mPlan\x1b[0m" in term.raw.decode()
    term = terminal("plan it")  # NO_COLOR=1: the text as the model wrote it
    assert term.wait() == 0
    assert "# Plan" in term.text and "Some **bold** and `code`." in term.text


def test_ctrl_c_on_a_terminal_keeps_the_line_held_for_drawing(server, terminal):
    chunks = anthropic_stream(["**Half** a li", "ne."])
    stall = next(i for i, c in enumerate(chunks) if b'"ne."' in c)
    server.queue("/v1/messages", Reply(chunks=[(c, 60.0 if i == stall else 0.0)
                                               for i, c in enumerate(chunks)]))
    term = terminal("say it", env={"NO_COLOR": ""})
    deadline = time.monotonic() + 30
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.1)
    until = time.monotonic() + 2
    while time.monotonic() < until:  # the first delta arrives and is held: no newline yet
        term._read(0.2)
    assert "Half" not in term.text
    term.send("\x03")
    term.expect("Half a li")
    term.expect("(cancelled)")
    assert term.wait() == 130


def test_slash_help_lists_every_command_the_session_takes():
    from nacelle.cli.interactive import HELP

    for command in ("/help", "/clear", "/cost", "/model NAME", "/save NAME", "/load NAME",
                    "/skills", "/memory", "/attach FILE", "/exit"):
        assert f"\n{command} " in "\n" + HELP, command
