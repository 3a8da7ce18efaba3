"""The public surface: exactly the names DESIGN.md promises, sorted, and cheap to import."""

import subprocess
import sys
from pathlib import Path

import pytest

import nacelle

ROOT = Path(__file__).resolve().parent.parent

# Every top-level name the package promises.
PUBLIC = {
    "Agent", "APIError", "Backend", "Budget", "Cache", "CallProfile", "CancelEvent", "Cancelled", "Capabilities",
    "Checkpoint", "CheckpointError", "Citation", "Compaction", "ConfigError", "ConversationError",
    "DEFAULT_MAX_TOKENS", "Document", "Effort", "Event", "Fallback", "Finish", "HookEvent", "HookPoint",
    "HookResult", "Image", "Kind", "MAX_INJECT", "MCPServer", "Message", "ModelSettings", "NacelleError", "PAUSE",
    "PartialJSON", "ProviderBlock", "Reasoning", "Request", "Result", "Retry", "RetryBudgetExceeded",
    "RetryOptions", "Role", "RunContext", "Schema", "Stop", "StreamError", "StreamTruncated", "Text",
    "Thinking", "ToolSearch", "Tool", "ToolCall", "ToolContext", "ToolEvent", "ToolResult", "ToolSink",
    "TransportError", "Unsupported", "Usage", "assistant_text", "attempt", "detached",
    "dumps", "estimate_tokens", "loads", "partial_json", "retryable", "run_tool", "subagent_tool", "tool", "tools_by_name",
    "transient", "trim", "user_text", "with_timeout",
}


def test_all_is_exactly_the_public_names():
    assert set(nacelle.__all__) == PUBLIC


def test_all_is_sorted_and_has_no_duplicates():
    assert nacelle.__all__ == sorted(set(nacelle.__all__))


def test_every_name_in_all_exists():
    for name in nacelle.__all__:
        assert getattr(nacelle, name) is not None, name


