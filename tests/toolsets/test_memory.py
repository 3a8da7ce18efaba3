"""toolsets.memory: the memory_20250818 commands over a confined directory, safe under
concurrent writers, sent as Anthropic's memory tool on its wire and as a plain tool on
others (request bodies read from a loopback FakeServer)."""

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import nacelle
from nacelle import Agent, user_text
from nacelle.backends import anthropic, chat
from nacelle.errors import NacelleError
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, sse_event
from nacelle.toolsets import memory
from nacelle.toolsets.memory import LOCK_NAME, MAX_FILE_BYTES

KEY = "sk-test-0123456789"


@pytest.fixture
def tool(tmp_path):
    made = memory(tmp_path / "mem")
    yield made
    made.close()


def run(tool, **input):
    return tool.run(input, None)


def test_create_view_and_the_root_is_private(tool, tmp_path):
    assert run(tool, command="create", path="/memories/notes/a.md",
               file_text="one\ntwo\n") == "File created successfully at: /memories/notes/a.md"
    assert stat.S_IMODE(os.stat(tmp_path / "mem").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "mem" / "notes" / "a.md").st_mode) == 0o600
    assert run(tool, command="view", path="/memories/notes/a.md") == (
        "Here's the content of /memories/notes/a.md with line numbers:\n"
        "     1\tone\n     2\ttwo")
    assert run(tool, command="view", path="/memories/notes/a.md",
               view_range=[2, -1]).endswith("     2\ttwo")
    listing = run(tool, command="view", path="/memories")
    assert listing.startswith("Here're the files and directories up to 2 levels deep in "
                              "/memories, excluding hidden items and node_modules:\n")
    assert "\t/memories/notes\n" in listing and listing.endswith("8\t/memories/notes/a.md")
    assert LOCK_NAME not in listing


def test_create_refuses_an_existing_file(tool):
    run(tool, command="create", path="/memories/a.md", file_text="x")
    with pytest.raises(NacelleError, match="Error: File /memories/a.md already exists"):
        run(tool, command="create", path="/memories/a.md", file_text="y")


def test_str_replace_needs_exactly_one_occurrence(tool):
    run(tool, command="create", path="/memories/a.md", file_text="cat\ndog\ncat\n")
    with pytest.raises(NacelleError, match=r"Multiple occurrences of old_str `cat` in lines: \[1, 3\]"):
        run(tool, command="str_replace", path="/memories/a.md", old_str="cat", new_str="x")
    with pytest.raises(NacelleError, match="did not appear verbatim"):
        run(tool, command="str_replace", path="/memories/a.md", old_str="cow", new_str="x")
    assert run(tool, command="str_replace", path="/memories/a.md", old_str="dog",
               new_str="fox") == "The memory file has been edited."
    assert "2\tfox" in run(tool, command="view", path="/memories/a.md")


def test_insert_goes_after_the_line_given_and_checks_its_range(tool):
    run(tool, command="create", path="/memories/a.md", file_text="a\nc\n")
    run(tool, command="insert", path="/memories/a.md", insert_line=1, insert_text="b\n")
    run(tool, command="insert", path="/memories/a.md", insert_line=0, insert_text="top")
    assert "     1\ttop\n     2\ta\n     3\tb\n     4\tc" in run(tool, command="view",
                                                              path="/memories/a.md")
    with pytest.raises(NacelleError, match=r"range of lines of the file: \[0, 4\]"):
        run(tool, command="insert", path="/memories/a.md", insert_line=9, insert_text="x")


def test_delete_and_rename(tool, tmp_path):
    run(tool, command="create", path="/memories/d/x/y.md", file_text="y")
    assert run(tool, command="rename", old_path="/memories/d/x/y.md",
               new_path="/memories/e/z.md") == "Successfully renamed /memories/d/x/y.md to /memories/e/z.md"
    assert (tmp_path / "mem" / "e" / "z.md").read_text() == "y"
    run(tool, command="create", path="/memories/f.md", file_text="f")
    with pytest.raises(NacelleError, match="The destination /memories/f.md already exists"):
        run(tool, command="rename", old_path="/memories/e/z.md", new_path="/memories/f.md")
    assert run(tool, command="delete", path="/memories/d") == "Successfully deleted /memories/d"
    assert not (tmp_path / "mem" / "d").exists()
    with pytest.raises(NacelleError, match="The path /memories/d does not exist"):
        run(tool, command="delete", path="/memories/d")
    with pytest.raises(NacelleError, match="cannot be deleted"):
        run(tool, command="delete", path="/memories")
    assert tool.files() == [("/memories/e/z.md", 1), ("/memories/f.md", 1)]


@pytest.mark.parametrize("path", [
    "/memories/../outside.txt", "/memories/a/../../outside.txt", "/etc/passwd",
    "outside.txt", "/memoriesX/a", "/memories//etc/passwd", f"/memories/{LOCK_NAME}",
    "/memories/link/secret.txt", "/memories/filelink",
])
def test_paths_out_of_the_memory_directory_are_refused(tool, tmp_path, path):
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "outdir", tmp_path / "mem" / "link")
    os.symlink(tmp_path / "outside.txt", tmp_path / "mem" / "filelink")
    for input in ({"command": "view", "path": path},
                  {"command": "create", "path": path, "file_text": "x"},
                  {"command": "delete", "path": path},
                  {"command": "rename", "old_path": path, "new_path": "/memories/n"},
                  {"command": "rename", "old_path": "/memories/link", "new_path": path}):
        with pytest.raises(NacelleError) as caught:
            tool.run(input, None)
        assert "secret" not in str(caught.value) or "refused" in str(caught.value)
    assert (tmp_path / "outside.txt").read_text() == "secret"
    assert (tmp_path / "outdir" / "secret.txt").read_text() == "secret"


