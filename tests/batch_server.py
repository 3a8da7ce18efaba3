"""EchoServer: a FakeServer whose Anthropic replies are computed from each request, so a
batch's results do not depend on which worker asked first.

The answer to a conversation whose last user text is ``P`` is ``"answer to P"`` with
``len(P)`` input tokens; ``P`` starting with ``"fail"`` gets a 400 error. ``delay``
seconds pass before the answer's final event, so a batch can be killed mid-way.
Imports the standard library and nacelle.testing; a helper of tests/test_batch.py.
"""

import json
from typing import Any, Dict, List, Optional

from nacelle.testing import FakeServer, RecordedRequest, Reply, anthropic_stream


def prompt_of(body: bytes) -> str:
    """The last user text; ``"fail: torn body"`` for a body cut short (a client killed
    while sending it)."""
    try:
        message = json.loads(body.decode("utf-8"))["messages"][-1]
    except (ValueError, KeyError, IndexError):
        return "fail: torn body"
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def answer(prompt: str, delay: float = 0.0) -> Reply:
    if prompt.startswith("fail"):
        return Reply.json({"type": "error", "error": {"type": "invalid_request_error",
                                                      "message": f"refused {prompt}"}},
                          status=400)
    chunks: List[Any] = list(anthropic_stream([f"answer to {prompt}"], pings=False,
                                              usage={"input_tokens": len(prompt),
                                                     "output_tokens": 3}))
    if delay:
        chunks[-2] = (chunks[-2], delay)
    return Reply(chunks=chunks)


class EchoServer(FakeServer):
    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay

    def _take(self, method: str, target: str, headers: Dict[str, str], body: bytes,
              connection: int) -> Optional[Reply]:
        path, _, query = target.partition("?")
        with self._changed:
            self._requests.append(RecordedRequest(method, path, headers, body, query,
                                                  connection))
            self._changed.notify_all()
        return answer(prompt_of(body), self.delay)

    def prompts(self) -> List[str]:
        return [prompt_of(r.body) for r in self.requests]
