"""``nacelle -a FILE`` and ``/attach FILE``: the real command against a loopback
FakeServer, the attached image, PDF or text read back from the request body in the
Anthropic Messages shape (https://docs.anthropic.com/en/api/messages: ``image`` and
``document`` blocks with a base64 ``source``)."""

import base64
import io
import json

import pytest

from nacelle.backends.chat import deepseek
from nacelle.backends.anthropic import Backend as Anthropic
from nacelle.cli.attach import MAX_TEXT_BYTES, check, describe, read_attachment, user_message
from nacelle.messages import Document, Image, Role, Text
from nacelle.settings import SettingsError
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

from test_cli import nacelle
from test_cli_interactive import terminal  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow  # the command as a process

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def content(server, n=0):
    return server.requests[n].json()["messages"][-1]["content"]


def test_an_attached_image_pdf_and_text_go_before_the_prompt_in_the_wire_shape(server, tmp_path):
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    (tmp_path / "notes.md").write_text("launch at **noon**\n", encoding="utf-8")
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["A dot, a report, notes."])))
    out = nacelle("What are these?", "-a", str(tmp_path / "dot.png"),
                  "--attach", str(tmp_path / "report.pdf"), "-a", str(tmp_path / "notes.md"),
                  "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "A dot, a report, notes.\n"
    image, document, text, prompt = content(server)
    assert image["type"] == "image"
    assert image["source"] == {"type": "base64", "media_type": "image/png",
                               "data": base64.b64encode(PNG).decode()}
    assert document["type"] == "document"
    assert document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]) == PDF
    assert text["type"] == "text" and "<source>notes.md</source>" in text["text"]
    assert "launch at **noon**" in text["text"]
    assert prompt["type"] == "text" and prompt["text"] == "What are these?"


def test_an_attachment_can_come_from_stdin_while_the_prompt_is_an_argument(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["It is a log."])))
    out = nacelle("-a", "-", "What is this?", "--root", str(tmp_path), server=server,
                  stdin="2026-01-01 started\n2026-01-01 stopped\n")
    assert out.returncode == 0, out.stderr
    text, prompt = content(server)
    assert "<source>stdin</source>" in text["text"] and "stopped" in text["text"]
    assert prompt["text"] == "What is this?"


def test_stdin_as_an_attachment_needs_the_prompt_as_an_argument(server, tmp_path):
    out = nacelle("-a", "-", "--root", str(tmp_path), server=server, stdin="data")
    assert out.returncode == 2
    assert "--attach - reads stdin, so the prompt is an argument" in out.stderr
    assert server.requests == []


def test_a_missing_attachment_is_one_line_and_no_request(server, tmp_path):
    out = nacelle("Look", "-a", str(tmp_path / "nope.png"), "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0
    assert "--attach" in out.stderr and "nope.png: No such file or directory" in out.stderr
    assert server.requests == []


def test_a_binary_file_that_is_no_medium_is_refused_saying_what_is_taken(server, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02garbage")
    out = nacelle("Look", "-a", str(tmp_path / "blob.bin"), "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 1
    assert "a binary file; attach an image (PNG, JPEG, GIF, WebP), a PDF or UTF-8 text" \
        in out.stderr
    assert server.requests == []


def test_a_huge_text_file_is_refused(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"a" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(SettingsError, match="attached whole, up to 524,288 bytes"):
        read_attachment(str(tmp_path / "big.txt"))


def test_a_name_that_says_pdf_over_bytes_that_are_not_is_refused(tmp_path):
    (tmp_path / "scan.pdf").write_text("just text", encoding="utf-8")
    with pytest.raises(SettingsError, match="the name says application/pdf, but the bytes"):
        read_attachment(str(tmp_path / "scan.pdf"))


def test_text_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\u00e9".encode("latin-1"))
    with pytest.raises(SettingsError, match="not UTF-8 text"):
        read_attachment(str(tmp_path / "latin.txt"))


def test_stdin_bytes_become_an_image_when_they_are_one():
    part = read_attachment("-", stdin=io.BytesIO(PNG))
    assert isinstance(part, Image) and part.media_type == "image/png"
    assert describe(part) == "image (image/png, 69 bytes)"


def test_a_backend_without_images_is_refused_before_any_request():
    image = Image.from_bytes(PNG)
    with pytest.raises(SettingsError, match="backend cannot take images"):
        check([image], deepseek("deepseek-chat", api_key="sk-test"))
    check([image, Document.from_bytes(PDF)], Anthropic(api_key="sk-ant-test"))
    check([Text("any backend takes text")], deepseek("deepseek-chat", api_key="sk-test"))


def test_the_user_message_holds_the_parts_then_the_prompt():
    image = Image.from_bytes(PNG)
    message = user_message("what?", [image])
    assert message.role is Role.USER and message.parts == (image, Text("what?"))
    assert user_message("plain", []).parts == (Text("plain"),)


def test_slash_attach_attaches_to_the_next_message_only(server, terminal, tmp_path):  # noqa: F811
    (tmp_path / "dot.png").write_bytes(PNG)
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["A dot."])),
                 Reply(chunks=anthropic_stream(["Nothing new."])))
    term = terminal()
    term.expect("> ")
    term.send("/attach\r")
    term.expect("(nothing attached: /attach FILE)")
    term.send(f"/attach {tmp_path / 'missing.png'}\r")
    term.expect("No such file or directory")
    term.send(f"/attach {tmp_path / 'dot.png'}\r")
    term.expect("(attached image (image/png, 69 bytes); 1 waiting for the next message)")
    term.send("/attach\r")
    term.expect("image (image/png, 69 bytes)")
    term.send("What is it?\r")
    term.expect("A dot.")
    term.expect("> ")
    term.send("And now?\r")
    term.expect("Nothing new.")
    term.expect("> ")
    term.send("exit\r")
    assert term.wait() == 0
    first = content(server, 0)
    assert [block["type"] for block in first] == ["image", "text"]
    second = server.requests[1].json()["messages"]
    assert [block["type"] for block in second[-1]["content"]] == ["text"]
    assert json.dumps(second).count('"image"') == 1  # the first message's, carried over


def test_an_image_for_a_backend_without_images_is_one_line_before_any_request(server, tmp_path):
    (tmp_path / "dot.png").write_bytes(PNG)
    out = nacelle("What is it?", "-a", str(tmp_path / "dot.png"), "--backend", "deepseek",
                  "--model", "deepseek-chat", "--base-url", server.url, "--root", str(tmp_path),
                  server=server, env={"DEEPSEEK_API_KEY": "sk-deepseek-test"})
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "the deepseek backend cannot take images (--attach)" in out.stderr
    assert server.requests == []
