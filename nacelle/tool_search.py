"""Tool search: many tools offered without sending every schema on every request.

``Agent(tool_search=ToolSearch(defer_over=30))``: when a run has more than
``defer_over`` tools (an MCP server's included), they are *deferred* — left out of what
the model reads first — and the model searches for the ones it needs; a tool made with
``@tool(defer=True)`` is deferred whenever the Agent searches. Tool definitions are
input tokens on every request (one report counted 55K tokens for 58 tools of five
MCP servers before a word was said: https://www.anthropic.com/engineering/
advanced-tool-use), and a model picks worse among many similar tools.

Two ways, by the backend's ``Capabilities.tool_search``:

- **Native**, where the provider searches itself: every tool is sent, the deferred
  ones marked ``defer_loading: true``, beside the provider's search tool — Anthropic's
  ``tool_search_tool_bm25_20251119`` (or ``_regex_``) with the
  ``advanced-tool-use-2025-11-20`` beta header
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool),
  OpenAI's ``tool_search`` (gpt-5.4 and later;
  https://developers.openai.com/api/docs/guides/tools-tool-search). The provider
  expands what it finds into the model's context; the tools list sent never changes.
- **Local** elsewhere, as pydantic-ai and the AI SDK do: the model is offered the tools
  not deferred plus ``search_tools`` (a BM25 ranking over the deferred tools' names and
  descriptions, :class:`BM25`, no dependency), which loads the best matches; a loaded
  tool joins the list from the next request on.

Either way the list only grows within a run, and a loaded tool is sent after the tools
sent before it (``loaded_at``, read by the wires' ordering), so the prompt cache's
prefix of tools holds from one request to the next. A run resumed from a checkpoint
loads again what its ``search_tools`` results loaded.

One :class:`Searching` is made per run (:meth:`ToolSearch.start`): it is the run's
toolset (the loop asks it for the tools of now before each turn) and it holds what the
run has loaded.

Core module: imports the standard library, ``errors``, ``messages``, ``native`` and
``tools``.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .errors import ConfigError
from .messages import Message, ToolResult
from .native import is_native
from .tools import expand_tools

__all__ = ["BM25", "SEARCH_TOOL", "Searching", "ToolSearch", "searching_of"]

#: The local search tool's name.
SEARCH_TOOL = "search_tools"

_VARIANTS = ("bm25", "regex")


@dataclass(frozen=True)
class ToolSearch:
    """How an Agent defers its tools: above ``defer_over`` tools every tool is deferred
    but those named in ``keep``; ``variant`` picks Anthropic's native search ("bm25":
    natural-language queries, or "regex"); ``max_results`` is how many tools one local
    search loads."""

    defer_over: int = 30
    keep: Tuple[str, ...] = ()
    variant: str = "bm25"
    max_results: int = 5

    def __post_init__(self) -> None:
        if type(self.defer_over) is not int or self.defer_over < 0:
            raise ConfigError(f"defer_over must be an int of 0 or more, got {self.defer_over!r:.40}")
        if type(self.max_results) is not int or self.max_results < 1:
            raise ConfigError(f"max_results must be a positive int, got {self.max_results!r:.40}")
        if self.variant not in _VARIANTS:
            raise ConfigError(f"variant must be one of {', '.join(_VARIANTS)}, got "
                              f"{self.variant!r:.40}")
        if isinstance(self.keep, str):
            raise ConfigError("keep takes a list of tool names, not one string")
        object.__setattr__(self, "keep", tuple(self.keep))

    def start(self, items: Sequence[Any], native: bool,
              messages: Sequence[Message] = (), servers: bool = False) -> "Searching":
        """The search state of one run of an Agent whose tools are ``items`` (tools and
        toolsets), on a backend that searches natively or not; ``messages`` is the
        conversation the run starts from, whose ``search_tools`` results are loaded
        again; ``servers``: the run has server-side MCP servers, whose tools a native
        search defers whatever their number (it is not known here)."""
        searching = Searching(self, tuple(items), native, servers and native)
        for name in _loaded_before(messages):
            searching.load(name)
        return searching


class _Deferred:
    """A deferred tool as a native search sends it: the tool, with ``defer_loading``."""

    defer_loading = True

    def __init__(self, tool: Any) -> None:
        self.tool = tool

    def __getattr__(self, name: str) -> Any:
        if name == "tool":  # not yet set (a copy being made): never ask ourselves again
            raise AttributeError(name)
        return getattr(self.tool, name)

    def __repr__(self) -> str:
        return f"<deferred {self.tool!r}>"


class _Loaded:
    """A tool a local search loaded, sent after every tool sent before it."""

    def __init__(self, tool: Any, order: int) -> None:
        self.tool = tool
        self.loaded_at = order

    def __getattr__(self, name: str) -> Any:
        if name == "tool":  # not yet set (a copy being made): never ask ourselves again
            raise AttributeError(name)
        return getattr(self.tool, name)

    def __repr__(self) -> str:
        return f"<loaded {self.tool!r}>"


class _NativeSearch:
    """The provider's own search tool, in the list a native search sends: its wire
    entry is the backend's (``kind`` "tool_search", ``options`` its variant)."""

    native = True
    kind = "tool_search"
    name = "tool_search"
    description = "Search the deferred tools (run by the provider)."

    def __init__(self, searching: "Searching") -> None:
        self.searching = searching
        self.options = (("variant", searching.settings.variant),)
        self.schema: Dict[str, Any] = {"type": "object", "properties": {}}

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        raise ConfigError("the tool search is run by the provider, never locally")


