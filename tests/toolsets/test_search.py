"""list_directory, find_files and search_content on real trees; glob translation."""

import os
import re
import threading
import time

import pytest

import nacelle
from nacelle.toolsets import LocalTools
from nacelle.toolsets import search
from nacelle.toolsets.confine import PathError
from nacelle.toolsets.search import glob_regex


def ctx():
    return nacelle.ToolContext(call_id="call_1", name="test")


@pytest.fixture
def project(tmp_path):
    files = {
        "README.md": "# Project\nSee src.\n",
        "setup.cfg": "[metadata]\nname = demo\n",
        "src/app.py": "import os\n\ndef main():\n    return 'TODO: write'\n",
        "src/util/strings.py": "def strip():\n    pass  # TODO later\n",
        "src/util/data.json": '{"todo": true}\n',
        "docs/guide.md": "Guide\nTODO: more\n",
        ".hidden.py": "# TODO hidden\n",
        ".git/config": "[core]\nTODO = inside git\n",
        "bin/blob.bin": "TODO\x00binary",
    }
    for name, body in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    with LocalTools(tmp_path) as tools:
        yield {t.name: t for t in tools.tools()}, tmp_path


def run(tools, name, **input):
    return tools[0][name].run(input, ctx())


@pytest.mark.parametrize("glob, path, matches", [
    ("*.py", "a.py", True),
    ("*.py", "src/a.py", False),
    ("**/*.py", "a.py", True),
    ("**/*.py", "src/deep/a.py", True),
    ("src/**", "src/a/b", True),
    ("src/**", "src", False),
    ("src/**/test_*.py", "src/test_x.py", True),
    ("src/**/test_*.py", "src/a/b/test_x.py", True),
    ("src/**/test_*.py", "lib/test_x.py", False),
    ("?.txt", "a.txt", True),
    ("?.txt", "ab.txt", False),
    ("[ab].txt", "b.txt", True),
    ("[!ab].txt", "c.txt", True),
    ("[!ab].txt", "a.txt", False),
    ("*.{ts,tsx}", "x.tsx", True),
    ("*.{ts,tsx}", "x.js", False),
    ("a+b(1).txt", "a+b(1).txt", True),
    ("[unclosed.txt", "[unclosed.txt", True),
    ("*", ".hidden", True),
])
def test_glob_regex_follows_globstar_rules(glob, path, matches):
    assert bool(glob_regex(glob.split("/")).fullmatch(path)) is matches


def test_list_directory_shows_kinds_sizes_and_link_targets(project):
    root = project[1]
    os.symlink("src/app.py", root / "app_link")
    os.mkfifo(root / "pipe")
    assert run(project, "list_directory") == "\n".join([
        ".git/", ".hidden.py (14 bytes)", "README.md (19 bytes)", "app_link -> src/app.py",
        "bin/", "docs/", "pipe [FIFO (named pipe)]", "setup.cfg (23 bytes)", "src/"])
    assert run(project, "list_directory", path="src/util") == (
        "data.json (15 bytes)\nstrings.py (36 bytes)")


def test_list_directory_says_when_a_directory_is_empty_or_not_one(project):
    (project[1] / "empty").mkdir()
    assert run(project, "list_directory", path="empty") == "(empty is empty)"
    with pytest.raises(PathError, match="'README.md' is a regular file, not a directory"):
        run(project, "list_directory", path="README.md")
    with pytest.raises(PathError, match="'nope': no such directory"):
        run(project, "list_directory", path="nope")


