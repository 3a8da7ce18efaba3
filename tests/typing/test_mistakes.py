"""The public API is typed where users make mistakes: a checker must catch each one.

``mistakes.py`` beside this file holds one deliberate mistake a marked line
(``# E: <what> [code]``); mypy --strict, for the oldest Python the package supports,
must report that error code on every marked line and nothing anywhere else, so a
name that silently became ``Any`` (or a check that started failing a correct line)
fails here. mypy is a test extra (pinned in setup.cfg to a release that still checks
a 3.9 target); without it the test is skipped.
"""

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MARK = re.compile(r"#\s*E:\s*(?P<what>.*?)\s*\[(?P<code>[a-z-]+)\]\s*$")
REPORTED = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")


def strict_mypy(paths, cache_dir):
    """mypy --strict's errors for ``paths``, as ``{(file name, line): [codes]}``."""
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install .[test])")
    # nacelle's own modules are read but not reported on, as for an installed package
    # (the package is checked on its own, with its stubs, by mypy --config-file setup.cfg).
    config = cache_dir.parent / "mypy.ini"
    config.write_text("[mypy]\n[mypy-nacelle.*]\nfollow_imports = silent\n", encoding="utf-8")
    stdout, stderr, status = api.run([
        "--strict", "--python-version", "3.9", "--config-file", str(config),
        "--cache-dir", str(cache_dir), "--show-error-codes", "--no-pretty",
        "--hide-error-context", "--no-error-summary", *map(str, paths)])
    assert status in (0, 1), stderr or stdout
    found = {}
    for line in stdout.splitlines():
        match = REPORTED.match(line)
        if match:
            key = (Path(match["path"]).name, int(match["line"]))
            found.setdefault(key, []).append(match["code"] or match["message"])
    return found, stdout


@pytest.mark.slow
def test_the_checker_reports_every_deliberate_mistake_and_nothing_else(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # mypy finds this nacelle, not an installed one
    source = (HERE / "mistakes.py").read_text(encoding="utf-8").splitlines()
    expected = {("mistakes.py", n): m["code"] for n, text in enumerate(source, 1)
                for m in [MARK.search(text)] if m}
    assert len(expected) >= 30  # a marker the pattern stopped reading would pass unseen
    found, output = strict_mypy([HERE / "mistakes.py"], tmp_path / "cache")
    missed = {line: code for (_, line), code in expected.items()
              if code not in found.get(("mistakes.py", line), [])}
    unexpected = {key: codes for key, codes in found.items() if key not in expected}
    assert not missed and not unexpected, (
        f"not reported (line: code): {missed}\nreported where no mistake is marked: "
        f"{unexpected}\n{output}")


@pytest.mark.parametrize("package", ["nacelle.testing", "nacelle.toolsets"])
def test_every_name_a_package_loads_on_first_use_is_imported_for_a_checker(package):
    # A name found only by a module __getattr__ is Any to a checker, and so is
    # everything made with it: each must be imported under TYPE_CHECKING as well.
    import ast
    import importlib

    module = importlib.import_module(package)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    seen = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom):
                    seen.update({a.asname: item.module for a in item.names if a.asname})
    assert seen == module._HOMES
