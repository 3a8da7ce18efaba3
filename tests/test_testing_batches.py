"""nacelle.testing.batches: the Anthropic and OpenAI batch APIs a FakeServer serves,
asked over real HTTP with ``requests`` as a client of those APIs would, and checked
against the shapes of the providers' API references and SDK types."""

import json

import pytest
import requests

from nacelle.testing import FakeServer, Reply
from nacelle.testing.batches import anthropic_message, chat_completion, openai_response


def echo(endpoint, params):
    said = (params.get("messages") or [{}])[-1].get("content", "")
    return anthropic_message(f"{endpoint}: {said}")


def test_an_anthropic_batch_is_in_progress_until_its_polls_pass_then_ends_with_results():
    with FakeServer() as server:
        fake = server.batches(echo, polls=1)
        base = server.url + "/v1/messages/batches"
        made = requests.post(base, json={"requests": [
            {"custom_id": "a", "params": {"messages": [{"role": "user", "content": "hi"}]}},
            {"custom_id": "b", "params": {"messages": [{"role": "user", "content": "yo"}]}}]})
        batch = made.json()
        assert batch["type"] == "message_batch" and batch["processing_status"] == "in_progress"
        assert batch["request_counts"]["processing"] == 2 and batch["results_url"] is None
        early = requests.get(f"{base}/{batch['id']}/results")
        assert early.status_code == 400
        first = requests.get(f"{base}/{batch['id']}").json()
        assert first["processing_status"] == "in_progress"
        ended = requests.get(f"{base}/{batch['id']}").json()
        assert ended["processing_status"] == "ended"
        assert ended["request_counts"]["succeeded"] == 2
        assert ended["results_url"].endswith(f"/v1/messages/batches/{batch['id']}/results")
        lines = [json.loads(line) for line in
                 requests.get(f"{base}/{batch['id']}/results").text.splitlines()]
        assert requests.get(f"{base}/msgbatch_nope").status_code == 404
    assert [line["custom_id"] for line in lines] == ["a", "b"]
    assert lines[0]["result"]["type"] == "succeeded"
    assert lines[0]["result"]["message"]["content"][0]["text"] == "/v1/messages: hi"
    assert fake.answered == {"a": 1, "b": 1} and len(fake.created) == 1


def test_anthropic_expired_and_errored_results_and_a_refused_create():
    with FakeServer() as server:
        server.batches(echo, fail=1, expire=lambda cid, params: cid == "x",
                       error=lambda cid, params: (400, "too long") if cid == "e" else None)
        base = server.url + "/v1/messages/batches"
        body = {"requests": [{"custom_id": c, "params": {"messages": []}}
                             for c in ("x", "e", "ok")]}
        refused = requests.post(base, json=body)
        assert refused.status_code == 529
        assert refused.json()["error"]["type"] == "overloaded_error"
        batch = requests.post(base, json=body).json()
        counts = requests.get(f"{base}/{batch['id']}").json()["request_counts"]
        lines = requests.get(f"{base}/{batch['id']}/results").text.splitlines()
    assert counts == {"processing": 0, "succeeded": 1, "errored": 1, "canceled": 0,
                      "expired": 1}
    results = {json.loads(line)["custom_id"]: json.loads(line)["result"] for line in lines}
    assert results["x"] == {"type": "expired"}
    assert results["e"]["error"]["error"] == {"type": "invalid_request_error",
                                              "message": "too long"}


def test_an_openai_batch_reads_its_uploaded_file_and_writes_output_and_error_files():
    def answer(endpoint, params):
        return openai_response(f"{endpoint} {params['input']}")

    with FakeServer() as server:
        fake = server.batches(answer, expire=lambda cid, params: cid == "late",
                              retry_after=3)
        jsonl = "".join(json.dumps({"custom_id": c, "method": "POST", "url": "/v1/responses",
                                    "body": {"input": c}}) + "\n" for c in ("one", "late"))
        upload = requests.post(server.url + "/v1/files", data={"purpose": "batch"},
                               files={"file": ("batch.jsonl", jsonl.encode())}).json()
        assert upload["object"] == "file" and upload["purpose"] == "batch"
        made = requests.post(server.url + "/v1/batches", json={
            "input_file_id": upload["id"], "endpoint": "/v1/responses",
            "completion_window": "24h"}).json()
        assert made["object"] == "batch" and made["status"] == "validating"
        polled = requests.get(server.url + f"/v1/batches/{made['id']}")
        done = polled.json()
        assert polled.headers["retry-after"] == "3"
        assert done["status"] == "completed" and done["request_counts"] == {
            "total": 2, "completed": 1, "failed": 1}
        output = requests.get(server.url + f"/v1/files/{done['output_file_id']}/content").text
        errors = requests.get(server.url + f"/v1/files/{done['error_file_id']}/content").text
    good, = [json.loads(line) for line in output.splitlines()]
    late, = [json.loads(line) for line in errors.splitlines()]
    assert good["custom_id"] == "one" and good["response"]["status_code"] == 200
    assert good["response"]["body"]["output"][0]["content"][0]["text"] == "/v1/responses one"
    assert late["response"] is None and late["error"]["code"] == "batch_expired"
    assert fake.created[0].kind == "/v1/responses"


def test_an_openai_batch_can_fail_as_a_whole():
    with FakeServer() as server:
        server.batches(lambda e, p: chat_completion("x"), fail=1)
        upload = requests.post(server.url + "/v1/files", data={"purpose": "batch"},
                               files={"file": ("b.jsonl", b"")}).json()
        made = requests.post(server.url + "/v1/batches", json={
            "input_file_id": upload["id"], "endpoint": "/v1/chat/completions",
            "completion_window": "24h"}).json()
        failed = requests.get(server.url + f"/v1/batches/{made['id']}").json()
    assert failed["status"] == "failed"
    assert failed["errors"]["data"][0]["message"] == "the batch failed validation"


def test_a_queued_reply_wins_over_the_batch_api_and_other_paths_are_unexpected():
    with FakeServer() as server:
        server.batches(echo)
        server.queue("/v1/messages/batches", Reply.json({"queued": True}))
        assert requests.post(server.url + "/v1/messages/batches", json={}).json() == {
            "queued": True}
        assert requests.post(server.url + "/v1/messages", json={}).status_code == 500
        with pytest.raises(AssertionError, match="unexpected POST /v1/messages"):
            server.assert_consumed()


def test_the_result_builders_have_the_providers_shapes():
    message = anthropic_message("hi", tool_calls=[("toolu_1", "f", {"a": 1})])
    assert message["stop_reason"] == "tool_use"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    response = openai_response(tool_calls=[("call_1", "f", {"a": 1})])
    assert response["output"][0]["arguments"] == '{"a": 1}'
    completion = chat_completion("hey")
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert completion["usage"]["total_tokens"] == 15
