"""The ``nacelle`` command: for scripts (a prompt in, the answer out), for people (an
interactive session), and its subcommands, one module each:

- :mod:`~nacelle.cli.app` dispatches the first word to a command, and only that;
- :mod:`~nacelle.cli.run` a prompt (``nacelle "prompt"``, piped stdin) or, with none,
  the interactive session (:mod:`~nacelle.cli.interactive`), printed for a script by
  :mod:`~nacelle.cli.script` (``result.schema.json`` is its ``--json`` result);
- ``demo``, ``report``, ``sessions``, ``models``, ``serve``, ``batch``, ``resume``:
  the modules of the same names; ``help`` is the text in :mod:`~nacelle.cli.help`;
- :mod:`~nacelle.cli.agent` the agent a command line describes, and
  :mod:`~nacelle.cli.approval` the y/n/always/never questions on the terminal;
- :mod:`~nacelle.cli.terminal` the one-line errors, the terminal and the exit.

Whatever a model, a tool, a provider or an MCP server wrote is shown through
:func:`nacelle.terminal_text.visible` (the console, the approvals, the answer, the
errors, the library's warnings), so no escape sequence of theirs acts on the terminal.

``nacelle.cli:main`` is the console script's entry point, and ``python -m nacelle``
calls it too.

Outer ring: may import anything in the package; the one folder, with the console,
that prints.
"""

from .agent import build_agent as build_agent
from .app import main as main
from .approval import Approver as Approver

__all__ = ["Approver", "build_agent", "main"]
