"""The package's shape: the rings of DESIGN.md as a table of folders, the import
arrows between them, no import cycle, no printing, and a vendored copy that imports
from a bare folder.

Rings (:data:`RINGS`, looked up by the longest matching prefix; a top-level module not
in the table is core): leaves (standard library only) <- core (never ``requests``,
never a backend, a tool set or the test doubles; a third-party module only inside a
function) <- outer (everything that talks to a network, a terminal or a process, and
everything only a user's program or the CLI imports). Backends never import each
other, but for OpenRouter, which is the Chat Completions dialect plus its extras and so
imports chat's wire and stream modules (never the chat backend itself). ``retry`` and
``fallback`` wrap a backend; ``retry`` sits in the outer ring but is pure logic held to
the core's rules, which is what lets the package front re-export it.

No cycles: the strongly connected components of the import graph (every import that
runs, at the top of a module or inside a function; those under ``if TYPE_CHECKING:``
never run) are single modules, and nothing that supplies or wraps a model turn (a
backend, ``Retry``, ``Fallback``, the scripted double) reaches ``loop.py`` or
``agent.py``, directly or through another module. A module's size is no test: split by
subject.
"""

import ast
import functools
import importlib.util
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nacelle"

#: Module or folder -> ring. Every folder under nacelle/ is listed (tested), so a new
#: one is placed on purpose.
RINGS = {
    "nacelle": "front",
    # leaves: the standard library only
    "nacelle.errors": "leaf", "nacelle.sse": "leaf", "nacelle.bounded_json": "leaf",
    "nacelle.terminal_text": "leaf", "nacelle._files": "leaf", "nacelle._loggers": "leaf",
    "nacelle.backtracking": "leaf",
    # core folders (top-level modules are core unless listed)
    "nacelle.output": "core", "nacelle.compaction": "core",
    # outer ring
    "nacelle.retry": "outer", "nacelle.settings": "outer",
    "nacelle.console": "outer", "nacelle.demo": "outer", "nacelle.__main__": "outer",
    "nacelle.otel": "outer",
    "nacelle.cli": "outer", "nacelle.batch": "outer", "nacelle.report": "outer",
    "nacelle._net": "outer", "nacelle.backends": "outer", "nacelle.mcp": "outer",
    "nacelle.toolsets": "outer", "nacelle.testing": "outer", "nacelle.serve": "outer",
    "nacelle.sandbox": "outer", "nacelle.evals": "outer", "nacelle.skills": "outer",
    "nacelle.instructions": "outer",
}
#: Outer modules held to the core's rules (a turn wrapper the front re-exports).
CORE_RULES = {"nacelle.retry"}
#: Where printing is the point.
PRINTERS = ("nacelle.console", "nacelle.__main__", "nacelle.cli")
#: What a leaf may import of the package.
LEAF_IMPORTS = {"nacelle.errors", "nacelle.bounded_json"}
#: OpenRouter speaks the Chat Completions dialect.
DIALECT = {"nacelle.backends.chat.wire", "nacelle.backends.chat.stream"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(name: str) -> str:
    """The ring of a module: the table's entry for its longest listed prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        ring = RINGS.get(".".join(parts[:i]))
        if ring is not None and (i > 1 or len(parts) == 1):
            return ring
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
                for alias in node.names:  # from .x import y: y itself when it is a module
                    sub = f"{target}.{alias.name}"
                    yield (sub if sub in MODULES else target), node.lineno, id(node) in top_level


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
                assert target in LEAF_IMPORTS, where
            elif mine in ("core", "front") or name in CORE_RULES:
                front_reexport = mine == "front" and target in CORE_RULES
                assert theirs in ("leaf", "core") or target in CORE_RULES and (
                    front_reexport or name in CORE_RULES), where
            elif name.startswith("nacelle.backends."):
                own = name.split(".")[2].split("_")[0]
                if target.startswith("nacelle.backends."):
                    other = target.split(".")[2].split("_")[0]
                    dialect = own == "openrouter" and target in DIALECT
                    assert other in (own, "") or dialect, where
            elif name.startswith(("nacelle.toolsets", "nacelle.testing")):
                assert not target.startswith("nacelle.backends"), where
        else:
            if mine == "leaf":
                assert is_stdlib(target), where
            elif mine in ("core", "front") or name in CORE_RULES:
                assert target.split(".")[0] != "requests", where
                if not is_stdlib(target):
                    assert not top_level, f"{where} at import time"


@pytest.mark.parametrize("name", sorted(n for n in MODULES
                                         if not (n + ".").startswith(
                                             tuple(p + "." for p in PRINTERS))))
def test_the_library_never_prints(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    calls = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert calls == [], f"{name} prints at lines {calls}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_holds(name):
    text = MODULES[name].read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{name} has no docstring"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_may_import(name):
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8"))) or ""
    assert re.search(r"\bimport", doc, re.I), f"{name}'s docstring says nothing of its imports"


ONLY_THE_STANDARD_LIBRARY = re.compile(r"imports?:?\s+the\s+standard\s+library\s+only", re.I)


def test_a_module_that_says_it_imports_the_standard_library_only_imports_no_other_module():
    claims = {name for name, path in MODULES.items() if ONLY_THE_STANDARD_LIBRARY.search(
        ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")}
    assert {"nacelle.errors", "nacelle.terminal_text"} <= claims
    found = {name: sorted({target for target, _, _ in imports(name, MODULES[name])
                           if target.startswith("nacelle")}) for name in sorted(claims)}
    assert {name: targets for name, targets in found.items() if targets} == {}


#: What wraps or supplies a model turn: it never reaches the loop, not even through
#: another module (DESIGN.md, "The turn is the seam": the Agent runs the loop).
TURN_SIDE = ("nacelle.retry", "nacelle.fallback", "nacelle.testing.scripted",
             "nacelle.backends")


@functools.lru_cache(maxsize=1)
def package_graph() -> Dict[str, Set[str]]:
    return import_graph(PACKAGE)


def reachable(graph: Dict[str, Set[str]], start: str) -> Set[str]:
    seen: Set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("name", sorted(n for n in MODULES
                                         if (n + ".").startswith(tuple(s + "." for s in TURN_SIDE))))
def test_a_backend_or_a_turn_wrapper_never_reaches_the_loop(name):
    reached = reachable(package_graph(), name)
    assert not reached & {"nacelle.loop", "nacelle.agent"}, sorted(reached)


def test_every_folder_is_placed_in_a_ring():
    folders = {module_name(p) for p in PACKAGE.rglob("__init__.py")} - {"nacelle"}
    top_folders = {f for f in folders if f.count(".") == 1}
    assert sorted(top_folders - set(RINGS)) == []


# -- cycles ------------------------------------------------------------------------------

def _under_type_checking(tree: ast.AST) -> Set[int]:
    """The ids of import nodes inside ``if TYPE_CHECKING:`` blocks (they never run)."""
    skipped: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else (
                test.attr if isinstance(test, ast.Attribute) else "")
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def import_graph(package: Path) -> Dict[str, Set[str]]:
    """Module -> the package's modules it imports when it runs: at the top or inside a
    function (a lazy import is an arrow too), not under ``if TYPE_CHECKING:``. An
    import of a name from a module is an arrow to that module; of a submodule, to it."""
    root = package.parent
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    top = package.name

    def known(target: str) -> str:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target

    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _under_type_checking(tree)
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: Set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # "from m import x": an arrow to the module m.x if there is one, else to m
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules
                           else module for alias in node.names]
            for target in targets:
                resolved = known(target)
                if (resolved == top or resolved.startswith(top + ".")) and resolved != name:
                    edges.add(resolved)
        graph[name] = edges
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted, largest first."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    found: List[List[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: List[Tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def test_no_import_cycle_lazy_imports_included():
    assert cycles(package_graph()) == []


def test_the_cycle_check_finds_a_planted_cycle_in_a_graph():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a", "p.d"}, "p.d": set(),
             "p.e": {"p.e"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_the_cycle_check_finds_a_cycle_closed_by_a_lazy_import_in_a_package(tmp_path):
    package = tmp_path / "planted"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package with a cycle."""\n')
    (package / "inner" / "__init__.py").write_text('"""Inner."""\n')
    (package / "a.py").write_text("from .inner.b import thing\n")
    (package / "inner" / "b.py").write_text(
        "thing = 1\n\ndef later():\n    from .. import a\n    return a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    assert cycles(import_graph(package)) == [["planted.a", "planted.inner.b"]]


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
