"""Row 5: installed footprint — what ``pip install`` puts into a fresh environment.

Each contender gets a fresh venv under the system's temp directory, made without
pip (so the environment starts empty) and filled by the running interpreter's pip
through ``--python``; the venvs are deleted afterwards. nacelle is installed from
this checkout (a regular, non-editable install), the peers from the package index
pip is configured with. Figures: the bytes of every file under ``site-packages``
and the number of distributions (``*.dist-info``) there. ``--no-compile`` keeps
bytecode out of both sides, so sizes compare source with source.

Installs run two at a time, and this row runs while no timing is being taken, so its
load disturbs nothing else. nacelle is built from the checkout with pip's build
isolation (setuptools comes from the index into a throw-away build environment).

Benchmark-only: imports the standard library and ``measure``.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Tuple

from measure import ROOT, Row

CONTENDERS = {"nacelle": [ROOT], "anthropic SDK": ["anthropic"], "openai SDK": ["openai"],
              "litellm": ["litellm"]}


def _install(parent: str, name: str, specs: List[str]) -> Tuple[str, dict]:
    home = os.path.join(parent, name.split()[0])
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", home], check=True)
    python = os.path.join(home, "bin", "python")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check",
         "install", "--quiet", "--no-compile", *specs],
        capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if "WARNING" not in line]
        return name, {"error": (lines or ["pip failed"])[-1]}
    site = glob.glob(os.path.join(home, "lib", "python*", "site-packages"))[0]
    dists = sorted(d[:-len(".dist-info")] for d in os.listdir(site) if d.endswith(".dist-info"))
    return name, {"bytes": _size(site), "own": _size(os.path.join(site, name.split()[0])),
                  "dists": dists}


def _size(folder: str) -> int:
    total = 0
    for where, _, files in os.walk(folder):
        for file in files:
            path = os.path.join(where, file)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def measure() -> Dict[str, dict]:
    parent = tempfile.mkdtemp(prefix="nacelle-footprint-")
    try:
        with ThreadPoolExecutor(2) as pool:
            return dict(pool.map(lambda item: _install(parent, *item), CONTENDERS.items()))
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def footprint_rows() -> List[Row]:
    results = measure()
    figures = []
    for name, result in results.items():
        if "error" in result:
            figures.append(f"{name}: install failed: {result['error']}")
        else:
            shown = ", ".join(result["dists"]) if len(result["dists"]) <= 8 else ""
            figures.append(f"{name}: {result['bytes'] / 1e6:.1f} MB in site-packages, "
                           f"{len(result['dists'])} distributions" + (f" ({shown})" if shown else "")
                           + f"; the package alone {result['own'] / 1e6:.2f} MB")
    ours = results["nacelle"].get("bytes")
    rows = []
    for letter, peer in zip("abc", ("anthropic SDK", "openai SDK", "litellm")):
        theirs = results[peer].get("bytes")
        rows.append(Row("5" + letter, f"installed size, {peer} ÷ nacelle (with deps)",
                        theirs / ours if ours and theirs else None, "(none)", None,
                        figures if letter == "a" else [],
                        label=f"install size: {peer.split()[0]} ÷ nacelle"))
    return rows
