"""FileStore: round trips, names, permissions, corrupt files, crashes and two writers;
MemoryStore: the same interface and promises in memory."""

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import ConfigError, Message, Role, ToolCall, assistant_text, user_text
from nacelle.checkpoint import Checkpoint, PendingCall, fingerprint
from nacelle.backends import anthropic
from nacelle.sessions import CorruptSession, FileStore, MemoryStore, SessionError, SessionNotFound
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

ROOT = Path(__file__).resolve().parent.parent
POSIX = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions and signals")
CONVERSATION = [user_text("What is in café.txt?"), assistant_text("Coffee ☕.")]


def test_a_saved_conversation_loads_back_equal(tmp_path):
    store = FileStore(tmp_path / "s")
    store.save("first", CONVERSATION)
    assert store.load("first") == CONVERSATION
    assert (tmp_path / "s" / "first.json").read_text(encoding="utf-8") == nacelle.dumps(
        CONVERSATION)


def test_a_saved_conversation_keeps_a_users_document_and_a_tools_media(tmp_path):
    media = [
        Message(Role.USER, (nacelle.Text("Read this."),
                            nacelle.Document("application/pdf", "JVBERi0=", "q3.pdf"))),
        Message(Role.ASSISTANT, (ToolCall("c1", "shot", "{}"),)),
        Message(Role.USER, (nacelle.ToolResult("c1", "shot", "the page", content=(
            nacelle.Text("the page"), nacelle.Image("image/png", "iVBORw0KGgo="))),)),
    ]
    for store in (FileStore(tmp_path / "s"), MemoryStore()):
        store.save("media", media)
        assert store.load("media") == media


def test_names_lists_saved_conversations_sorted_and_delete_removes_one(tmp_path):
    store = FileStore(tmp_path)
    for name in ("b", "a-1", "C_2"):
        store.save(name, CONVERSATION)
    (tmp_path / ".tmp-left-by-a-crash.part").write_text("half")
    (tmp_path / "notes.txt").write_text("not a session")
    assert store.names() == ["C_2", "a-1", "b"]
    store.delete("a-1")
    assert store.names() == ["C_2", "b"]
    with pytest.raises(SessionNotFound, match="'a-1'"):
        store.delete("a-1")


def test_loading_a_name_never_saved_is_session_not_found(tmp_path):
    with pytest.raises(SessionNotFound) as caught:
        FileStore(tmp_path).load("missing")
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, SessionError)
    assert isinstance(caught.value, nacelle.NacelleError)


def test_saving_again_replaces_the_conversation(tmp_path):
    store = FileStore(tmp_path)
    store.save("s", CONVERSATION)
    store.save("s", CONVERSATION[:1])
    assert store.load("s") == CONVERSATION[:1]


@pytest.mark.parametrize("name", [
    "", ".", "..", "../escape", "a/b", "a\\b", ".hidden", "-flag", "_x", "a.b", "a.json",
    "x" * 129, "café", "a b", "a\x00b", "/etc/passwd", None, 3, "chat\n", "\nchat"])
def test_names_outside_the_safe_alphabet_are_refused_before_any_file_is_touched(
        tmp_path, name):
    store = FileStore(tmp_path / "s")
    for call in (lambda: store.save(name, CONVERSATION), lambda: store.load(name),
                 lambda: store.delete(name)):
        with pytest.raises(ConfigError):
            call()
    assert sorted(os.listdir(tmp_path / "s")) == []
    assert sorted(os.listdir(tmp_path)) == ["s"]


@POSIX
def test_the_directory_is_0700_and_every_file_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        store = FileStore(tmp_path / "a" / "store")
        store.save("s", CONVERSATION)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "store").st_mode) == 0o700
    for entry in os.listdir(tmp_path / "a" / "store"):
        assert stat.S_IMODE(os.stat(tmp_path / "a" / "store" / entry).st_mode) == 0o600, entry


@pytest.mark.parametrize("content, why", [
    (b"{not json", "not JSON"),
    (b'{"role": "user"}', "expected a list"),
    (b'[{"role": "nobody", "parts": []}]', "role"),
    (b"\xff\xfe[]", "not UTF-8"),
])
def test_a_corrupt_file_is_an_error_naming_it_and_is_left_as_it_is(tmp_path, content, why):
    store = FileStore(tmp_path)
    (tmp_path / "broken.json").write_bytes(content)
    with pytest.raises(CorruptSession, match=why) as caught:
        store.load("broken")
    assert "'broken'" in str(caught.value) and str(tmp_path / "broken.json") in str(caught.value)
    assert (tmp_path / "broken.json").read_bytes() == content
    assert store.names() == ["broken"]


def _checkpoint():
    call = ToolCall("call_1", "write_file", '{"path": "a"}')
    messages = (user_text("write a"), Message(Role.ASSISTANT, (call,)))
    pending = PendingCall("call_1", "write_file", call.input,
                          fingerprint("write_file", call.input))
    return Checkpoint(messages=messages, results=(), pending=(pending,), iterations=1,
                      tools=("write_file",))