class _SearchTools:
    """The local ``search_tools`` tool of one run (see the module docstring)."""

    name = SEARCH_TOOL
    read_only = True
    destructive = False
    idempotent = True
    open_world = False

    def __init__(self, searching: "Searching") -> None:
        self.searching = searching

    @property
    def description(self) -> str:
        return (f"Search the {self.searching.deferred_count} tools not loaded yet by what "
                f"they do, in a few words; the best matches (at most "
                f"{self.searching.settings.max_results}) are loaded, to call from your next "
                f"step on. Search again with other words if none fits.")

    @property
    def schema(self) -> Dict[str, Any]:
        return {"type": "object", "properties": {"query": {
            "type": "string", "description": "What the tool should do, in a few words."}},
            "required": ["query"]}

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        query = input.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        return self.searching.search(query)


class Searching:
    """One run's tool search: a toolset (``current()``) and the tools it loaded."""

    def __init__(self, settings: ToolSearch, items: Tuple[Any, ...], native: bool,
                 servers: bool = False) -> None:
        self.settings = settings
        self.items = items
        self.native = native
        self.servers = servers
        self._lock = threading.Lock()
        self._loaded: Dict[str, int] = {}
        self._tool = _SearchTools(self) if not native else None
        self._marker = _NativeSearch(self)
        self.deferred_count = 0

    def _split(self) -> Tuple[List[Any], List[Any], List[Any]]:
        """(kept, deferred, native) of the tools of now."""
        tools = expand_tools(self.items)
        local = [t for t in tools if not is_native(t)]
        over = len(local) > self.settings.defer_over
        kept, deferred = [], []
        for tool in local:
            named = tool.name in self.settings.keep
            if not named and (over or getattr(tool, "defer", False) is True):
                deferred.append(tool)
            else:
                kept.append(tool)
        return kept, deferred, [t for t in tools if is_native(t)]

    def current(self) -> Tuple[Any, ...]:
        """The tools to send now."""
        kept, deferred, natives = self._split()
        self.deferred_count = len(deferred)
        if not deferred and not self.servers:
            return tuple(kept + natives)
        if self.native:
            return tuple(kept + [_Deferred(t) for t in deferred] + natives + [self._marker])
        with self._lock:
            loaded = dict(self._loaded)
        found = [_Loaded(t, loaded[t.name]) for t in deferred if t.name in loaded]
        assert self._tool is not None
        return tuple(kept + natives + [self._tool] + found)

    def load(self, name: str) -> None:
        """Send the deferred tool ``name`` from the next request on."""
        with self._lock:
            self._loaded.setdefault(name, len(self._loaded) + 1)

    def search(self, query: str) -> str:
        """Rank the deferred tools not loaded yet for ``query``; load the best."""
        _, deferred, _ = self._split()
        with self._lock:
            loaded = set(self._loaded)
        waiting = [t for t in deferred if t.name not in loaded]
        ranking = BM25([_words(f"{t.name} {t.description}") for t in waiting])
        best = [waiting[i] for i in ranking.top(_words(query), self.settings.max_results)]
        for tool in best:
            self.load(tool.name)
        return json.dumps({"loaded": [t.name for t in best], "tools": [
            {"name": t.name, "description": t.description} for t in best]}, ensure_ascii=False)


def searching_of(tools: Iterable[Any]) -> Optional[Searching]:
    """The run's Searching among a request's tools (its local search tool or its
    native marker), or None."""
    for tool in tools:
        found = getattr(tool, "searching", None)
        if isinstance(found, Searching):
            return found
    return None


def _loaded_before(messages: Sequence[Message]) -> List[str]:
    names: List[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.name == SEARCH_TOOL and not part.failed:
                try:
                    value = json.loads(part.result)
                except ValueError:
                    continue
                loaded = value.get("loaded") if isinstance(value, dict) else None
                names.extend(n for n in loaded or () if isinstance(n, str))
    return names


_WORD = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+"  # compiled (and cached by re) at first use


def _words(text: str) -> List[str]:
    """Lower-cased words, camelCase, snake_case and kebab-case split apart."""
    return [w.lower() for w in re.findall(_WORD, text)]


class BM25:
    """Okapi BM25 over a fixed list of documents (lists of words), the ranking
    Anthropic's own bm25 tool search names; k1 = 1.2 and b = 0.75, the usual defaults
    (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    2009, §3.5), and the idf that stays positive (as Lucene's).

    Scoring is linear in the query's words times the documents holding them."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2,
                 b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.counts = [Counter(d) for d in documents]
        self.lengths = [len(d) for d in documents]
        self.average = sum(self.lengths) / len(documents) if documents else 0.0
        holding: Counter[str] = Counter()
        for counts in self.counts:
            holding.update(counts.keys())
        n = len(documents)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in holding.items()}
        self.postings: Dict[str, List[int]] = {}
        for index, counts in enumerate(self.counts):
            for word in counts:
                self.postings.setdefault(word, []).append(index)

    def scores(self, query: Sequence[str]) -> Dict[int, float]:
        """Each document holding a word of ``query``, with its score."""
        out: Dict[int, float] = {}
        for word in set(query):
            idf = self.idf.get(word)
            if idf is None:
                continue
            for index in self.postings[word]:
                tf = self.counts[index][word]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / (self.average or 1))
                out[index] = out.get(index, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return out

    def top(self, query: Sequence[str], count: int) -> List[int]:
        """The indexes of the ``count`` best documents for ``query`` (ties by index)."""
        scored = self.scores(query)
        return sorted(scored, key=lambda i: (-scored[i], i))[:count]

