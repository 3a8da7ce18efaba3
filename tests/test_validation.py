"""Input validation: the built-in validator's verdicts and messages, a differential
test holding it to jsonschema's verdicts on generated schemas, and a server's schema
checked as data: nothing fetched, regex and step work bounded."""

import http.server
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nacelle.backtracking import search_cost
from nacelle.errors import NacelleError
from nacelle.validation import UnusableSchema, builtin_check, compile_schema, jsonschema_check

ROOT = Path(__file__).resolve().parent.parent

OBJECT = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "mode": {"enum": ["fast", "slow"]},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                 "minItems": 2, "maxItems": 2},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("instance, message", [
    ({}, "input: the required property 'query' is missing"),
    ({"query": 1}, "input.query: expected string, got integer"),
    ({"query": "q", "limit": 0}, "input.limit: 0 is less than the minimum of 1"),
    ({"query": "q", "limit": 51}, "input.limit: 51 is more than the maximum of 50"),
    ({"query": "q", "limit": True}, "input.limit: expected integer, got boolean"),
    ({"query": "q", "limit": 2.5}, "input.limit: expected integer, got number"),
    ({"query": "q", "tags": ["a", "a"]}, 'input.tags: items must be unique; "a" repeats'),
    ({"query": "q", "tags": ["a", 3]}, "input.tags[1]: expected string, got integer"),
    ({"query": "q", "mode": "medium"}, 'input.mode: "medium" is not one of "fast", "slow"'),
    ({"query": "q", "pair": [1]}, "input.pair: expected at least 2 items, got 1"),
    ({"query": "q", "pair": [1, 2]}, "input.pair[1]: expected string, got integer"),
    ({"query": "q", "extra": {"a": "x"}}, "input.extra.a: expected number, got string"),
    ({"query": "q", "surprise": 1}, "input: unexpected property 'surprise'"),
])
def test_the_builtin_validator_names_the_first_violation(instance, message):
    assert builtin_check(OBJECT)(instance).startswith(message)


@pytest.mark.parametrize("instance", [
    {"query": "q"},
    {"query": "q", "limit": 3.0, "tags": ["a", "b"], "mode": "fast", "when": None,
     "pair": [1, "a"], "extra": {"a": 1, "b": 2.5}},
])
def test_the_builtin_validator_accepts_valid_input(instance):
    assert builtin_check(OBJECT)(instance) is None
    assert jsonschema_check(OBJECT)(instance) is None


def test_jsonschema_messages_name_the_path():
    assert jsonschema_check(OBJECT)({"query": 3}).startswith("input.query:")


def test_compile_schema_is_cached_per_schema_text():
    assert compile_schema(OBJECT, "builtin") is compile_schema(dict(OBJECT), "builtin")


def test_unknown_keywords_are_ignored_and_logged_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger="nacelle.validation")
    check = builtin_check({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}},
                           "description": "annotations are not unknown"})
    assert check({"s": "b"}) is None
    assert "pattern" in caplog.text and "description" not in caplog.text


# -- the differential test ----------------------------------------------------------

scalars = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "null"}, {}, {"type": "integer", "minimum": 0, "maximum": 10},
    {"type": "number", "minimum": -1.5}, {"enum": ["a", 1, True, None]}, {"enum": [0, 1.0]},
    {"type": "string", "enum": ["x", "y"]},
])


def extend(children):
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.builds(lambda item: {"type": "array", "items": item}, children),
        st.builds(lambda item: {"type": "array", "items": item, "uniqueItems": True}, children),
        st.builds(lambda items: {"type": "array", "prefixItems": items, "minItems": len(items),
                                 "maxItems": len(items)}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda item: {"anyOf": [item, {"type": "null"}]}, children),
        st.builds(lambda props, req, extra: {
            "type": "object", "properties": props,
            "required": sorted(set(req) & set(props)), "additionalProperties": extra},
            st.dictionaries(names, children, max_size=3), st.lists(names, max_size=3),
            st.one_of(st.booleans(), children)),
    )


schemas = st.recursive(scalars, extend, max_leaves=6)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([0.0, 1.0, 2.5, -1.5]),
              st.sampled_from(["a", "b", "x", ""])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, max_size=4)),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, instance=values)
def test_the_builtin_validator_agrees_with_jsonschema(schema, instance):
    ours = builtin_check(schema)(instance) is None
    theirs = jsonschema_check(schema)(instance) is None
    assert ours == theirs, (schema, instance)


# -- schemas as data: no retrieval, bounded work ------------------------------------

@pytest.fixture
def recorder():
    """A local HTTP server that answers every GET with a schema and records the hit."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            body = json.dumps({"type": "integer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


def finishes(fn, seconds):
    """fn's answer (or exception) if it returns within ``seconds``; fails the test otherwise."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    box["seconds"] = time.monotonic() - started
    return box


@pytest.mark.slow
@pytest.mark.parametrize("untrusted", [True, False], ids=["server", "local"])
def test_a_remote_ref_is_refused_and_never_fetched(recorder, untrusted):
    url, hits = recorder
    schema = {"type": "object", "properties": {"n": {"$ref": f"{url}/n.json"}}}
    check = compile_schema(schema, "jsonschema", untrusted=untrusted)
    with pytest.raises(UnusableSchema, match="n.json. cannot be resolved.*nothing|n.json. cannot be resolved.*fetched") as caught:
        check({"n": 1})
    assert isinstance(caught.value, NacelleError)
    assert hits == []


def test_a_ref_to_a_server_that_never_answers_does_not_block():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections and never answers one
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/slow.json"
        check = compile_schema({"$ref": url}, "jsonschema", untrusted=True)
        box = finishes(lambda: check(1), 10)
        assert isinstance(box.get("error"), UnusableSchema)
    finally:
        silent.close()


