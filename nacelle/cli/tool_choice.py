"""Which of the CLI's tools a run offers the model: ``--tools LIST``, ``--no-tools``,
the ``tools`` setting, and a smaller default for local servers.

The CLI has up to nine tools: the six file tools of
:class:`nacelle.toolsets.LocalTools` (``read_file``, ``write_file``, ``edit_file``,
``list_directory``, ``find_files``, ``search_content``), ``run_command`` with
``--bash``, and ``web_search`` and ``web_fetch`` with ``--search-url``. Every tool's
name, description and schema go with every request: the six file tools alone are
about 4,500 characters of JSON, some 1,100 tokens.

- ``tools`` unset: every tool the other flags enable, except on a local server
  (``ollama``, ``vllm``, ``llamacpp``, ``lmstudio``), which gets :data:`SMALL`,
  ``read_file`` and ``list_directory``. Why: a local model runs in a small context
  window (Ollama's default is 4,096 tokens,
  https://docs.ollama.com/faq#how-can-i-specify-the-context-window-size), where the
  six schemas plus the system prompt take a third of it before the question; small
  models also choose among fewer tools more reliably. Those two tools let a model look
  around the project and read it, which is what most questions need; nothing it does
  can change a file. ``--tools`` asks for more.
- ``none`` (``--no-tools``): none of these, so the request carries no tools (what is
  asked for by its own flag — ``--skills``, ``--memory``, ``--mcp``, ``--functions``
  — still comes).
- ``a,b,c`` (``--tools read_file,search_content``): those; a name not
  among the tools the flags enable is a usage error listing the ones that are (and
  saying that ``run_command`` needs ``--bash``, the web tools ``--search-url``).

Imports the standard library and ``nacelle.settings``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..settings import SettingsError

__all__ = ["SMALL", "UnknownTool", "choose_tools"]

#: The default for local servers (see the module docstring).
SMALL = ("read_file", "list_directory")

_NEEDS = {"run_command": "--bash", "web_search": "--search-url", "web_fetch": "--search-url"}


class UnknownTool(SettingsError):
    """A name in ``--tools`` that is not one of the run's tools: a usage error."""

    for_the_command_line = True  # shown without its class name (terminal.one_line)


def choose_tools(available: Sequence[Any], wanted: str, *, local: bool) -> List[Any]:
    """The tools of ``available`` (each with a ``name``) that ``wanted`` (the ``tools``
    setting: "", "none" or a comma-separated list) picks; ``local`` says the backend is
    a local server."""
    if wanted == "none":
        return []
    if not wanted:
        return [tool for tool in available if tool.name in SMALL] if local else list(available)
    by_name: Dict[str, Any] = {tool.name: tool for tool in available}
    names = list(dict.fromkeys(name.strip() for name in wanted.split(",") if name.strip()))
    for name in names:
        if name not in by_name:
            need = _NEEDS.get(name)
            why = f" ({name} needs {need})" if need is not None else ""
            raise UnknownTool(f"unknown tool {name!r} in --tools{why}; this run's tools: "
                              + (", ".join(by_name) or "none"))
    return [by_name[name] for name in names]
