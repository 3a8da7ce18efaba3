"""``nacelle report RUN.jsonl [-o OUT.html]``: a run recorded with ``--record`` as one
self-contained HTML page (:mod:`nacelle.report`).

Imports the standard library and :mod:`nacelle.report` inside :func:`command`; prints.
"""

from __future__ import annotations

import argparse
import os
from typing import Sequence

from ..errors import NacelleError
from ..terminal_text import visible
from .help import EXIT_OK
from .terminal import fail, one_line

__all__ = ["command"]


def command(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle report",
        description="Render a run recorded with 'nacelle --record RUN.jsonl' as one "
                    "self-contained HTML page.")
    parser.add_argument("run", metavar="RUN.jsonl", help="the recording to render")
    parser.add_argument("-o", "--output", metavar="OUT.html",
                        help="where to write the page (default: RUN.html beside RUN.jsonl)")
    args = parser.parse_args(argv)
    out = args.output or os.path.splitext(args.run)[0] + ".html"
    if os.path.abspath(out) == os.path.abspath(args.run):
        return fail(f"the report would overwrite {args.run}; name another with -o")
    from .. import report

    try:
        report.write(args.run, out)
    except (OSError, NacelleError) as err:
        return fail(f"{args.run}: {one_line(err)}")
    print(visible(out))  # a path can hold any byte a file name can, escapes included
    return EXIT_OK

