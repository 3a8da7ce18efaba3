"""Tools from outside the CLI's own sets: ``--mcp COMMAND_OR_URL`` (an MCP server's
tools) and ``--functions FILE.py`` (a Python file's functions), both repeatable, as
``llm --functions`` and the MCP hosts (Claude Code, Claude Desktop) give them.

``--mcp``: a value starting with ``http://`` or ``https://`` is a Streamable HTTP
endpoint (:func:`nacelle.mcp.connect_http`); anything else is a command line, split as
a POSIX shell would (:func:`shlex.split`) and started over stdio
(:func:`nacelle.mcp.connect_stdio`, which gives the child a minimal environment: the
host's API keys are not a server's business; ``--mcp "env NAME=VALUE server"`` passes
one on purpose). The tools keep the server's names, but for a name already taken —
``read_file`` from a filesystem server beside the CLI's own, or a second server's
``search`` — which becomes ``mcp__NAME`` (``mcp2__NAME``, … if that is taken too), as
Claude Code names MCP tools ``mcp__server__tool``: both tools stay usable, and the
call still goes out under the server's name. Every call
asks, as a write does: a server's ``readOnlyHint`` is a claim about somebody else's
code, and :func:`nacelle.policy.secure`, which the approval prompt follows, trusts
such claims only when told to. The connections close when the run ends.

``--functions``: the file runs as a module under a private name (never importable as
its own name, so it shadows nothing), and each public (not ``_``-prefixed) function
it defines — not those it imports — becomes a tool through :func:`nacelle.tool`, its
docstring the description and its annotations the schema. A function already wrapped
with ``@nacelle.tool`` keeps its name and description but not its read-only claim:
the file is arbitrary code, so each call asks unless ``--yes``. An exception while the
file loads is one line naming the file and the line.

Imports the standard library, ``settings`` and ``errors`` at import time; the MCP
client, ``tools`` and the heavier standard modules (``inspect``, ``shlex``,
``urllib``) when a flag asks for them, so a plain prompt starts no slower.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import re
import sys
from typing import Any, Dict, List, Sequence, Tuple

from ..errors import NacelleError
from ..settings import SettingsError

__all__ = ["ExtraTools", "NameTaken", "joined", "load_functions", "open_tools", "tool_flags",
           "tool_options"]

_modules = itertools.count(1)


def tool_options(parser: argparse.ArgumentParser) -> None:
    """``--mcp`` and ``--functions``, for the prompt command and ``resume`` (which must
    rebuild the same agent)."""
    group = parser.add_argument_group("tools from MCP servers and Python files")
    group.add_argument("--mcp", metavar="COMMAND_OR_URL", action="append",
                       help="give the model an MCP server's tools: an http(s):// URL "
                            "(Streamable HTTP) or a command run over stdio; repeatable; "
                            "each call asks unless --yes")
    group.add_argument("--functions", metavar="FILE.py", action="append",
                       help="give the model the public functions a Python file defines, "
                            "as tools; repeatable; each call asks unless --yes")


def tool_flags(args: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """Take :func:`tool_options`' flags out of ``args``: the MCP servers, the files."""
    return list(args.pop("mcp", None) or []), list(args.pop("functions", None) or [])


class NameTaken(SettingsError):
    """A ``--functions`` function named like a tool the run already has."""

    for_the_command_line = True  # shown without its class name (terminal.one_line)


class ExtraTools:
    """The tools the flags gave, and the MCP connections to close after the run."""

    def __init__(self) -> None:
        self.tools: List[Any] = []
        self.clients: List[Any] = []

    def close(self) -> None:
        for client in self.clients:
            try:
                client.close()
            except Exception:  # a server that died already: nothing left to close
                pass
        self.clients = []


