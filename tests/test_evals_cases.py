"""Case and Dataset: the JSONL file, lossless with nacelle's message form, and its
errors naming the line."""

import base64

import pytest

from nacelle.errors import ConfigError
from nacelle.evals import Case, Dataset, called, contains, equals, judge, matches, max_cost, max_turns, not_called
from nacelle.messages import Image, Message, Role, Text, ToolCall, ToolResult, user_text
from nacelle.testing import ScriptedBackend

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def test_a_dataset_round_trips_through_jsonl_with_conversations_and_checks(tmp_path):
    conversation = [
        Message(Role.USER, (Text("What is in this picture?"), Image("image/png", PNG))),
        Message(Role.ASSISTANT, (ToolCall("c1", "zoom", '{"x": 1}'),)),
        Message(Role.USER, (ToolResult("c1", "zoom", "a cat"),)),
    ]
    dataset = Dataset([
        Case("prompt", "Capital of France?", expected="Paris"),
        Case("conversation", conversation, expected={"animal": "cat"}, checks=[
            contains("cat", case_sensitive=False), matches({"type": "object"}),
            called("zoom", x=1), not_called("delete"), max_cost(0.01), max_turns(3),
            equals({"animal": "cat"})]),
    ])
    dataset.save(tmp_path / "d.jsonl")
    again = Dataset.load(tmp_path / "d.jsonl")
    assert again.dumps() == dataset.dumps()
    assert again[1].input == tuple(conversation)
    assert [repr(c) for c in again[1].checks] == [repr(c) for c in dataset[1].checks]
    assert again[0].conversation == (user_text("Capital of France?"),)


def test_judge_checks_in_a_file_take_their_backend_from_load():
    line = '{"name": "a", "input": "q", "checks": [{"judge": "Is polite."}]}\n'
    with pytest.raises(ConfigError, match="dataset line 1 checks\\[0\\]: a judge check needs"):
        Dataset.loads(line)
    loaded = Dataset.loads(line, judge=ScriptedBackend([]))
    assert repr(loaded[0].checks[0]) == "judge('Is polite.')"


@pytest.mark.parametrize("line,message", [
    ("not json", "line 2: not JSON"),
    ("[]", "line 2: a case is a JSON object"),
    ('{"name": "b"}', "line 2: input must be"),
    ('{"name": "", "input": "q"}', "line 2: a Case needs a non-empty name"),
    ('{"name": "b", "input": "q", "extra": 1}', "line 2: unknown field 'extra'"),
    ('{"name": "b", "input": [{"role": "user"}]}', "line 2: input: "),
    ('{"name": "b", "input": "q", "checks": [{"smells": "ok"}]}', "unknown check 'smells'"),
    ('{"name": "b", "input": "q", "checks": [{"max_turns": 0}]}', "checks\\[0\\]: max_turns"),
    ('{"name": "a", "input": "q"}', "two cases are named 'a'"),
    ('{"name": "b", "input": "q", "checks": [{"contains": "x", "max_turns": 1}]}',
     "a 'contains' check takes no 'max_turns'"),
    ('{"name": "b", "input": "q", "checks": [{"contains": "x", "case_sensitive": "no"}]}',
     "case_sensitive must be true or false"),
    ('{"name": "b", "input": "q", "checks": [{"matches": {"type": 5}}]}', "not a valid JSON Schema"),
    ('{"name": "b", "input": "q", "checks": [{"called": "t", "input": [1]}]}', "input must be an object"),
])
def test_a_bad_line_is_a_config_error_naming_it(line, message):
    with pytest.raises(ConfigError, match=message):
        Dataset.loads('{"name": "a", "input": "q"}\n' + line + "\n")


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"name": "a", "input": "\xff"}\n')
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        Dataset.load(path)


def test_a_case_with_a_python_check_has_no_file_form():
    with pytest.raises(ConfigError, match="has no JSON form"):
        Dataset([Case("a", "q", checks=[lambda r: True])]).dumps()


def test_a_case_refuses_what_is_not_a_conversation_or_a_check():
    with pytest.raises(ConfigError):
        Case("a", user_text("q"))
    with pytest.raises(ConfigError):
        Case("a", [])
    with pytest.raises(ConfigError):
        Case("a", "q", checks=["contains"])
    assert Case("a", "q", expected=1).effective_checks()[0].name == "equals()"
    assert Case("a", "q").effective_checks() == ()
