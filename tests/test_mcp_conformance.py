"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) against
nacelle's MCP client (client mode) and ``nacelle.mcp.server`` (server mode).

``NACELLE_MCP_CONFORMANCE`` names the suite's command (``.ci/run`` installs a pinned
version and writes a script running it on Node >= 22); without it the tests skip,
saying why. Each mode's failing checks are compared with a committed list that may
only shrink (``tests/conformance/*-expected-failures.txt``): a check failing that the
list does not name fails the test, and so does a listed check that now passes — the
fix then removes its line (or its run). A line is ``<scenario>:<check-id> @<run>...
# reason``, where each ``<run>`` is ``default`` (each scenario at the revision the suite picks for it)
or a revision the suite was asked for with ``--spec-version``. A WARNING counts as
not passing: it is a SHOULD the implementation misses, and is listed like a failure.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

HERE = Path(__file__).parent / "conformance"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration

NOT_PASSING = ("FAILURE", "WARNING")
SEVERITY = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1, "INFO": 0, "SKIPPED": 0}


def suite_command() -> List[str]:
    path = os.environ.get("NACELLE_MCP_CONFORMANCE")
    if not path:
        pytest.skip("NACELLE_MCP_CONFORMANCE is unset: .ci/run installs "
                    "@modelcontextprotocol/conformance and names its command there")
    if not os.access(path, os.X_OK):
        pytest.skip(f"NACELLE_MCP_CONFORMANCE={path!r} names no runnable file "
                    f"(did its install fail?)")
    return [path]


def expected(name: str) -> Dict[str, str]:
    """The committed list: ``{"scenario:check @run": reason}``; a line may name
    several runs (``scenario:check @default @2026-07-28  # reason``)."""
    entries = {}
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        text, _, reason = line.partition("#")
        words = text.split()
        if words:
            for run in words[1:]:
                entries[f"{words[0]} {run}"] = reason.strip()
    return entries


def verdicts(out: Path, run: str) -> Dict[str, str]:
    """Every check of a run's results folder, ``{"scenario:check @run": status}``;
    a check id met more than once keeps its most severe status, as the suite's own
    baseline does."""
    found: Dict[str, str] = {}
    for path in sorted(out.rglob("checks.json")):
        scenario = _scenario(path.parent.relative_to(out))
        for check in json.loads(path.read_text(encoding="utf-8")):
            key = f"{scenario}:{check['id']} @{run}"
            status = check.get("status", "")
            if SEVERITY.get(status, 0) >= SEVERITY.get(found.get(key, ""), 0):
                found[key] = status
    return found


def _scenario(folder: Path) -> str:
    """The scenario a results folder is for: ``auth/iss-supported-2026-…`` is
    ``auth/iss-supported`` (the suite appends an ISO timestamp, and the server mode
    a ``server-`` prefix)."""
    name = "/".join(folder.parts)
    name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", name)
    return name[len("server-"):] if name.startswith("server-") else name


def compare(found: Dict[str, str], allowed: Dict[str, str], runs: Tuple[str, ...]) -> List[str]:
    problems = []
    for key, status in sorted(found.items()):
        if status in NOT_PASSING and key not in allowed:
            problems.append(f"{key}: {status}, and the expected-failures list does not name it")
    for key in sorted(allowed):
        if key.rsplit("@", 1)[-1] not in runs:
            continue
        status = found.get(key)
        if status is None:
            problems.append(f"{key}: listed, but the suite no longer reports it; drop the line")
        elif status not in NOT_PASSING:
            problems.append(f"{key}: listed, but now {status}; drop the line")
    return problems


def run_suite(argv: List[str], out: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(suite_command() + argv + ["-o", str(out)], cwd=str(out.parent),
                          env=env, capture_output=True, text=True, timeout=timeout)


def summary(found: Dict[str, str]) -> Tuple[int, int]:
    scored = [s for s in found.values() if s in ("SUCCESS",) + NOT_PASSING]
    return sum(s == "SUCCESS" for s in scored), len(scored)


CLIENT_RUNS = {"default": [], "2026-07-28": ["--spec-version", "2026-07-28"]}


def run_all(mode: List[str], runs: Dict[str, List[str]], allowed: Dict[str, str],
            tmp_path: Path) -> Dict[str, str]:
    """Every check of ``--suite all`` for each run, ``{"scenario:check @run": status}``.

    The suite starts all its scenarios at once (48 client processes for the client
    mode), and on a loaded two-core machine a check that measures time (how soon a
    client reconnects after the server's ``retry:``) can fail for the load alone. So
    a scenario with a check failing that the list does not name runs again, alone,
    and its checks are judged on that run: a real failure fails there too."""
    found: Dict[str, str] = {}
    for run, extra in runs.items():
        out = tmp_path / run
        done = run_suite(mode + ["--suite", "all"] + extra, out, timeout=600)
        if not out.exists():
            pytest.fail(f"the suite wrote no results ({done.returncode}): {done.stderr[-2000:]}")
        batch = verdicts(out, run)
        again = sorted({key.split(":", 1)[0] for key, status in batch.items()
                        if status in NOT_PASSING and key not in allowed})
        for scenario in again:
            solo = tmp_path / f"{run}-alone-{scenario.replace('/', '-')}"
            run_suite(mode + ["--scenario", scenario] + extra, solo, timeout=300)
            alone = verdicts(solo, run) if solo.exists() else {}
            if alone:
                batch = {k: v for k, v in batch.items() if not k.startswith(scenario + ":")}
                batch.update(alone)
        found.update(batch)
    return found


def test_the_client_passes_the_conformance_suite_but_for_its_listed_failures(tmp_path):
    driver = [sys.executable, str(HERE / "client_driver.py")]
    allowed = expected("client-expected-failures.txt")
    found = run_all(["client", "--command", " ".join(driver), "--timeout", "60000"],
                    CLIENT_RUNS, allowed, tmp_path)
    passed, total = summary(found)
    print(f"MCP conformance, client: {passed}/{total} checks pass")
    problems = compare(found, allowed, tuple(CLIENT_RUNS))
    assert not problems, "\n".join(problems)


SERVER_RUNS = CLIENT_RUNS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(params=["asgi", "wsgi"])
def conformance_server(request):
    """tests/mcp_servers/conformance_server.py on a free port: the ASGI app under
    uvicorn, or the WSGI app under the standard library's threaded server."""
    if request.param == "asgi":
        pytest.importorskip("uvicorn", reason="the ASGI app is served by uvicorn (test extra)")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp_servers" / "conformance_server.py"),
         str(port), request.param], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the conformance server did not start: "
                                f"{process.stderr.read().decode()[-2000:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


def test_the_server_passes_the_conformance_suite_but_for_its_listed_failures(
        tmp_path, conformance_server):
    allowed = expected("server-expected-failures.txt")
    found = run_all(["server", "--url", conformance_server], SERVER_RUNS, allowed, tmp_path)
    passed, total = summary(found)
    print(f"MCP conformance, server: {passed}/{total} checks pass")
    problems = compare(found, allowed, tuple(SERVER_RUNS))
    assert not problems, "\n".join(problems)
