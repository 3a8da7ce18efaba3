"""Settings: flag > environment > file > default, key by key, with clear refusals."""

import itertools
import os

import pytest

from nacelle.settings import Settings, SettingsError, config_path, parse_file, resolve

LAYERS = ("flag", "env", "file")
VALUES = {"flag": "from-flag", "env": "from-env", "file": "from-file"}


@pytest.mark.parametrize("present", [
    combo for n in range(4) for combo in itertools.combinations(LAYERS, n)
])
def test_every_combination_of_layers_resolves_to_the_highest_present(present):
    flags = {"model": VALUES["flag"]} if "flag" in present else {}
    env = {"NACELLE_MODEL": VALUES["env"]} if "env" in present else {}
    file_text = f"model: {VALUES['file']}\n" if "file" in present else ""
    settings = resolve(flags, env, file_text)
    expected = next((layer for layer in LAYERS if layer in present), "default")
    assert settings.model == (VALUES[expected] if expected != "default" else "")
    assert settings.source("model") == expected


def test_layers_are_decided_key_by_key():
    settings = resolve({"backend": "openrouter"}, {"NACELLE_MODEL": "m"},
                       "root: /srv\nmodel: other\n")
    assert (settings.backend, settings.model, settings.root) == ("openrouter", "m", "/srv")
    assert (settings.source("backend"), settings.source("model"), settings.source("root")) == (
        "flag", "env", "file")


def test_untyped_flags_do_not_outrank_the_file():
    # An argument parser's untyped flag arrives as None (or not at all).
    settings = resolve({"max_iterations": None, "bash": None}, {}, "max_iterations: 7\nbash: yes\n")
    assert settings.max_iterations == 7 and settings.bash is True


@pytest.mark.parametrize("flag,env,file,expected", [
    (None, None, None, False),
    (None, None, "true", True),
    (None, "0", "true", False),
    (False, "1", "true", False),
    (True, "false", "false", True),
    (None, "yes", None, True),
])
def test_toggles_are_tri_state(flag, env, file, expected):
    settings = resolve(
        {"bash": flag},
        {"NACELLE_BASH": env} if env is not None else {},
        f"bash: {file}\n" if file is not None else "",
    )
    assert settings.bash is expected


def test_defaults_when_nothing_is_set():
    settings = resolve({}, {}, "")
    assert settings == Settings()


def test_environment_values_are_converted():
    settings = resolve({}, {"NACELLE_MAX_ITERATIONS": "12", "NACELLE_SHOW_THINKING": "on",
                            "NACELLE_EFFORT": "high"}, "")
    assert (settings.max_iterations, settings.show_thinking, settings.effort) == (12, True, "high")


def test_the_file_parses_comments_quotes_booleans_integers_and_plain_strings():
    values = parse_file(
        "# a comment\n"
        "\n"
        "model: anthropic/claude-opus-5   # trailing comment\n"
        "root: \"/tmp/with # hash\"\n"
        "search_url: 'http://127.0.0.1:8888'\n"
        "bash: no\n"
        "max_iterations: 30\n"
    )
    assert values == {"model": "anthropic/claude-opus-5", "root": "/tmp/with # hash",
                      "search_url": "http://127.0.0.1:8888", "bash": False,
                      "max_iterations": 30}


@pytest.mark.parametrize("line,message", [
    ("model", "line 2: expected 'key: value'"),
    ("  model: x", "line 2: nested values are not supported"),
    ("model: [a, b]", "line 2: only plain values"),
    ("model: {a: 1}", "line 2: only plain values"),
    ("model: \"open", "line 2: unterminated or malformed"),
    ("model: 'open", "line 2: unterminated quoted string"),
    ("model:", "line 2: 'model' has no value"),
    ("colour: blue", "line 2: unknown setting 'colour'"),
    ("backend: anthropic", "line 2: 'backend' is set twice"),
])
def test_malformed_lines_are_errors_naming_the_line(line, message):
    with pytest.raises(SettingsError, match=message):
        resolve({}, {}, "backend: anthropic\n" + line + "\n")


@pytest.mark.parametrize("key", [
    "api_key", "anthropic_api_key", "key", "token", "github_token", "client_secret",
    "secret", "password",
])
def test_credentials_are_refused_everywhere_with_a_pointer_to_the_environment(key):
    with pytest.raises(SettingsError, match="credentials belong in the environment"):
        resolve({}, {}, f"{key}: sk-123\n")
    with pytest.raises(SettingsError, match="credential"):
        resolve({}, {f"NACELLE_{key.upper()}": "sk-123"}, "")


