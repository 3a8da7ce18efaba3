"""The agent a command line describes: the options that make it (shared by a prompt,
``serve``, ``batch`` and ``resume``), the options that say how a run is printed, and
:func:`build_agent`, which turns settings into an Agent with the local tools, the web
tools when a SearXNG instance is named, a retried backend and an approval policy.

Settings come from :mod:`nacelle.settings` (flag > environment > file > default);
argparse leaves untyped flags out (``SUPPRESS``) so its defaults never outrank the
file. The backends read their keys and base URL variables themselves;
:mod:`nacelle.cli.backends` builds the one ``--backend`` names (and says which
variable to set when its key is missing).

Imports the standard library, the core, ``settings`` and ``approval`` at import time;
the agent, the backends and the tool sets inside :func:`build_agent`.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..errors import NacelleError
from ..settings import BACKENDS, Settings, SettingsError, resolve
from .approval import Approver

if TYPE_CHECKING:
    from ..agent import Agent
    from ..toolsets import LocalTools

__all__ = ["SYSTEM", "agent_options", "build_agent", "context_flags", "context_options",
           "open_context", "output_options", "subcommand_agent", "version"]

DISTRIBUTION = "nacelle-sdk"  # the name on PyPI; `nacelle` there is an unrelated project


SYSTEM = (
    "You are a capable assistant working in a local project folder through tools. "
    "Paths are relative to that folder. Read before you change anything, keep changes "
    "small, and say plainly what you did and what you could not do."
)



def version() -> str:
    return f"{DISTRIBUTION} {__version__} (import nacelle)"


def agent_options(parser: argparse.ArgumentParser) -> None:
    """The options that make the agent, shared by prompts, ``serve`` and ``batch``."""
    parser.add_argument("--backend", metavar="NAME",
                        help="the provider or server: " + ", ".join(BACKENDS)
                             + " (default: anthropic; see 'backends' below)")
    parser.add_argument("--base-url", dest="base_url", metavar="URL",
                        help="the backend's endpoint (a proxy, a local server; needed by "
                             "--backend chat)")
    parser.add_argument("--profile", metavar="NAME",
                        help="use the settings of profiles.NAME in the settings file "
                             "(under flags and the environment; also NACELLE_PROFILE)")
    parser.add_argument("--model", help="the model name (needed by every backend but "
                                        "anthropic and llamacpp)")
    parser.add_argument("--system", metavar="TEXT", help="the system prompt (replaces the default)")
    parser.add_argument("--root", help="the folder the local tools work in (default: .)")
    parser.add_argument("--bash", action=argparse.BooleanOptionalAction,
                        help="allow run_command (asks before each command unless --yes)")
    parser.add_argument("--max-iterations", type=int, dest="max_iterations",
                        help="model requests allowed per prompt (0: no cap; default 50)")
    parser.add_argument("--max-cost", type=float, dest="max_cost", metavar="DOLLARS",
                        help="stop a run (exit 3) once it has cost this much (needs prices)")
    parser.add_argument("--effort", help="none, minimal, low, medium, high, xhigh or max")
    parser.add_argument("--show-thinking", action=argparse.BooleanOptionalAction,
                        dest="show_thinking", help="show the model's thinking")
    offered = parser.add_mutually_exclusive_group()
    offered.add_argument("--tools", metavar="LIST",
                         help="offer only these tools, comma-separated (read_file,"
                              "list_directory,...; default: all, or read_file and "
                              "list_directory on a local server)")
    offered.add_argument("--no-tools", action="store_const", const="none", dest="tools",
                         help="offer the model no tools")
    parser.add_argument("--search-url", dest="search_url",
                        help="a SearXNG instance for web_search (also enables web_fetch)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every tool call without asking")


def context_options(parser: argparse.ArgumentParser) -> None:
    """``--skills``, ``--memory`` and ``--no-instructions``: what the prompt command and
    ``resume`` (which must rebuild the same agent) take beyond the agent's options."""
    context = parser.add_argument_group("skills, memory and instructions")
    context.add_argument("--skills", metavar="DIR", action="append",
                         help="load the Agent Skills (SKILL.md folders) in DIR, or DIR "
                              "itself; repeatable (/skills lists them)")
    context.add_argument("--memory", metavar="DIR",
                         help="give the model a memory folder, DIR, seen as /memories "
                              "(its writes ask like any write; /memory lists it)")
    context.add_argument("--no-instructions", action="store_true", dest="no_instructions",
                         help="leave out AGENTS.md and CLAUDE.md (read by default from "
                              "$XDG_CONFIG_HOME/nacelle and from the repository root "
                              "down to the --root folder)")


def context_flags(args: Dict[str, Any]) -> Tuple[List[str], Optional[str], bool]:
    """Take :func:`context_options`' flags out of ``args`` (before settings read the
    rest): the skill folders, the memory folder, whether to read instructions."""
    return (list(args.pop("skills", None) or []), args.pop("memory", None),
            not args.pop("no_instructions", False))