def test_an_oversized_file_and_an_unknown_command_are_refused(tool):
    with pytest.raises(NacelleError, match="at most"):
        run(tool, command="create", path="/memories/big", file_text="x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(NacelleError, match="unknown command"):
        run(tool, command="format")
    with pytest.raises(NacelleError, match="must be a string"):
        run(tool, command="create", path=3, file_text="x")


def test_concurrent_writers_lose_no_edit(tmp_path):
    first, second = memory(tmp_path / "mem"), memory(tmp_path / "mem")  # two holders
    run(first, command="create", path="/memories/log.md", file_text="start\n")
    errors = []

    def writer(tool, tag):
        try:
            for i in range(25):
                lines = run(tool, command="view", path="/memories/log.md").count("\n")
                run(tool, command="insert", path="/memories/log.md",
                    insert_line=lines, insert_text=f"{tag}{i}")
                run(tool, command="str_replace", path="/memories/log.md",
                    old_str=f"{tag}{i}\n", new_str=f"{tag}{i}!\n")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tool, tag))
               for tool, tag in ((first, "a"), (second, "b"), (first, "c"), (second, "d"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = (tmp_path / "mem" / "log.md").read_text()
    assert errors == []
    for tag in "abcd":
        for i in range(25):
            assert f"\n{tag}{i}!\n" in text
    assert not [n for n in os.listdir(tmp_path / "mem") if n.endswith(".tmp")]


#: One writer process: a read-then-insert and a str_replace per edit, each its own
#: call, so two processes interleave their calls between each other's reads and writes.
WRITER = """
import sys
from nacelle.toolsets import memory
tool, tag = memory(sys.argv[1]), sys.argv[2]
for i in range(25):
    lines = tool.run({"command": "view", "path": "/memories/log.md"}, None).count("\\n")
    tool.run({"command": "insert", "path": "/memories/log.md", "insert_line": lines,
              "insert_text": f"{tag}{i}"}, None)
    tool.run({"command": "str_replace", "path": "/memories/log.md",
              "old_str": f"{tag}{i}\\n", "new_str": f"{tag}{i}!\\n"}, None)
tool.close()
"""


def test_writers_in_separate_processes_lose_no_edit(tmp_path):
    first = memory(tmp_path / "mem")
    run(first, command="create", path="/memories/log.md", file_text="start\n")
    first.close()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "mem"), tag],
                                env=env, stderr=subprocess.PIPE) for tag in "ab"]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    text = (tmp_path / "mem" / "log.md").read_text()
    for tag in "ab":
        for i in range(25):
            assert f"\n{tag}{i}!\n" in text
    assert not [n for n in os.listdir(tmp_path / "mem") if n.endswith(".tmp")]


# -- on the wire ---------------------------------------------------------------------

@pytest.fixture
def server(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer() as running:
        yield running


def test_anthropic_gets_the_native_memory_tool_and_the_run_executes_its_calls(server, tool, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[(
                     "toolu_1", "memory",
                     '{"command": "create", "path": "/memories/user.md", "file_text": "likes tea"}')])),
                 Reply(chunks=anthropic_stream(["Noted."])))
    backend = anthropic.Backend(KEY, base_url=server.url)
    result = Agent(backend, "s", tools=[tool, nacelle.tool(lambda: "x", name="other")]).run(
        [user_text("remember I like tea")])
    assert result.text == "Noted."
    body = server.requests[0].json()
    assert {"type": "memory_20250818", "name": "memory"} in body["tools"]
    assert [t.get("type") for t in body["tools"] if t["name"] == "other"] == [None]
    assert "anthropic-beta" not in {k.lower() for k in server.requests[0].headers}
    assert (tmp_path / "mem" / "user.md").read_text() == "likes tea"
    sent = server.requests[1].json()["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result" and "File created successfully" in str(sent["content"])


def test_other_backends_get_it_as_a_plain_tool_with_a_schema(server, tool):
    server.queue("/v1/chat/completions", Reply(chunks=[
        sse_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]}),
        sse_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        b"data: [DONE]\n\n"]))
    backend = chat.Backend(base_url=server.url + "/v1", model="m", api_key=KEY)
    Agent(backend, "s", tools=[tool]).run([user_text("hi")])
    [sent] = server.requests[0].json()["tools"]
    assert sent["function"]["name"] == "memory"
    assert sent["function"]["parameters"]["properties"]["command"]["enum"] == [
        "view", "create", "str_replace", "insert", "delete", "rename"]


def test_toolsets_memory_stays_the_function_after_its_module_is_imported_by_name():
    import subprocess
    import sys

    code = ("import nacelle.toolsets.memory, importlib; "
            "importlib.import_module('nacelle.toolsets.memory'); "
            "from nacelle.toolsets import memory; import nacelle.toolsets as t; "
            "print(callable(memory), t.memory is memory, memory.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "nacelle.toolsets.memory"]
