"""Approval policies: ready-made ``approve`` callables and ways to combine them.

An ``approve`` callable is asked ``approve(name, input, ctx)`` once per local tool call,
possibly from several threads at once, and answers True (run it), False (refuse it), a
``str`` (refuse it, with that reason for the model) or ``nacelle.PAUSE`` (stop the run
with a checkpoint and let someone decide later). This module holds:

- :func:`secure` — read-only, closed-world tools run; everything else pauses for a
  person. It is the default to reach for when nobody watches the run: reading the
  project is safe, writing it, running commands or touching the network is not.
- :func:`remembering` — asks another policy once per tool and canonical input (or
  once per tool) and remembers its True/False.
- :func:`ask` — an interactive yes/no/always/never, the CLI's prompt.
- :func:`first` — the first policy with an opinion decides.

``approve`` is given the tool's name, not the tool, so :func:`secure` is told the
tools it judges (``secure(tools)``, the list the Agent gets; ``secure()`` without them
is a ConfigError); a name it was not given is unknown, and an unknown tool is never
assumed safe. A tool's metadata is read with
:func:`nacelle.tools.metadata`, so a tool that declares nothing is treated with MCP's
cautious defaults (destructive, open world).

A tool whose metadata is ``advisory`` — an MCP server's annotations, which the MCP
specification calls hints a client must not rely on from an untrusted server — is not
trusted by :func:`secure`: a server that says ``readOnlyHint: true`` still has its calls
paused unless ``secure(tools, trust_hints=True)`` says the user trusts its servers.

Core module: imports the standard library, ``checkpoint`` (for ``PAUSE``), ``errors``,
``terminal_text`` and ``tools``.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union, cast

from ._loggers import get_logger
from .checkpoint import PAUSE
from .errors import ConfigError
from .terminal_text import visible
from .tools import ToolLike, Toolset, expand_tools, is_toolset, metadata

__all__ = ["ask", "first", "remembering", "secure"]

log = get_logger(__name__)

Policy = Callable[[str, Dict[str, Any], Any], Any]


def secure(tools: Union[Iterable[ToolLike], Toolset, None] = None, *, trust_hints: bool = False) -> Policy:
    """Run read-only, closed-world tools; pause every other call.

    ``tools`` are the tools this policy judges (give it the Agent's, toolsets included:
    their tools as listed now); a call of a name not among them pauses too. A tool whose metadata is ``advisory``
    (an MCP server's claim) pauses unless ``trust_hints`` is true.

    ``secure()`` without them is a ConfigError rather than a policy that pauses every
    call: a run left alone would stop at its first read with nothing saying why. The
    tools are not taken from the Agent instead, because an ``approve`` callable is
    opaque to it — ``secure`` inside ``first(...)`` could never be found and bound.
    (``secure([])``, an Agent with no tools, is what it says.)
    """
    if tools is None:
        raise ConfigError("secure() needs the tools it judges: secure(tools), with the "
                          "tools the Agent gets; without them it would pause every call")
    given: Iterable[Any] = [tools] if is_toolset(tools) else cast(Iterable[Any], tools)
    if not is_toolset(tools) and (isinstance(tools, (str, bytes)) or hasattr(tools, "run")
                                  or not hasattr(tools, "__iter__")):
        raise ConfigError(f"secure(tools) takes a list of tools, got {type(tools).__name__}")
    judged = expand_tools(given)
    for tool in judged:
        if not isinstance(getattr(tool, "name", None), str):
            raise ConfigError(f"secure(tools) takes a list of tools, and {tool!r:.60} is not "
                              "a tool (decorate a function with @nacelle.tool)")
    safe = frozenset(
        tool.name for tool in judged
        if _safe(tool) and (trust_hints or not getattr(tool, "advisory", False)))

    def approve(name: str, input: Dict[str, Any], ctx: Any) -> Any:
        if name in safe:
            return True
        log.debug("secure(): %s is not a known read-only, closed-world tool", name)
        return PAUSE

    return approve


def _safe(tool: Any) -> bool:
    facts = metadata(tool)
    return facts["read_only"] and not facts["destructive"] and not facts["open_world"]


def canonical(input: Any) -> str:
    """The input as canonical JSON: sorted keys, no spaces, so equal inputs match."""
    return json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def remembering(approve: Policy, *, key: str = "input") -> Policy:
    """Ask ``approve`` once per tool and canonical input (``key="name"``: per tool).

    A True or False answer is remembered and given again for the same key; any other
    answer (a reason, a pause, None) is passed on and asked again next time, since it
    is about this call. The lock is held while ``approve`` is asked, so two threads
    with the same question ask it once — and an interactive ``approve`` never sees
    two questions at once.
    """
    if key not in ("input", "name"):
        raise ConfigError(f"remembering(key=...) is 'input' or 'name', not {key!r}")
    decisions: Dict[Tuple[str, str], bool] = {}
    lock = threading.Lock()

    def remembered(name: str, input: Dict[str, Any], ctx: Any) -> Any:
        which = (name, canonical(input) if key == "input" else "")
        with lock:
            if which in decisions:
                return decisions[which]
            answer = approve(name, input, ctx)
            if isinstance(answer, bool):
                decisions[which] = answer
            return answer

    return remembered


_ANSWERS = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always",
            "always": "always", "v": "never", "never": "never"}


def ask(prompt: Callable[[str], str] = input, *, attempts: int = 3) -> Policy:
    """Ask a person: yes, no, always (this tool, from now on) or never.

    ``prompt`` shows a question and returns the answer (``input`` by default; the CLI
    passes its own). "always" and "never" are remembered per tool name for as long as
    this policy lives. An answer it cannot read is asked again, up to ``attempts``
    times; then, or at end of input, the call is refused.
    """
    remembered: Dict[str, bool] = {}
    lock = threading.Lock()

    def approve(name: str, input: Dict[str, Any], ctx: Any) -> Any:
        with lock:  # one question on the terminal at a time
            if name in remembered:
                return remembered[name]
            shown = canonical(input)
            if len(shown) > 200:
                shown = shown[:200] + "…"
            for _ in range(attempts):
                try:
                    # The input is the model's: shown, its escape sequences never act.
                    reply = prompt(visible(f"Allow {name} {shown}? [y]es/[n]o/[a]lways/ne[v]er: "))
                except EOFError:
                    return False
                answer = _ANSWERS.get(reply.strip().lower())
                if answer == "always" or answer == "never":
                    remembered[name] = answer == "always"
                    return remembered[name]
                if answer is not None:
                    return answer == "yes"
            return False

    return approve


def first(*policies: Optional[Policy]) -> Policy:
    """The first policy that answers something other than None decides.

    A policy abstains by returning None; when every one abstains the call is refused.
    None in ``policies`` is skipped, so optional policies compose without ifs.
    """
    chain = [policy for policy in policies if policy is not None]
    for policy in chain:
        if not callable(policy):
            raise TypeError(f"first() takes policies, got {type(policy).__name__}")

    def approve(name: str, input: Dict[str, Any], ctx: Any) -> Any:
        for policy in chain:
            answer = policy(name, input, ctx)
            if answer is not None:
                return answer
        return False

    return approve