def test_a_credential_value_never_appears_in_the_error():
    with pytest.raises(SettingsError) as info:
        resolve({}, {}, "api_key: sk-live-abcdef\n")
    assert "sk-live-abcdef" not in str(info.value)


def test_an_environment_variable_that_misspells_a_setting_is_named():
    with pytest.raises(SettingsError, match="NACELLE_MODLE"):
        resolve({}, {"NACELLE_MODLE": "x"}, "")


def test_other_nacelle_variables_are_not_settings_and_are_left_alone():
    settings = resolve({}, {"NACELLE_ARTIFACTS": "/tmp/a", "NACELLE_CASSETTE": "replay",
                            "NACELLE_LLAMA_SERVER": "/bin/x", "NACELLE_MODEL": "m"}, "")
    assert settings.model == "m"


@pytest.mark.parametrize("text,message", [
    ("backend: sagemaker", "unknown backend 'sagemaker'"),
    ("effort: extreme", "unknown effort 'extreme'"),
    ("max_iterations: many", "expected a whole number"),
    ("max_iterations: -1", "cannot be negative"),
    ("bash: sometimes", "expected true or false"),
])
def test_bad_values_are_errors_naming_the_key(text, message):
    with pytest.raises(SettingsError, match=message):
        resolve({}, {}, text)


def test_the_config_path_comes_from_nacelle_config_or_home(tmp_path):
    assert config_path({"NACELLE_CONFIG": str(tmp_path / "c.yml")}) == tmp_path / "c.yml"
    assert config_path({"HOME": str(tmp_path)}) == tmp_path / ".nacelle.yml"


def test_resolve_reads_the_file_named_by_nacelle_config(tmp_path):
    path = tmp_path / "nacelle.yml"
    path.write_text("model: from-disk\n", encoding="utf-8")
    settings = resolve({}, {"NACELLE_CONFIG": str(path)})
    assert settings.model == "from-disk"


def test_a_missing_file_is_no_error(tmp_path):
    assert resolve({}, {"NACELLE_CONFIG": str(tmp_path / "absent.yml")}) == Settings()


