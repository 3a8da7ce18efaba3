"""What differs between MCP's two protocol generations, as pure functions and values.

*Legacy* revisions (2024-11-05 to 2025-11-25) open with an ``initialize`` handshake
and keep a session; the *modern* one, 2026-07-28, is stateless: every request carries
its protocol version, the client's capabilities and identity in ``params._meta``
(``io.modelcontextprotocol/protocolVersion``, ``…/clientCapabilities``,
``…/clientInfo``), ``server/discover`` tells what a server speaks, change
notifications come on a ``subscriptions/listen`` stream, and a server that needs the
user's input answers ``tools/call``, ``prompts/get`` or ``resources/read`` with
``resultType: "input_required"`` and its ``inputRequests``, which the client answers
by retrying the request with ``inputResponses`` and the opaque ``requestState``
(Multi Round-Trip Requests). Sources, read on the date of this module:
https://modelcontextprotocol.io/specification/2026-07-28/changelog,
…/basic/versioning, …/basic/patterns/mrtr, …/basic/transports/streamable-http; and
the official Python SDK ``mcp`` 2.3.0 (``mcp_types/version.py``, ``mcp/client/_probe.py``,
``mcp/client/_input_required.py``), whose server serves both generations. The
pages on the stdio transport, ``server/discover``, subscriptions and cancellation were
not available here: the shapes of ``DiscoverResult``, the ``subscriptions/listen``
filter and ``notifications/subscriptions/acknowledged`` are taken from that SDK's
``mcp_types`` for 2026-07-28, and the stdio probe follows the versioning page's
summary ("probe with ``server/discover`` and fall back on any error that is not a
recognized modern error").

Choices where the text leaves room:

- Era detection follows the SDK's probe: ``server/discover`` at 2026-07-28; only a
  result naming 2026-07-28, or ``UnsupportedProtocolVersion`` (-32022, and the
  draft's -32004) naming versions of neither kind we speak, counts as modern
  evidence; anything else (``-32601`` from a legacy server, an HTTP 4xx without a
  JSON-RPC body) falls back to ``initialize``.
- The client asks for no server log messages on modern requests (no
  ``io.modelcontextprotocol/logLevel``): logging is deprecated in 2026-07-28 and
  nacelle's tools report through their results.
- The client declares ``elicitation`` (form) only when it was given ``on_elicit``,
  and neither sampling nor roots (both deprecated in 2026-07-28): a server asking
  for them is refused with an error naming what it asked for.
- ``x-mcp-header`` (2026-07-28 Streamable HTTP): a tool whose schema breaks one of
  its rules is left out of the tool list, with a warning, as the spec asks; a value
  of the wrong type for its declared type is not mirrored.
- An elicitation callback returns the content (a ``dict``: *accept*), ``"accept"``
  (a URL-mode consent, no content), ``"decline"`` or ``None`` (*decline*), or
  ``"cancel"`` — or an ``ElicitResult`` as the official SDKs write one: a dict with
  an ``action`` and nothing but ``content`` and ``_meta`` beside it, or an object
  with ``action`` and ``content`` attributes (the Python SDK's ``ElicitResult``).
  Such a result is sent with its own action: ``{"action": "decline"}`` is a
  decline, never content accepted. The spec's rules hold (action one of
  ``accept``, ``decline``, ``cancel``; content only with ``accept``, and an object:
  https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation);
  a result that breaks them is refused with an error naming the forms, never sent.
  A form whose own fields are ``action`` (and ``content``) is answered wrapped,
  ``{"action": "accept", "content": {...}}``: the shape decides, not the schema.

Outer ring (with the rest of the MCP client); imports the standard library, the
package's ``errors``, and ``nacelle`` itself for ``__version__`` (the version the client
names is the package's).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, Union

from .. import __version__
from .errors import MCPError

__all__ = ["CLIENT_INFO", "Elicitation", "LEGACY_VERSIONS", "MODERN_VERSION", "OnElicit",
           "answer_elicitation", "capabilities", "header_value", "modern_meta", "offers_modern",
           "param_headers", "param_values", "unsupported_versions"]

MODERN_VERSION = "2026-07-28"
#: The handshake revisions, newest first: the first is what the handshake offers.
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT_INFO = {"name": "nacelle", "version": __version__}
#: ``UnsupportedProtocolVersion``: -32022 in the final text, -32004 in the draft.
UNSUPPORTED_VERSION_CODES = (-32022, -32004)
#: How many ``input_required`` answers one request may get before the client gives up.
MAX_INPUT_ROUNDS = 10

PROTOCOL_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True)
class Elicitation:
    """A server's request for the user's input, as ``on_elicit`` gets it.

    ``mode`` is ``"form"`` (answer with a ``dict`` matching ``schema``, the
    server's ``requestedSchema``) or ``"url"`` (the user is sent to ``url``; answer
    ``"accept"`` once they agreed). ``server`` names the MCP server asking.
    """

    server: str
    message: str
    schema: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "form"
    url: str = ""


class ElicitResultLike(Protocol):
    """An object shaped as the MCP SDK's ``ElicitResult`` (its ``content``, when it
    has one, is read too)."""

    @property
    def action(self) -> str: ...


Answer = Union[Mapping[str, Any], str, None, ElicitResultLike]
OnElicit = Callable[[Elicitation], Answer]


def capabilities(elicit: bool) -> Dict[str, Any]:
    """The client capabilities nacelle declares, in either generation."""
    return {"elicitation": {"form": {}}} if elicit else {}


def modern_meta(elicit: bool) -> Dict[str, Any]:
    """The ``_meta`` every 2026-07-28 request carries."""
    return {PROTOCOL_KEY: MODERN_VERSION, CAPABILITIES_KEY: capabilities(elicit),
            CLIENT_INFO_KEY: dict(CLIENT_INFO)}


def offers_modern(discovered: Mapping[str, Any]) -> bool:
    """Whether a ``server/discover`` result names the 2026 revision."""
    versions = discovered.get("supportedVersions")
    return isinstance(versions, list) and MODERN_VERSION in versions


def unsupported_versions(err: MCPError) -> Optional[List[str]]:
    """The versions an ``UnsupportedProtocolVersion`` error names, or None when
    ``err`` is not one (or names none)."""
    if err.code not in UNSUPPORTED_VERSION_CODES or not isinstance(err.data, dict):
        return None
    supported = err.data.get("supported")
    if not isinstance(supported, list):
        return None
    return [v for v in supported if isinstance(v, str)]


def elicitation(server: str, params: Any) -> Elicitation:
    """An ``elicitation/create`` request's params as an :class:`Elicitation`."""
    params = params if isinstance(params, dict) else {}
    schema = params.get("requestedSchema")
    return Elicitation(server=server, message=str(params.get("message") or ""),
                       schema=schema if isinstance(schema, dict) else {},
                       mode=str(params.get("mode") or "form"), url=str(params.get("url") or ""))


