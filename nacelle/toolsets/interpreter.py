"""How the local tools start their helper scripts: this Python, isolated.

``run_command``'s supervisor (:mod:`nacelle.toolsets.supervisor`) and
``search_content``'s matcher (:mod:`nacelle.toolsets.matcher`) are standard-library
scripts that run as processes of their own beside the agent: a process can be
killed when a thread cannot, and it can be started holding none of the host's
secrets. :func:`helper_command` is the command line for one of them:
``sys.executable -I -S path/to/script.py``. ``-I`` (isolated mode) makes the child
ignore every ``PYTHON*`` variable, the user's site directory and the current
directory, so nothing in the environment or the root can change what it imports;
``-S`` skips ``site``, which is most of an interpreter's start-up, so a helper is
running in about ten milliseconds. :func:`helper_environment` is what a helper is
started with: ``PATH`` and the loader's library path (which an interpreter built with a
shared ``libpython`` may need in order to start), nothing else of the host's.

A host whose ``sys.executable`` is not a Python interpreter it can run this way —
empty, or a frozen application's own binary — cannot start the helpers, and
:func:`helper_command` raises :class:`~nacelle.ConfigError` saying so. So does a
package imported from a zip archive, whose scripts are not files.

Outer ring: imports the standard library and ``nacelle.errors``.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List

from ..errors import ConfigError

__all__ = ["helper_command", "helper_environment"]

_LOADER_VARIABLES = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")


def helper_command(script: str, *args: str) -> List[str]:
    """The command line that runs ``script`` (a file beside this one) in a fresh,
    isolated interpreter, with ``args``."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
    if not sys.executable or getattr(sys, "frozen", False):
        raise ConfigError(f"the local tools run {script} in a Python interpreter of its "
                          "own, and this program has none to run (sys.executable is "
                          f"{sys.executable!r})")
    if not os.path.isfile(path):
        raise ConfigError(f"the local tools run {path} as a script, and it is not a file "
                          "(is nacelle imported from a zip archive?)")
    return [sys.executable, "-I", "-S", path, *args]


def helper_environment(**extra: str) -> Dict[str, str]:
    """``PATH``, the loader's library path if the host has one, and ``extra``."""
    env = {"PATH": os.environ.get("PATH") or os.defpath}
    env.update((name, os.environ[name]) for name in _LOADER_VARIABLES if name in os.environ)
    env.update(extra)
    return env
