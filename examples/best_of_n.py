"""Best of N: run the same question through N agents at once and keep the answer
the judge prefers.

An Agent holds configuration, not run state, so one Agent serves many runs from
many threads. Agents and conversations also pickle (``pickle.dumps(agent)``,
``nacelle.dumps(messages)``), so Ray or Dask can ship them to a cluster the same
way ``concurrent.futures`` ships them to threads here.

    ANTHROPIC_API_KEY=... python examples/best_of_n.py
    python examples/best_of_n.py --offline

``--offline`` needs no key and no network: the example runs unchanged against
``nacelle.testing.FakeServer``, a loopback server speaking the Anthropic Messages
wire, which plays the scripted answers below (four drafts, then the judge's pick).
"""

import contextlib
import os
import sys
from typing import Iterator
from concurrent.futures import ThreadPoolExecutor

import nacelle
from nacelle.backends import anthropic

N = 4


def main() -> None:
    writer = nacelle.Agent(anthropic.Backend(), "Write one vivid sentence. No preamble.")
    judge = nacelle.Agent(anthropic.Backend(), "You pick the best sentence. "
                          "Answer with its number only.")
    prompt = [nacelle.user_text("Describe a lighthouse at dawn.")]
    with ThreadPoolExecutor(max_workers=N) as pool:
        drafts = list(pool.map(lambda _: writer.run(prompt), range(N)))
    listing = "\n".join(f"{i + 1}. {d.text.strip()}" for i, d in enumerate(drafts))
    verdict = judge.run([nacelle.user_text(listing)])
    digits = "".join(c for c in verdict.text if c.isdigit())
    best = int(digits) - 1 if digits and 0 < int(digits) <= N else 0
    spent = sum((d.usage for d in drafts), verdict.usage)
    print(listing)
    print(f"\nbest: {drafts[best].text.strip()}")
    print(f"spent {spent.total} tokens")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """A loopback Anthropic server playing this example's script, named to the backend
    through ``ANTHROPIC_BASE_URL`` as a proxy would be."""
    from nacelle.testing import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    with FakeServer() as server:
        server.queue("/v1/messages", *[Reply(chunks=c) for c in [
            *[anthropic_stream([f"Draft number {i}."]) for i in range(N)],
            anthropic_stream(["3"])]])
        os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="offline-example")
        yield


if __name__ == "__main__":
    if "--offline" in sys.argv[1:]:
        with offline():
            main()
    elif not os.environ.get("ANTHROPIC_API_KEY"):
        sys.exit(f"{sys.argv[0]}: set ANTHROPIC_API_KEY to run this against Anthropic, "
                 "or pass --offline to run it against a scripted loopback server")
    else:
        main()