def test_a_checkpoint_is_saved_beside_its_conversation_and_loads_back(tmp_path):
    store = FileStore(tmp_path)
    store.save("run", CONVERSATION)
    store.save_checkpoint("run", _checkpoint(), key="secret")
    store.save_checkpoint("alone", _checkpoint())
    assert store.load_checkpoint("run", key="secret").dumps() == _checkpoint().dumps()
    assert store.names() == ["run"] and store.load("run") == CONVERSATION
    assert store.checkpoint_names() == ["alone", "run"]
    store.delete_checkpoint("run")
    assert store.checkpoint_names() == ["alone"]
    with pytest.raises(SessionNotFound):
        store.load_checkpoint("run")
    assert store.load("run") == CONVERSATION


def test_a_checkpoint_with_the_wrong_key_or_garbage_is_a_checkpoint_error_naming_the_file(
        tmp_path):
    store = FileStore(tmp_path)
    store.save_checkpoint("run", _checkpoint(), key="secret")
    with pytest.raises(nacelle.CheckpointError, match="run.checkpoint.json"):
        store.load_checkpoint("run", key="other")
    (tmp_path / "bad.checkpoint.json").write_text("{")
    with pytest.raises(nacelle.CheckpointError, match="bad.checkpoint.json"):
        store.load_checkpoint("bad")
    with pytest.raises(ConfigError):
        store.save_checkpoint("../x", _checkpoint())


def test_an_empty_key_is_refused_and_the_checkpoint_is_neither_written_nor_taken(tmp_path):
    store = FileStore(tmp_path)
    with pytest.raises(ConfigError, match="empty"):
        store.save_checkpoint("run", _checkpoint(), key="")
    assert store.checkpoint_names() == []
    store.save_checkpoint("run", _checkpoint(), key="secret")
    with pytest.raises(ConfigError, match="empty"):
        store.take_checkpoint("run", key=b"")
    assert store.take_checkpoint("run", key="secret").dumps() == _checkpoint().dumps()


def test_a_checkpoint_taken_is_gone_so_a_paused_run_resumes_at_most_once(tmp_path):
    store = FileStore(tmp_path)
    store.save_checkpoint("run", _checkpoint(), key="secret")
    assert store.take_checkpoint("run", key="secret").dumps() == _checkpoint().dumps()
    with pytest.raises(SessionNotFound):
        store.take_checkpoint("run", key="secret")


def test_a_checkpoint_that_fails_its_check_is_not_taken(tmp_path):
    store = FileStore(tmp_path)
    store.save_checkpoint("run", _checkpoint(), key="secret")
    with pytest.raises(nacelle.CheckpointError, match="run.checkpoint.json"):
        store.take_checkpoint("run", key="other")
    assert store.take_checkpoint("run", key="secret").pending[0].id == "call_1"


@pytest.mark.slow
@POSIX
def test_of_two_processes_taking_one_checkpoint_exactly_one_gets_it(tmp_path):
    store = FileStore(tmp_path)
    store.save_checkpoint("run", _checkpoint(), key="secret")
    code = """
        import sys
        from nacelle.sessions import FileStore, SessionNotFound
        try:
            FileStore(sys.argv[1]).take_checkpoint("run", key="secret")
        except SessionNotFound:
            print("missed")
        else:
            print("took")
    """
    takers = [_python(code, tmp_path) for _ in range(4)]
    said = sorted(p.communicate(timeout=60)[0].decode().strip() for p in takers)
    assert said == ["missed", "missed", "missed", "took"]


def _python(code, *args):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)


@pytest.mark.slow
@POSIX
def test_a_writer_killed_before_its_rename_leaves_the_old_conversation_whole(tmp_path):
    store = FileStore(tmp_path)
    store.save("s", CONVERSATION)
    marker = tmp_path.parent / (tmp_path.name + ".renaming")
    writer = _python("""
        import os, sys, time
        import nacelle
        from nacelle.sessions import FileStore

        def stuck(source, target):
            open(sys.argv[2], "w").close()
            time.sleep(60)

        os.replace = stuck
        FileStore(sys.argv[1]).save("s", [nacelle.user_text("new " * 100_000)])
    """, tmp_path, marker)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert writer.poll() is None, writer.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # The temporary file is whole and fsynced; the rename never happened.
        assert [e for e in os.listdir(tmp_path) if e.startswith(".tmp-")]
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.communicate()
    assert writer.returncode == -signal.SIGKILL
    assert store.load("s") == CONVERSATION
    assert store.names() == ["s"]
    store.save("s", CONVERSATION[:1])  # the lock died with its holder
    assert store.load("s") == CONVERSATION[:1]


