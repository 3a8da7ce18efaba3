"""``--backend NAME`` and ``--base-url``: each backend run end to end through
``nacelle.cli.app.main`` against a loopback FakeServer, keys read from the variables the
backends read, and a missing key said as the variable to set."""

import io
import json
import os
import sys

import pytest

from nacelle.cli import app, run
from nacelle.cli.backends import CHOICES, LOCAL, models_provider
from nacelle.settings import BACKENDS, SettingsError
from nacelle.testing import FakeServer, Reply
from nacelle.testing.clouds import EVENTSTREAM, bedrock_stream
from nacelle.testing.wire import (
    anthropic_stream, gemini_stream, openrouter_stream, responses_stream,
)

#: Variables that would reach a backend from the machine running the tests.
FOREIGN = ("NACELLE_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_", "GEMINI_", "GROQ_",
           "DEEPSEEK_", "MISTRAL_", "TOGETHER_", "XAI_", "AWS_", "GOOGLE_", "CLOUD_ML_",
           "GCE_METADATA_HOST", "K_SERVICE", "OLLAMA_HOST")


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(FOREIGN):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NACELLE_CONFIG", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(run, "exit_now", lambda code: code)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    from nacelle.backends.anthropic import gcp

    monkeypatch.setattr(gcp, "_DMI", str(tmp_path / "no-dmi"))  # not a Google Cloud VM


