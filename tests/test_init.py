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
DEFERRED = {"base64", "configparser", "datetime", "decimal", "hashlib", "hmac", "html",
            "logging", "pathlib", "random", "secrets", "urllib.parse", "uuid", "zlib"}
IMPORTS = {
    "import nacelle": set(),
    # Bedrock's event stream (re-exported by the anthropic backend) decodes each chunk
    # with base64 and checks each frame with zlib's CRC-32, per event.
    "from nacelle.backends import anthropic": {"base64", "zlib"},
    "import nacelle.backends.anthropic.clouds": {"base64", "zlib"},
    "import nacelle.backends.chat": set(),
    "import nacelle.backends.openai": set(),
    "import nacelle.backends.openrouter": set(),
    "import nacelle.backends.gemini": set(),
}


@pytest.mark.parametrize("statement", sorted(IMPORTS))
def test_importing_the_core_or_a_backend_leaves_feature_only_modules_unloaded(statement):
    code = (f"import sys; before = set(sys.modules); {statement}; "
            f"print(sorted((set(sys.modules) - before) & set({sorted(DEFERRED)!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == repr(sorted(IMPORTS[statement]))
