"""What a request's headers may hold, for a model backend and an MCP server alike: the
API key, read from the argument or the environment by :func:`read_key`, and names and
values HTTP can carry (:func:`checked`). (Hiding the secret ones in text made from an
answer is :func:`nacelle._net.secrets.scrub`.)

A key is printable ASCII without spaces. One with anything else — a zero width space
or a newline pasted with it, a letter from another alphabet, whitespace around it —
is refused before a request is made, with a ``ConfigError`` that says what the
character is and where and never repeats the key. Sent on, it would become a
``UnicodeEncodeError`` whose repr holds the whole key (http.client encodes header
values as latin-1), or a header ``requests`` refuses with the value in its message,
mistaken for a network failure and retried. A header value is held to what HTTP
carries — latin-1, no control characters, no whitespace at either end — and a
value that is not is named by its header alone, since it may be a secret too. A name
is an HTTP token (RFC 9110 §5.1: letters, digits and ``!#$%&'*+-.^_`|~``); one that is
not is refused without being repeated (``"Authorization: Bearer sk-…"`` pasted as a
name is a secret too).

:func:`checked_settings` checks the rest of what a transport is made with (the
``base_url``, retries and timeouts). Pure functions of strings and the environment;
no socket is touched.

Outer ring: imports the standard library and ``nacelle.errors``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, Mapping, Optional

from ..errors import ConfigError

__all__ = ["checked", "checked_settings", "read_key"]

#: RFC 9110 §5.6.2's ``token``: what a field name is made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def read_key(given: Optional[str], variable: str, provider: str, module: str) -> str:
    """The API key: ``given``, else ``$variable`` read now — at the first request, so a
    backend can be built (and pickled, and shipped) before the environment holds it.
    A ``ConfigError`` when there is none, or when it holds a character no key holds
    (the module docstring says which, and why)."""
    if given:
        key, source = given, f"the api_key given to {module}.Backend"
    else:
        key, source = os.environ.get(variable, ""), f"the {provider} API key from ${variable}"
        if not key.strip():
            raise ConfigError(
                f"no {provider} API key: pass api_key= to {module}.Backend or set ${variable}")
    problem = _stray(key, _fits_a_key)
    if problem:
        raise ConfigError(f"{source} {problem}: remove it (an API key is printable ASCII, "
                          f"without spaces)")
    return key


def checked(headers: Mapping[str, str], *, what: str = "the") -> Dict[str, str]:
    """A copy of ``headers``, or a ``ConfigError`` naming the first one whose value
    HTTP cannot carry (what ``requests`` or ``http.client`` would refuse with the value,
    which may be a secret, in the message, or send changed). Latin-1 letters are
    carried, as HTTP allows. A name that is not a token is refused unnamed. ``what``
    begins the message ("the MCP server's")."""
    for name, value in headers.items():
        if not _TOKEN.fullmatch(str(name)):
            raise ConfigError(f"{what} header name {_stray_name(str(name))}: a header name "
                              f"is letters, digits and !#$%&'*+-.^_`|~")
        problem = _stray(str(value), _fits_a_header)
        if problem:
            raise ConfigError(f"{what} {name} header {problem}")
    return dict(headers)


def checked_settings(base_url: Any, max_retries: Any, timeouts: Mapping[str, Any]) -> str:
    """``base_url`` without its trailing slash, once it and the other settings of a
    transport are sound; a ``ValueError`` naming the first that is not.

    Checked where a backend is made, before any header is, so a typo in a setting is
    an error at construction rather than at the first request.
    """
    from urllib.parse import urlsplit  # imported where a backend is made, not with it

    parts = urlsplit(str(base_url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
    for label, value in timeouts.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise ValueError(f"{label} must be a positive number of seconds, got {value!r}")
    return str(base_url).rstrip("/")


def _fits_a_key(char: str) -> bool:
    return "!" <= char <= "~"


def _fits_a_header(char: str) -> bool:
    return " " <= char <= "~" or char == "\t" or "\u00a0" <= char <= "\u00ff"


_CHAR_NAMES = {" ": "a space", "\t": "a tab", "\n": "a newline", "\r": "a carriage return",
               "\u00a0": "a no-break space", "\ufeff": "a byte order mark"}


def _stray(text: str, fits: Callable[[str], bool]) -> str:
    """Where ``text`` goes wrong, in words that do not repeat it ("ends with a newline
    (U+000A)"), or "" when every character ``fits`` and none is whitespace at an end."""
    if text[:1].isspace():
        return f"starts with {_char_name(text[0])}"
    if text[-1:].isspace():
        return f"ends with {_char_name(text[-1])}"
    for index, char in enumerate(text):
        if not fits(char):
            return f"contains {_char_name(char)} at position {index}"
    return ""


def _stray_name(name: str) -> str:
    for index, char in enumerate(name):
        if not _TOKEN.fullmatch(char):
            return f"holds {_char_name(char)} at position {index}"
    return "is empty"


def _char_name(char: str) -> str:
    name = _CHAR_NAMES.get(char)
    if name is None:
        import unicodedata  # only for a message about a character nobody meant to send

        word = unicodedata.name(char, "").lower()
        name = ("an " if word[0] in "aeiou" else "a ") + word if word else "a control character"
    return f"{name} (U+{ord(char):04X})"