@pytest.mark.slow
@POSIX
def test_two_processes_writing_one_name_take_turns_and_every_read_is_whole(tmp_path):
    code = """
        import sys
        import nacelle
        from nacelle.sessions import FileStore

        store = FileStore(sys.argv[1])
        tag = sys.argv[2]
        for i in range(60):
            store.save("shared", [nacelle.user_text(tag * (1000 + 997 * i))])
            store.save(tag, [nacelle.user_text(str(i))])
    """
    writers = [_python(code, tmp_path, tag) for tag in ("a", "b")]
    store = FileStore(tmp_path)
    seen = set()
    while any(w.poll() is None for w in writers):
        try:
            messages = store.load("shared")
        except SessionNotFound:
            continue
        text = messages[0].parts[0].text
        assert set(text) in ({"a"}, {"b"}), "a read saw two writers' bytes"
        seen.add(text[0])
    for writer in writers:
        out, err = writer.communicate()
        assert writer.returncode == 0, err.decode()
    assert store.load("a")[0].parts[0].text == "59"
    assert store.load("b")[0].parts[0].text == "59"
    assert store.names() == ["a", "b", "shared"]
    assert not [e for e in os.listdir(tmp_path) if e.startswith(".tmp-")]


@pytest.mark.slow
@POSIX
def test_a_write_waits_for_the_lock_another_process_holds(tmp_path):
    import fcntl

    store = FileStore(tmp_path)
    store.save("s", CONVERSATION)
    fd = os.open(tmp_path / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        writer = _python("""
            import sys
            import nacelle
            from nacelle.sessions import FileStore
            FileStore(sys.argv[1]).save("s", [nacelle.user_text("later")])
        """, tmp_path)
        time.sleep(1.0)
        assert writer.poll() is None and store.load("s") == CONVERSATION
    finally:
        os.close(fd)
    writer.communicate(timeout=30)
    assert writer.returncode == 0
    assert store.load("s") == [user_text("later")]


# -- MemoryStore ------------------------------------------------------------------------


def test_a_memory_store_keeps_conversations_and_checkpoints_as_a_file_store_does():
    store = MemoryStore()
    messages = list(CONVERSATION)
    store.save("run", messages)
    messages.append(user_text("later"))  # what was saved is a copy
    assert store.load("run") == CONVERSATION and store.load("run") is not store.load("run")
    store.save_checkpoint("run", _checkpoint(), key="secret")
    store.save_checkpoint("alone", _checkpoint())
    assert store.names() == ["run"] and store.checkpoint_names() == ["alone", "run"]
    assert store.load_checkpoint("run", key="secret").dumps() == _checkpoint().dumps()
    with pytest.raises(nacelle.CheckpointError, match="'run'"):
        store.take_checkpoint("run", key="other")
    assert store.take_checkpoint("run", key="secret").pending[0].id == "call_1"
    with pytest.raises(SessionNotFound):
        store.take_checkpoint("run", key="secret")
    store.delete_checkpoint("alone")
    store.delete("run")
    assert store.names() == store.checkpoint_names() == []
    for bad in ("../x", "a.b", ""):
        with pytest.raises(ConfigError):
            store.save(bad, CONVERSATION)
        with pytest.raises(ConfigError):
            store.take_checkpoint(bad)
    with pytest.raises(SessionNotFound):
        store.load("never")


def test_of_many_threads_taking_one_checkpoint_from_memory_exactly_one_gets_it():
    import threading

    store = MemoryStore()
    store.save_checkpoint("run", _checkpoint())
    got, gate = [], threading.Barrier(8)

    def take():
        gate.wait()
        try:
            got.append(store.take_checkpoint("run"))
        except SessionNotFound:
            pass

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(got) == 1


HIGH, LOW, EMOJI = "\ud83d", "\ude00", "\U0001f600"  # an emoji cut in two UTF-16 halves


def split_emoji_agent(server):
    """An Agent on the Anthropic backend whose answer streams an emoji's two halves in
    two deltas, as a server that cuts by UTF-16 code unit sends it."""
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hi " + HIGH, LOW + "!"])))
    return nacelle.Agent(anthropic.Backend("sk-ant-test-0123456789", base_url=server.url,
                                           max_retries=0), "Be brief.")


def test_an_answer_with_an_emoji_split_over_two_deltas_saves_and_loads_whole(tmp_path):
    with FakeServer() as server:
        result = split_emoji_agent(server).run([user_text("Smile")])
    store = FileStore(tmp_path / "store")
    store.save("smile", result.messages)
    assert store.load("smile")[-1].text == "Hi " + EMOJI + "!"


@pytest.mark.parametrize("make", [lambda path: MemoryStore(), FileStore], ids=["memory", "file"])
def test_a_conversation_holding_half_a_surrogate_pair_saves_with_a_replacement_character(make, tmp_path):
    store = make(tmp_path / "s")
    store.save("half", [user_text("cut \ud83d here")])
    assert store.load("half")[0].parts[0].text == "cut \ufffd here"
