"""Approval policies: secure, remembering, ask and first, each as a decisions table."""

import threading
import time

import pytest

import nacelle
from nacelle import ConfigError, ToolContext, tool
from nacelle.mcp import MCPTool
from nacelle.policy import ask, first, remembering, secure


@tool(read_only=True, open_world=False)
def reader(path: str) -> str:
    """Read."""
    return path


@tool(read_only=True)
def fetcher(url: str) -> str:
    """Fetch (read-only, open world)."""
    return url


@tool(open_world=False)
def writer(path: str) -> str:
    """Write (destructive, closed world)."""
    return path


@tool(read_only=True, destructive=True, open_world=False)
def odd(path: str) -> str:
    """Read-only yet destructive: it says so, so it is not trusted."""
    return path


@tool
def unknown_kind(x: str) -> str:
    """Declares nothing."""
    return x


def mcp_reader(name="remote_read"):
    return MCPTool(None, {"name": name, "inputSchema": {"type": "object"},
                          "annotations": {"readOnlyHint": True, "openWorldHint": False}}, name)


CTX = ToolContext("call_1", 0, "x")
TOOLS = [reader, fetcher, writer, odd, unknown_kind, mcp_reader()]


@pytest.mark.parametrize("name, decision", [
    ("reader", True),
    ("fetcher", nacelle.PAUSE),
    ("writer", nacelle.PAUSE),
    ("odd", nacelle.PAUSE),
    ("unknown_kind", nacelle.PAUSE),
    ("remote_read", nacelle.PAUSE),
    ("not_given", nacelle.PAUSE),
])
def test_secure_runs_read_only_closed_world_tools_and_pauses_the_rest(name, decision):
    assert secure(TOOLS)(name, {}, CTX) is decision


def test_secure_trusts_an_mcp_servers_read_only_claim_only_when_told():
    assert secure(TOOLS, trust_hints=True)("remote_read", {}, CTX) is True
    assert secure(TOOLS, trust_hints=True)("fetcher", {}, CTX) is nacelle.PAUSE


def test_secure_called_without_the_tools_is_a_config_error_not_a_pause_of_every_call():
    with pytest.raises(ConfigError, match=r"secure\(tools\)"):
        secure()
    with pytest.raises(ConfigError, match=r"secure\(tools\)"):
        secure(None, trust_hints=True)


def test_secure_given_an_empty_list_knows_no_tool_and_pauses_everything():
    assert secure([])("reader", {}, CTX) is nacelle.PAUSE


@pytest.mark.parametrize("tools", ["reader", reader, 3, [3], ["reader"]])
def test_secure_refuses_what_is_not_a_list_of_tools(tools):
    with pytest.raises(ConfigError, match="list of tools"):
        secure(tools)


class Toolset:
    """A toolset as the Agent takes one: ``current()`` lists its tools of now."""

    def __init__(self, *tools):
        self.tools = list(tools)

    def current(self):
        return list(self.tools)


def test_secure_reads_the_tools_of_a_toolset_in_the_list_or_given_bare():
    for given in ([Toolset(reader, writer)], Toolset(reader, writer)):
        approve = secure(given)
        assert approve("reader", {}, CTX) is True and approve("writer", {}, CTX) is nacelle.PAUSE


def test_secure_judges_the_builtin_tools_as_declared(tmp_path):
    from nacelle.toolsets import LocalTools

    with LocalTools(tmp_path, allow_bash=True) as local:
        approve = secure(local.tools())
        decisions = {t.name: approve(t.name, {}, CTX) for t in local.tools()}
    assert decisions == {
        "read_file": True, "list_directory": True, "find_files": True,
        "search_content": True, "write_file": nacelle.PAUSE, "edit_file": nacelle.PAUSE,
        "run_command": nacelle.PAUSE}


class Counting:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    def __call__(self, name, input, ctx):
        self.asked.append((name, input))
        return self.answers.pop(0)


@pytest.mark.parametrize("answer, remembered", [
    (True, True), (False, True), ("not now", False), (nacelle.PAUSE, False), (None, False)])
def test_remembering_keeps_true_and_false_and_asks_again_for_anything_else(answer, remembered):
    inner = Counting(answer, answer)
    approve = remembering(inner)
    assert approve("writer", {"path": "a"}, CTX) is answer
    assert approve("writer", {"path": "a"}, CTX) is answer
    assert len(inner.asked) == (1 if remembered else 2)


def test_remembering_by_input_matches_canonical_json_and_tells_inputs_apart():
    inner = Counting(True, False)
    approve = remembering(inner)
    assert approve("writer", {"path": "a", "mode": 1}, CTX) is True
    assert approve("writer", {"mode": 1, "path": "a"}, CTX) is True  # same, other order
    assert approve("writer", {"path": "b", "mode": 1}, CTX) is False
    assert len(inner.asked) == 2