def test_list_directory_caps_entries_and_says_how_many_are_left(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_ENTRIES", 5)
    for i in range(12):
        (tmp_path / f"f{i:02d}").write_text("")
    with LocalTools(tmp_path) as tools:
        result = tools.tools()[3].run({}, ctx())
    assert result.splitlines() == [f"f{i:02d} (0 bytes)" for i in range(5)] + [
        "[7 more entries not shown; 12 in all; use find_files with a pattern to narrow]"]


def test_find_files_matches_globs_in_path_order(project):
    assert run(project, "find_files", pattern="**/*.py") == (
        ".hidden.py\nsrc/app.py\nsrc/util/strings.py")
    assert run(project, "find_files", pattern="*.md") == "README.md"
    assert run(project, "find_files", pattern="src/*") == "src/app.py\nsrc/util/"
    assert run(project, "find_files", pattern="./src/**/*.json") == "src/util/data.json"


def test_find_files_skips_vcs_metadata_unless_asked_for_it(project):
    assert ".git" not in run(project, "find_files", pattern="**/config*")
    assert run(project, "find_files", pattern=".git/*") == ".git/config"


def test_find_files_says_when_nothing_matches(project):
    assert run(project, "find_files", pattern="**/*.rs") == "no matches for '**/*.rs'"
    assert run(project, "find_files", pattern="nope/*.py") == (
        "no matches for 'nope/*.py' ('nope' does not exist or is not a directory)")


def test_find_files_caps_matches_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_ENTRIES", 3)
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text("")
    with LocalTools(tmp_path) as tools:
        result = tools.tools()[4].run({"pattern": "*.txt"}, ctx())
    assert result.splitlines() == ["f0.txt", "f1.txt", "f2.txt", "[only the first 3 matches "
                                   "are shown; there are more: narrow the pattern]"]


def test_find_files_stops_a_huge_walk_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_VISITED", 10)
    for i in range(20):
        (tmp_path / f"f{i:02d}").write_text("")
    with LocalTools(tmp_path) as tools:
        result = tools.tools()[4].run({"pattern": "**/f1*"}, ctx())
    assert result.splitlines()[-1] == (
        "[the search stopped after examining 10 entries; narrow the pattern to a subdirectory]")


@pytest.mark.parametrize("pattern, message", [
    ("", "pattern must be a non-empty glob pattern"),
    (".", "names the root itself"),
    ("a\0b", "the pattern contains a NUL character"),
])
def test_find_files_refuses_bad_patterns(project, pattern, message):
    with pytest.raises(ValueError if "NUL" not in message else PathError, match=message):
        run(project, "find_files", pattern=pattern)


def test_search_content_finds_lines_and_skips_binary_and_vcs_files(project):
    assert run(project, "search_content", pattern="TODO") == "\n".join([
        ".hidden.py:1: # TODO hidden",
        "docs/guide.md:2: TODO: more",
        "src/app.py:4:     return 'TODO: write'",
        "src/util/strings.py:2:     pass  # TODO later",
        "[skipped: 1 binary]"])


def test_search_content_glob_matches_names_at_any_depth_or_paths_with_a_slash(project):
    assert run(project, "search_content", pattern="(?i)todo", glob="*.json") == (
        'src/util/data.json:1: {"todo": true}')
    assert run(project, "search_content", pattern="TODO", glob="src/*.py") == (
        "src/app.py:4:     return 'TODO: write'")
    assert run(project, "search_content", pattern="TODO", glob="src/**/*.py") == (
        "src/app.py:4:     return 'TODO: write'\nsrc/util/strings.py:2:     pass  # TODO later")


def test_search_content_says_when_nothing_matches(project):
    assert run(project, "search_content", pattern="xyzzy", glob="*.md") == (
        "no matches for 'xyzzy' in 2 files")


def test_search_content_refuses_an_invalid_regex(project):
    with pytest.raises(ValueError, match=re.escape("invalid regular expression 'a(b': "
                                                   "missing ), unterminated subpattern")):
        run(project, "search_content", pattern="a(b")


def test_search_content_caps_matches_and_cuts_long_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_MATCHES", 2)
    (tmp_path / "a.txt").write_text("hit " + "z" * 400 + "\nhit 2\nhit 3\n")
    with LocalTools(tmp_path) as tools:
        result = tools.tools()[5].run({"pattern": "hit"}, ctx())
    lines = result.splitlines()
    assert lines[0] == "a.txt:1: hit " + "z" * 296 + " …"
    assert lines[1:] == ["a.txt:2: hit 2", "[only the first 2 matching lines are shown; "
                         "there are more: narrow the pattern or the glob]"]


def test_search_content_skips_files_over_the_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "MAX_SEARCH_BYTES", 100)
    (tmp_path / "big.txt").write_text("needle\n" * 100)
    (tmp_path / "small.txt").write_text("needle\n")
    with LocalTools(tmp_path) as tools:
        result = tools.tools()[5].run({"pattern": "needle"}, ctx())
    assert result == "small.txt:1: needle\n[skipped: 1 larger than 100 bytes]"


def test_search_content_does_not_open_fifos(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "f.txt").write_text("needle\n")
    with LocalTools(tmp_path) as tools:
        assert tools.tools()[5].run({"pattern": "needle"}, ctx()) == "f.txt:1: needle"


def test_walks_check_for_cancellation(tmp_path):
    for i in range(1500):
        (tmp_path / f"f{i}").write_text("")
    context = ctx()
    context.cancelled.set()
    with LocalTools(tmp_path) as tools:
        with pytest.raises(nacelle.Cancelled):
            tools.tools()[4].run({"pattern": "**/*"}, context)


def test_search_and_find_results_stay_within_max_output_and_say_so(tmp_path):
    for i in range(100):
        (tmp_path / f"file_{i:03d}_with_a_long_name.txt").write_text("needle here\n")
    with LocalTools(tmp_path, max_output=1000) as tools:
        by_name = {t.name: t for t in tools.tools()}
        found = by_name["find_files"].run({"pattern": "*.txt"}, ctx())
        hits = by_name["search_content"].run({"pattern": "needle"}, ctx())
    assert len(found) <= 1000 and len(hits) <= 1000
    assert found.splitlines()[-1].startswith("[only the first ")
    assert found.splitlines()[-1].endswith(" matches are shown; there are more: narrow the pattern]")
    assert hits.splitlines()[-1].startswith("[only the first ")


# -- regular expressions run where they can be stopped -------------------------------------

CATASTROPHIC = "(a+)+$"  # tries every way to split a run of a's before failing at the b


