"""A batch in a process of its own, for tests/test_batch.py's kill-and-resume and
progress tests: ``python tests/batch_worker.py URL RESULTS COUNT`` runs the prompts
``q0``..``q{COUNT-1}`` against an EchoServer at URL into RESULTS on 4 threads;
``URL`` ``scripted`` uses a ScriptedBackend (for the progress line alone), and
RESULTS ``-`` keeps no file. The progress line goes to stderr as in any batch.
"""

import sys

import nacelle
from nacelle import batch


def main() -> None:
    url, results, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if url == "scripted":
        from nacelle.testing import ScriptedBackend, Turn

        backend = ScriptedBackend([Turn(nacelle.assistant_text("ok"), delay=0.01)] * count)
    else:
        from nacelle.backends import anthropic

        backend = anthropic.Backend(api_key="sk-test", base_url=url, max_retries=0)
    agent = nacelle.Agent(backend, "You answer.")
    items = batch.run_many(agent, [f"q{i}" for i in range(count)], max_workers=4,
                           results=None if results == "-" else results)
    for _ in items:
        pass


if __name__ == "__main__":
    main()
