"""Code mode: a script in a box calls the agent's tools through the bridge, each call
through the run's validation, hooks and approval, reported with via set. Runs in a
Local box everywhere and in a Bubblewrap box where one can be had."""

import json

import pytest

import nacelle
from nacelle import Agent, HookPoint, HookResult, Kind, Message, Role, Text, ToolCall
from nacelle.errors import ConfigError
from nacelle.sandbox import Bubblewrap, Local, code_mode
from nacelle.sandbox.bubblewrap import available
from nacelle.testing import ScriptedBackend
from nacelle.token_estimate import estimate_tokens
from nacelle.toolsets.shell import CommandTimedOut

pytestmark = pytest.mark.slow  # every test starts a Python in a box

deleted = []


@nacelle.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@nacelle.tool
def lookup(key: str) -> str:
    """Look a record up by key."""
    return f"value of {key}"


@nacelle.tool
def delete(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return "deleted"


SCRIPT = """
print("sum", add(a=2, b=3))
print(lookup(key="k"))
try:
    delete(path="important.txt")
except ToolError as err:
    print("refused:", err)
try:
    add(a="two", b=3)
except ToolError as err:
    print("invalid:", str(err)[:30])
"""


def assistant(*parts):
    return Message(Role.ASSISTANT, tuple(parts))


def boxes():
    yield pytest.param("local", id="local")
    yield pytest.param("bubblewrap", id="bubblewrap", marks=[
        pytest.mark.integration,
        pytest.mark.skipif(available() is not None, reason=f"no Bubblewrap box: {available()}")])


def make_box(kind, path):
    return Local(path) if kind == "local" else Bubblewrap(path)


@pytest.mark.parametrize("kind", list(boxes()))
def test_a_script_calls_two_tools_with_the_runs_hooks_and_approval(kind, tmp_path):
    deleted.clear()
    seen = []

    def audit(event):
        seen.append(event.tool)
        return HookResult(inject="audited") if event.tool == "lookup" else None

    def approve(name, input, ctx):
        return "deleting files is not allowed" if name == "delete" else True

    with make_box(kind, tmp_path) as box:
        script = ScriptedBackend([
            assistant(ToolCall("c1", "run_python", json.dumps({"code": SCRIPT}))),
            assistant(Text("done")),
        ])
        agent = Agent(script, "sys", tools=[code_mode([add, lookup, delete], box)],
                      approve=approve, hooks={HookPoint.BEFORE_TOOL_CALL: [audit]})
        events = list(agent.stream([nacelle.user_text("go")]))
    result = next(e.tool for e in events if e.kind is Kind.TOOL_RESULT and not e.via)
    assert result.id == "c1" and not result.failed
    lines = result.result.splitlines()
    assert lines[0] == "sum 5"
    assert lines[1].startswith("value of k") and "audited" in result.result
    assert "refused: deleting files is not allowed" in lines
    assert any(line.startswith("invalid: invalid input for add") for line in lines)
    assert deleted == []
    assert seen == ["run_python", "add", "lookup", "delete"]  # invalid input asks no hook
    bridged = [(e.kind, e.tool.id, e.tool.name) for e in events if e.via == "c1"]
    assert bridged == [(k, f"c1.{i}", n) for i, n in enumerate(["add", "lookup", "delete", "add"])
                       for k in (Kind.TOOL_CALL, Kind.TOOL_RESULT)]
    refused = [e.tool for e in events if e.via and e.kind is Kind.TOOL_RESULT
               and e.tool.name == "delete"]
    assert refused[0].refused and refused[0].failed
    # every bridged event comes before the run_python call is closed
    closing = next(i for i, e in enumerate(events) if e.kind is Kind.TOOL_RESULT and not e.via)
    assert max(i for i, e in enumerate(events) if e.via) < closing
    # the model sees only run_python's call and result, not the bridged calls
    assert [p.id for m in script.requests[1].messages for p in m.parts
            if isinstance(p, ToolCall)] == ["c1"]


def test_a_paused_approval_refuses_the_call_in_the_script(tmp_path):
    deleted.clear()
    approve = lambda name, *a: nacelle.PAUSE if name == "delete" else True  # noqa: E731
    with Local(tmp_path) as box:
        script = ScriptedBackend([
            assistant(ToolCall("c1", "run_python", json.dumps({"code": SCRIPT}))),
            assistant(Text("done")),
        ])
        agent = Agent(script, "sys", tools=[code_mode([add, lookup, delete], box)],
                      approve=approve)
        events = list(agent.stream([nacelle.user_text("go")]))
    result = next(e.tool for e in events if e.kind is Kind.TOOL_RESULT and not e.via)
    assert "refused: the call was refused: it needs a person's approval" in result.result
    assert deleted == []
    assert events[-1].stop is not nacelle.Stop.PAUSED


def test_a_script_outside_a_run_reports_errors_and_exit_codes(tmp_path):
    with Local(tmp_path) as box:
        tool = code_mode([add], box, timeout=2)
        ctx = nacelle.ToolContext(call_id="c", name="run_python")
        out = tool.run({"code": "print(add(a=1, b=1)); raise SystemExit(4)"}, ctx)
        assert out == "2\nexit code: 4"
        out = tool.run({"code": "nope("}, ctx)
        assert "SyntaxError" in out and "exit code: 1" in out
        with pytest.raises(CommandTimedOut):
            tool.run({"code": "import time\nprint('started')\ntime.sleep(30)"}, ctx)
        assert "add(a: integer, b: integer)" in tool.description
    with pytest.raises(ConfigError, match="run_python"):
        code_mode([tool], Local(tmp_path))
    with pytest.raises(ConfigError, match="box"):
        code_mode([add], object())


RECORDS = 8


@nacelle.tool
def record(id: int) -> str:
    """One customer record, as JSON."""
    return json.dumps({"id": id, "name": f"customer {id}", "plan": "pro" if id % 3 else "free",
                       "notes": "x" * 300, "history": [{"month": m, "spend": 10 * m + id}
                                                        for m in range(1, 13)]})


def measured():
    """Input tokens of a conversation doing RECORDS lookups, summed over every model
    request (each request re-sends the conversation), by nacelle's estimator: the
    model calling the tool directly, one call a turn, against one run_python call."""
    direct = ScriptedBackend(
        [assistant(ToolCall(f"c{i}", "record", json.dumps({"id": i}))) for i in range(RECORDS)]
        + [assistant(Text("5 pro customers"))])
    Agent(direct, "sys", tools=[record]).run([nacelle.user_text("how many are on pro?")])
    code = ("print(sum(json.loads(record(id=i))['plan'] == 'pro' for i in range(%d)))"
            % RECORDS)
    with Local(".") as box:
        mode = code_mode([record], box)
        scripted = ScriptedBackend([
            assistant(ToolCall("c1", "run_python", json.dumps({"code": "import json\n" + code}))),
            assistant(Text("5 pro customers"))])
        Agent(scripted, "sys", tools=[mode]).run([nacelle.user_text("how many are on pro?")])

    def total(backend, tools):
        return sum(estimate_tokens(r.messages, "sys", tools) for r in backend.requests)

    return total(direct, [record]), total(scripted, [mode]), len(direct.requests), \
        len(scripted.requests), scripted.requests[-1].messages[-1].parts[0].result


def test_code_mode_spends_fewer_tokens_than_direct_calls():
    direct, code, direct_turns, code_turns, answer = measured()
    assert answer == "5"
    assert (direct_turns, code_turns) == (RECORDS + 1, 2)
    assert code * 5 < direct, (direct, code)


if __name__ == "__main__":  # python tests/sandbox/test_codemode.py: the README's numbers
    print(measured()[:4])