def test_import_loads_no_third_party_module():
    # Compare against the modules loaded before the import: a site hook on some
    # machines preloads certifi at interpreter start, which is not nacelle's doing.
    code = (
        "import sys; before = set(sys.modules); import nacelle; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} & "
        "{'requests', 'jsonschema', 'urllib3', 'certifi', 'idna', 'charset_normalizer'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_nacelle_logger_has_a_null_handler():
    import logging

    handlers = logging.getLogger("nacelle").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


# What only some features need, kept out of the imports a program pays for before it
# does anything: checkpoints sign with hashlib/hmac, observers name a run with uuid,
# notebook views escape with html, Retry's jitter and made-up call ids draw from
# random/secrets, the AWS files need configparser, prices decimal and datetime (read
# where a backend is made), base URLs urllib.parse (the
# transport loads it with requests at the first request). benchmarks/imports.py (row 4)
# measures what the imports cost; this only keeps each of these out of them. Module
# loggers import logging at their first use (nacelle/_loggers.py), and pathlib comes
# with the settings, files and tools that read paths.
# nacelle's own feature modules that a plain Agent run does not use (checkpoints,
# compaction, hooks, tool search, Retry, Fallback, partial JSON, sub-agents, the token
# estimate) are exported by name and imported at the first access to one (the
# package's ``__getattr__``); a run loads the checkpoint module when it pauses, the
# observe module when it has observers (or logs them at DEBUG).
DEFERRED = {"base64", "configparser", "datetime", "decimal", "hashlib", "hmac", "html",
            "logging", "pathlib", "random", "secrets", "urllib.parse", "uuid", "zlib",
            "nacelle.checkpoint", "nacelle.compaction", "nacelle.fallback", "nacelle.hooks",
            "nacelle.native", "nacelle.observe", "nacelle.sse", "nacelle.partial", "nacelle.retry",
            "nacelle.subagent", "nacelle.token_estimate", "nacelle.tool_search",
            "nacelle.backends.anthropic.clouds", "nacelle.backends.anthropic.bedrock_stream",
            "nacelle.backends.anthropic.eventstream"}
# The wires that send provider-run tools tell them apart with native.is_native; the
# Agent looks for NativeTools only once that module is loaded.
NATIVE = {"nacelle.native"}
# Every backend reads a stream (nacelle.sse); the core reads JSON from outside with its
# parse_json only in messages.loads and trim.
SSE = {"nacelle.sse"}
# Bedrock's event-stream decoder is loaded with the first Bedrock backend.
BEDROCK = {"nacelle.backends.anthropic.clouds"} | NATIVE | SSE
IMPORTS = {
    "import nacelle": set(),
    "from nacelle import Agent": set(),
    # The anthropic backend re-exports bedrock and vertex, loading their module (and the
    # AWS, Google and event-stream ones) at the first use of either name.
    "from nacelle.backends import anthropic": NATIVE | SSE,
    "import nacelle.backends.anthropic.clouds": BEDROCK,
    "import nacelle.backends.chat": SSE,
    "import nacelle.backends.openai": NATIVE | SSE,
    "import nacelle.backends.openrouter": SSE,
    "import nacelle.backends.gemini": NATIVE | SSE,
}


@pytest.mark.parametrize("statement", sorted(IMPORTS))
def test_importing_the_core_or_a_backend_leaves_feature_only_modules_unloaded(statement):
    code = (f"import sys; before = set(sys.modules); {statement}; "
            f"print(sorted((set(sys.modules) - before) & set({sorted(DEFERRED)!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == repr(sorted(IMPORTS[statement]))


LAZY = {"Checkpoint": "nacelle.checkpoint", "Compaction": "nacelle.compaction",
        "HookEvent": "nacelle.hooks", "HookPoint": "nacelle.hooks", "HookResult": "nacelle.hooks",
        "MAX_INJECT": "nacelle.hooks", "detached": "nacelle.hooks", "with_timeout": "nacelle.hooks", "Fallback": "nacelle.fallback",
        "PartialJSON": "nacelle.partial", "partial_json": "nacelle.partial",
        "Retry": "nacelle.retry", "RetryOptions": "nacelle.retry",
        "subagent_tool": "nacelle.subagent", "estimate_tokens": "nacelle.token_estimate",
        "ToolSearch": "nacelle.tool_search"}


@pytest.mark.parametrize("name", sorted(LAZY))
def test_a_name_imported_at_first_use_is_its_module_s_object_in_a_fresh_interpreter(name):
    code = (f"import sys, nacelle; assert {LAZY[name]!r} not in sys.modules; "
            f"from nacelle import {name}; import {LAZY[name]} as m; "
            f"assert {name} is m.{name} is nacelle.{name}; print({name!r} in dir(nacelle))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "True"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        nacelle.NoSuchThing  # noqa: B018


def test_every_public_dataclass_compares_by_fields_and_has_a_repr_of_its_own_or_generated():
    # A class that writes its own __repr__ is made with repr=False (the generated one
    # would be built, then discarded); equality stays the generated one on every class.
    import dataclasses

    for name in nacelle.__all__:
        value = getattr(nacelle, name)
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)):
            continue
        params = value.__dataclass_params__
        assert params.eq, name
        assert value.__eq__ is not object.__eq__, name
        assert value.__repr__ is not object.__repr__, name
        if not params.repr:
            assert "__repr__" in vars(value), name


def test_bedrock_and_vertex_are_the_clouds_functions_when_first_named():
    code = ("import sys; from nacelle.backends import anthropic; "
            "assert 'nacelle.backends.anthropic.clouds' not in sys.modules; "
            "assert {'bedrock', 'vertex'} <= set(dir(anthropic)); "
            "from nacelle.backends.anthropic import bedrock; "
            "from nacelle.backends.anthropic import clouds; "
            "assert bedrock is clouds.bedrock and anthropic.vertex is clouds.vertex; "
            "print(hasattr(anthropic, 'nothing'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_plain_run_with_a_tool_call_loads_none_of_the_modules_left_to_first_use():
    # What is deferred is what a plain run does not use: an Agent with a tool, run
    # through a tool call to its answer, still leaves these modules unloaded.
    code = """
import sys
import nacelle
from nacelle.messages import Message, Role, Text, ToolCall
from nacelle.testing import ScriptedBackend

@nacelle.tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

turns = [Message(Role.ASSISTANT, (ToolCall("c1", "add", '{"a": 2, "b": 3}'),)), "Five."]
result = nacelle.Agent(ScriptedBackend(turns), "Be brief.", tools=[add]).run(
    [nacelle.user_text("2+3?")])
assert result.text == "Five.", result.text
print(sorted(m for m in sys.modules if m in %r))
""" % (sorted(set(LAZY.values()) | {"nacelle.native", "nacelle.observe"}),)
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
