"""Sandboxes: commands and code in a box the agent can spin and reap.

- ``Sandbox``: the protocol (``workspace``, ``run(argv, ...) -> Completed``,
  ``close()``, a context manager), in :mod:`nacelle.sandbox.box`.
- ``Local(root)``: ``run_command``'s supervisor — bounded, not confined.
- ``Bubblewrap(root, ...)``: Linux namespaces through ``bwrap``
  (:mod:`nacelle.sandbox.bubblewrap`).
- ``Container(image, root, ...)``: podman or docker through its CLI
  (:mod:`nacelle.sandbox.container`).
- ``code_mode(tools, box)``: one ``run_python`` tool whose script calls the agent's
  tools through a bridge (:mod:`nacelle.sandbox.codemode`).

``LocalTools(root, sandbox=box)`` runs ``run_command`` in the box, and
``batch.best_of(..., sandbox=factory)`` gives each candidate a box of its own.

Names load on first use, so ``import nacelle.sandbox`` imports nothing heavy.
Outer ring: may import the core and ``nacelle.toolsets``, never ``backends``.
"""

import importlib as _importlib
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:  # what a type checker sees; at run time each loads on first use
    from .box import Local as Local
    from .box import Sandbox as Sandbox
    from .bubblewrap import Bubblewrap as Bubblewrap
    from .codemode import code_mode as code_mode
    from .container import Container as Container
    from .process import Completed as Completed

_HOMES = {
    "Bubblewrap": "bubblewrap",
    "Completed": "process",
    "Container": "container",
    "Local": "box",
    "Sandbox": "box",
    "code_mode": "codemode",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'nacelle.sandbox' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_HOMES))
