"""Structured output against a real llama.cpp ``llama-server``: its grammar compiled
from the ``response_format`` schema the chat backend sends constrains even the tiny
test model (``tests/servers/tiny_gguf.py``), and the answer validates.

Skips with the reason (and the command that fixes it) where the server cannot run,
as ``tests/backends/test_chat_servers.py`` does; marked ``llamacpp``.
"""

import dataclasses
import enum

import pytest

import nacelle
from nacelle.backends import chat

from servers import llamacpp as llamacpp_server


class Sky(enum.Enum):
    SUNNY = "sunny"
    RAINY = "rainy"


@dataclasses.dataclass
class Verdict:
    """Short values only: the tiny model writes a byte per token, and a free string
    could run to the token cap."""

    sky: Sky
    windy: bool


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    llamacpp_server.require()
    server = llamacpp_server.serve(tmp_path_factory.mktemp("llama-output"))
    yield server
    server.stop()


@pytest.mark.llamacpp
def test_the_grammar_constrained_answer_of_a_real_llama_server_validates(llama):
    backend = chat.llamacpp(base_url=llama.base_url)
    assert backend.capabilities.structured_output
    agent = nacelle.Agent(backend, "You report the weather as JSON.", max_tokens=200,
                          output=Verdict, output_mode="native", output_retries=0)
    result = agent.run([nacelle.user_text("Is it sunny and windy?")])
    assert result.stop is nacelle.Stop.END, result.text
    assert isinstance(result.output, Verdict)
    assert isinstance(result.output.sky, Sky) and isinstance(result.output.windy, bool)
