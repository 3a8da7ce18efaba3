"""The backend contract's values: Request, Thinking, Effort, Capabilities, MCPServer, TurnEnd."""


import pytest

from nacelle.backend import (
    DEFAULT_MAX_TOKENS, Capabilities, Effort, MCPServer, Request, Thinking, TurnEnd,
)
from nacelle.events import Stop, Usage
from nacelle.messages import user_text


def test_default_max_tokens_is_32000():
    assert DEFAULT_MAX_TOKENS == 32000 and Request("s").max_tokens == 32000


def test_request_turns_sequences_into_tuples():
    r = Request("s", messages=[user_text("a")], tools=[], mcp=[])
    assert r.messages == (user_text("a"),) and r.tools == () and r.mcp == ()


def test_request_defaults_match_the_agent_defaults():
    r = Request("s")
    assert (r.thinking, r.max_iterations, r.approve, r.hooks, r.max_parallel_tools,
            r.tool_timeout) == (Thinking(), 0, None, None, 8, None)


def test_effort_values_are_the_documented_strings():
    assert [e.value for e in Effort] == ["none", "minimal", "low", "medium", "high", "xhigh", "max"]


def test_thinking_accepts_an_effort_string_and_refuses_a_negative_budget():
    assert Thinking(effort="high").effort is Effort.HIGH
    with pytest.raises(ValueError):
        Thinking(budget=-1)


def test_capabilities_default_to_nothing():
    c = Capabilities()
    assert not any([c.mcp, c.thinking, c.effort, c.cost, c.token_counting, c.images])
    assert c.min_budget == 0


def test_mcp_server_repr_hides_the_token():
    server = MCPServer("docs", "https://example.com/mcp", authorization_token="sk-secret-123",
                       allowed_tools=["a"])
    assert "sk-secret-123" not in repr(server) and "<hidden>" in repr(server)
    assert server.allowed_tools == ("a",)


def test_turn_end_defaults():
    assert TurnEnd(()) == TurnEnd((), Usage(), Stop.END, False)


# -- RunContext ------------------------------------------------------------------
