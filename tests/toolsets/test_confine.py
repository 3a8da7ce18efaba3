"""The confined walk itself: what ``Root.locate`` returns, the descriptor's life,
pickling, and the atomic replace — on real trees with real symlinks."""

import errno
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import nacelle
from nacelle.errors import ConfigError
from nacelle.toolsets import confine
from nacelle.toolsets.confine import ConfinedTool, PathError, PathRefused, Root, replace_file

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.txt").write_text("f")
    r = Root(tmp_path)
    yield r
    r.close()


def located(root, path, **kwargs):
    """Where ``path`` leads, as (directory's real path, name)."""
    with root.entry(path, **kwargs) as (dir_fd, name):
        return os.readlink(f"/proc/self/fd/{dir_fd}"), name


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


@needs_proc
@pytest.mark.parametrize("path, where, name", [
    ("a/b/f.txt", "a/b", "f.txt"),
    ("a/b/missing.txt", "a/b", "missing.txt"),
    (".", "", ""),
    ("", "", ""),
    ("a/..", "", ""),
    ("a/b/", "a", "b"),
    ("a//b/./f.txt", "a/b", "f.txt"),
])
def test_locate_returns_the_real_directory_and_final_name(root, path, where, name):
    real, got = located(root, path)
    assert real == os.path.join(root.path, where).rstrip("/")
    assert got == name


@needs_proc
def test_symlinks_are_resolved_inside_the_walk_and_dot_dot_is_physical(root):
    os.symlink("a/b", os.path.join(root.path, "lb"))
    # lb/.. is the real parent of a/b (that is, a), not the root: as the kernel does it.
    assert located(root, "lb/..") == (os.path.join(root.path, "a"), "")
    assert located(root, "lb/f.txt") == (os.path.join(root.path, "a", "b"), "f.txt")


def test_a_chain_of_forty_symlinks_resolves_and_forty_one_is_refused(root):
    os.symlink("a/b/f.txt", os.path.join(root.path, "l0"))
    for i in range(1, 41):
        os.symlink(f"l{i - 1}", os.path.join(root.path, f"l{i}"))
    fd, _ = root.open_regular("l39")
    os.close(fd)
    with pytest.raises(PathRefused, match="refused 'l40': too many levels of symlinks"):
        root.open_regular("l40")


def test_make_parents_creates_directories_under_the_root_only(root):
    with root.entry("x/y/z.txt", make_parents=True) as (_, name):
        assert name == "z.txt"
    assert os.path.isdir(os.path.join(root.path, "x", "y"))
    with pytest.raises(PathError, match="'p/q.txt': directory 'p' does not exist"):
        with root.entry("p/q.txt"):
            pass


def test_refusals_are_nacelle_errors(root):
    with pytest.raises(nacelle.NacelleError):
        root.open_regular("../x")
    assert issubclass(PathRefused, PathError)


def test_relative_translates_absolute_paths_under_the_root_only(root):
    assert root.relative(root.path) == "."
    assert root.relative(root.path + "/a/b") == "a/b"
    assert root.relative(root.path + "x/a") is None  # a sibling sharing a prefix
    assert root.relative("/etc") is None
    assert root.relative("a/b") == "a/b"


def test_a_root_given_through_a_symlink_accepts_both_spellings(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    r = Root(tmp_path / "alias")
    try:
        assert r.path == os.path.realpath(tmp_path / "real")
        for spelling in (tmp_path / "alias" / "f", tmp_path / "real" / "f"):
            fd, _ = r.open_regular(str(spelling))
            os.close(fd)
    finally:
        r.close()


def test_close_waits_for_the_last_user_before_closing_the_descriptor(root):
    with root.descriptor() as fd:
        root.close()
        os.fstat(fd)  # still open: a call in flight keeps it
    with pytest.raises(OSError):
        os.fstat(fd)
    with pytest.raises(ValueError, match="were closed"):
        with root.descriptor():
            pass


def test_a_pickled_root_opens_its_own_descriptor_lazily(root):
    copy = pickle.loads(pickle.dumps(root))
    assert copy._fd is None
    fd, _ = copy.open_regular("a/b/f.txt")
    os.close(fd)
    assert copy._fd is not None and copy._fd != root._fd
    copy.close()


def test_platforms_without_dir_fd_are_refused_clearly(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "supports_dir_fd", set())
    with pytest.raises(ConfigError, match="local tools need directory descriptors"):
        Root(tmp_path)


def test_replace_file_replaces_a_symlink_rather_than_following_it(tmp_path):
    (tmp_path / "target").write_text("keep")
    os.symlink(tmp_path / "target", tmp_path / "name")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        replace_file(fd, "name", b"new", 0o640)
    finally:
        os.close(fd)
    assert (tmp_path / "target").read_text() == "keep"
    assert not os.path.islink(tmp_path / "name")
    assert (tmp_path / "name").read_bytes() == b"new"
    assert stat.S_IMODE((tmp_path / "name").stat().st_mode) == 0o640


def test_replace_file_cleans_up_its_temporary_when_the_rename_fails(tmp_path):
    (tmp_path / "d").mkdir()  # renaming a file over a directory fails
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError):
            replace_file(fd, "d", b"x")
    finally:
        os.close(fd)
    assert os.listdir(tmp_path) == ["d"]


