"""Ready-made tool sets.

- ``LocalTools`` (``nacelle.toolsets.files``): files under one root, and
  ``run_command`` when allowed (``nacelle.toolsets.shell``).
- ``web_search`` and ``web_fetch`` (``nacelle.toolsets.web``).
- ``memory(root)`` (``nacelle.toolsets.memory``): Claude's memory tool over a directory.

Names load on first use, so ``import nacelle.toolsets`` imports nothing heavy, with one
exception: ``memory`` is both a function and the submodule that defines it, and Python
binds a package's attribute to a submodule whenever the submodule is first imported
(``import nacelle.toolsets.memory`` anywhere would turn ``toolsets.memory`` into the
module). Importing the submodule here, before anything else can, lets the function
rebind the name once and for all; the module is small (the standard library and
``confine``).
Outer ring: may import the core, never ``backends``.
"""

import importlib as _importlib
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:  # what a type checker sees; at run time each loads on first use
    from .files import LocalTools as LocalTools
    from .web import web_fetch as web_fetch
    from .web import web_search as web_search

_HOMES = {
    "LocalTools": "files",
    "web_fetch": "web",
    "web_search": "web",
}

__all__ = sorted([*_HOMES, "memory"])

from .memory import memory as memory  # noqa: E402  (see the docstring: the function owns the name)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'nacelle.toolsets' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_HOMES))
