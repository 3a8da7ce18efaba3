"""The import paths users already have keep working as modules move into folders:
the console script's entry point, ``python -m nacelle``, and every module README.rst
and DESIGN.md name. (One test module for the package's public paths as a whole.)"""

import configparser
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# module -> names a user's code reads from it
PATHS = {
    "nacelle.cli": ["main", "Approver", "build_agent"],
    "nacelle.batch": ["BatchItem", "Progress", "ProgressLine", "Summary", "best_of",
                      "main_batch", "ray_executor", "run_many", "summary"],
    "nacelle.report": ["html", "write"],
    "nacelle.output": ["FINAL_ANSWER", "Output", "Schema", "make_output", "to_jsonable"],
    "nacelle.compaction": ["CLEARED", "Compacted", "Compaction", "SUMMARY_PROMPT", "Strategy",
                           "clear_tool_results", "drop_oldest", "is_context_overflow",
                           "summarize"],
    "nacelle.backends.anthropic": ["Backend", "PROTOCOL", "Pricing", "capabilities",
                                   "to_wire"],
    "nacelle.backends.chat": ["Backend", "Dialect", "PROTOCOL", "deepseek", "gemini", "groq",
                              "llamacpp", "lmstudio", "mistral", "ollama", "openai", "to_wire",
                              "together", "vllm", "xai"],
    "nacelle.backends.openai": ["Backend", "PROTOCOL", "capabilities", "to_wire"],
    "nacelle.backends.openrouter": ["Backend", "DIALECT", "PROTOCOL", "capabilities",
                                    "to_wire"],
}


@pytest.mark.parametrize("module", sorted(PATHS))
def test_a_documented_module_still_imports_with_its_names(module):
    imported = importlib.import_module(module)
    missing = [name for name in PATHS[module] if not hasattr(imported, name)]
    assert missing == [], f"{module} lost {missing}"


def test_the_console_script_entry_point_resolves_to_a_function():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    (entry,) = [line.split("=", 1)[1].strip() for line in
                config["options.entry_points"]["console_scripts"].strip().splitlines()
                if line.split("=", 1)[0].strip() == "nacelle"]
    module, _, attr = entry.partition(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_python_dash_m_nacelle_runs_the_command():
    out = subprocess.run([sys.executable, "-m", "nacelle", "--version"], capture_output=True,
                         text=True, cwd=str(ROOT), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nacelle-sdk ")
