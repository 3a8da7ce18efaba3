"""``best_of`` with a box per candidate: each run works on its own copy of a tree.

``best_of(make_agent, conversation, n, score=..., sandbox=factory, workspace=path)``
copies ``workspace`` once per candidate (beside it, so the copies are on the same file
system), makes a box on each copy with ``factory(copy)`` — ``sandbox.Bubblewrap`` itself,
or ``lambda root: sandbox.Bubblewrap(root, network=True)`` — and an Agent for it with
``make_agent(box)`` (whose tools use the box: ``LocalTools(box.workspace,
sandbox=box)``, ``sandbox.code_mode(tools, box)``), then runs the ``n`` candidates at
once on threads. ``score(result, box)`` ranks each while its box is still open, so a
score can run the tests in the candidate's tree (``box.run(["pytest", "-q"])``).

The winner's tree is kept: it takes the place of ``workspace`` (the original is
renamed away and removed only once the winner is in place), and the losers' copies
are removed. A run that fails raises its error after the others are cancelled and
every copy removed, leaving ``workspace`` as it was. This is the pattern of sampling
several agent attempts and keeping the one that passes the tests, as in SWE-bench
harnesses and OpenAI's Codex "best of N" (https://openai.com/index/introducing-codex/).

Outer ring: imports the standard library and the core (``agent``, ``context``,
``errors``, ``messages``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Sequence, Tuple, Union

from ..agent import Agent, Result
from ..context import CancelEvent
from ..errors import ConfigError
from ..messages import Message, user_text

__all__ = ["best_of_in_boxes"]


def best_of_in_boxes(make_agent: Callable[[Any], Agent],
                     conversation: Union[str, Sequence[Message]], n: int, *,
                     score: Callable[[Result[Any], Any], Any], sandbox: Callable[[str], Any],
                     workspace: Union[str, "os.PathLike[str]", None]) -> Tuple[Result[Any],
                                                                             List[Result[Any]]]:
    """See the module docstring; ``best_of`` checked ``n`` and ``score``."""
    if isinstance(make_agent, Agent) or not callable(make_agent):
        raise ConfigError("with sandbox=, best_of takes a function making each candidate's "
                          "Agent from its box (lambda box: Agent(..., tools=LocalTools("
                          "box.workspace, sandbox=box).tools())), not one Agent")
    if not callable(sandbox):
        raise ConfigError(f"sandbox must make a box from a path, such as sandbox.Bubblewrap; "
                          f"got {sandbox!r}")
    if workspace is None or not os.path.isdir(workspace):
        raise ConfigError(f"with sandbox=, best_of needs workspace=, the directory each "
                          f"candidate gets a copy of; got {workspace!r}")
    source = os.path.realpath(workspace)
    messages = (user_text(conversation),) if isinstance(conversation, str) \
        else tuple(conversation)
    scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(source)}.best_of-",
                               dir=os.path.dirname(source))
    boxes: List[Any] = []
    try:
        for i in range(n):
            copy = os.path.join(scratch, str(i))
            shutil.copytree(source, copy, symlinks=True)
            boxes.append(sandbox(copy))
        agents = [make_agent(box) for box in boxes]
        cancel = CancelEvent()
        with ThreadPoolExecutor(n, thread_name_prefix="nacelle-best-of") as pool:
            futures = [pool.submit(agent.run, messages, cancel=cancel) for agent in agents]
            try:
                results = [f.result() for f in futures]
            except BaseException:
                cancel.set()
                raise
        scores = [score(r, box) for r, box in zip(results, boxes)]
        best = max(range(n), key=lambda i: (scores[i], -i))
        for box in boxes:
            box.close()
        aside = os.path.join(scratch, "original")
        os.rename(source, aside)
        try:
            os.rename(os.path.join(scratch, str(best)), source)
        except BaseException:
            os.rename(aside, source)
            raise
        return results[best], results
    finally:
        for box in boxes:
            try:
                box.close()
            except Exception:  # noqa: BLE001 - removing the copies matters more
                pass
        shutil.rmtree(scratch, ignore_errors=True)