def nacelle(capsys, tmp_path, *args):
    code = app.main(["--root", str(tmp_path), "--no-instructions", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_anthropic_takes_its_key_from_the_environment_and_the_base_url_from_the_flag(
        server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-0123456789")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # the flag outranks it
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hello."])))
    code, out, err = nacelle(capsys, tmp_path, "--base-url", server.url, "hi")
    assert (code, out) == (0, "Hello.\n"), err
    assert server.requests[0].headers["x-api-key"] == "sk-ant-cli-0123456789"


def test_openai_is_the_responses_backend(server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-cli-0123456789")
    server.queue("/v1/responses", Reply(chunks=responses_stream(["Hi from Responses."])))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "openai", "--model", "gpt-5-mini",
                             "--base-url", server.url + "/v1", "hi")
    assert (code, out) == (0, "Hi from Responses.\n"), err
    assert server.requests[0].headers["authorization"] == "Bearer sk-openai-cli-0123456789"
    assert server.requests[0].json()["input"]


def test_gemini_is_the_native_backend(server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-cli-0123456789")
    server.queue("/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                 Reply(chunks=gemini_stream(["Hi from Gemini."])))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "gemini", "--model",
                             "gemini-2.5-flash", "--base-url", server.url + "/v1beta", "hi")
    assert (code, out) == (0, "Hi from Gemini.\n"), err
    assert server.requests[0].headers["x-goog-api-key"] == "AIza-cli-0123456789"
    assert "contents" in server.requests[0].json()


def test_openrouter_takes_the_base_url_from_the_environment_setting(
        server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-cli-0123456789")
    monkeypatch.setenv("NACELLE_BASE_URL", server.url + "/api/v1")
    server.queue("/api/v1/chat/completions",
                 Reply(chunks=openrouter_stream(["Routed."], keepalives=0)))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "openrouter", "--model",
                             "anthropic/claude-haiku-4.5", "hi")
    assert (code, out) == (0, "Routed.\n"), err
    assert server.requests[0].headers["authorization"] == "Bearer sk-or-cli-0123456789"


def test_a_local_preset_needs_no_key_and_sends_none(server, capsys, tmp_path):
    server.queue("/v1/chat/completions",
                 Reply(chunks=openrouter_stream(["Local."], keepalives=0)))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "ollama", "--model", "qwen3",
                             "--base-url", server.url + "/v1", "hi")
    assert (code, out) == (0, "Local.\n"), err
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].json()["model"] == "qwen3"


def test_a_hosted_preset_reads_its_own_key_variable(server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-cli-0123456789")
    server.queue("/openai/v1/chat/completions",
                 Reply(chunks=openrouter_stream(["Fast."], keepalives=0)))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "groq", "--model",
                             "openai/gpt-oss-120b", "--base-url", server.url + "/openai/v1",
                             "hi")
    assert (code, out) == (0, "Fast.\n"), err
    assert server.requests[0].headers["authorization"] == "Bearer gsk-cli-0123456789"


@pytest.mark.parametrize("backend, variable", [
    ("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"),
    ("gemini", "GEMINI_API_KEY"), ("openrouter", "OPENROUTER_API_KEY"),
    ("groq", "GROQ_API_KEY"), ("openai-chat", "OPENAI_API_KEY"), ("xai", "XAI_API_KEY"),
])
def test_a_missing_key_says_which_variable_to_set_in_a_command_lines_words(
        server, capsys, tmp_path, backend, variable):
    code, out, err = nacelle(capsys, tmp_path, "--backend", backend, "--model", "m",
                             "--base-url", server.url, "hi")
    assert code == 1 and out == ""
    assert err == (f"nacelle: error: no API key: set {variable} (or pick another "
                   f"--backend)\n")
    assert "api_key=" not in err and server.requests == []


def test_bedrock_signs_with_the_aws_keys_of_the_environment(
        server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    server.queue("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream",
                 Reply(chunks=bedrock_stream(anthropic_stream(["From Bedrock."])),
                       content_type=EVENTSTREAM))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "bedrock", "--model", model,
                             "--base-url", server.url, "hi")
    assert (code, out) == (0, "From Bedrock.\n"), err
    authorization = server.requests[0].headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-1/bedrock/aws4_request" in authorization


def test_bedrock_without_credentials_names_the_variables(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    code, _, err = nacelle(capsys, tmp_path, "--backend", "bedrock", "--model", "m", "hi")
    assert code == 1
    assert err.startswith("nacelle: error: no AWS credentials for Bedrock: set "
                          "AWS_BEARER_TOKEN_BEDROCK")
    assert "AWS_ACCESS_KEY_ID" in err and "api_key=" not in err


@pytest.fixture
def without_google_auth(monkeypatch):
    """The token path as it runs where google-auth is not installed."""
    monkeypatch.setitem(sys.modules, "google.auth", None)
    monkeypatch.setitem(sys.modules, "google.auth.transport.requests", None)


def test_vertex_gets_its_token_from_the_metadata_server_once(
        server, monkeypatch, capsys, tmp_path, without_google_auth):
    # The metadata server's token endpoint, as
    # https://cloud.google.com/compute/docs/access/authenticate-workloads documents it.
    monkeypatch.setenv("GCE_METADATA_HOST", server.url.split("//", 1)[1])
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    server.queue("/computeMetadata/v1/instance/service-accounts/default/token",
                 Reply.json({"access_token": "ya29.cli", "expires_in": 3599,
                             "token_type": "Bearer"}, headers={"Metadata-Flavor": "Google"}))
    # Asked beside the token; the environment's project outranks it.
    server.queue("/computeMetadata/v1/project/project-id",
                 Reply(chunks=[b"metadata-project"], mode="length",
                       headers={"Metadata-Flavor": "Google"}))
    server.queue("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
                 "claude-sonnet-4-5@20250929:streamRawPredict",
                 Reply(chunks=anthropic_stream(["From Vertex."])))
    code, out, err = nacelle(capsys, tmp_path, "--backend", "vertex", "--model",
                             "claude-sonnet-4-5@20250929", "--base-url", server.url + "/v1",
                             "hi")
    assert (code, out) == (0, "From Vertex.\n"), err
    assert server.requests[-1].headers["authorization"] == "Bearer ya29.cli"
    server.assert_consumed()


def test_vertex_without_credentials_says_what_to_run(capsys, tmp_path, without_google_auth):
    code, _, err = nacelle(capsys, tmp_path, "--backend", "vertex", "--model", "m", "hi")
    assert code == 1
    assert err.startswith("nacelle: error: no Google Cloud credentials for Vertex AI: run "
                          "`gcloud auth application-default login`")
    assert "token=" not in err


def test_the_chat_backend_needs_a_base_url_and_sends_the_openai_key_only_when_set(
        server, monkeypatch, capsys, tmp_path):
    code, _, err = nacelle(capsys, tmp_path, "--backend", "chat", "--model", "m", "hi")
    assert code == 1 and "the chat backend needs --base-url" in err
    server.queue("/v1/chat/completions",
                 Reply(chunks=openrouter_stream(["one"], keepalives=0)),
                 Reply(chunks=openrouter_stream(["two"], keepalives=0)))
    args = ("--backend", "chat", "--model", "m", "--base-url", server.url + "/v1", "hi")
    assert nacelle(capsys, tmp_path, *args)[:2] == (0, "one\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-compatible-0123456789")
    assert nacelle(capsys, tmp_path, *args)[:2] == (0, "two\n")
    assert "authorization" not in server.requests[0].headers
    assert server.requests[1].headers["authorization"] == "Bearer sk-compatible-0123456789"


def test_an_unknown_backend_lists_the_names_and_the_closest(capsys, tmp_path):
    code, _, err = nacelle(capsys, tmp_path, "--backend", "olama", "hi")
    assert code == 1
    assert "unknown backend 'olama'; did you mean 'ollama'?" in err
    assert all(name in err for name in BACKENDS)


def test_a_backend_that_needs_a_model_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-cli-0123456789")
    code, _, err = nacelle(capsys, tmp_path, "--backend", "groq", "hi")
    assert code == 1 and "the groq backend needs a model (--model" in err


def test_help_lists_every_backend_and_the_base_url_flag(capsys):
    with pytest.raises(SystemExit):
        app.main(["--help"])
    out = capsys.readouterr().out
    assert "--base-url URL" in out and "--backend NAME" in out
    assert all(name in out for name in BACKENDS)


def test_the_table_builds_exactly_the_backends_the_settings_accept():
    assert tuple(CHOICES) == BACKENDS
    assert LOCAL == {"ollama", "vllm", "llamacpp", "lmstudio"}


def test_nacelle_models_lists_a_backends_provider_or_asks_for_one():
    assert models_provider("openai-chat") == "openai"
    assert models_provider("ollama") == "ollama"
    with pytest.raises(SettingsError, match="pass --provider"):
        models_provider("groq")


def test_a_key_never_reaches_the_settings(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("NACELLE_GROQ_API_KEY", "gsk-in-the-wrong-place")
    code, _, err = nacelle(capsys, tmp_path, "--backend", "groq", "--model", "m", "hi")
    assert code == 1 and "looks like a credential" in err
    assert "gsk-in-the-wrong-place" not in err and json.dumps(err)


def test_a_profile_in_the_settings_file_picks_the_backend_end_to_end(
        server, monkeypatch, capsys, tmp_path):
    settings = tmp_path / "nacelle.yml"
    settings.write_text("model: claude-top\nprofiles:\n  local:\n    backend: ollama\n"
                        f"    model: qwen3\n    base_url: {server.url}/v1\n",
                        encoding="utf-8")
    monkeypatch.setenv("NACELLE_CONFIG", str(settings))
    server.queue("/v1/chat/completions",
                 Reply(chunks=openrouter_stream(["From the profile."], keepalives=0)))
    code, out, err = nacelle(capsys, tmp_path, "--profile", "local", "hi")
    assert (code, out) == (0, "From the profile.\n"), err
    assert server.requests[0].json()["model"] == "qwen3"
    code, _, err = nacelle(capsys, tmp_path, "--profile", "lokal", "hi")
    assert code == 1 and "unknown profile 'lokal'" in err and "defines local" in err


def test_every_command_that_builds_the_agent_says_a_missing_key_the_same_way(
        capsys, tmp_path):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"prompt": "hi"}\n', encoding="utf-8")
    code = app.main(["batch", str(prompts), "-o", str(tmp_path / "out.jsonl"), "--root",
                     str(tmp_path), "--backend", "groq", "--model", "m"])
    assert code == 1
    assert capsys.readouterr().err == ("nacelle: error: no API key: set GROQ_API_KEY (or "
                                       "pick another --backend)\n")


#: The backends with a test of their own above; every other name is a Chat Completions preset.
OWN_TESTS = {"anthropic", "openai", "gemini", "openrouter", "vertex", "bedrock", "chat"}


@pytest.mark.parametrize("backend", sorted(set(CHOICES) - OWN_TESTS))
def test_every_chat_completions_preset_runs_end_to_end_with_its_own_key(
        server, monkeypatch, capsys, tmp_path, backend):
    keys = CHOICES[backend].keys
    for variable in keys:
        monkeypatch.setenv(variable, f"key-{backend}-0123456789")
    server.queue("/v1/chat/completions",
                 Reply(chunks=openrouter_stream([f"Hi from {backend}."], keepalives=0)))
    model = () if backend == "llamacpp" else ("--model", "some-model")
    code, out, err = nacelle(capsys, tmp_path, "--backend", backend, *model,
                             "--base-url", server.url + "/v1", "hi")
    assert (code, out) == (0, f"Hi from {backend}.\n"), err
    headers = server.requests[0].headers
    if keys:
        assert headers["authorization"] == f"Bearer key-{backend}-0123456789"
    else:
        assert "authorization" not in headers
    if model:
        assert server.requests[0].json()["model"] == "some-model"
