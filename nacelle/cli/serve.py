"""``nacelle serve [MODULE:FACTORY]``: the agent (nacelle's own, or the one a function
of the user's makes) over HTTP with a chat page (:func:`nacelle.serve.run_server`).
Calls that would ask at the terminal pause instead, for the page to approve.

Without the backend's API key the command says so and stops before serving: the
library's own message ("pass api_key= to anthropic.Backend") speaks to a programmer,
and would only reach the person in the page, at their first question. The variable
is checked, not the key itself; a wrong key is the provider's 401, shown in the page.

Imports the standard library and the agent options; the serving code and the policy
inside :func:`command`; prints.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional, Sequence

from ..errors import ConfigError, NacelleError
from .agent import agent_options, subcommand_agent
from .backends import MissingKey
from .help import EXIT_FAILED, EXIT_OK
from .terminal import fail, one_line

__all__ = ["command"]

# backend -> (its key's variable, the provider's name, where a person gets a key)
_KEYS = {"anthropic": ("ANTHROPIC_API_KEY", "Anthropic", "https://console.anthropic.com/settings/keys"),
         "openrouter": ("OPENROUTER_API_KEY", "OpenRouter", "https://openrouter.ai/keys")}


def missing_key(backend: str) -> Optional[str]:
    """What to tell a person who started ``nacelle serve`` without the backend's key,
    or None when the key's variable is set (or the backend is one it does not know)."""
    known = _KEYS.get(backend)
    if known is None or os.environ.get(known[0], "").strip():
        return None
    variable, provider, where = known
    other = ("  (or serve through OpenRouter instead: set OPENROUTER_API_KEY and add "
             "--backend openrouter --model NAME)\n" if backend == "anthropic" else
             "  (or use Anthropic instead: set ANTHROPIC_API_KEY and --backend anthropic)\n")
    return (f"nacelle: serving needs an {provider} API key, and {variable} is not set, "
            f"so the chat page could not answer anything.\n"
            f"  Get a key at {where}, then start the server again with it:\n"
            f"    export {variable}=...\n"
            f"    nacelle serve\n" + other)


def command(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle serve", argument_default=argparse.SUPPRESS,
        description="Serve the agent over HTTP (nacelle.serve): GET / is a chat page, POST "
                    "/runs streams a run as Server-Sent Events. Calls that would ask at the "
                    "terminal pause instead, for the page to approve (--yes approves all).")
    parser.add_argument("factory", nargs="?", metavar="MODULE:FACTORY", help="serve the Agent "
                        "this function of yours makes (myapp:make_agent) instead of nacelle's "
                        "own; the agent options below are then not used")
    agent_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default: "
                        "127.0.0.1; anyone who reaches the port can run the agent's tools)")
    parser.add_argument("--port", type=int, default=8000, help="the port (default: 8000)")
    parser.add_argument("--store", metavar="DIR", default=None,
                        help="where paused runs and sessions are kept (default: "
                             "$XDG_DATA_HOME/nacelle/serve)")
    parser.add_argument("--allowed-host", action="append", default=[], dest="allowed_hosts",
                        metavar="NAME", help="a host name to answer to besides IP addresses "
                        "and localhost (repeatable; .example.com for a domain, * for any)")
    parser.add_argument("--mcp", metavar="MODULE:OBJECT", default=None,
                        help="serve these tools as an MCP server instead (a tool, a list of "
                             "tools, or an Agent as one tool), at /mcp")
    parser.add_argument("--stdio", action="store_true", default=False,
                        help="with --mcp: speak MCP on stdin/stdout instead of HTTP")
    args = vars(parser.parse_args(argv))
    mcp, stdio = args.pop("mcp"), args.pop("stdio")
    if mcp is not None or stdio:
        from .serve_mcp import serve_mcp

        other = sorted(set(args) - {"host", "port", "store", "allowed_hosts"})
        if mcp is None or other or args.get("store") is not None:
            return fail("--stdio serves the tools given with --mcp MODULE:OBJECT" if mcp is None
                        else "--mcp MODULE:OBJECT names what to serve: it takes no agent "
                             "options, --store or MODULE:FACTORY")
        return serve_mcp(mcp, host=args["host"], port=args["port"],
                         allowed_hosts=args["allowed_hosts"], stdio=stdio)
    host, port, store = args.pop("host"), args.pop("port"), args.pop("store")
    allowed_hosts, factory = args.pop("allowed_hosts"), args.pop("factory", None)
    from ..policy import secure
    from ..serve import run_server
    from ..serve.server import load_factory

    settings: Dict[str, Any] = {k: v for k, v in args.items()
                                if k not in ("yes", "system", "max_cost")}
    try:
        if factory is not None and args:
            raise ConfigError(f"{factory} makes the agent: --{sorted(args)[0].replace('_', '-')} "
                              "is for nacelle's own")
        # secure() pauses what it will not run, which is what the page's approvals resume.
        agent, local = (load_factory(factory), None) if factory is not None else (
            subcommand_agent(args, lambda tools, root, yes: (
                (lambda *a: True) if yes else secure(tools))))
        if local is not None:
            from ..settings import resolve

            message = missing_key(resolve(settings).backend)
            if message is not None:
                local.close()
                sys.stderr.write(message)
                return EXIT_FAILED
    except MissingKey as err:
        from ..settings import resolve

        # The serve command's longer advice where it has one, else the one line.
        message = missing_key(resolve(settings).backend)
        if message is None:
            return fail(one_line(err))
        sys.stderr.write(message)
        return EXIT_FAILED
    except NacelleError as err:
        return fail(one_line(err))

    try:
        run_server(agent, host, port, store, allowed_hosts=allowed_hosts,
                   preview=local.preview if local is not None else None,
                   on_ready=lambda url: print(f"nacelle: serving on {url} (Ctrl-C stops)",
                                              file=sys.stderr, flush=True))
    except OSError as err:
        return fail(f"cannot serve on {host}:{port}: {err.strerror or err}")
    finally:
        if local is not None:
            local.close()
    return EXIT_OK