def test_local_refs_and_the_metaschema_still_resolve():
    schema = {"$defs": {"n": {"type": "integer", "minimum": 1}},
              "type": "object", "properties": {"n": {"$ref": "#/$defs/n"},
                                                "s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}
    for untrusted in (True, False):
        check = compile_schema(schema, "jsonschema", untrusted=untrusted)
        assert check({"n": 1, "s": {"type": "string"}}) is None
        assert check({"n": 0}).startswith("input.n:")
        assert check({"n": 1, "s": {"type": 5}}) is not None


EVIL = "^(a+)+$"


@pytest.mark.slow
@pytest.mark.parametrize("schema, instance", [
    ({"properties": {"s": {"pattern": EVIL}}}, {"s": "a" * 40 + "!"}),
    ({"items": {"pattern": "(a|aa)*b"}}, ["a" * 60]),
    ({"propertyNames": {"pattern": EVIL}}, {"a" * 40 + "!": 1}),
    ({"patternProperties": {EVIL: {"type": "integer"}}}, {"a" * 40 + "!": "x"}),
    ({"patternProperties": {EVIL: {}}, "additionalProperties": False}, {"a" * 40 + "!": 1}),
    ({"allOf": [{"patternProperties": {EVIL: {}}}], "unevaluatedProperties": False},
     {"a" * 40 + "!": 1}),
    # A subschema naming another draft gets that draft's validator from jsonschema.
    ({"properties": {"s": {"$schema": "http://json-schema.org/draft-07/schema#",
                           "pattern": EVIL}}}, {"s": "a" * 40 + "!"}),
    # additionalProperties joins the patterns with "|": a verbose flag in the first
    # changes how the next one reads ("(?:a+)+!"), so the joined pattern is what is bounded.
    ({"patternProperties": {"(?x)q": {}, "[b]?(?:a+) +!": {}}, "additionalProperties": False},
     {"a" * 40: 1}),
], ids=["pattern", "alternation", "propertyNames", "patternProperties",
        "additionalProperties", "unevaluatedProperties", "draft-07", "joined"])
def test_a_backtracking_pattern_from_a_server_finishes_fast(schema, instance):
    # In a child process: a match that backtracks holds the GIL, so a thread running it
    # could not even be waited for.
    code = ("import json, sys, time; from nacelle.validation import compile_schema\n"
            "schema, instance = json.loads(sys.stdin.read())\n"
            "check = compile_schema(schema, 'jsonschema', untrusted=True)\n"
            "started = time.monotonic(); check(instance)\n"
            "print(time.monotonic() - started)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps([schema, instance]),
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 5


def test_a_pattern_too_costly_to_match_is_left_to_the_server_and_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="nacelle.validation")
    check = compile_schema({"properties": {"s": {"pattern": EVIL}}}, "jsonschema", untrusted=True)
    assert check({"s": "a" * 25 + "!"}) is None
    assert "not matched" in caplog.text


def test_patterns_cheap_enough_are_still_checked_on_a_server_schema():
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                                               "short": {"pattern": EVIL}},
              "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False}
    check = compile_schema(schema, "jsonschema", untrusted=True)
    assert check({"id": "a-1" * 10_000, "short": "aaaa", "x-y": "z"}) is None
    assert "does not match" in check({"id": "A"})
    assert "does not match" in check({"short": "aa!"})  # a few characters are cheap even here
    assert check({"x-y": 1}).startswith("input.x-y:")
    assert "'y' does not match any of the regexes" in check({"y": 1})


def test_the_regex_work_of_one_check_is_bounded_in_total(monkeypatch):
    # Each string alone is cheap enough to match; 400 of them are not: the check
    # matches as many as its budget pays for and leaves the rest to the server.
    pattern = r"\d+\d+\d+x"
    schema = {"type": "array", "items": {"type": "string", "pattern": pattern}}
    each = search_cost(pattern, 40)
    assert each < 20_000_000 < 400 * each
    searched = []
    search = re.search
    monkeypatch.setattr(re, "search", lambda p, s, *a: (
        searched.append(p) if p == pattern else None, search(p, s, *a))[1])
    check = compile_schema(schema, "jsonschema", untrusted=True)
    assert "does not match" in check(["1" * 40] * 400)
    assert len(searched) == 20_000_000 // each
    searched.clear()
    assert "does not match" in check(["1" * 40] * 400)  # a new check, a new budget
    assert len(searched) == 20_000_000 // each


def test_a_server_schema_that_fans_out_is_unusable_rather_than_run_for_ever():
    defs = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(40)}
    defs["a40"] = {"type": "integer"}
    check = compile_schema({"$defs": defs, "$ref": "#/$defs/a0"}, "jsonschema", untrusted=True)
    box = finishes(lambda: check(1), 20)
    assert isinstance(box.get("error"), UnusableSchema), box
    assert "steps" in str(box["error"])


@pytest.mark.parametrize("schema, instance", [
    ({"properties": 5}, {"a": 1}),
    ({"type": "foo"}, 1),
    ({"properties": {"s": {"pattern": "("}}}, {"s": "x"}),
    ({"minimum": "x"}, 3),
    ({"$ref": "#"}, 1),
    ({"$ref": "#/nowhere"}, 1),
])
@pytest.mark.parametrize("engine", ["jsonschema", "builtin"])
def test_a_server_schema_the_validator_cannot_use_is_unusable_not_a_crash(schema, instance, engine):
    check = compile_schema(schema, engine, untrusted=True)
    try:
        check(instance)
    except UnusableSchema as exc:
        assert "schema" in str(exc)
