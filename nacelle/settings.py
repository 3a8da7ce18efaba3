"""Settings for the command line: a file, the environment and flags, resolved in one
function.

Precedence is flag > environment > profile > file > default, decided key by key in
:func:`resolve`. Only flags the user actually typed count: the CLI's argument
parser leaves untyped flags out (``argparse.SUPPRESS``), because a parser default
that outranked the file would make the file useless. Toggles are tri-state —
unset, true, false — so ``--no-bash`` can switch off what the file switched on.

The file is ``~/.nacelle.yml`` (or the path in ``NACELLE_CONFIG``), a flat
``key: value`` subset of YAML parsed here rather than by a YAML library, to keep the
dependency list at two: comments, quoted strings, booleans, integers and unquoted
strings, and one nested block, ``profiles:`` (below); anything else is an error
naming the line. The file is read as UTF-8, at most ``MAX_FILE`` bytes. Environment variables are
``NACELLE_<KEY>`` (``NACELLE_MODEL``, ``NACELLE_MAX_ITERATIONS``, …). Other
``NACELLE_`` variables are left alone — the library's own (``NACELLE_CASSETTE``) and a
user's are no settings — unless the name is a near miss of a setting's
(``NACELLE_MODLE``) or looks like a credential, which is an error naming it.

Profiles. The file may hold named sets of settings, the ``[profiles.NAME]`` tables a
TOML file would have, written in the same YAML subset as a ``profiles:`` block: one
``NAME:`` line a profile, indented, its ``key: value`` lines indented further, each
level at one indentation of spaces::

    model: claude-sonnet-4-5
    profiles:
      local:
        backend: ollama
        model: qwen3
      work:
        backend: bedrock

``--profile NAME`` chooses one, as do ``NACELLE_PROFILE`` and a top-level ``profile:``
line (a default profile; flag > environment > file, like any setting). Its values
sit between the environment and the file's top level, as in the other CLIs with
profiles (the AWS CLI's ``--profile``, Poetry's and git's scoped config): a flag or a
``NACELLE_`` variable still wins, and a profile overrides the file's defaults. A
profile cannot choose a profile; an unknown one is an error naming those the file
defines; a file holds at most ``MAX_PROFILES``.

Credentials never live in settings: a key that looks like one (``api_key``,
``*_api_key``, ``key``, ``token``, ``*_token``, ``*secret*``, ``password``) is
refused with a message pointing to the environment, where the backends read their
keys. An unknown key is an error naming it.

Outer ring: imports the standard library and the core.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .backend import Effort
from .errors import ConfigError

__all__ = ["Settings", "SettingsError", "config_path", "parse_file", "resolve"]

#: The names ``backend`` takes; :mod:`nacelle.cli.backends` says what each builds.
BACKENDS = ("anthropic", "openai", "gemini", "openrouter", "vertex", "bedrock", "chat",
            "openai-chat", "gemini-chat", "ollama", "vllm", "llamacpp", "lmstudio", "groq",
            "deepseek", "mistral", "together", "xai")


class SettingsError(ConfigError):
    """A settings file, variable or flag that cannot be used; the message says where."""


@dataclass(frozen=True)
class Settings:
    """The resolved settings. ``sources`` tells where each value came from."""

    backend: str = "anthropic"
    model: str = ""
    root: str = "."
    bash: bool = False
    max_iterations: int = 50
    effort: str = ""
    show_thinking: bool = False
    search_url: str = ""
    #: The backend's endpoint, replacing its default and its SDK variable
    #: (``ANTHROPIC_BASE_URL``…); empty means the backend's own.
    base_url: str = ""
    #: Where ``--session`` keeps conversations; empty means the CLI's default,
    #: ``$XDG_DATA_HOME/nacelle/sessions`` or ``~/.local/share/nacelle/sessions``.
    sessions_dir: str = ""
    #: The tools offered: "" (the CLI's default for the backend), "none", or a
    #: comma-separated list of names (:mod:`nacelle.cli.tool_choice`).
    tools: str = ""
    #: The ``profiles.NAME`` table of the file layered under flags and the environment.
    profile: str = ""
    sources: Tuple[Tuple[str, str], ...] = ()

    def source(self, key: str) -> str:
        """"flag", "env", "profile", "file" or "default"."""
        return dict(self.sources).get(key, "default")


KEYS = tuple(f.name for f in fields(Settings) if f.name != "sources")

_CREDENTIAL = re.compile(r"^(api_key|.*_api_key|key|token|.*_token|.*secret.*|password)$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
MAX_PROFILES = 100  # a file is a person's; more than this is a mistake, not a need
MAX_FILE = 256 * 1024  # bytes; a hand-written settings file is a few hundred


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SettingsError(f"{where}: expected true or false, got {value!r}")


def _as_count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or _INTEGER.match(str(value))):
        raise SettingsError(f"{where}: expected a whole number, got {value!r}")
    number = int(value)
    if number < 0:
        raise SettingsError(f"{where}: cannot be negative, got {number}")
    return number


def _as_text(value: Any, where: str) -> str:
    if isinstance(value, bool):
        raise SettingsError(f"{where}: expected text, got {value!r}")
    return str(value)


def _as_backend(value: Any, where: str) -> str:
    text = _as_text(value, where)
    if text not in BACKENDS:
        close = difflib.get_close_matches(text, BACKENDS, n=1, cutoff=0.6)
        meant = f"did you mean {close[0]!r}? " if close else ""
        raise SettingsError(f"{where}: unknown backend {text!r}; {meant}choose one of "
                            + ", ".join(BACKENDS))
    return text


def _as_effort(value: Any, where: str) -> str:
    text = _as_text(value, where)
    if text and text not in {e.value for e in Effort}:
        raise SettingsError(
            f"{where}: unknown effort {text!r}; choose one of "
            + ", ".join(e.value for e in Effort))
    return text


def _as_tools(value: Any, where: str) -> str:
    names = [name.strip() for name in _as_text(value, where).split(",")]
    if names == [""]:
        return ""
    if not all(re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name) for name in names) \
            or len(names) > 64:
        raise SettingsError(f"{where}: expected none or tool names separated by commas "
                            f"(read_file,list_directory), got {value!r}")
    return ",".join(names)


def _as_profile(value: Any, where: str) -> str:
    text = _as_text(value, where)
    if text and not _PROFILE.match(text):
        raise SettingsError(f"{where}: a profile's name is letters, digits, '_', '.' and "
                            f"'-', got {text!r}")
    return text


_CONVERT: Dict[str, Callable[[Any, str], Any]] = {
    "backend": _as_backend,
    "model": _as_text,
    "root": _as_text,
    "bash": _as_bool,
    "max_iterations": _as_count,
    "effort": _as_effort,
    "show_thinking": _as_bool,
    "search_url": _as_text,
    "base_url": _as_text,
    "sessions_dir": _as_text,
    "tools": _as_tools,
    "profile": _as_profile,
}


def _check_key(key: str, where: str) -> None:
    if _CREDENTIAL.match(key.lower()):
        raise SettingsError(
            f"{where}: {key!r} looks like a credential; credentials belong in the "
            "environment (ANTHROPIC_API_KEY, OPENROUTER_API_KEY), never in settings")
    if key not in _CONVERT:
        raise SettingsError(f"{where}: unknown setting {key!r}; known: {', '.join(KEYS)}")


def config_path(env: Mapping[str, str]) -> Path:
    """Where the settings file is: ``NACELLE_CONFIG``, else ``~/.nacelle.yml``."""
    given = env.get("NACELLE_CONFIG")
    if given:
        return Path(given).expanduser()
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".nacelle.yml"


def _scalar(raw: str, where: str) -> Any:
    if raw[:1] == '"':
        try:
            value, end = json.JSONDecoder().raw_decode(raw)
        except ValueError:
            raise SettingsError(f"{where}: unterminated or malformed quoted string") from None
        rest = raw[end:].strip()
        if rest and not rest.startswith("#"):
            raise SettingsError(f"{where}: unexpected text after the quoted string")
        return value
    if raw[:1] == "'":
        end = raw.find("'", 1)
        while end != -1 and raw[end + 1:end + 2] == "'":  # '' is an escaped quote in YAML
            end = raw.find("'", end + 2)
        if end == -1:
            raise SettingsError(f"{where}: unterminated quoted string")
        rest = raw[end + 1:].strip()
        if rest and not rest.startswith("#"):
            raise SettingsError(f"{where}: unexpected text after the quoted string")
        return raw[1:end].replace("''", "'")
    value = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
    if value[:1] in ("[", "{", "&", "*", "!", "|", ">", "-") and value not in ("-",):
        if not _INTEGER.match(value):
            raise SettingsError(f"{where}: only plain values are supported, got {value!r}")
    if value.lower() in ("true", "false", "yes", "no", "on", "off"):
        return value.lower() in ("true", "yes", "on")
    if _INTEGER.match(value):
        return int(value)
    return value




def _entry(stripped: str, where: str) -> Tuple[str, str]:
    """A line's key and raw value (the value may be empty or a comment)."""
    key, colon, raw = stripped.partition(":")
    key, raw = key.strip(), raw.strip()
    if not colon or not _KEY.match(key) and not _PROFILE.match(key):
        raise SettingsError(f"{where}: expected 'key: value', got {stripped!r}")
    return key, ("" if raw.startswith("#") else raw)


