"""The backend contract's values: Request, Thinking, Effort, Capabilities, MCPServer, TurnEnd."""

import ast
import dataclasses
from pathlib import Path

import pytest

import nacelle
from nacelle.backend import (
    DEFAULT_MAX_TOKENS, Backend, CallProfile, Capabilities, Effort, MCPServer, Request, Thinking, TurnEnd,
)
from nacelle.loop import RunSettings
from nacelle.events import Stop, Usage
from nacelle.messages import user_text


def test_default_max_tokens_is_32000():
    assert DEFAULT_MAX_TOKENS == 32000 and Request("s").max_tokens == 32000


def test_request_turns_sequences_into_tuples():
    r = Request("s", messages=[user_text("a")], tools=[], mcp=[])
    assert r.messages == (user_text("a"),) and r.tools == () and r.mcp == ()


def test_request_defaults_match_the_agent_defaults():
    r = Request("s")
    assert (r.thinking, r.max_tokens, r.output, r.profile) == (
        Thinking(), 32000, None, CallProfile.AGENT_TURN)


def test_a_request_holds_only_what_a_provider_sees():
    assert [f.name for f in dataclasses.fields(Request)] == [
        "system", "messages", "tools", "mcp", "thinking", "max_tokens", "output", "profile"]


def test_the_loops_policy_is_the_runs_with_the_agents_defaults():
    s = RunSettings()
    assert (s.max_iterations, s.approve, s.hooks, s.max_parallel_tools, s.tool_timeout,
            s.max_result_chars, s.budget, s.resume, s.compaction, s.loop_guard,
            s.toolsets) == (0, None, None, 8, None, 100_000, None, None, None, 0, ())


def test_effort_values_are_the_documented_strings():
    assert [e.value for e in Effort] == ["none", "minimal", "low", "medium", "high", "xhigh", "max"]


def test_thinking_accepts_an_effort_string_and_refuses_a_negative_budget():
    assert Thinking(effort="high").effort is Effort.HIGH
    with pytest.raises(ValueError):
        Thinking(budget=-1)


def test_capabilities_default_to_nothing():
    c = Capabilities()
    assert not any([c.mcp, c.thinking, c.effort, c.cost, c.token_counting, c.images,
                    c.documents, c.tool_media])
    assert c.min_budget == 0


def test_mcp_server_repr_hides_the_token():
    server = MCPServer("docs", "https://example.com/mcp", authorization_token="sk-secret-123",
                       allowed_tools=["a"])
    assert "sk-secret-123" not in repr(server) and "<hidden>" in repr(server)
    assert server.allowed_tools == ("a",)


def test_turn_end_defaults():
    assert TurnEnd(()) == TurnEnd((), Usage(), Stop.END, False)


# -- RunContext ------------------------------------------------------------------


# -- the seam ----------------------------------------------------------------------

PACKAGE = Path(nacelle.__file__).resolve().parent


def _calls(tree, function):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == function]


def test_the_backend_protocol_is_name_capabilities_turn_and_count_tokens():
    members = {name for name in vars(Backend) if not name.startswith("_")}
    members |= set(getattr(Backend, "__annotations__", {}))  # 3.9: none without annotations
    assert members == {"name", "capabilities", "turn", "count_tokens"}


def test_nothing_probes_for_a_turn_with_getattr():
    probes = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(encoding="utf-8")), "getattr"):
            if any(isinstance(a, ast.Constant) and a.value == "turn" for a in call.args[1:2]):
                probes.append(f"{path.relative_to(PACKAGE)}:{call.lineno}")
    assert probes == []


@pytest.mark.parametrize("module", ["retry", "fallback", "testing.scripted", "backends"])
def test_turn_wrappers_and_backends_never_import_the_loop(module):
    base = PACKAGE.joinpath(*module.split("."))
    paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or node.module.startswith("nacelle")):
                names = [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("nacelle")]
            else:
                continue
            assert not any("loop" in n.split(".") for n in names), (path, node.lineno)
