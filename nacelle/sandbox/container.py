"""``Container``: a command in a fresh container, through podman's or docker's CLI.

For hosts that are not Linux, or that want an image's tools rather than the host's
``/usr``. Each ``run`` is one ``ENGINE run --rm`` (podman and docker take the same
flags here: https://docs.podman.io/en/latest/markdown/podman-run.1.html,
https://docs.docker.com/reference/cli/docker/container/run/):

- ``-v ROOT:/workspace`` (the only writable bind; ``--read-only`` makes the image's
  own file system read-only, with a private ``--tmpfs /tmp``), ``-w`` the cwd in it;
- ``--network=none`` unless ``network=True``;
- ``--cap-drop=ALL`` and ``--security-opt=no-new-privileges``;
- ``--init``, so the container's PID 1 reaps what the command orphans;
- ``--env NAME=VALUE`` for exactly the environment given (nothing of the host's);
- ``--name`` a fresh name, so that at a timeout, on cancel or on :meth:`close` the box
  removes the container with ``ENGINE rm -f NAME``: killing the CLI alone leaves a
  docker container running, since the daemon owns it.

The environment's values appear on the engine CLI's command line, which other users
of the host can read in ``/proc``; pass no secret you would not show them.

The engine is checked at construction (``ENGINE info``): no binary, or an engine whose
daemon or socket does not answer, is a :class:`~nacelle.errors.ConfigError` naming
it. The image must hold what the commands need (``/bin/sh``; ``python3`` for code
mode).

Outer ring: imports the standard library, ``nacelle.errors`` and the siblings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple, Union

from ..errors import ConfigError
from .box import Box
from .process import Completed, Feed, Sink

__all__ = ["Container", "engine_problem"]

INSIDE = "/workspace"
_ENGINES = ("podman", "docker")
_INFO_SECONDS = 30.0
_RM_SECONDS = 30.0
#: What the engine's CLI needs of the host's environment to find its daemon or its
#: rootless storage; none of it reaches the container.
_ENGINE_ENV = ("HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "DOCKER_HOST",
               "DOCKER_CONFIG", "DOCKER_CONTEXT", "CONTAINER_HOST", "CONTAINERS_CONF",
               "DBUS_SESSION_BUS_ADDRESS", "USER", "LOGNAME")


def _engine_env() -> Dict[str, str]:
    env = {"PATH": os.environ.get("PATH") or os.defpath}
    env.update((k, os.environ[k]) for k in _ENGINE_ENV if k in os.environ)
    return env


def engine_problem(engine: str) -> Optional[str]:
    """None when ``engine`` runs containers here, else why not."""
    if engine not in _ENGINES:
        return f"engine must be one of {', '.join(_ENGINES)}, not {engine!r}"
    found = shutil.which(engine)
    if found is None:
        return f"no {engine} on PATH: install {engine} (apt-get install {engine})"
    try:
        done = subprocess.run([found, "info"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=_INFO_SECONDS, env=_engine_env())
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{engine} info failed: {err}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{engine} cannot run containers here: {(said or ['no reason given'])[-1][:300]}"
    return None


class Container(Box):
    """A box that is a fresh container of ``image`` for each command; see the module
    docstring."""

    def __init__(self, image: str, root: "os.PathLike[str] | str", *,
                 engine: str = "podman", network: bool = False) -> None:
        if not isinstance(image, str) or not image or image.startswith("-") \
                or any(c.isspace() for c in image):
            raise ConfigError(f"image must be an image name such as 'python:3.12-slim', "
                              f"not {image!r}")
        super().__init__(root)
        problem = engine_problem(engine)
        if problem is not None:
            raise ConfigError(problem)
        self.image = image
        self.engine = engine
        self.network = bool(network)
        self._binary = shutil.which(engine) or engine
        self._call = threading.local()  # this thread's container name and -i

    def __getstate__(self) -> Dict[str, Any]:
        state = super().__getstate__()
        del state["_call"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        self._call = threading.local()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return (f"Container({self.image!r}, {self._workspace!r}, engine={self.engine!r}"
                f"{', network=True' if self.network else ''}{state})")

    def _start(self, argv: Any, *, cwd: str = ".", env: Optional[Dict[str, str]] = None,
               stdin: Union[None, bytes, Feed] = None, timeout: Optional[float] = None,
               ctx: Any = None, stdout: Optional[Sink] = None) -> Completed:
        name = self._call.name = f"nacelle-{uuid.uuid4().hex[:16]}"
        self._call.interactive = stdin is not None
        try:
            done = super()._start(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout,
                                  ctx=ctx, stdout=stdout)
        except BaseException:
            self._remove(name)
            raise
        if done.timed_out:
            self._remove(name)
        return done

    def _remove(self, name: str) -> None:
        try:
            subprocess.run([self._binary, "rm", "-f", name], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=_RM_SECONDS, env=_engine_env())
        except (OSError, subprocess.TimeoutExpired):
            pass  # --rm removes it when it ends; nothing more can be done from here

    def _host_command(self, argv: List[str], cwd: str, env: Dict[str, str],
                      ) -> Tuple[List[str], Dict[str, str], str]:
        inside = INSIDE if cwd == "." else f"{INSIDE}/{cwd}"
        args = [self._binary, "run", "--rm", "--name", self._call.name, "--init",
                "--network", "bridge" if self.network else "none",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--read-only", "--tmpfs", "/tmp",
                "-v", f"{self._workspace}:{INSIDE}", "-w", inside]
        if self._call.interactive:
            args.append("-i")
        for name, value in env.items():
            args += ["--env", f"{name}={value}"]
        args += [self.image, *argv]
        return args, _engine_env(), self._workspace