def _setting(values: Dict[str, Any], key: str, raw: str, where: str) -> None:
    if not _KEY.match(key):
        raise SettingsError(f"{where}: expected 'key: value', got {key!r}")
    _check_key(key, where)
    if key in values:
        raise SettingsError(f"{where}: {key!r} is set twice")
    if not raw:
        raise SettingsError(f"{where}: {key!r} has no value")
    values[key] = _scalar(raw, where)


class _Profiles:
    """The ``profiles:`` block being read: one indented ``NAME:`` line a profile, its
    settings indented further, every level at one indentation."""

    def __init__(self) -> None:
        self.tables: Dict[str, Dict[str, Any]] = {}
        self.name_indent = 0
        self.key_indent = 0
        self.current: Optional[Dict[str, Any]] = None

    def line(self, indent: int, key: str, raw: str, where: str) -> None:
        if not self.name_indent:
            self.name_indent = indent
        if indent == self.name_indent:
            if not _PROFILE.match(key):
                raise SettingsError(f"{where}: a profile's name is letters, digits, '_', "
                                    f"'.' and '-', got {key!r}")
            if raw:
                raise SettingsError(f"{where}: profile {key!r} holds settings, one per "
                                    f"line indented below it, not a value")
            if key in self.tables:
                raise SettingsError(f"{where}: profile {key!r} is defined twice")
            if len(self.tables) == MAX_PROFILES:
                raise SettingsError(f"{where}: more than {MAX_PROFILES} profiles")
            self.current = self.tables[key] = {}
            self.key_indent = 0
            return
        if indent < self.name_indent or self.current is None:
            raise SettingsError(f"{where}: this line's indentation matches no line above")
        if not self.key_indent:
            self.key_indent = indent
        if indent != self.key_indent:
            raise SettingsError(f"{where}: this line's indentation matches no line above")
        if key == "profile":
            raise SettingsError(f"{where}: a profile cannot choose a profile")
        _setting(self.current, key, raw, where)