def answer_elicitation(on_elicit: Optional[OnElicit], server: str, params: Any) -> Dict[str, Any]:
    """Ask ``on_elicit`` and return the ``ElicitResult``; raise :class:`MCPError`
    when there is no callback or its answer is not one of the accepted forms."""
    request = elicitation(server, params)
    if on_elicit is None:
        raise MCPError(f"MCP server {server} asked for the user's input ({request.message!r}), "
                       f"but this client was connected without on_elicit", code=-32601)
    answer = on_elicit(request)
    shaped = _elicit_result(answer)
    if shaped is not None:
        return shaped
    if isinstance(answer, Mapping):
        return {"action": "accept", "content": dict(answer)}
    if answer is None or answer == "decline":
        return {"action": "decline"}
    if answer in ("accept", "cancel"):
        return {"action": answer}
    raise _bad_answer(f"not {type(answer).__name__}")


_ACTIONS = ("accept", "decline", "cancel")
_RESULT_KEYS = frozenset(("action", "content", "_meta"))


def _elicit_result(answer: Any) -> Optional[Dict[str, Any]]:
    """The ``ElicitResult`` an answer shaped as one is (a mapping of ``action`` with
    at most ``content`` and ``_meta``, or an object with an ``action`` attribute),
    checked against the spec's rules; None for any other answer."""
    if isinstance(answer, Mapping):
        if "action" not in answer or not set(answer) <= _RESULT_KEYS:
            return None
        action, content = answer["action"], answer.get("content")
    elif answer is None or isinstance(answer, str) or not hasattr(answer, "action"):
        return None
    else:
        action, content = answer.action, getattr(answer, "content", None)
    if action not in _ACTIONS:
        raise _bad_answer(f"not an ElicitResult with action {action!r}")
    if action != "accept":
        if content is not None:
            raise _bad_answer(f"an ElicitResult of action {action!r} carries content, and "
                              f"the spec allows content only with 'accept'")
        return {"action": action}
    if content is None:
        return {"action": "accept"}
    if not isinstance(content, Mapping):
        raise _bad_answer(f"an accepted ElicitResult's content must be a dict, not "
                          f"{type(content).__name__}")
    return {"action": "accept", "content": dict(content)}


