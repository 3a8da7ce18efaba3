"""The exception tree and the failure classifiers."""

import pickle

import pytest

import nacelle
from nacelle.errors import (
    APIError, Cancelled, ConfigError, ConversationError, NacelleError,
    RetryBudgetExceeded, StreamError, StreamTruncated, TransportError, Unsupported,
    _set_attempt, attempt, retryable, transient,
)


@pytest.mark.parametrize("cls", [
    ConfigError, ConversationError, Unsupported, APIError, TransportError, StreamError,
    StreamTruncated, Cancelled, RetryBudgetExceeded,
])
def test_every_error_is_a_nacelle_error(cls):
    assert issubclass(cls, NacelleError)


def test_config_and_conversation_errors_are_value_errors():
    assert issubclass(ConfigError, ValueError)
    assert issubclass(ConversationError, ValueError)


def test_stream_truncated_is_a_stream_error():
    assert issubclass(StreamTruncated, StreamError)


def test_no_error_reuses_a_builtin_name():
    import builtins

    for name in ("APIError", "Cancelled", "ConfigError", "NacelleError", "StreamError",
                 "StreamTruncated", "TransportError", "Unsupported", "RetryBudgetExceeded"):
        assert not hasattr(builtins, name)


def test_unsupported_names_the_backend_and_the_feature():
    err = Unsupported("openrouter", "server-side MCP", "use nacelle.mcp.connect_http")
    assert err.backend == "openrouter" and err.feature == "server-side MCP"
    assert "openrouter" in str(err) and "server-side MCP" in str(err)
    assert "connect_http" in str(err)


def test_api_error_carries_its_fields_and_reads_well():
    err = APIError(429, "rate_limit_error", "slow down", "req_1", 2.0)
    assert (err.status, err.type, err.message, err.request_id, err.retry_after) == (
        429, "rate_limit_error", "slow down", "req_1", 2.0)
    assert str(err) == "HTTP 429 rate_limit_error: slow down (request id req_1)"


@pytest.mark.parametrize("status,expected", [
    (400, False), (401, False), (403, False), (404, False), (408, True), (409, True),
    (429, True), (500, True), (503, True), (529, True), (599, True),
])
def test_api_error_is_retryable_by_the_status_rule(status, expected):
    assert retryable(APIError(status)) is expected


def test_api_error_retryable_can_be_overridden_by_the_provider():
    assert retryable(APIError(500, retryable=False)) is False
    assert retryable(APIError(400, retryable=True)) is True


def test_transport_errors_and_truncation_are_retryable():
    assert retryable(TransportError("reset"))
    assert retryable(StreamTruncated("ended early"))


def test_plain_stream_errors_and_cancellation_are_not_retryable():
    assert not retryable(StreamError("bad data"))
    assert not retryable(Cancelled())
    assert not retryable(RetryBudgetExceeded())
    assert not retryable(ValueError("x"))


def test_transient_marks_an_error_and_returns_it():
    err = StreamError("overloaded_error")
    assert transient(err) is err
    assert retryable(err)


def test_an_object_with_a_true_retryable_attribute_is_retryable():
    class Flaky(Exception):
        retryable = True

    assert retryable(Flaky())


def test_attempt_is_zero_until_recorded():
    err = TransportError("x")
    assert attempt(err) == 0
    _set_attempt(err, 3)
    assert attempt(err) == 3


def test_errors_pickle_with_their_fields():
    api = pickle.loads(pickle.dumps(APIError(503, "overloaded", "busy", "r", 1.5, retryable=False)))
    assert (api.status, api.type, api.retry_after, api.retryable) == (503, "overloaded", 1.5, False)
    uns = pickle.loads(pickle.dumps(Unsupported("b", "f", "h")))
    assert (uns.backend, uns.feature, str(uns)) == ("b", "f", "backend 'b' does not support f; h")


def test_the_tree_is_drawn_in_the_module_docstring():
    doc = nacelle.errors.__doc__
    for name in ("NacelleError", "ConfigError", "Unsupported", "APIError", "TransportError",
                 "StreamError", "StreamTruncated", "Cancelled", "RetryBudgetExceeded"):
        assert name in doc


def _every_subclass(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _every_subclass(sub)


def test_the_drawn_tree_names_every_error_the_package_defines():
    import importlib
    import pkgutil

    import nacelle.errors

    for module in pkgutil.walk_packages(nacelle.__path__, "nacelle."):
        if module.name != "nacelle.__main__":  # running it is the CLI
            importlib.import_module(module.name)
    drawing = nacelle.errors.__doc__.split("::")[1].split("\n\n")[1]
    defined = {cls for cls in _every_subclass(NacelleError)
               if cls.__module__.startswith("nacelle") and not cls.__name__.startswith("_")}
    missing = sorted(cls.__name__ for cls in defined if cls.__name__ not in drawing)
    assert missing == []
    assert len(defined) >= 17


def test_a_stream_error_takes_its_context_as_keyword_arguments():
    err = StreamError("Anthropic stream error overloaded_error", code=529, type="overloaded_error",
                      request_id="req_1", retry_after=2.5, retryable=True)
    assert (str(err), err.code, err.type, err.request_id, err.retry_after) == (
        "Anthropic stream error overloaded_error", 529, "overloaded_error", "req_1", 2.5)
    assert retryable(err)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.code, copy.type, copy.request_id, copy.retry_after, retryable(copy)) == (
        529, "overloaded_error", "req_1", 2.5, True)


def test_a_plain_stream_error_has_empty_context_and_truncation_stays_retryable():
    err = StreamError("garbage")
    assert (err.code, err.type, err.request_id, err.retry_after) == (None, "", "", None)
    assert not retryable(err)
    assert retryable(StreamTruncated("ended early"))
    assert not retryable(StreamTruncated("ended early", retryable=False))


def test_a_retry_budget_report_takes_its_attempt_and_budget_as_keyword_arguments():
    err = RetryBudgetExceeded("the retry budget of 5 s ran out", attempt=2, budget=5.0)
    assert (attempt(err), err.budget) == (2, 5.0)
    bare = RetryBudgetExceeded("the run's deadline passed")
    assert (attempt(bare), bare.budget) == (0, None)


def test_no_error_of_the_package_is_given_its_context_after_it_is_made():
    """Context goes into the constructor (``StreamError(message, *, code=...)``), so an
    error is whole when it is raised and a checker sees its fields."""
    import ast
    from pathlib import Path

    fields = {"code", "type", "request_id", "retry_after", "retryable", "status", "budget"}
    late = []
    for path in sorted(Path(nacelle.__file__).resolve().parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if (isinstance(target, ast.Attribute) and target.attr in fields
                        and isinstance(target.value, ast.Name)
                        and target.value.id in ("err", "error", "exc", "spent", "e")):
                    late.append(f"{path.name}:{node.lineno}")
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)
                        and target.value.attr == "__dict__" and path.name != "errors.py"):
                    late.append(f"{path.name}:{node.lineno}")
    assert late == []
