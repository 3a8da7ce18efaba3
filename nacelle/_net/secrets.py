"""Secrets kept out of what an error, a log line or a repr says: :func:`scrub` hides the
values of secret-looking headers in text made from an answer, :func:`hide` hides given
values (raw and URL-encoded: an authorization server that echoes its form echoes them
encoded), and :func:`safe_url` names a URL without what may hold a secret.

A header is secret when its name holds one of :data:`SECRET_WORDS`; its value is
hidden whole, and so is its last word alone ("Bearer sk-…": the token), since an
answer may quote either. Values shorter than four characters are left: replacing
every "a" in a message helps nobody.

Outer ring; imports the standard library only.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

__all__ = ["HIDDEN", "SECRET_WORDS", "hide", "is_secret", "safe_url", "scrub"]

HIDDEN = "<hidden>"
#: Header names holding one of these words carry a secret.
SECRET_WORDS = ("key", "auth", "token", "secret", "cookie", "signature")


def is_secret(name: str) -> bool:
    """Whether a header of this name carries a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def hide(text: str, values: Iterable[Optional[str]]) -> str:
    """``text`` with every value in ``values`` (raw and URL-encoded) as ``<hidden>``."""
    from urllib.parse import quote  # imported at first use, not with the backends

    for secret in values:
        if secret and len(secret) >= 4:
            for form in sorted({secret, quote(secret, safe=""), quote(secret)}, key=len,
                               reverse=True):
                text = text.replace(form, HIDDEN)
    return text


def scrub(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with the value of every secret-looking header replaced by ``<hidden>``."""
    values = []
    for name, value in headers.items():
        if value and is_secret(name):
            secret = str(value)
            values += [secret, secret.split(" ", 1)[-1]]  # "Bearer sk-…": the token too
    return hide(text, values)


def safe_url(url: Any) -> str:
    """``url`` without user info, query or fragment: how errors and logs name it. Text
    that is not a URL with a host (``user:password@host``, say: its "scheme" would be
    the user) is not repeated at all."""
    if not isinstance(url, str):
        return f"a {type(url).__name__}, not a URL"
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if not parts.netloc:
        return f"text that is not a URL with a host ({len(url)} characters)"
    try:
        port = parts.port
    except ValueError:
        port = None
    return urlunsplit((parts.scheme, parts.hostname or "", parts.path, "", "")) + (
        f" (port {port})" if port else "")