def open_context(flags: Tuple[List[str], Optional[str], bool]) -> Dict[str, Any]:
    """:func:`build_agent`'s ``skills``, ``memory`` and ``instructions`` for ``flags``
    (a ConfigError for a bad skill folder); the memory tool is the caller's to close."""
    skill_dirs, memory_dir, use_instructions = flags
    opened: Dict[str, Any] = {"skills": None, "memory": None, "instructions": use_instructions}
    if skill_dirs:
        from ..skills import load

        opened["skills"] = load(*skill_dirs)
    if memory_dir is not None:
        from ..toolsets.memory import memory

        opened["memory"] = memory(memory_dir)
    return opened


def output_options(parser: argparse.ArgumentParser) -> None:
    """How a run is printed, shared by prompts and ``resume``."""
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_const", const="json", dest="mode",
                        help="print the result as one JSON object (nacelle/cli/result.schema.json)")
    output.add_argument("--jsonl", action="store_const", const="jsonl", dest="mode",
                        help="print each event as one JSON object per line, then the result")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no tool lines, usage or cost on stderr (errors still show)")


def build_agent(settings: Settings, *, yes: bool = False, observers: Sequence[Any] = (),
                system: Optional[str] = None, max_cost: Optional[float] = None,
                approver: Optional[Callable[[Sequence[Any], str], Any]] = None,
                skills: Any = None, memory: Any = None, instructions: bool = False,
                extra_tools: Sequence[Any] = (),
                ) -> Tuple["Agent", "LocalTools"]:
    """The Agent the CLI runs, and the tool sets to close afterwards. ``approver``
    makes the approval policy from the tools and the root (default: an
    :class:`Approver` on this terminal). ``skills`` (a SkillSet) and ``memory`` (the
    memory tool) are added when given, the caller's to close; with ``instructions``
    the AGENTS.md and CLAUDE.md layers for the root (:mod:`nacelle.instructions`)
    follow the system prompt. ``extra_tools`` (``--mcp``, ``--functions``:
    :mod:`nacelle.cli.extra_tools`) join the local tools and ask before each call."""
    from ..agent import Agent
    from ..backend import Effort, Thinking
    from ..context import Budget
    from ..retry import Retry

    from ..toolsets import LocalTools
    from .backends import LOCAL, make_backend
    from .tool_choice import choose_tools

    backend = make_backend(settings)

    root = os.path.abspath(os.path.expanduser(settings.root))
    prompt = SYSTEM if system is None else system
    if instructions:
        from ..instructions import instructions as layered

        found = layered(root)
        prompt = f"{prompt}\n\n{found}" if found else prompt
    local = LocalTools(root, allow_bash=settings.bash)
    offered: List[Any] = list(local.tools())
    if settings.search_url:
        from ..toolsets import web_fetch, web_search
        offered += web_search(settings.search_url) + web_fetch()
    try:
        tools = choose_tools(offered, settings.tools, local=settings.backend in LOCAL)
    except NacelleError:
        local.close()
        raise
    # What the user named (--memory, --mcp, --functions) comes whatever --tools says.
    if memory is not None:
        tools.append(memory)
    if extra_tools:
        from .extra_tools import joined

        try:
            tools = joined(tools, extra_tools)
        except NacelleError:
            local.close()
            raise
    thinking = Thinking(effort=Effort(settings.effort) if settings.effort else None,
                        show=settings.show_thinking)
    if max_cost is not None and not backend.capabilities.cost:
        local.close()
        raise SettingsError(f"--max-cost needs prices, and the price table has none for "
                            f"{backend.name} model {getattr(backend, 'model', '?')!r}")
    # The approval policy knows every tool the agent has (the skill tool, read-only,
    # runs unasked).
    known = tools + ([skills.tool] if skills is not None and len(skills) else [])
    approve = approver(known, root) if approver is not None else Approver(known, yes=yes, root=root)
    try:
        agent = Agent(Retry(backend), prompt, thinking=thinking, skills=skills,
                      tools=tools, max_iterations=settings.max_iterations, approve=approve,
                      observers=observers,
                      budget=Budget(cost=max_cost) if max_cost is not None else None)
    except (NacelleError, ValueError):
        local.close()
        raise
    return agent, local


def subcommand_agent(args: Dict[str, Any], policy: Callable[[Sequence[Any], str, bool], Any],
                      ) -> Tuple["Agent", "LocalTools"]:
    """The agent a ``serve`` or ``batch`` command line describes (``args`` from a
    parser given :func:`agent_options`); ``policy(tools, root, yes)`` approves."""
    yes, system, max_cost = args.pop("yes", False), args.pop("system", None), args.pop("max_cost", None)
    return build_agent(resolve(args), system=system, max_cost=max_cost,
                       approver=lambda tools, root: policy(tools, root, yes))

