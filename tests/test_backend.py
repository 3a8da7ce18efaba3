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
        "system", "messages", "tools", "mcp", "thinking", "max_tokens", "output", "profile",
        "settings", "cache", "context_edits"]


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


# -- ModelSettings and Cache ----------------------------------------------------------

from nacelle import Cache, ConfigError, ModelSettings  # noqa: E402
from nacelle.backend import SETTINGS, refused_settings  # noqa: E402


def test_model_settings_default_to_asking_for_nothing():
    assert ModelSettings().used() == [] and Cache().used() == []
    assert Request("s").settings == ModelSettings() and Request("s").cache is None


def test_model_settings_keep_sound_values_and_name_what_they_ask_for():
    settings = ModelSettings(temperature=0, top_p=1, top_k=40, stop="END", seed=7,
                             tool_choice="lookup", parallel_tool_calls=False,
                             extra_body={"metadata": {"user_id": "u1"}},
                             extra_headers={"X-Trace": "t1"})
    assert settings.temperature == 0.0 and isinstance(settings.temperature, float)
    assert settings.stop == ("END",) and settings.forced_tool == "lookup"
    assert sorted(settings.used()) == sorted(
        ["temperature", "top_p", "top_k", "stop", "seed", "tool_choice",
         "forced_tool_choice", "parallel_tool_calls", "extra_body", "extra_headers"])
    assert set(settings.used()) <= SETTINGS
    assert ModelSettings(tool_choice="required").used() == ["tool_choice", "forced_tool_choice"]
    assert ModelSettings(tool_choice="auto").forced_tool is None


@pytest.mark.parametrize("options, match", [
    ({"temperature": 2.5}, "temperature must be a number from 0 to 2"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": True}, "temperature"),
    ({"temperature": "0.5"}, "temperature"),
    ({"top_p": 1.5}, "top_p must be a number from 0 to 1"),
    ({"top_k": 0}, "top_k must be a whole number of at least 1"),
    ({"top_k": 2.0}, "top_k"),
    ({"seed": "7"}, "seed"),
    ({"seed": 2 ** 64}, "seed"),
    ({"stop": ["END", ""]}, "stop sequences must be non-empty strings"),
    ({"stop": 5}, "stop must be a str or a sequence of str"),
    ({"tool_choice": ""}, "tool_choice"),
    ({"tool_choice": 3}, "tool_choice"),
    ({"parallel_tool_calls": 1}, "parallel_tool_calls"),
    ({"extra_body": {"messages": []}}, r"extra_body may not set \['messages'\]"),
    ({"extra_body": {"model": "x", "stream": False}}, "extra_body may not set"),
    ({"extra_body": {"x": float("inf")}}, "JSON values only"),
    ({"extra_body": {"x": object()}}, "JSON values only"),
    ({"extra_body": [1]}, "extra_body must be a mapping"),
    ({"extra_headers": {"bad name": "v"}}, "not an HTTP token"),
    ({"extra_headers": {"X-Trace": "a\r\nX-Evil: 1"}}, "without line breaks"),
    ({"extra_headers": {"X-A": "1", "x-a": "2"}}, "twice"),
])
def test_bad_model_settings_are_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        ModelSettings(**options)


@pytest.mark.parametrize("name", ["Authorization", "x-api-key", "X-Goog-Api-Key", "api-key",
                                  "Proxy-Authorization", "X-Auth-Token", "Cookie",
                                  "X-Client-Secret"])
def test_extra_headers_may_not_carry_a_credential(name):
    with pytest.raises(ConfigError, match="credentials go in the backend's api_key") as caught:
        ModelSettings(extra_headers={name: "sk-ant-SECRET-VALUE"})
    assert "SECRET" not in str(caught.value)


def test_the_repr_names_extra_headers_but_never_shows_their_values():
    settings = ModelSettings(temperature=0.2, extra_headers={"X-Team": "hush-hush"})
    assert repr(settings) == "ModelSettings(temperature=0.2, extra_headers=<X-Team>)"
    assert "hush" not in repr(settings) and "hush" not in str(hash(settings))


def test_model_settings_copy_what_they_are_given():
    body = {"metadata": {"user_id": "u1"}}
    settings = ModelSettings(extra_body=body, stop=["a", "b"])
    body["metadata"]["user_id"] = "changed"
    assert settings.extra_body == {"metadata": {"user_id": "u1"}} and settings.stop == ("a", "b")


@pytest.mark.parametrize("options, match", [
    ({"ttl": "24h"}, "ttl must be '5m' or '1h'"),
    ({"ttl": 3600}, "ttl"),
    ({"key": ""}, "Cache key"),
    ({"key": "k" * 1025}, "Cache key"),
])
def test_bad_cache_values_are_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        Cache(**options)


def test_a_cache_asks_for_the_one_hour_lifetime_and_the_key_only_when_given():
    assert Cache(ttl="1h", key="run-1").used() == ["cache_ttl", "cache_key"]
    assert Cache(ttl="5m").used() == []


def test_refused_settings_names_the_first_setting_a_backend_does_not_take():
    caps = Capabilities(settings=frozenset({"temperature", "stop"}))
    assert refused_settings(caps, ModelSettings(temperature=0.5, stop="x"), None,
                            Thinking()) is None
    what, _ = refused_settings(caps, ModelSettings(seed=1), None, Thinking())
    assert what == "the seed setting"
    what, _ = refused_settings(caps, ModelSettings(), Cache(ttl="1h"), Thinking())
    assert what == "the cache_ttl setting"


def test_a_model_that_thinks_is_held_to_its_thinking_settings():
    caps = Capabilities(thinking=True, settings=frozenset({"temperature", "stop"}),
                        thinking_settings=frozenset({"stop"}), thinks_by_default=True)
    hot = ModelSettings(temperature=0.5)
    what, hint = refused_settings(caps, hot, None, Thinking())
    assert what == "the temperature setting while the model thinks"
    assert "Effort.NONE" in hint
    assert refused_settings(caps, hot, None, Thinking(effort=Effort.NONE)) is None
    quiet = dataclasses.replace(caps, thinks_by_default=False)
    assert refused_settings(quiet, hot, None, Thinking()) is None
    assert refused_settings(quiet, hot, None, Thinking(budget=2048)) is not None
    assert refused_settings(quiet, hot, None, Thinking(effort=Effort.LOW)) is not None


def test_a_temperature_above_the_providers_highest_is_refused():
    caps = Capabilities(settings=frozenset({"temperature"}), max_temperature=1.0)
    what, _ = refused_settings(caps, ModelSettings(temperature=1.5), None, Thinking())
    assert what == "a temperature of 1.5 (its highest is 1)"


def test_settings_of_an_exclusive_group_are_refused_together_but_not_alone():
    caps = Capabilities(settings=frozenset({"temperature", "top_p"}),
                        exclusive_settings=(frozenset({"temperature", "top_p"}),))
    what, hint = refused_settings(caps, ModelSettings(temperature=0.2, top_p=0.5), None,
                                  Thinking())
    assert (what, hint) == ("temperature and top_p together", "give one of them")
    assert refused_settings(caps, ModelSettings(top_p=0.5), None, Thinking()) is None