def _bad_answer(what: str) -> MCPError:
    return MCPError(f"on_elicit must return a dict, 'accept', 'decline', 'cancel' or None, "
                    f"or an ElicitResult such as {{'action': 'decline'}} or {{'action': "
                    f"'accept', 'content': {{...}}}}; got {what}", code=-32603)


def refusal(server: str, method: str) -> MCPError:
    """The error for a server request nacelle does not serve (sampling, roots...)."""
    return MCPError(f"MCP server {server} asked the client for {method}, which nacelle "
                    f"does not offer", code=-32601)


# RFC 9110 token characters: what an x-mcp-header name may hold.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def param_headers(schema: Any) -> Dict[str, Tuple[str, ...]]:
    """The ``x-mcp-header`` names of a tool's ``inputSchema``, each with the path of
    ``properties`` keys to its value; ``ValueError`` saying what is wrong when the
    annotations break the spec's rules (then the tool must not be offered)."""
    found: Dict[str, Tuple[str, ...]] = {}

    def walk(node: Any, path: Tuple[str, ...], static: bool) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, path, False)
            return
        if not isinstance(node, dict):
            return
        if "x-mcp-header" in node:
            name = node["x-mcp-header"]
            if not static or not path:
                raise ValueError("x-mcp-header on a value not reached through properties alone")
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise ValueError(f"x-mcp-header {name!r} is not an HTTP header name token")
            if node.get("type") not in ("string", "integer", "boolean"):
                raise ValueError(f"x-mcp-header {name!r} on a {node.get('type')!r} value; "
                                 f"only string, integer and boolean may be mirrored")
            if name.lower() in {other.lower() for other in found}:
                raise ValueError(f"x-mcp-header {name!r} is given twice")
            found[name] = path
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, sub in value.items():
                    walk(sub, path + (str(prop),), static)
            elif key != "x-mcp-header":
                walk(value, path, False)

    walk(schema, (), True)
    return found


def param_values(params: Mapping[str, Tuple[str, ...]],
                 arguments: Mapping[str, Any]) -> Dict[str, str]:
    """The ``Mcp-Param-*`` headers for one call: each annotated value that is there
    and of a mirrored type, encoded as :func:`header_value` says."""
    headers = {}
    for name, path in params.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int) and abs(value) <= 2**53 - 1:
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            continue  # absent, null, or not a type the spec lets a header carry
        headers[f"Mcp-Param-{name}"] = header_value(text)
    return headers


def header_value(text: str) -> str:
    """``text`` as a header value: as it is when it is visible ASCII (inner spaces
    and tabs allowed), else ``=?base64?…?=`` of its UTF-8, as 2026-07-28 asks; a
    plain value that looks like that form is encoded too."""
    plain = (all(c == "\t" or " " <= c <= "~" for c in text) and text == text.strip()
             and not (text.startswith("=?base64?") and text.endswith("?=")))
    if plain:
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="
