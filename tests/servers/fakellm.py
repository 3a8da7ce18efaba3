"""fakellm, the PyPI mock LLM server, started with YAML rules for one test module.

fakellm 0.3.5 (``fakellm serve``, FastAPI under uvicorn) answers
``POST /v1/chat/completions`` from rules: the first rule whose ``when`` matches the
request (a substring of the messages, the turn of the conversation, a tool result
seen, a tool offered, a header) gives the ``respond`` (text, or tool calls). What
it does on the wire, read from its source and seen in its streams:

- a stream is ``data: {chunk}`` events: the role alone, then one chunk per word
  (``" " + word``) or, for tool calls, a chunk with ``index``, ``id``, ``type``,
  the name and ``"arguments": ""`` followed by the arguments' JSON in four pieces
  with ``index`` only; a last chunk with an empty delta and the ``finish_reason``;
  ``data: [DONE]``;
- no usage in a stream, whatever ``stream_options.include_usage`` says (a
  non-streamed answer has an estimated ``usage``);
- ``max_tokens`` is ignored, and a rule's error ``status`` applies only to
  non-streamed requests (a stream is always 200);
- a conversation is the hash of its first user message, and its turn counter lives
  in the server: ``reset()`` clears it between tests.

fakellm needs Python 3.10 or newer, so on 3.9 ``require()`` skips with that reason.
"""

import importlib.util
import json
import sys
import urllib.request

import pytest

from . import start

VERSION_NEEDED = (3, 10)


def require():
    """Skip the calling test unless fakellm can run under this interpreter."""
    if sys.version_info < VERSION_NEEDED:
        pytest.skip(f"fakellm needs Python 3.10 or newer and this is "
                    f"{sys.version_info.major}.{sys.version_info.minor}; its tests run "
                    f"under the other interpreters")
    if importlib.util.find_spec("fakellm") is None:
        pytest.skip("fakellm is not installed: python -m pip install -e \".[test]\"")


class FakeLLM:
    """A running fakellm; ``base_url`` ends in ``/v1``."""

    def __init__(self, server):
        self.server = server
        self.base_url = server.base_url
        self.port = server.port

    def _post(self, path):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=b"",
                                         method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def reset(self):
        """Forget every conversation's turn count (the rules' ``turn:`` conditions)."""
        return self._post("/_fakellm/reset")

    def stats(self):
        """The server's request history: ``recent`` lists each request's matched rule."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_fakellm/stats",
                                    timeout=10) as response:
            return json.loads(response.read())

    def stop(self):
        self.server.stop()


def serve(rules_yaml, directory):
    """Start fakellm with ``rules_yaml`` (the text of its config) in ``directory``."""
    require()
    config = directory / "fakellm.yaml"
    config.write_text(rules_yaml)

    def argv(port):
        return [sys.executable, "-m", "fakellm.cli", "serve", "--host", "127.0.0.1",
                "--port", str(port), "--config", str(config)]

    # Starting uvicorn imports FastAPI and pydantic: a few seconds on a busy machine.
    server = start("fakellm", argv, directory / "fakellm.log", ready_path="/_fakellm/stats",
                   timeout=60.0)
    return FakeLLM(server)
