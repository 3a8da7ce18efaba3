"""The package's shape: the import arrows of DESIGN.md, no printing, small modules,
and a vendored copy that imports from a bare folder.

Layers: leaves (``errors``, ``sse``, ``bounded_json``, ``terminal_text``: standard
library only) ← core (every other top-level module that is not in the outer ring:
never ``requests``, never a backend, a tool set or the test doubles) ← outer ring
(``retry``, ``mcp/``, ``settings``, ``console``, ``cli/``, ``demo``, ``__main__``,
``backends/``, ``toolsets/``, ``testing/``). Backends never import each other, but for
OpenRouter, which is the Chat Completions dialect plus its extras and so imports
``chat_wire`` and ``chat_stream`` (never ``chat``, the backend). ``retry`` sits in the outer ring
(it wraps a backend) but is pure logic held to the core's rules, which is what lets
the package front re-export ``Retry``.
"""

import ast
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nacelle"

LEAVES = {"nacelle.errors", "nacelle.sse", "nacelle.bounded_json", "nacelle.terminal_text",
          "nacelle._files"}
OUTER_MODULES = {"nacelle.retry", "nacelle.settings", "nacelle.console",
                 "nacelle.demo", "nacelle.__main__"}
# Packages, and families of modules named by a common prefix (batch_progress, cli_script…).
OUTER_PACKAGES = ("nacelle.backends", "nacelle.toolsets", "nacelle.testing", "nacelle.serve",
                  "nacelle.cli", "nacelle.batch", "nacelle.report", "nacelle.otel", "nacelle._net")
PRINTERS = {"nacelle.console", "nacelle.__main__"}
PRINTING_PACKAGES = ("nacelle.cli",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(name: str) -> str:
    if name in LEAVES:
        return "leaf"
    if (name in OUTER_MODULES or name.startswith(OUTER_PACKAGES)
            or name.split(".")[1:2] and name.split(".")[1].startswith("mcp")):
        return "outer"
    if name == "nacelle":
        return "front"
    return "core"


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path):
    """Yield (imported module, lineno, at_top_level) for every import in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.level and not node.module:
                for alias in node.names:  # from . import x
                    yield f"{target}.{alias.name}", node.lineno, id(node) in top_level
            else:
                yield target, node.lineno, id(node) in top_level


_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def is_stdlib(module: str) -> bool:
    top = module.split(".")[0]
    if top in sys.builtin_module_names:
        return True
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return spec is not None
    origin = Path(spec.origin).resolve()
    return _STDLIB in origin.parents and "site-packages" not in origin.parts


def test_the_layout_finds_the_known_modules():
    assert {"nacelle", "nacelle.errors", "nacelle.events", "nacelle.messages",
            "nacelle.backend", "nacelle.tools"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_points_against_the_dependency_direction(name):
    path = MODULES[name]
    mine = layer(name)
    for target, line, top_level in imports(name, path):
        where = f"{path.relative_to(ROOT)}:{line} imports {target}"
        if target.startswith("nacelle"):
            theirs = layer(target)
            if mine == "leaf":
                assert target in ("nacelle.errors", "nacelle.bounded_json"), where
            elif mine in ("core", "front") or name == "nacelle.retry":
                front_reexport = mine == "front" and target == "nacelle.retry"
                assert theirs in ("leaf", "core") or front_reexport, where
            elif name.startswith("nacelle.backends."):
                own = name.split(".")[2].split("_")[0]
                if target.startswith("nacelle.backends."):
                    other = target.split(".")[2].split("_")[0]
                    dialect = own == "openrouter" and target in (
                        "nacelle.backends.chat_wire", "nacelle.backends.chat_stream")
                    assert other in (own, "", "_http") or dialect or \
                        target == "nacelle.backends._http", where
            elif name.startswith(("nacelle.toolsets", "nacelle.testing")):
                assert not target.startswith("nacelle.backends"), where
        else:
            if mine == "leaf":
                assert is_stdlib(target), where
            elif mine in ("core", "front") or name == "nacelle.retry":
                assert target.split(".")[0] != "requests", where
                if not is_stdlib(target):
                    assert not top_level, f"{where} at import time"


@pytest.mark.parametrize("name", sorted(n for n in set(MODULES) - PRINTERS
                                         if not n.startswith(PRINTING_PACKAGES)))
def test_the_library_never_prints(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    calls = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert calls == [], f"{name} prints at lines {calls}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_holds_and_stays_small(name):
    text = MODULES[name].read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{name} has no docstring"
    assert text.count("\n") < 600, f"{name} has grown past 600 lines: split it by subject"


def test_there_is_no_utils_module():
    assert not [p for p in PACKAGE.rglob("*util*.py")]


def test_a_vendored_copy_imports_from_a_bare_folder(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "nacelle",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import nacelle; "
        "assert nacelle.__file__.startswith(sys.argv[1]), nacelle.__file__; "
        "m = [nacelle.user_text('hi')]; assert nacelle.loads(nacelle.dumps(m)) == m; "
        "print('ok', nacelle.__version__)"
    )
    # -I ignores the environment and the working directory, -S skips site-packages:
    # the copy must import with the standard library alone, without package metadata.
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(tmp_path)],
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ")