def joined(tools: Sequence[Any], extra: Sequence[Any]) -> List[Any]:
    """``tools`` then ``extra``, each MCP tool of ``extra`` whose name is taken by then
    under a new name (see the module docstring); a function whose name is taken is a
    :class:`NameTaken` saying how to resolve it, since the file is the user's to
    rename."""
    from ..mcp import MCPTool

    result, taken = list(tools), {getattr(t, "name", None) for t in tools}
    for item in extra:
        if isinstance(item, MCPTool) and item.name in taken:
            prefixes = ("mcp" if n == 1 else f"mcp{n}" for n in itertools.count(1))
            name = next(n for n in (f"{p}__{item.name}"[:64] for p in prefixes) if n not in taken)
            item = copy.copy(item)  # the copy alone renamed: run() calls remote_name
            item.name = name
        elif not isinstance(item, MCPTool) and item.name in taken:
            raise NameTaken(f"--functions: a tool is already named {item.name!r} (one of the "
                            "command's own, or an earlier file's or server's); rename the "
                            "function, or leave the other tool out with --tools")
        taken.add(getattr(item, "name", None))
        result.append(item)
    return result


def shown(spec: str) -> str:
    """How an ``--mcp`` value is named in an error: a URL without its user, password
    and query (where tokens ride); a command as given."""
    if not spec.startswith(("http://", "https://")):
        return spec
    from urllib.parse import urlsplit

    parts = urlsplit(spec)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _connect(spec: str) -> Any:
    from ..mcp import MCPError, connect_http, connect_stdio

    try:
        if spec.startswith(("http://", "https://")):
            return connect_http(spec)
        import shlex

        try:
            argv = shlex.split(spec)
        except ValueError as err:
            raise SettingsError(f"--mcp {spec}: {err}") from None
        if not argv:
            raise SettingsError("--mcp needs a command or a URL")
        return connect_stdio(argv[0], argv[1:])
    except (MCPError, OSError) as err:
        # The error's later lines are the server's last words on stderr (why it
        # exited, often): kept, on the one line an error gets.
        text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
        text = text if len(text) <= 400 else text[:399] + "\u2026"
        raise SettingsError(f"--mcp {shown(spec)}: the server did not connect: "
                            f"{text or type(err).__name__}") from None


def open_tools(flags: Tuple[List[str], List[str]]) -> ExtraTools:
    """Connect the MCP servers and load the files ``flags`` name; on any failure, close
    what was opened and raise a SettingsError naming the one that failed."""
    servers, files = flags
    extra = ExtraTools()
    try:
        for spec in servers:
            client = _connect(spec)
            extra.clients.append(client)
            try:
                extra.tools += list(client.tools())
            except NacelleError as err:
                raise SettingsError(f"--mcp {shown(spec)}: cannot list its tools: "
                                    f"{str(err).strip()[:200]}") from None
        for path in files:
            extra.tools += load_functions(path)
    except BaseException:
        extra.close()
        raise
    return extra


def _where(path: str, err: BaseException) -> str:
    """``, line N`` for the deepest frame of ``err`` in ``path`` (a SyntaxError's own
    line when it is the file's), or ""."""
    import traceback

    if isinstance(err, SyntaxError) and err.filename == path and err.lineno:
        return f", line {err.lineno}"
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__)
             if frame.filename == path]
    return f", line {lines[-1]}" if lines else ""


def load_functions(path: str) -> List[Any]:
    """The tools a Python file's public functions make (see the module docstring)."""
    import importlib.util
    import inspect

    from ..tools import FunctionTool, tool

    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise SettingsError(f"--functions {path}: no such file")
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(full))[0])
    name = f"_nacelle_functions_{next(_modules)}_{stem}"
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise SettingsError(f"--functions {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # In sys.modules while it runs, as an import would be: dataclasses and pickling
    # look a module up there by name.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # sys.exit() in the file is an error too
        del sys.modules[name]
        detail = str(err).strip().splitlines()
        raise SettingsError(f"--functions {path}{_where(full, err)}: {type(err).__name__}"
                            + (f": {detail[0]}" if detail else "")) from None
    tools: List[Any] = []
    for attribute, value in vars(module).items():
        if attribute.startswith("_"):
            continue
        fn = value.fn if isinstance(value, FunctionTool) else value
        if not inspect.isfunction(fn) or fn.__module__ != name:
            continue
        try:
            if isinstance(value, FunctionTool):
                tools.append(tool(name=value.name, description=value.description)(fn))
            else:
                tools.append(tool(fn))
        except NacelleError as err:
            raise SettingsError(f"--functions {path}: {attribute}: {err}") from None
    if not tools:
        raise SettingsError(f"--functions {path}: the file defines no public functions")
    return tools
