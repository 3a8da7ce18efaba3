"""``nacelle models``: each provider's listing endpoint on a FakeServer, and the cache."""

import io

import pytest

from nacelle.cli.models import TTL, ListingError, fetch_models, models_command
from nacelle.testing import FakeServer, Reply

KEY = "sk-ant-models-test-0123456789"


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeServer() as s:
        for variable in ("ANTHROPIC_BASE_URL", "OPENROUTER_BASE_URL", "OPENAI_BASE_URL"):
            monkeypatch.setenv(variable, s.url)
        monkeypatch.setenv("OLLAMA_HOST", s.url)
        yield s


def test_anthropic_models_follow_pages_with_the_key_and_show_known_prices(server):
    server.queue("/v1/models",
                 Reply.json({"data": [{"id": "claude-opus-4-1", "display_name": "Claude Opus 4.1"}],
                             "has_more": True, "last_id": "claude-opus-4-1"}),
                 Reply.json({"data": [{"id": "claude-new-9", "display_name": "New"}],
                             "has_more": False, "last_id": "claude-new-9"}))
    models, cached = fetch_models("anthropic")
    assert not cached
    assert [name for name, _ in models] == ["claude-opus-4-1", "claude-new-9"]
    assert "per Mtok" in models[0][1] and models[1][1] == "New"
    assert server.requests[0].headers["x-api-key"] == KEY
    assert "after_id=claude-opus-4-1" in server.requests[1].query


def test_a_listing_is_reused_from_the_cache_until_it_is_ten_minutes_old(server):
    server.queue("/models", *[Reply.json({"data": [{"id": f"m{i}"}]}) for i in range(3)])
    now = 1_000_000.0
    assert fetch_models("openai", clock=lambda: now) == ([("m0", "")], False)
    assert fetch_models("openai", clock=lambda: now + TTL - 1) == ([("m0", "")], True)
    assert fetch_models("openai", clock=lambda: now + TTL + 1) == ([("m1", "")], False)
    assert fetch_models("openai", refresh=True, clock=lambda: now + TTL + 2)[0] == [("m2", "")]
    assert len(server.requests) == 3



def test_a_cache_write_that_fails_leaves_no_temporary_file_and_the_listing_still_comes(
        server, monkeypatch, tmp_path):
    import os

    server.queue("/models", Reply.json({"data": [{"id": "m0"}]}))

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    assert fetch_models("openai") == ([("m0", "")], False)
    assert list((tmp_path / "cache" / "nacelle").iterdir()) == []


def test_the_cache_is_a_private_file_in_a_private_directory(server, tmp_path):
    import os
    import stat

    server.queue("/models", Reply.json({"data": [{"id": "m0"}]}))
    old = os.umask(0o022)
    try:
        fetch_models("openai")
    finally:
        os.umask(old)
    folder = tmp_path / "cache" / "nacelle"
    (cache,) = folder.iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600

def test_openrouter_shows_its_own_prices_per_million_tokens(server):
    server.queue("/models", Reply.json({"data": [{
        "id": "vendor/model", "name": "Model", "context_length": 128000,
        "pricing": {"prompt": "0.000003", "completion": "0.000015"}}]}))
    [(name, about)] = fetch_models("openrouter")[0]
    assert name == "vendor/model"
    assert about == "Model - 128,000 context - $3/$15 per Mtok"


def test_ollama_lists_its_local_tags(server):
    server.queue("/api/tags", Reply.json({"models": [{"name": "qwen3:8b", "size": 5_200_000_000}]}))
    assert fetch_models("ollama")[0] == [("qwen3:8b", "5.2 GB")]


def test_a_failed_listing_is_one_line_without_the_key(server):
    server.queue("/v1/models", Reply.json({"error": "no"}, status=401))
    out, err = io.StringIO(), io.StringIO()
    assert models_command(["--provider", "anthropic"], lambda: "anthropic", out, err) == 1
    assert err.getvalue().count("\n") == 1 and "401" in err.getvalue()
    assert KEY not in err.getvalue()
    with pytest.raises(ListingError):
        fetch_models("anthropic", refresh=True)


def test_a_listing_nested_five_thousand_deep_is_a_listing_error(server):
    deep = b'{"data": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    server.queue("/models", Reply(chunks=[deep], mode="length"))
    with pytest.raises(ListingError, match="did not answer JSON"):
        fetch_models("openai", refresh=True)


def test_the_command_prints_one_model_a_line_with_a_tab(server):
    server.queue("/api/tags", Reply.json({"models": [{"name": "a"}, {"name": "b", "size": 1e9}]}))
    out, err = io.StringIO(), io.StringIO()
    assert models_command(["--provider", "ollama"], lambda: "anthropic", out, err) == 0
    assert out.getvalue() == "a\nb\t1.0 GB\n"
    out = io.StringIO()
    assert models_command(["--provider", "ollama"], lambda: "anthropic", out, err) == 0
    assert "from the cache" in err.getvalue() and out.getvalue() == "a\nb\t1.0 GB\n"


def test_a_providers_model_names_are_shown_with_their_escapes_visible(server):
    server.queue("/models", Reply.json({"data": [
        {"id": "m\x1b]52;c;eA==\x07", "name": "x\x1b[2J\x9b2J\u202e"}]}))
    out, err = io.StringIO(), io.StringIO()
    assert models_command(["--provider", "openrouter"], lambda: "anthropic", out, err) == 0
    assert out.getvalue().startswith("m\\x1b]52;c;eA==\\x07\tx\\x1b[2J\\x9b2J\\u202e")
    assert not {"\x1b", "\x07", "\x9b", "\u202e"} & set(out.getvalue())


def test_the_default_provider_follows_the_backend_setting_or_asks_for_one(
        server, monkeypatch, capsys):
    from nacelle.cli.models import command

    monkeypatch.setenv("NACELLE_CONFIG", "/dev/null")
    monkeypatch.setenv("NACELLE_BACKEND", "openai-chat")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-models-0123456789")
    server.queue("/models", Reply.json({"data": [{"id": "gpt-5-mini"}]}))
    assert command([]) == 0
    assert capsys.readouterr().out.startswith("gpt-5-mini\t")  # listed as openai
    monkeypatch.setenv("NACELLE_BACKEND", "groq")
    assert command([]) == 1
    assert "cannot list the groq backend's models; pass --provider" in capsys.readouterr().err