def parse_file(text: str, name: str = "settings") -> Dict[str, Any]:
    """Parse the settings file: flat ``key: value`` lines, and a ``profiles:`` block
    of named tables (``values["profiles"]``, a dict of name -> settings); errors name
    the file and line."""
    values: Dict[str, Any] = {}
    block: Optional[_Profiles] = None
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}, line {number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        margin = line[:len(line) - len(line.lstrip())]
        if margin.strip(" "):
            raise SettingsError(f"{where}: indent with spaces (YAML refuses tabs)")
        key, raw = _entry(stripped, where)
        if margin:
            if block is None:
                raise SettingsError(f"{where}: nested values are not supported (but "
                                    f"under 'profiles:')")
            block.line(len(margin), key, raw, where)
        elif key == "profiles":
            if "profiles" in values:
                raise SettingsError(f"{where}: 'profiles' is set twice")
            if raw:
                raise SettingsError(f"{where}: 'profiles:' holds named profiles, one "
                                    f"per indented 'NAME:' line below it, not a value")
            block = _Profiles()
            values["profiles"] = block.tables
        else:
            block = None
            _setting(values, key, raw, where)
    return values


def _read_file(path: Path) -> str:
    """The settings file's text ("" when there is none), read under :data:`MAX_FILE`
    bytes (``NACELLE_CONFIG=/dev/zero`` must not fill the memory) and decoded as
    UTF-8, or a SettingsError saying why not."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE + 1)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE:
        raise SettingsError(f"{path}: a settings file is at most {MAX_FILE // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _profile(flags: Mapping[str, Any], env: Mapping[str, Any], top: Mapping[str, Any],
             profiles: Mapping[str, Dict[str, Any]], name: str,
             ) -> Tuple[str, Dict[str, Any]]:
    """The profile chosen (flag > environment > the file's top level) and its table;
    an unknown one is an error naming those the file defines."""
    for values, where in ((flags, "flag --profile"), (env, "environment variable "
                          "NACELLE_PROFILE"), (top, f"{name}: profile")):
        if "profile" in values:
            chosen = _as_profile(values["profile"], where)
            if not chosen:
                return "", {}
            if chosen not in profiles:
                defined = ", ".join(sorted(profiles)) or "none"
                raise SettingsError(f"{where}: unknown profile {chosen!r}; {name} "
                                    f"defines {defined}")
            return chosen, profiles[chosen]
    return "", {}


def resolve(
    flags: Optional[Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    file_text: Optional[str] = None,
) -> Settings:
    """Resolve every key: flag > environment > profile > file > default.

    ``flags`` holds only what the user typed (a toggle typed as ``--no-x`` is False,
    an untyped one is absent or None). ``env`` defaults to ``os.environ``; the file
    is read from :func:`config_path` unless ``file_text`` is given.
    """
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    for key in flags:
        _check_key(key, f"flag --{key.replace('_', '-')}")
    if file_text is None:
        path = config_path(env)
        file_text, name = _read_file(path), str(path)
    else:
        name = "settings"
    from_file = parse_file(file_text, name)
    from_env = {}
    for var, value in env.items():
        if var.startswith("NACELLE_") and var != "NACELLE_CONFIG":
            key = var[len("NACELLE_"):].lower()
            if key in _CONVERT:
                from_env[key] = value
            elif (_CREDENTIAL.match(key)
                  or difflib.get_close_matches(key, KEYS, n=1, cutoff=0.8)):
                # A credential or a typo of a setting is an error; other NACELLE_
                # variables (NACELLE_CASSETTE, a test suite's own) are no settings.
                _check_key(key, f"environment variable {var}")

    profiles: Dict[str, Dict[str, Any]] = from_file.pop("profiles", {})
    profile, from_profile = _profile(flags, from_env, from_file, profiles, name)
    chosen: Dict[str, Any] = {}
    sources = []
    for key in KEYS:
        for layer, values, where in (
            ("flag", flags, f"flag --{key.replace('_', '-')}"),
            ("env", from_env, f"environment variable NACELLE_{key.upper()}"),
            ("profile", from_profile, f"{name}: profiles.{profile}.{key}"),
            ("file", from_file, f"{name}: {key}"),
        ):
            if key in values:
                chosen[key] = _CONVERT[key](values[key], where)
                sources.append((key, layer))
                break
    return Settings(**chosen, sources=tuple(sources))