def matcher_children():
    """Processes this test process started that are still running search's matcher."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] not in "ZX" and b"matcher" in cmdline:
            found.append(int(pid))
    return found


@pytest.fixture
def slow_tree(tmp_path):
    (tmp_path / "0-first.txt").write_text("aaa\nbbb\n")
    (tmp_path / "slow.txt").write_text("a" * 40 + "b\n")
    (tmp_path / "z-last.txt").write_text("aaaa\n")
    with LocalTools(tmp_path) as tools:
        yield {t.name: t for t in tools.tools()}["search_content"]


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")


@pytest.mark.slow
@needs_proc
def test_a_catastrophic_regex_is_stopped_at_its_time_bound_and_the_result_says_so(
        slow_tree, monkeypatch):
    monkeypatch.setattr(search, "MATCH_SECONDS", 0.5)
    started = time.monotonic()
    with pytest.raises(search.RegexTimedOut) as caught:
        slow_tree.run({"pattern": CATASTROPHIC}, ctx())
    assert time.monotonic() - started < 10
    assert str(caught.value) == (
        "the regular expression ran for more than 0.5 seconds on 'slow.txt' and the search "
        "was stopped there; it probably backtracks catastrophically (a repeated group "
        "inside a repetition, like (a+)+): simplify it or narrow the glob. Matches before "
        "it stopped:\n0-first.txt:1: aaa")
    assert isinstance(caught.value, nacelle.NacelleError)
    assert matcher_children() == []


@pytest.mark.slow
@needs_proc
def test_a_catastrophic_regex_is_cancellable(slow_tree):
    cancelled = threading.Event()
    timer = threading.Timer(0.3, cancelled.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(nacelle.Cancelled):
            slow_tree.run({"pattern": CATASTROPHIC},
                          nacelle.ToolContext(call_id="call_1", cancelled=cancelled))
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert matcher_children() == []


@pytest.mark.slow
@needs_proc
def test_a_catastrophic_regex_stops_at_the_call_deadline(slow_tree):
    started = time.monotonic()
    with pytest.raises(nacelle.Cancelled, match="ran out of time"):
        slow_tree.run({"pattern": CATASTROPHIC},
                      nacelle.ToolContext(call_id="call_1", deadline=time.monotonic() + 0.5))
    assert time.monotonic() - started < 10
    assert matcher_children() == []


@needs_proc
def test_the_matcher_does_not_outlive_an_ordinary_search(project):
    assert run(project, "search_content", pattern="TODO", glob="*.md") == (
        "docs/guide.md:2: TODO: more")
    assert matcher_children() == []


def test_a_pattern_that_is_not_valid_utf8_text_still_matches_what_it_names(tmp_path):
    (tmp_path / "f.txt").write_text("caf\u00e9 \U0001f600\n")
    with LocalTools(tmp_path) as tools:
        assert tools.tools()[5].run({"pattern": "\U0001f600|\ud800"}, ctx()) == (
            "f.txt:1: caf\u00e9 \U0001f600")


# -- globs match in time linear in pattern and path ----------------------------------------

@pytest.mark.parametrize("parts, path", [
    (["*a" * 12 + "*b"], "a" * 250),  # stars that a regex would try every placement of
    (["**"] * 30 + ["x"], "a/" * 200 + "y"),  # globstars that would do the same across dirs
    (["**", "*a*a*a*a*a*a*a*a*b", "**", "*a*a*a*a*a*a*c"], "/".join(["a" * 50] * 60)),
], ids=["stars", "globstars", "both"])
def test_a_glob_that_a_regex_would_backtrack_on_fails_to_match_quickly(parts, path):
    started = time.monotonic()
    assert not glob_regex(parts).fullmatch(path)
    assert time.monotonic() - started < 5


def test_find_files_with_a_backtracking_glob_answers_quickly(tmp_path):
    (tmp_path / ("a" * 250)).write_text("x")
    started = time.monotonic()
    with LocalTools(tmp_path) as tools:
        assert tools.tools()[4].run({"pattern": "*a" * 12 + "*b"}, ctx()) == (
            f"no matches for {'*a' * 12 + '*b'!r}")
        assert tools.tools()[5].run({"pattern": "x", "glob": "*a" * 12 + "*b"}, ctx()) == (
            "no matches for 'x' in 0 files")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("glob, path, matches", [
    ("**/**/*.py", "a.py", True),
    ("**/**/*.py", "x/y/a.py", True),
    ("a/**/**/b", "a/b", True),
    ("a/**/**", "a", False),
    ("**", "a/b/c", True),
    ("*.{ts,tsx}{,.map}", "x.tsx.map", True),
    ("*.{ts,tsx}{,.map}", "x.js.map", False),
    ("[a-c]?", "bz", True),
    ("[!a-c]?", "bz", False),
    ("[z-a]", "[z-a]", True),  # not a valid class: the bracket is literal
    ("a\nb", "a\nb", True),
    ("*", "a\nb", True),
])
def test_globs_keep_their_meaning(glob, path, matches):
    assert bool(glob_regex(glob.split("/")).fullmatch(path)) is matches


def test_a_glob_with_too_many_alternatives_is_refused(project):
    with pytest.raises(ValueError, match=r"has more than 256 \{\.\.\.\} alternatives"):
        run(project, "find_files", pattern="{a,b}" * 9)