def test_errors_in_a_file_name_the_file(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("oops\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="bad.yml, line 1"):
        resolve({}, {"NACELLE_CONFIG": str(path)})


def test_the_sessions_directory_comes_from_a_flag_the_environment_or_the_file():
    file_text = "sessions_dir: ~/from-file\n"
    assert resolve({}, {}, "").sessions_dir == ""  # the CLI picks the XDG default
    assert resolve({}, {}, file_text).sessions_dir == "~/from-file"
    settings = resolve({}, {"NACELLE_SESSIONS_DIR": "/from/env"}, file_text)
    assert (settings.sessions_dir, settings.source("sessions_dir")) == ("/from/env", "env")
    assert resolve({"sessions_dir": "/from/flag"}, {"NACELLE_SESSIONS_DIR": "/e"},
                   file_text).sessions_dir == "/from/flag"


PROFILES = """\
model: top-model
effort: low
profiles:
  # a comment inside the block
  local:
    backend: ollama
    model: qwen3
    base_url: http://gpu-box:11434/v1

  work:
      backend: bedrock
      bash: yes
max_iterations: 7
"""


def test_profiles_parse_as_named_tables_beside_the_flat_keys():
    values = parse_file(PROFILES)
    assert values == {"model": "top-model", "effort": "low", "max_iterations": 7,
                      "profiles": {"local": {"backend": "ollama", "model": "qwen3",
                                             "base_url": "http://gpu-box:11434/v1"},
                                   "work": {"backend": "bedrock", "bash": True}}}


def test_a_profile_sits_under_flags_and_the_environment_and_over_the_files_top_level():
    settings = resolve({"profile": "local"}, {}, PROFILES)
    assert (settings.backend, settings.model, settings.effort, settings.max_iterations) == (
        "ollama", "qwen3", "low", 7)
    assert (settings.source("model"), settings.source("effort"),
            settings.source("profile")) == ("profile", "file", "flag")
    settings = resolve({"profile": "local", "model": "flagged"},
                       {"NACELLE_BASE_URL": "http://env/v1"}, PROFILES)
    assert (settings.model, settings.base_url, settings.backend) == (
        "flagged", "http://env/v1", "ollama")


def test_the_profile_comes_from_the_flag_the_environment_or_the_files_top_level():
    default = "profile: work\n" + PROFILES
    assert resolve({}, {}, default).backend == "bedrock"
    assert resolve({}, {"NACELLE_PROFILE": "local"}, default).backend == "ollama"
    assert resolve({"profile": "work"}, {"NACELLE_PROFILE": "local"}, default).backend == \
        "bedrock"
    assert resolve({"profile": ""}, {}, default).backend == "anthropic"  # none at all
    assert resolve({}, {}, PROFILES).backend == "anthropic"  # no profile unless chosen


def test_an_unknown_profile_names_the_ones_the_file_defines():
    with pytest.raises(SettingsError, match=r"flag --profile: unknown profile 'wrok'; "
                                            r"settings defines local, work"):
        resolve({"profile": "wrok"}, {}, PROFILES)
    with pytest.raises(SettingsError, match="NACELLE_PROFILE: unknown profile 'x'; "
                                            "settings defines none"):
        resolve({}, {"NACELLE_PROFILE": "x"}, "model: m\n")


@pytest.mark.parametrize("text,message", [
    ("profiles: local\n", "line 1: 'profiles:' holds named profiles"),
    ("profiles:\n  local: ollama\n", "line 2: profile 'local' holds settings"),
    ("profiles:\n  local:\n    colour: blue\n", "line 3: unknown setting 'colour'"),
    ("profiles:\n  local:\n    api_key: sk-1\n", "line 3: 'api_key' looks like a credential"),
    ("profiles:\n  local:\n    profile: work\n", "line 3: a profile cannot choose a profile"),
    ("profiles:\n  local:\n    model: a\n   model: b\n", "line 4: this line's indentation"),
    ("profiles:\n  local:\n    model: a\n     bash: no\n", "line 4: this line's indentation"),
    ("profiles:\n    local:\n  work:\n", "line 3: this line's indentation"),
    ("profiles:\n  local:\n  local:\n", "line 3: profile 'local' is defined twice"),
    ("profiles:\n  local:\n    model: a\n    model: b\n", "line 4: 'model' is set twice"),
    ("profiles:\n  local:\n    model:\n", "line 3: 'model' has no value"),
    ("profiles:\n  lo cal:\n", "line 2: expected 'key: value'"),
    ("profiles:\n  a/b:\n", "line 2: expected 'key: value'"),
    ("profiles:\n\tlocal:\n", "line 2: indent with spaces"),
    ("model: m\n  local:\n", "line 2: nested values are not supported"),
    ("profiles:\n  local:\nmodel: m\n    bash: no\n", "line 4: nested values"),
    ("profiles:\nprofiles:\n", "line 2: 'profiles' is set twice"),
    ("profiles:\n  local:\n    model: [a]\n", "line 3: only plain values"),
])
def test_a_malformed_profiles_block_is_an_error_naming_the_line(text, message):
    with pytest.raises(SettingsError, match=message):
        parse_file(text)


def test_a_file_holds_a_bounded_number_of_profiles():
    from nacelle.settings import MAX_PROFILES

    text = "profiles:\n" + "".join(f"  p{i}:\n    model: m\n" for i in range(MAX_PROFILES))
    assert len(parse_file(text)["profiles"]) == MAX_PROFILES
    with pytest.raises(SettingsError, match=f"more than {MAX_PROFILES} profiles"):
        parse_file(text + "  one-more:\n")


@pytest.mark.parametrize("value", ["Read_File", "read_file;rm", "a,,b", "-x"])
def test_a_malformed_tools_setting_names_where_it_came_from(value):
    with pytest.raises(SettingsError, match="environment variable NACELLE_TOOLS: expected "
                                            "none or tool names"):
        resolve({}, {"NACELLE_TOOLS": value}, "")


def test_the_tools_setting_is_none_or_names_separated_by_commas():
    assert resolve({}, {}, "tools: none\n").tools == "none"
    assert resolve({"tools": " read_file , list_directory"}, {}, "").tools == \
        "read_file,list_directory"
    assert resolve({}, {}, "").tools == ""


def test_a_settings_file_that_is_too_big_or_not_text_is_a_one_line_error(tmp_path):
    from nacelle.settings import MAX_FILE

    big = tmp_path / "big.yml"
    big.write_text("# padding\n" * (MAX_FILE // 10 + 1), encoding="utf-8")
    with pytest.raises(SettingsError, match="a settings file is at most 256 KiB"):
        resolve({}, {"NACELLE_CONFIG": str(big)})
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"model: \xff\xfe\n")
    with pytest.raises(SettingsError, match="not UTF-8 text"):
        resolve({}, {"NACELLE_CONFIG": str(binary)})
    if os.path.exists("/dev/zero"):
        with pytest.raises(SettingsError, match="at most"):
            resolve({}, {"NACELLE_CONFIG": "/dev/zero"})
    assert resolve({}, {"NACELLE_CONFIG": str(tmp_path / "absent.yml")}).backend == "anthropic"
