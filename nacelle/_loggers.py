"""Module loggers that import :mod:`logging` only when something is logged.

``logging`` (with the ``traceback``, ``string``, ``threading`` and ``weakref`` it pulls
in) is the largest standard-library import left in ``import nacelle``, yet a run that
logs nothing never needs it. :func:`get_logger` returns a stand-in for
``logging.getLogger(name)``: the first attribute read (``log.debug``,
``log.isEnabledFor``, ``log.level``...) imports ``logging``, looks the real logger up
once and from then on delegates to it, so records carry the same logger name, level,
handlers, caller file and line as before, and ``logging.getLogger("nacelle.loop")``
configured by the application is the very logger the module writes to. Methods read
once are kept on the stand-in, so a later ``log.debug`` is an ordinary attribute read.
Setting an attribute (``log.disabled = True``) sets it on the real logger, and
``isinstance(log, logging.Logger)`` holds.

The ``nacelle`` package logger gets its :class:`logging.NullHandler` (so nothing is
printed unless the application configures logging, as the package docstring promises)
before any nacelle logger is looked up, hence before any record is emitted: by
``nacelle/__init__.py`` when ``logging`` is already loaded, else at the first lookup.

Leaf: imports the standard library only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, cast

if TYPE_CHECKING:  # pragma: no cover
    import logging

#: The package logger that carries the NullHandler.
PACKAGE = "nacelle"


def install_null_handler() -> None:
    """Give the ``nacelle`` logger its NullHandler, once (imports ``logging``)."""
    global _installed
    if _installed:
        return
    import logging

    package = logging.getLogger(PACKAGE)
    if not any(isinstance(h, logging.NullHandler) for h in package.handlers):
        package.addHandler(logging.NullHandler())
    _installed = True


_installed = False


def install_null_handler_if_loaded() -> None:
    """Install the NullHandler now if ``logging`` costs nothing more to use."""
    if "logging" in sys.modules:
        install_null_handler()


class _DeferredLogger:
    """Stands for ``logging.getLogger(name)`` until an attribute is first read."""

    __slots__ = ("_name", "_logger", "__dict__")

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_logger", None)

    def _resolve(self) -> logging.Logger:
        logger: Optional[logging.Logger] = self._logger
        if logger is None:
            install_null_handler()
            import logging

            logger = logging.getLogger(self._name)
            object.__setattr__(self, "_logger", logger)
        return logger

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._resolve(), attr)
        if callable(value) and getattr(value, "__self__", None) is self._logger:
            # A bound method never changes: keep it so the next read skips this hook.
            kept = self.__dict__
            kept[attr] = value
        return value

    def __setattr__(self, attr: str, value: Any) -> None:
        self.__dict__.pop(attr, None)
        setattr(self._resolve(), attr, value)

    def __delattr__(self, attr: str) -> None:
        self.__dict__.pop(attr, None)
        delattr(self._resolve(), attr)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance() falls back to __class__, so the stand-in passes for a Logger.
        return type(self._resolve())

    def __repr__(self) -> str:
        return repr(self._resolve())

    def __reduce__(self) -> Any:
        # Copied or pickled (an Agent holding it), it stays a stand-in for the name.
        return (get_logger, (self._name,))


class _DeferredLoggingModule:
    """``logging`` for annotations evaluated at run time.

    A module that names ``logging.Logger`` only in annotations binds ``logging`` to
    this, so ``typing.get_type_hints`` (which evaluates ``Optional[logging.Logger]``
    in the module's globals) still finds the real class, importing ``logging`` then.
    """

    __slots__ = ()

    def __getattr__(self, attr: str) -> Any:
        import logging

        return getattr(logging, attr)

    def __repr__(self) -> str:
        return "<module 'logging', imported at first use>"


logging_for_annotations = _DeferredLoggingModule()


def get_logger(name: str) -> logging.Logger:
    """A logger for ``name`` that imports ``logging`` at its first use (module doc)."""
    return cast("logging.Logger", _DeferredLogger(name))
