"""``nacelle batch INPUT.jsonl -o RESULTS.jsonl``: every line of the input run into the
results file, resuming one a previous batch left (:func:`nacelle.batch.main_batch`).
No one is asked: calls that would ask are refused unless ``--yes``.

Imports the standard library and the agent options; the batch runner and the console
inside :func:`command`; prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..errors import NacelleError
from .agent import agent_options, subcommand_agent
from .approval import Approver
from .help import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from .terminal import exit_now, fail, one_line

__all__ = ["command"]


def command(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle batch", argument_default=argparse.SUPPRESS,
        description="Run every line of INPUT.jsonl ({\"prompt\": ...} or {\"messages\": "
                    "[...]}) into RESULTS.jsonl, resuming a results file a previous batch "
                    "left (nacelle.batch). No one is asked: calls that would ask are "
                    "refused unless --yes. Exits 1 when a run failed.")
    agent_options(parser)
    parser.add_argument("input", metavar="INPUT.jsonl")
    parser.add_argument("-o", "--output", metavar="RESULTS.jsonl", required=True)
    parser.add_argument("--workers", type=int, default=8, help="runs at once (default: 8)")
    parser.add_argument("--provider-batch", action="store_true", default=False,
                        help="send each round of model turns as one provider batch (Anthropic "
                             "Message Batches, OpenAI Batch): half the price, results within "
                             "24 hours; a rerun resumes polling the same batches")
    parser.add_argument("--poll", type=float, default=30.0,
                        help="with --provider-batch: seconds between status checks "
                             "(default: 30)")
    args = vars(parser.parse_args(argv))
    input_path, output_path, workers = args.pop("input"), args.pop("output"), args.pop("workers")
    provider_batch, poll = args.pop("provider_batch"), args.pop("poll")
    if workers < 1:
        return fail("--workers must be at least 1", EXIT_USAGE)
    try:
        agent, local = subcommand_agent(args, lambda tools, root, yes: Approver(
            tools, yes=yes, root=root, stderr=sys.stderr, no_terminal=True))
    except NacelleError as err:
        return fail(one_line(err))
    from ..batch import main_batch
    from ..console import describe_usage

    try:
        done = main_batch(agent, input_path, output_path, workers,
                          provider_batch=provider_batch, poll=poll)
    except KeyboardInterrupt:
        print("\n(cancelled; finished runs are kept in the results file)", file=sys.stderr)
        return exit_now(EXIT_INTERRUPTED)
    except (NacelleError, OSError) as err:
        return fail(one_line(err))
    finally:
        local.close()
    streamed = "" if done.streamed is None else f" (${done.streamed:.4f} streamed)"
    print(f"nacelle: {done.count} runs, {done.failures} failed, {describe_usage(done.usage)}"
          f"{streamed}, {done.wall:.1f} s wall; results in {output_path}", file=sys.stderr)
    return exit_now(EXIT_FAILED if done.failures else EXIT_OK)