def test_a_stray_os_error_becomes_a_sentence_about_the_path(root):
    class Broken(ConfinedTool):
        name = "broken"

        def _run(self, input, ctx):
            raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PathError, match=r"^'secret.txt': permission denied$"):
        Broken(root, max_output=1000).run({"path": "secret.txt"}, None)


def test_kind_of_names_every_file_type():
    assert confine.kind_of(stat.S_IFIFO) == "FIFO (named pipe)"
    assert confine.kind_of(stat.S_IFSOCK) == "socket"
    assert confine.kind_of(stat.S_IFBLK) == "block device"


# -- deep paths: a bounded number of descriptors, a depth limit ----------------------------

def make_chain(base, depth):
    """``base/a/a/.../a`` ``depth`` levels deep with a file ``f`` at the bottom, made
    through descriptors since its path is longer than the system's PATH_MAX."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            sub = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        out = os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"bottom\n")
        os.close(out)
    finally:
        os.close(fd)


def remove_chain(base):
    """Remove a chain made by :func:`make_chain` one level at a time (``shutil.rmtree``
    recurses once per level and would hit Python's recursion limit)."""
    top = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while "a" in os.listdir(top):
            level = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
            try:
                for name in os.listdir(level):
                    if name == "a":
                        os.rename("a", "next", src_dir_fd=level, dst_dir_fd=top)
                    else:
                        os.unlink(name, dir_fd=level)
            finally:
                os.close(level)
            os.rmdir("a", dir_fd=top)
            if "next" in os.listdir(top):
                os.rename("next", "a", src_dir_fd=top, dst_dir_fd=top)
    finally:
        os.close(top)


@pytest.fixture
def chain(tmp_path):
    def make(depth):
        make_chain(tmp_path, depth)
        return tmp_path

    yield make
    remove_chain(tmp_path)


def open_fds():
    return sorted(os.listdir("/proc/self/fd"))


@pytest.mark.slow
@needs_proc
def test_a_three_thousand_component_path_is_refused_and_leaves_no_descriptor_open(chain):
    root = Root(chain(3000))
    try:
        before = open_fds()
        with pytest.raises(PathRefused, match=r"more than 256 directories deep"):
            root.open_regular("a/" * 3000 + "f")
        with pytest.raises(PathRefused, match=r"more than 256 directories deep"):
            root.open_regular("a/" * 3000)
        assert open_fds() == before
    finally:
        root.close()


@pytest.mark.slow
@needs_proc
def test_a_path_at_the_depth_limit_opens_and_leaves_no_descriptor_open(chain):
    root = Root(chain(confine.MAX_DEPTH))
    try:
        before = open_fds()
        fd, _ = root.open_regular("a/" * confine.MAX_DEPTH + "f")
        assert os.read(fd, 100) == b"bottom\n"
        os.close(fd)
        with pytest.raises(PathRefused, match=r"more than 256 directories deep"):
            root.open_regular("a/" * (confine.MAX_DEPTH + 1) + "f")
        assert open_fds() == before
    finally:
        root.close()


DEEP_WALK = """
import os, resource, sys
from nacelle.toolsets.confine import Root
root = Root(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 24, hard))
for path in sys.argv[2:]:
    fd, _ = root.open_regular(path)
    sys.stdout.write(os.read(fd, 100).decode())
    os.close(fd)
"""


@pytest.mark.slow
@needs_proc
def test_a_deep_walk_holds_a_bounded_number_of_descriptors(chain, tmp_path):
    base = chain(250)
    (tmp_path / "a" / "top.txt").write_text("top\n")
    there_and_back = "a/" * 250 + "../" * 249 + "top.txt"
    result = subprocess.run(
        [sys.executable, "-c", DEEP_WALK, str(base), "a/" * 250 + "f", there_and_back],
        cwd=str(PROJECT), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "bottom\ntop\n"


@needs_proc
def test_dot_dot_past_the_descriptors_kept_open_still_reaches_the_real_parent(chain, tmp_path):
    root = Root(chain(40))
    try:
        os.symlink("a/" * 39 + "a", tmp_path / "deep")  # a link into the bottom
        (tmp_path / "a" / "a" / "mid.txt").write_text("mid")
        path = "deep/" + "../" * 38 + "mid.txt"
        assert located(root, path) == (os.path.join(root.path, "a", "a"), "mid.txt")
        with pytest.raises(PathRefused, match="'..' would leave the root"):
            root.open_regular("deep/" + "../" * 41 + "x")
    finally:
        root.close()
