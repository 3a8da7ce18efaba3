"""``nacelle._files``: the one atomic, private writer and the lock that every file
nacelle keeps (sessions, checkpoints, OAuth tokens, cassettes, the model cache) goes
through."""

import os
import stat
import threading
import time

import pytest

from nacelle import _files
from nacelle._files import file_lock, private_directory, write_atomic


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_written_file_is_0600_and_a_made_directory_0700_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        folder = private_directory(str(tmp_path / "a" / "b"))
        write_atomic(os.path.join(folder, "f.json"), b"{}")
    finally:
        os.umask(old)
    assert mode(folder) == 0o700
    assert mode(os.path.join(folder, "f.json")) == 0o600


def test_an_existing_directory_keeps_its_permissions(tmp_path):
    os.chmod(tmp_path, 0o755)
    private_directory(str(tmp_path))
    assert mode(tmp_path) == 0o755


def test_a_file_asked_for_with_another_mode_is_never_seen_private_first(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def replace(source, target):
        seen.append(mode(source))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    write_atomic(str(tmp_path / "cassette.json"), b"[]", mode=0o644)
    assert seen == [0o644] and mode(tmp_path / "cassette.json") == 0o644


def test_a_write_that_fails_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    write_atomic(str(path), b"old")

    def fail(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        write_atomic(str(path), b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_a_rewrite_replaces_the_whole_file_and_syncs_the_directory(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(_files, "fsync_directory", synced.append)
    path = tmp_path / "f.json"
    write_atomic(str(path), b"a much longer first version")
    write_atomic(str(path), b"short")
    assert path.read_bytes() == b"short"
    assert synced == [str(tmp_path), str(tmp_path)]


def test_the_lock_makes_writers_take_turns(tmp_path):
    lock = str(tmp_path / ".lock")
    inside = []

    def hold(name):
        with file_lock(lock):
            inside.append(name)
            time.sleep(0.05)
            inside.append(name)

    threads = [threading.Thread(target=hold, args=(n,)) for n in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(inside[i] == inside[i + 1] for i in range(0, len(inside), 2))
    assert mode(lock) == 0o600
