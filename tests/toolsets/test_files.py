"""LocalTools and the file tools, against real temp trees with real symlinks.

The hostile tree puts a canary directory next to the root; every escape attempt
must be refused with a message naming the path and the reason, and the canary
tree must be byte-for-byte and timestamp-for-timestamp what it was.
"""

import copy
import errno
import os
import pickle
import re
import socket
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

import nacelle
from nacelle.errors import ConfigError
from nacelle.toolsets import LocalTools
from nacelle.toolsets import confine, files
from nacelle.toolsets.confine import PathError, PathRefused

CANARY = "CANARY-7f3a-never-read"
PROJECT = Path(__file__).resolve().parents[2]


def ctx():
    return nacelle.ToolContext(call_id="call_1", name="test")


def snapshot(top: Path):
    """Every entry under ``top``: name, type, content and modification time."""
    seen = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            st = path.lstat()
            body = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
            seen.append((str(path.relative_to(top)), st.st_mode, st.st_mtime_ns, body))
    return sorted(seen)


@pytest.fixture
def hostile(tmp_path):
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "canary.txt").write_text(CANARY)
    (outside / "dir" / "canary.txt").write_text(CANARY)
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "notes.txt").write_text("first line\nsecond line\n")
    (root / "a" / "b" / "deep.txt").write_text("deep\n")
    links = {
        "file_link": "../outside/canary.txt",
        "abs_link": str(outside / "canary.txt"),
        "slash": "/",
        "chain1": "chain2",
        "chain2": "a/chain3",
        "a/chain3": str(outside / "canary.txt"),
        "via_inner": "file_link",
        "dangling": "../outside/new.txt",
        "dir_link": "../outside/dir",
        "slash_to_outside": "/../../" + str(outside)[1:],
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "inside_link": "notes.txt",
        "inside_abs": str(root / "a" / "b" / "deep.txt"),
        "inside_dir": "a/b",
        "up_and_back": "a/../notes.txt",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.mkfifo(root / "fifo")
    before = snapshot(outside)
    tools = LocalTools(root)
    yield SimpleNamespace(root=root, outside=outside,
                          tools={t.name: t for t in tools.tools()})
    tools.close()
    assert snapshot(outside) == before, "the canary tree outside the root changed"


ESCAPES = [
    ("read_file", {"path": "../outside/canary.txt"},
     "refused '../outside/canary.txt': '..' would leave the root"),
    ("read_file", {"path": "a/../../outside/canary.txt"},
     "refused 'a/../../outside/canary.txt': '..' would leave the root"),
    ("read_file", {"path": "a/b/../../../outside/canary.txt"}, "'..' would leave the root"),
    ("read_file", {"path": "/etc/passwd"},
     "refused '/etc/passwd': absolute path outside the root"),
    ("read_file", {"path": "file_link"},
     "refused 'file_link': symlink 'file_link' (-> ../outside/canary.txt) leads out of the root"),
    ("read_file", {"path": "abs_link"}, "symlink 'abs_link' (-> /"),
    ("read_file", {"path": "slash/etc/passwd"},
     "refused 'slash/etc/passwd': symlink 'slash' (-> /) points outside the root"),
    ("read_file", {"path": "chain1"}, "symlink 'a/chain3' (-> /"),
    ("read_file", {"path": "via_inner"}, "symlink 'file_link' (-> ../outside/canary.txt) "
     "leads out of the root"),
    ("read_file", {"path": "notes\0.txt"}, "the path contains a NUL character"),
    ("read_file", {"path": "loop_a"}, "too many levels of symlinks"),
    ("read_file", {"path": "dir_link/canary.txt"}, "symlink 'dir_link' (-> ../outside/dir) "
     "leads out of the root"),
    ("write_file", {"path": "dangling", "content": "pwned"},
     "refused 'dangling': symlink 'dangling' (-> ../outside/new.txt) leads out of the root"),
    ("write_file", {"path": "../outside/canary.txt", "content": "pwned"},
     "'..' would leave the root"),
    ("write_file", {"path": "dir_link/new.txt", "content": "pwned"}, "leads out of the root"),
    ("write_file", {"path": "slash_to_outside/pwned.txt", "content": "pwned"},
     "points outside the root"),
    ("edit_file", {"path": "file_link", "old_text": CANARY, "new_text": "pwned"},
     "refused 'file_link': symlink 'file_link'"),
    ("edit_file", {"path": "abs_link", "old_text": CANARY, "new_text": "pwned"},
     "points outside the root"),
    ("list_directory", {"path": "dir_link"}, "refused 'dir_link': symlink 'dir_link'"),
    ("list_directory", {"path": "slash"}, "refused 'slash': symlink 'slash' (-> /)"),
    ("list_directory", {"path": ".."}, "refused '..': '..' would leave the root"),
    ("find_files", {"pattern": "../**"}, "refused '../**': '..' is not allowed in patterns"),
    ("find_files", {"pattern": "../outside/*.txt"}, "'..' is not allowed in patterns"),
    ("find_files", {"pattern": "/**/*"}, "refused '/**/*': absolute pattern outside the root"),
    ("find_files", {"pattern": "dir_link/*"}, "refused 'dir_link': symlink 'dir_link'"),
    ("search_content", {"pattern": "CANARY", "glob": "../outside/*"},
     "'..' is not allowed in patterns"),
    ("search_content", {"pattern": "CANARY", "glob": "dir_link/*.txt"},
     "refused 'dir_link': symlink 'dir_link'"),
    ("read_file", {"path": "fifo"},
     "refused 'fifo': it is a FIFO (named pipe); only regular files can be read"),
]


@pytest.mark.parametrize("name, input, message", ESCAPES,
                         ids=[f"{n}-{k}" for k, (n, _, _) in enumerate(ESCAPES)])
def test_escape_attempt_is_refused_with_a_message_naming_path_and_reason(
        hostile, name, input, message):
    outcome = []

    def attempt():  # in a thread, so a blocking open (a FIFO) fails the test, not hangs it
        try:
            outcome.append(hostile.tools[name].run(dict(input), ctx()))
        except Exception as err:  # noqa: BLE001 - the outcome is inspected below
            outcome.append(err)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert outcome, f"{name}({input}) blocked"
    err = outcome[0]
    assert isinstance(err, PathRefused), err
    assert message in str(err)
    assert CANARY not in str(err)
    assert not (hostile.outside / "new.txt").exists()


def test_search_content_does_not_follow_a_symlinked_directory_out_of_the_root(hostile):
    result = hostile.tools["search_content"].run({"pattern": "CANARY|deep"}, ctx())
    assert result == "a/b/deep.txt:1: deep"


def test_find_files_lists_symlinks_but_never_walks_into_them(hostile):
    result = hostile.tools["find_files"].run({"pattern": "**/*canary*"}, ctx())
    assert result == "no matches for '**/*canary*'"
    listed = hostile.tools["find_files"].run({"pattern": "*link*"}, ctx()).splitlines()
    assert listed == ["abs_link", "dir_link", "file_link", "inside_link"]


def test_symlinks_that_stay_inside_the_root_work(hostile):
    read = hostile.tools["read_file"]
    assert read.run({"path": "inside_link"}, ctx()) == "     1\tfirst line\n     2\tsecond line"
    assert read.run({"path": "inside_abs"}, ctx()) == "     1\tdeep"
    assert read.run({"path": "inside_dir/deep.txt"}, ctx()) == "     1\tdeep"
    assert read.run({"path": "up_and_back"}, ctx()).startswith("     1\tfirst line")
    assert read.run({"path": "inside_dir/../../notes.txt"}, ctx()).startswith("     1\tfirst")
    listing = hostile.tools["list_directory"].run({"path": "inside_dir"}, ctx())
    assert listing == "deep.txt (5 bytes)"


def test_writing_through_an_inside_symlink_changes_its_target_and_keeps_the_link(hostile):
    hostile.tools["write_file"].run({"path": "inside_link", "content": "new\n"}, ctx())
    assert os.path.islink(hostile.root / "inside_link")
    assert (hostile.root / "notes.txt").read_text() == "new\n"


def test_absolute_paths_inside_the_root_are_accepted(hostile):
    path = str(hostile.root / "a" / "b" / "deep.txt")
    assert hostile.tools["read_file"].run({"path": path}, ctx()) == "     1\tdeep"


@pytest.mark.slow
def test_symlink_swapped_for_a_directory_in_a_race_never_leaks_the_outside(hostile):
    """A thread flips ``x`` between a real directory and a symlink to the canary's
    directory while reads of ``x/canary.txt`` run; no read may see the canary."""
    real = hostile.root / "real"
    real.mkdir()
    (real / "canary.txt").write_text("inside\n")
    x = hostile.root / "x"
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            os.rename(real, x)
            os.rename(x, real)
            os.symlink(hostile.outside / "dir", x)
            os.unlink(x)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    seen = {"inside": 0, "refused": 0, "missing": 0}
    deadline = time.monotonic() + 3.0
    try:
        while time.monotonic() < deadline:
            try:
                result = hostile.tools["read_file"].run({"path": "x/canary.txt"}, ctx())
            except PathRefused:
                seen["refused"] += 1
            except PathError:
                seen["missing"] += 1
            else:
                assert result == "     1\tinside"
                seen["inside"] += 1
            if seen["inside"] and seen["refused"] and sum(seen.values()) > 500:
                break
    finally:
        stop.set()
        flipper.join(5)
    # Both sides of the race were really exercised.
    assert seen["inside"] > 0 and seen["refused"] > 0, seen


# -- read_file ---------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    tools = LocalTools(tmp_path)
    yield SimpleNamespace(root=tmp_path, tools={t.name: t for t in tools.tools()}, set=tools)
    tools.close()


def read(tree, **input):
    return tree.tools["read_file"].run(input, ctx())


def test_read_file_numbers_lines_and_strips_line_endings(tree):
    (tree.root / "f.txt").write_bytes(b"one\r\ntwo\nthree")
    assert read(tree, path="f.txt") == "     1\tone\n     2\ttwo\n     3\tthree"


def test_read_file_announces_where_to_read_on_when_the_limit_stops_it(tree):
    (tree.root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert read(tree, path="f.txt", offset=4, limit=2) == (
        "     4\tline 4\n     5\tline 5\n[showing lines 4-5; the file continues: call "
        "read_file with offset=6 to read on]")
    assert read(tree, path="f.txt", offset=9, limit=5) == "     9\tline 9\n    10\tline 10"


def test_read_file_refuses_an_offset_past_the_end(tree):
    (tree.root / "f.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="offset 5 is past the end of 'f.txt', which has 2 lines"):
        read(tree, path="f.txt", offset=5)


@pytest.mark.parametrize("bad", [0, -1, True, "3", 1.5])
def test_read_file_refuses_an_offset_that_is_not_a_positive_whole_number(tree, bad):
    (tree.root / "f.txt").write_text("a\n")
    with pytest.raises(ValueError, match="offset must be a whole number of at least 1"):
        read(tree, path="f.txt", offset=bad)


def test_read_file_says_when_a_file_is_empty(tree):
    (tree.root / "empty.txt").write_text("")
    assert read(tree, path="empty.txt") == "(empty.txt is empty)"


def test_read_file_cuts_long_lines_and_says_so(tree):
    (tree.root / "long.txt").write_text("x" * 5000 + "\nshort\n")
    result = read(tree, path="long.txt")
    first, second, note = result.split("\n")
    assert first == "     1\t" + "x" * 2000 + " … [3000 more bytes on this line not shown]"
    assert second == "     2\tshort"
    assert note.startswith("[1 line(s) longer than 2000 bytes were cut")


def sparse_lines(path, line_bytes, total_bytes):
    """A sparse file of ``total_bytes``: text for its first 9 KB (so it is not taken for
    binary), then holes that read as NUL bytes, with a newline every ``line_bytes``."""
    with open(path, "wb") as f:
        f.write(b"x" * 9000)
        for at in range(line_bytes, total_bytes, line_bytes):
            f.seek(at - 1)
            f.write(b"\n")
        f.truncate(total_bytes)


@pytest.mark.slow
def test_read_file_on_a_multi_gigabyte_line_reads_a_bounded_amount_in_bounded_memory(tree):
    sparse_lines(tree.root / "huge.txt", 8 * 2**30, 8 * 2**30)  # one 8 GB line
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = read(tree, path="huge.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 20
    assert peak < 8 * 2**20
    first, note = result.split("\n")
    assert first == "     1\t" + "x" * 2000 + (
        f" … [more than {files.MAX_LINE_SCAN} more bytes on this line not shown]")
    assert note == (f"[line 1 is longer than {files.MAX_LINE_SCAN} bytes, so read_file stops "
                    "there; search_content, or run_command with head -c or tail -c, can "
                    "look further]")


@pytest.mark.slow
def test_read_file_refuses_an_offset_beyond_a_line_too_long_to_read_past(tree):
    sparse_lines(tree.root / "huge.txt", 2**30, 2**30)
    with pytest.raises(ValueError, match=r"^offset 2 lies beyond line 1 of 'huge.txt', which "
                                         r"is longer than \d+ bytes; read_file cannot read "
                                         r"past it"):
        read(tree, path="huge.txt", offset=2)


@pytest.mark.slow
def test_read_file_stops_when_cancelled_inside_gigabytes_of_long_lines(tree):
    sparse_lines(tree.root / "long.txt", 8 * 2**20, 8 * 2**30)  # a thousand 8 MB lines
    cancelled = threading.Event()
    timer = threading.Timer(0.3, cancelled.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(nacelle.Cancelled, match="was cancelled"):
            tree.tools["read_file"].run({"path": "long.txt", "offset": 1000},
                                        nacelle.ToolContext(cancelled=cancelled))
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5


@pytest.mark.slow
def test_read_file_honours_the_call_deadline_inside_gigabytes_of_long_lines(tree):
    sparse_lines(tree.root / "long.txt", 8 * 2**20, 8 * 2**30)
    started = time.monotonic()
    with pytest.raises(nacelle.Cancelled, match="ran out of time"):
        tree.tools["read_file"].run({"path": "long.txt", "offset": 1000},
                                    nacelle.ToolContext(deadline=time.monotonic() + 0.3))
    assert time.monotonic() - started < 5


def test_read_file_stops_at_the_output_limit_and_says_where_to_read_on(tmp_path):
    (tmp_path / "f.txt").write_text("".join(f"{i:04d} " + "y" * 40 + "\n" for i in range(1000)))
    with LocalTools(tmp_path, max_output=500) as tools:
        result = tools.tools()[0].run({"path": "f.txt"}, ctx())
    lines = result.splitlines()
    assert len(result) < 700
    assert lines[-1] == ("[output limit of 500 characters reached after line 9; call "
                         "read_file with offset=10 to read on]")
    assert lines[-2].startswith("     9\t0008 ")


def test_read_file_describes_binary_files_instead_of_dumping_them(tree):
    (tree.root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    assert read(tree, path="img.png") == (
        "'img.png' is a binary file (116 bytes, PNG image); its content is not shown")


def test_read_file_replaces_invalid_utf8_rather_than_failing(tree):
    (tree.root / "latin.txt").write_bytes(b"caf\xe9\n")
    assert read(tree, path="latin.txt") == "     1\tcaf\ufffd"


def test_read_file_refuses_a_socket_without_opening_it(tree):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tree.root / "sock"))
        with pytest.raises(PathRefused, match="it is a socket; only regular files"):
            read(tree, path="sock")
    finally:
        sock.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_read_file_refuses_a_device_file(tree):
    os.mknod(tree.root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(PathRefused, match="it is a character device"):
        read(tree, path="null")


def test_read_file_reports_missing_files_and_directories_clearly(tree):
    (tree.root / "d").mkdir()
    with pytest.raises(PathError, match=r"^'nope.txt': no such file$"):
        read(tree, path="nope.txt")
    with pytest.raises(PathError, match=r"^'d' is a directory, not a file$"):
        read(tree, path="d")
    with pytest.raises(PathError, match=r"^'no/such.txt': directory 'no' does not exist$"):
        read(tree, path="no/such.txt")
    (tree.root / "plain").write_text("x")
    with pytest.raises(PathError, match="'plain' is a regular file, not a directory"):
        read(tree, path="plain/x.txt")


# -- write_file --------------------------------------------------------------------


def test_write_file_creates_parents_and_reports_what_it_did(tree):
    write = tree.tools["write_file"]
    assert write.run({"path": "x/y/z.txt", "content": "héllo\n"}, ctx()) == (
        "wrote 7 bytes to x/y/z.txt (new file)")
    assert (tree.root / "x" / "y" / "z.txt").read_text() == "héllo\n"
    assert write.run({"path": "x/y/z.txt", "content": ""}, ctx()) == (
        "wrote 0 bytes to x/y/z.txt (replaced)")
    assert (tree.root / "x" / "y" / "z.txt").read_bytes() == b""


def test_write_file_keeps_the_permission_bits_of_the_file_it_replaces(tree):
    script = tree.root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    tree.tools["write_file"].run({"path": "run.sh", "content": "#!/bin/sh\necho\n"}, ctx())
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_write_file_refuses_directories_and_fifos(tree):
    (tree.root / "d").mkdir()
    os.mkfifo(tree.root / "p")
    write = tree.tools["write_file"]
    with pytest.raises(PathError, match="'d' is a directory; write_file writes files"):
        write.run({"path": "d", "content": "x"}, ctx())
    with pytest.raises(PathRefused, match="it is a FIFO"):
        write.run({"path": "p", "content": "x"}, ctx())
    assert stat.S_ISFIFO((tree.root / "p").lstat().st_mode)


@pytest.mark.parametrize("depth", [257, 3000])
def test_write_file_refuses_an_absurdly_deep_path_before_creating_any_directory(tree, depth):
    before = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with pytest.raises(PathRefused, match=r"^refused 'a/a/a/.*': it is more than 256 "
                                          r"directories deep"):
        tree.tools["write_file"].run({"path": "a/" * depth + "f.txt", "content": "x"}, ctx())
    assert os.listdir(tree.root) == []
    if before is not None:
        assert sorted(os.listdir("/proc/self/fd")) == before


def test_write_file_creates_a_path_just_within_the_depth_limit(tree):
    path = "d/" * 255 + "f.txt"
    assert tree.tools["write_file"].run({"path": path, "content": "x"}, ctx()) == (
        f"wrote 1 bytes to {path} (new file)")
    assert read(tree, path=path) == "     1\tx"


def test_write_file_refuses_text_that_cannot_be_utf8(tree):
    with pytest.raises(ValueError, match="content cannot be written as UTF-8"):
        tree.tools["write_file"].run({"path": "s.txt", "content": "a\ud800b"}, ctx())
    assert not (tree.root / "s.txt").exists()


def test_write_file_replaces_a_hard_link_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text(CANARY)
    root = tmp_path / "root"
    root.mkdir()
    os.link(outside, root / "hard")
    with LocalTools(root) as tools:
        tools.tools()[1].run({"path": "hard", "content": "new"}, ctx())
    assert outside.read_text() == CANARY
    assert (root / "hard").read_text() == "new"


def test_a_failing_write_leaves_the_old_file_whole_and_no_temporary(tree, monkeypatch):
    target = tree.root / "data.txt"
    target.write_text("original content\n")

    def disk_full(fd, data):
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(confine, "_write_all", disk_full)
    with pytest.raises(PathError, match=r"^'data.txt': no space left on device$"):
        tree.tools["write_file"].run({"path": "data.txt", "content": "z" * 10000}, ctx())
    with pytest.raises(PathError, match="no space left on device"):
        tree.tools["edit_file"].run(
            {"path": "data.txt", "old_text": "original", "new_text": "changed"}, ctx())
    assert target.read_text() == "original content\n"
    assert sorted(os.listdir(tree.root)) == ["data.txt"]


@pytest.mark.slow
def test_a_process_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    (tmp_path / "data.txt").write_text("original content\n")
    code = (
        "import os, signal, sys\n"
        "from nacelle.toolsets import LocalTools, confine\n"
        "from nacelle import ToolContext\n"
        "def die(fd, data):\n"
        "    os.write(fd, data[:100])\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "confine._write_all = die\n"
        "tools = LocalTools(sys.argv[1])\n"
        "tools.tools()[1].run({'path': 'data.txt', 'content': 'z' * 100000}, ToolContext())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=str(PROJECT),
                          capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert (tmp_path / "data.txt").read_text() == "original content\n"
    leftovers = [n for n in os.listdir(tmp_path) if n != "data.txt"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".data.txt.")
    assert (tmp_path / leftovers[0]).read_bytes() == b"z" * 100


# -- edit_file ---------------------------------------------------------------------


def edit(tree, path, old, new):
    return tree.tools["edit_file"].run({"path": path, "old_text": old, "new_text": new}, ctx())


def test_edit_file_replaces_text_that_occurs_exactly_once(tree):
    (tree.root / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    assert edit(tree, "m.py", "b = 2", "b = 20") == "edited m.py: replaced 1 match at line 2"
    assert (tree.root / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"


def test_edit_file_refuses_text_that_is_not_found_and_says_to_read_again(tree):
    (tree.root / "m.py").write_text("a = 1\n")
    with pytest.raises(ValueError, match=r"^old_text not found in 'm.py'; read the file again"):
        edit(tree, "m.py", "a = 2", "a = 3")
    assert (tree.root / "m.py").read_text() == "a = 1\n"


def test_edit_file_refuses_several_matches_and_asks_for_more_context(tree):
    (tree.root / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(ValueError, match=r"^old_text has 3 matches in 'm.py'; include more "
                                         r"surrounding context"):
        edit(tree, "m.py", "x = 1", "x = 2")
    assert (tree.root / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_file_matches_lf_text_in_a_crlf_file_and_keeps_crlf(tree):
    (tree.root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    assert edit(tree, "w.txt", "one\ntwo", "1\n2") == "edited w.txt: replaced 1 match at line 1"
    assert (tree.root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


@pytest.mark.parametrize("old, new, message", [
    ("", "x", "old_text is empty; to create or overwrite a file use write_file"),
    ("same", "same", "old_text and new_text are the same"),
])
def test_edit_file_refuses_pointless_edits(tree, old, new, message):
    (tree.root / "f.txt").write_text("same\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        edit(tree, "f.txt", old, new)


def test_edit_file_refuses_binary_and_non_utf8_files_untouched(tree):
    (tree.root / "b.bin").write_bytes(b"ab\x00cd")
    (tree.root / "l.txt").write_bytes(b"caf\xe9 ab\n")
    with pytest.raises(ValueError, match="is a binary file.*edit_file edits text files only"):
        edit(tree, "b.bin", "ab", "xy")
    with pytest.raises(ValueError, match=r"'l.txt' is not valid UTF-8 \(byte 3\)"):
        edit(tree, "l.txt", "ab", "xy")
    assert (tree.root / "b.bin").read_bytes() == b"ab\x00cd"
    assert (tree.root / "l.txt").read_bytes() == b"caf\xe9 ab\n"


def test_edit_file_keeps_the_permission_bits(tree):
    script = tree.root / "s.sh"
    script.write_text("echo a\n")
    script.chmod(0o755)
    edit(tree, "s.sh", "echo a", "echo b")
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


# -- LocalTools --------------------------------------------------------------------


def test_tools_are_the_six_file_tools_and_run_command_only_when_allowed(tmp_path):
    with LocalTools(tmp_path) as plain, LocalTools(tmp_path, allow_bash=True) as bash:
        assert [t.name for t in plain.tools()] == [
            "read_file", "write_file", "edit_file", "list_directory", "find_files",
            "search_content"]
        assert [t.name for t in bash.tools()][-1] == "run_command"
        assert len(bash.tools()) == 7
        assert [t.name for t in bash.read_only()] == [
            "read_file", "list_directory", "find_files", "search_content"]


def test_writers_and_commands_are_exclusive_and_readers_read_only(tmp_path):
    with LocalTools(tmp_path, allow_bash=True) as tools:
        flags = {t.name: (t.exclusive, t.read_only) for t in tools.tools()}
    assert flags == {
        "read_file": (False, True), "list_directory": (False, True),
        "find_files": (False, True), "search_content": (False, True),
        "write_file": (True, False), "edit_file": (True, False),
        "run_command": (True, False)}


def test_the_tools_declare_what_they_touch_in_mcps_vocabulary(tmp_path):
    with LocalTools(tmp_path, allow_bash=True) as tools:
        facts = {t.name: (t.read_only, t.destructive, t.idempotent, t.open_world)
                 for t in tools.tools()}
    reader = (True, False, True, False)
    assert facts == {
        "read_file": reader, "list_directory": reader, "find_files": reader,
        "search_content": reader,
        "write_file": (False, True, True, False), "edit_file": (False, True, False, False),
        "run_command": (False, True, False, True)}


def _property_names(schema):
    if isinstance(schema, dict):
        for key, value in schema.get("properties", {}).items():
            yield key
            yield from _property_names(value)
        for value in schema.values():
            if isinstance(value, (dict, list)):
                yield from _property_names(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _property_names(value)


def test_no_tool_lets_the_model_choose_its_root_or_working_directory(tmp_path):
    forbidden = re.compile(r"(cwd|dir|directory|root|base|workdir|chdir)", re.I)
    with LocalTools(tmp_path, allow_bash=True) as tools:
        for tool in tools.tools():
            assert isinstance(tool, nacelle.Tool)
            assert tool.schema["type"] == "object"
            assert tool.schema["additionalProperties"] is False
            names = list(_property_names(tool.schema))
            assert names, tool.name
            assert not [n for n in names if forbidden.search(n)], (tool.name, names)
            assert tool.description and len(tool.description) > 80


def test_tools_never_mutate_the_input_they_are_given(tree):
    (tree.root / "f.txt").write_text("a\n")
    calls = [("read_file", {"path": "f.txt"}),
             ("edit_file", {"path": "f.txt", "old_text": "a", "new_text": "b"}),
             ("write_file", {"path": "g.txt", "content": "x"}),
             ("list_directory", {}), ("find_files", {"pattern": "*"}),
             ("search_content", {"pattern": "b", "glob": None})]
    for name, input in calls:
        before = copy.deepcopy(input)
        tree.tools[name].run(input, ctx())
        assert input == before


@pytest.mark.parametrize("kwargs, message", [
    ({"command_timeout": 0}, "command_timeout must be a positive number"),
    ({"command_timeout": True}, "command_timeout must be a positive number"),
    ({"max_output": 10}, "max_output must be a whole number of at least 100"),
    ({"max_output": 500.0}, "max_output must be a whole number of at least 100"),
])
def test_local_tools_refuses_bad_options(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LocalTools(tmp_path, **kwargs)


def test_local_tools_refuses_a_root_that_is_missing_or_not_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        LocalTools(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        LocalTools(tmp_path / "file")


def test_calls_after_close_fail_clearly(tmp_path):
    (tmp_path / "f.txt").write_text("a\n")
    with LocalTools(tmp_path) as tools:
        reader = tools.tools()[0]
        assert reader.run({"path": "f.txt"}, ctx()) == "     1\ta"
    with pytest.raises(ValueError, match="the local tools for .* were closed"):
        reader.run({"path": "f.txt"}, ctx())
    assert "closed" in repr(tools)


def test_local_tools_pickle_and_the_copy_reopens_the_root_by_path(tmp_path):
    (tmp_path / "f.txt").write_text("a\n")
    original = LocalTools(tmp_path, allow_bash=True, max_output=1234)
    copied = pickle.loads(pickle.dumps(original))
    original.close()
    assert copied.max_output == 1234 and copied.allow_bash
    assert copied.tools()[0].run({"path": "f.txt"}, ctx()) == "     1\ta"
    # The copy's tools share the copy's root, as the original's shared the original's.
    assert {id(t.root) for t in copied.tools()} == {id(copied.root)}
    copied.close()


def test_the_root_is_fixed_when_the_tools_are_made(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "f.txt").write_text("one\n")
    with LocalTools(tmp_path / "one") as tools:
        (tmp_path / "one").rename(tmp_path / "moved")
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "f.txt").write_text("impostor\n")
        # The descriptor still points at the directory the host chose.
        assert tools.tools()[0].run({"path": "f.txt"}, ctx()) == "     1\tone"


@pytest.mark.slow
def test_an_agent_runs_the_local_tools_end_to_end_and_pickles(hostile):
    from nacelle.testing import ScriptedBackend

    calls = nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c1", "write_file", '{"path": "out/plan.md", "content": "step 1\\n"}'),
        nacelle.ToolCall("c2", "edit_file",
                         '{"path": "out/plan.md", "old_text": "1", "new_text": "one"}'),
        nacelle.ToolCall("c3", "read_file", '{"path": "file_link"}'),
    ))
    # Readers run alongside the turn's writers, so reading back takes another turn.
    read_back = nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.ToolCall("c4", "read_file", '{"path": "out/plan.md"}'),))
    backend = ScriptedBackend([calls, read_back, "done"])
    with LocalTools(hostile.root) as tools:
        agent = nacelle.Agent(backend, "You edit files.", tools=tools.tools())
        results = {e.tool.id: e.tool for e in agent.stream([nacelle.user_text("go")])
                   if e.kind is nacelle.Kind.TOOL_RESULT}
        copy = pickle.loads(pickle.dumps(agent))
    assert results["c1"].error is None and results["c1"].result == (
        "wrote 7 bytes to out/plan.md (new file)")
    assert results["c2"].result == "edited out/plan.md: replaced 1 match at line 1"
    assert results["c3"].error.startswith("refused 'file_link': symlink 'file_link'")
    assert results["c4"].result == "     1\tstep one"
    assert (hostile.root / "out" / "plan.md").read_text() == "step one\n"
    assert [t.name for t in copy.tools][:3] == ["read_file", "write_file", "edit_file"]
    backend.assert_consumed()
