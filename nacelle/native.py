"""The providers' own server tools, given in ``tools=`` like any other:
:func:`web_search`, :func:`web_fetch` and :func:`code_execution`.

A provider that runs a tool itself (its search index, its fetcher, its sandbox) is the
cheapest way to do that job: no round trip through the run, results the model was
trained on, citations into the answer (``Text.citations``). Each function returns a
:class:`NativeTool`, data the backend turns into its provider's tool entry:

- Anthropic: ``web_search_20250305``
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool),
  ``web_fetch_20250910`` with the ``web-fetch-2025-09-10`` beta header
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-fetch-tool) and
  ``code_execution_20250825`` with ``code-execution-2025-08-25``
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/code-execution-tool);
- OpenAI's Responses API: the hosted ``web_search`` tool (``filters.allowed_domains``;
  https://developers.openai.com/api/docs/guides/tools-web-search) and
  ``code_interpreter`` with an ``auto`` container
  (https://developers.openai.com/api/docs/guides/tools-code-interpreter). It has no
  fetch tool.
- Gemini's native API: ``googleSearch``, ``urlContext`` and ``codeExecution`` tool
  entries (https://ai.google.dev/gemini-api/docs/google-search, ``/url-context``,
  ``/code-execution``), without options.

Which a backend sends is data: ``Capabilities.native_tools`` names each kind it has and
each option it takes as ``"kind:option"``. The Agent resolves the list at construction
(:func:`resolve`): a tool the backend has stays; one it lacks (or whose options it
cannot send) is replaced by its ``fallback=`` — a local tool or list of tools, such as
``toolsets.web_search(url)`` (SearXNG) or ``toolsets.web_fetch()`` (SSRF-guarded) — or,
without one, refused with :class:`~nacelle.errors.Unsupported`, as any capability is.

The provider runs the calls: they stream as server-side TOOL_CALL / TOOL_RESULT events
(``server`` set) and are kept in the conversation as provider blocks, replayed to the
same protocol — a paused turn (``pause_turn``) continues as any server tool's does. A
NativeTool is never run locally; its ``run`` says so, should a model name it in a
local call.

Core module: imports the standard library, ``errors`` and ``tools``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from .errors import ConfigError, Unsupported
from .tools import is_toolset

__all__ = ["NativeTool", "code_execution", "resolve", "web_fetch", "web_search"]

KINDS = ("web_search", "web_fetch", "code_execution")

_DESCRIPTIONS = {
    "web_search": "Search the web (run by the provider).",
    "web_fetch": "Fetch a web page or PDF by its URL (run by the provider).",
    "code_execution": "Run code in the provider's sandbox (run by the provider).",
}


@dataclass(frozen=True)
class NativeTool:
    """A provider's own tool, by ``kind``, with the ``options`` given (name, value
    pairs, only those set) and the local ``fallback`` tools for a backend without it.

    It has a Tool's ``name``, ``description`` and ``schema`` so that a tool list
    holding it is checked like any other (its name is the kind, so a local tool of
    the same name in one list is refused as a duplicate)."""

    kind: str
    options: Tuple[Tuple[str, Any], ...] = ()
    fallback: Tuple[Any, ...] = field(default=(), repr=False)

    native = True

    @property
    def name(self) -> str:
        return self.kind

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self.kind]

    @property
    def schema(self) -> Dict[str, Any]:
        return {"type": "object", "properties": {}}

    def option(self, name: str, default: Any = None) -> Any:
        """The option ``name`` as given, or ``default``."""
        return dict(self.options).get(name, default)

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        raise ConfigError(f"{self.kind} is run by the provider, never locally")


def _fallback(value: Any) -> Tuple[Any, ...]:
    if value is None:
        return ()
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for item in items:
        if not (callable(getattr(item, "run", None)) and isinstance(getattr(item, "name", None), str)):
            raise ConfigError(f"fallback= takes a tool or a list of tools, got "
                              f"{type(item).__name__}")
    return items


def _domains(name: str, value: Optional[Iterable[str]]) -> Optional[Tuple[str, ...]]:
    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigError(f"{name} takes a list of domains, not one string")
    domains = tuple(value)
    if not all(isinstance(d, str) and d for d in domains):
        raise ConfigError(f"{name} takes a list of non-empty domain strings")
    return domains


def _uses(value: Optional[int]) -> Optional[int]:
    if value is not None and (type(value) is not int or value < 1):
        raise ConfigError(f"max_uses must be a positive int, got {value!r:.40}")
    return value


def _options(**given: Any) -> Tuple[Tuple[str, Any], ...]:
    return tuple((name, value) for name, value in given.items() if value is not None)


def web_search(*, max_uses: Optional[int] = None,
               allowed_domains: Optional[Iterable[str]] = None,
               blocked_domains: Optional[Iterable[str]] = None,
               fallback: Any = None) -> NativeTool:
    """The provider's web search: at most ``max_uses`` searches a request, kept to
    ``allowed_domains`` or away from ``blocked_domains`` (Anthropic takes one of the
    two, not both)."""
    allowed, blocked = (_domains("allowed_domains", allowed_domains),
                        _domains("blocked_domains", blocked_domains))
    if allowed and blocked:
        raise ConfigError("give allowed_domains or blocked_domains, not both")
    return NativeTool("web_search", _options(max_uses=_uses(max_uses), allowed_domains=allowed,
                                             blocked_domains=blocked), _fallback(fallback))


def web_fetch(*, max_uses: Optional[int] = None,
              allowed_domains: Optional[Iterable[str]] = None,
              blocked_domains: Optional[Iterable[str]] = None,
              max_content_tokens: Optional[int] = None,
              fallback: Any = None) -> NativeTool:
    """The provider's page fetcher (Anthropic's fetches only URLs already in the
    conversation), citing what it read; ``max_content_tokens`` caps a page."""
    allowed, blocked = (_domains("allowed_domains", allowed_domains),
                        _domains("blocked_domains", blocked_domains))
    if allowed and blocked:
        raise ConfigError("give allowed_domains or blocked_domains, not both")
    if max_content_tokens is not None and (type(max_content_tokens) is not int
                                           or max_content_tokens < 1):
        raise ConfigError(f"max_content_tokens must be a positive int, got "
                          f"{max_content_tokens!r:.40}")
    return NativeTool("web_fetch", _options(
        max_uses=_uses(max_uses), allowed_domains=allowed, blocked_domains=blocked,
        max_content_tokens=max_content_tokens), _fallback(fallback))


def code_execution(*, fallback: Any = None) -> NativeTool:
    """The provider's code sandbox (Anthropic's bash and file tools in a container;
    OpenAI's code interpreter in an automatic container)."""
    return NativeTool("code_execution", (), _fallback(fallback))


def missing(tool: NativeTool, native: FrozenSet[str]) -> str:
    """What of ``tool`` a backend whose ``Capabilities.native_tools`` is ``native``
    cannot send ("" when it can send it all)."""
    if tool.kind not in native:
        return f"the native {tool.kind} tool"
    for name, _ in tool.options:
        if f"{tool.kind}:{name}" not in native:
            return f"the native {tool.kind} tool's {name}"
    return ""


def resolve(items: Sequence[Any], native: FrozenSet[str], backend: str) -> Tuple[Any, ...]:
    """``items`` (an Agent's tools) with each NativeTool the backend cannot send
    replaced by its fallback; :class:`Unsupported` for one without a fallback."""
    out: List[Any] = []
    for item in items:
        if isinstance(item, NativeTool) and not is_toolset(item):
            lacking = missing(item, native)
            if not lacking:
                out.append(item)
            elif item.fallback:
                out.extend(item.fallback)
            else:
                raise Unsupported(backend, lacking,
                                  f"give {item.kind}(fallback=...) a local tool to use instead")
        else:
            out.append(item)
    return tuple(out)


def is_native(tool: Any) -> bool:
    """True for a tool the provider runs (a NativeTool, or another marked ``native``)."""
    return getattr(tool, "native", False) is True


