"""``nacelle demo``: the offline demo (:mod:`nacelle.demo`: no key, no network), shown
as a run is shown on a terminal.

Imports the standard library, the console and the demo inside :func:`command`; prints.
"""

from __future__ import annotations

from typing import Sequence

from .help import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .terminal import fail

__all__ = ["command"]


def command(argv: Sequence[str]) -> int:
    if argv:
        return fail("'nacelle demo' takes no options", EXIT_USAGE)
    from ..console import Renderer
    from ..demo import demo_run

    renderer = Renderer()
    with demo_run() as (question, events):
        print(f"> {question}")
        done = renderer.render(events)
    return EXIT_OK if done is not None and done.stop is not None and done.stop.complete else EXIT_FAILED