def test_remembering_by_name_asks_once_per_tool():
    inner = Counting(True, False)
    approve = remembering(inner, key="name")
    assert [approve("writer", {"path": p}, CTX) for p in "abc"] == [True, True, True]
    assert approve("reader", {"path": "a"}, CTX) is False
    assert len(inner.asked) == 2


def test_remembering_refuses_an_unknown_key():
    with pytest.raises(ConfigError):
        remembering(Counting(), key="call")


def test_remembering_asks_once_when_threads_ask_the_same_question_together():
    asked = []

    def slow(name, input, ctx):
        asked.append(name)
        time.sleep(0.05)
        return True

    approve = remembering(slow)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(approve("w", {"x": 1}, CTX)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [True] * 8 and asked == ["w"]


class Prompt:
    def __init__(self, *replies):
        self.replies = list(replies)
        self.questions = []

    def __call__(self, question):
        self.questions.append(question)
        if not self.replies:
            raise EOFError
        return self.replies.pop(0)


@pytest.mark.parametrize("replies, first_answer, second_answer, questions", [
    (["y", "y"], True, True, 2),
    (["yes", "n"], True, False, 2),
    (["N", "Y"], False, True, 2),
    (["a"], True, True, 1),
    (["always"], True, True, 1),
    (["v"], False, False, 1),
    (["never"], False, False, 1),
    (["maybe", " y "], True, False, 3),
    (["?", "?", "?"], False, False, 4),
    ([], False, False, 2),
])
def test_ask_decisions_table(replies, first_answer, second_answer, questions):
    prompt = Prompt(*replies)
    approve = ask(prompt)
    assert approve("writer", {"path": "a"}, CTX) is first_answer
    assert approve("writer", {"path": "b"}, CTX) is second_answer
    assert len(prompt.questions) == questions


def test_ask_shows_the_tool_and_its_input_and_remembers_always_per_tool():
    prompt = Prompt("always", "n")
    approve = ask(prompt)
    assert approve("writer", {"path": "a"}, CTX) is True
    assert approve("writer", {"path": "zzz"}, CTX) is True
    assert approve("reader", {"path": "a"}, CTX) is False
    assert prompt.questions[0].startswith('Allow writer {"path":"a"}?')
    assert len(prompt.questions) == 2


def test_ask_cuts_a_long_input_in_its_question():
    prompt = Prompt("y")
    ask(prompt)("writer", {"text": "x" * 1000}, CTX)
    assert len(prompt.questions[0]) < 300


def test_ask_shows_escape_sequences_and_bidi_overrides_in_the_input_literally():
    prompt = Prompt("n")
    ask(prompt)("writer", {"path": "a\x9b2J\u202etxt.exe\x7f"}, CTX)
    question = prompt.questions[0]
    assert not {"\x9b", "\u202e", "\x7f"} & set(question)
    assert '{"path":"a\\x9b2J\\u202etxt.exe\\x7f"}' in question


@pytest.mark.parametrize("answers, decision", [
    ([True, False], True),
    ([None, False], False),
    ([None, "because"], "because"),
    ([None, nacelle.PAUSE], nacelle.PAUSE),
    ([None, None], False),
])
def test_first_takes_the_first_answer_that_is_not_none(answers, decision):
    policies = [lambda n, i, c, a=a: a for a in answers]
    assert first(*policies)("writer", {}, CTX) == decision


def test_first_skips_none_and_stops_at_the_deciding_policy():
    later = Counting(True)
    approve = first(None, lambda n, i, c: False, later)
    assert approve("writer", {}, CTX) is False and later.asked == []
    assert first()("writer", {}, CTX) is False
    with pytest.raises(TypeError):
        first("yes")


def test_first_composes_an_allow_list_with_secure():
    allow_writer = lambda name, input, ctx: True if name == "writer" else None  # noqa: E731
    approve = first(allow_writer, secure(TOOLS))
    assert approve("writer", {}, CTX) is True
    assert approve("reader", {}, CTX) is True
    assert approve("fetcher", {}, CTX) is nacelle.PAUSE


def test_an_agent_under_secure_runs_the_reader_and_pauses_the_writer():
    from nacelle.testing import ScriptedBackend

    ran = []

    @tool(read_only=True, open_world=False)
    def look(path: str) -> str:
        """Look."""
        ran.append(("look", path))
        return "seen"

    @tool
    def change(path: str) -> str:
        """Change."""
        ran.append(("change", path))
        return "changed"

    calls = nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c1", "look", '{"path": "a"}'),
        nacelle.ToolCall("c2", "change", '{"path": "a"}')))
    agent = nacelle.Agent(ScriptedBackend([calls]), "Work.", tools=[look, change],
                          approve=secure([look, change]))
    result = agent.run([nacelle.user_text("go")])
    assert result.stop is nacelle.Stop.PAUSED and ran == [("look", "a")]
    assert [p.name for p in result.checkpoint.pending] == ["change"]
