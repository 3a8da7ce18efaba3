"""Settings for the command line: a file, the environment and flags, resolved in one
function.

Precedence is flag > environment > file > default, decided key by key in
:func:`resolve`. Only flags the user actually typed count: the CLI's argument
parser leaves untyped flags out (``argparse.SUPPRESS``), because a parser default
that outranked the file would make the file useless. Toggles are tri-state —
unset, true, false — so ``--no-bash`` can switch off what the file switched on.

The file is ``~/.nacelle.yml`` (or the path in ``NACELLE_CONFIG``), a flat
``key: value`` subset of YAML parsed here rather than by a YAML library, to keep the
dependency list at two: comments, quoted strings, booleans, integers and unquoted
strings; anything else is an error naming the line. Environment variables are
``NACELLE_<KEY>`` (``NACELLE_MODEL``, ``NACELLE_MAX_ITERATIONS``, …). Other
``NACELLE_`` variables are left alone — the library's own (``NACELLE_CASSETTE``) and a
user's are no settings — unless the name is a near miss of a setting's
(``NACELLE_MODLE``) or looks like a credential, which is an error naming it.

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

BACKENDS = ("anthropic", "openrouter")


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
    #: Where ``--session`` keeps conversations; empty means the CLI's default,
    #: ``$XDG_DATA_HOME/nacelle/sessions`` or ``~/.local/share/nacelle/sessions``.
    sessions_dir: str = ""
    sources: Tuple[Tuple[str, str], ...] = ()

    def source(self, key: str) -> str:
        """"flag", "env", "file" or "default"."""
        return dict(self.sources).get(key, "default")


KEYS = tuple(f.name for f in fields(Settings) if f.name != "sources")

_CREDENTIAL = re.compile(r"^(api_key|.*_api_key|key|token|.*_token|.*secret.*|password)$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


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
        raise SettingsError(f"{where}: unknown backend {text!r}; choose {' or '.join(BACKENDS)}")
    return text


def _as_effort(value: Any, where: str) -> str:
    text = _as_text(value, where)
    if text and text not in {e.value for e in Effort}:
        raise SettingsError(
            f"{where}: unknown effort {text!r}; choose one of "
            + ", ".join(e.value for e in Effort))
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
    "sessions_dir": _as_text,
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


def parse_file(text: str, name: str = "settings") -> Dict[str, Any]:
    """Parse the flat ``key: value`` subset; errors name the file and line."""
    values: Dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}, line {number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[:1].isspace():
            raise SettingsError(f"{where}: nested values are not supported")
        key, colon, raw = stripped.partition(":")
        key = key.strip()
        if not colon or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise SettingsError(f"{where}: expected 'key: value', got {stripped!r}")
        _check_key(key, where)
        if key in values:
            raise SettingsError(f"{where}: {key!r} is set twice")
        raw = raw.strip()
        if not raw or raw.startswith("#"):
            raise SettingsError(f"{where}: {key!r} has no value")
        values[key] = _scalar(raw, where)
    return values


def resolve(
    flags: Optional[Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    file_text: Optional[str] = None,
) -> Settings:
    """Resolve every key: flag > environment > file > default.

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
        try:
            file_text = path.read_text(encoding="utf-8")
            name = str(path)
        except FileNotFoundError:
            file_text, name = "", str(path)
        except OSError as exc:
            raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
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

    chosen: Dict[str, Any] = {}
    sources = []
    for key in KEYS:
        for layer, values, where in (
            ("flag", flags, f"flag --{key.replace('_', '-')}"),
            ("env", from_env, f"environment variable NACELLE_{key.upper()}"),
            ("file", from_file, f"{name}: {key}"),
        ):
            if key in values:
                chosen[key] = _CONVERT[key](values[key], where)
                sources.append((key, layer))
                break
    return Settings(**chosen, sources=tuple(sources))
