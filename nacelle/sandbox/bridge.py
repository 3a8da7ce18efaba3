"""The script side of code mode's bridge: the program ``run_python`` starts in the box.

Started as ``python -I -c <this file's text>`` (the box need not see the package), it
reads one line of JSON from standard input — ``{"code": ..., "tools": [...]}`` — and
runs the code with each tool as a function of keyword arguments (``read_file(path=
"a.txt")``; a name that is not a Python identifier through ``call_tool(name, **args)``).
A call writes ``{"call": NAME, "input": {...}}`` as one line to the host and reads one
line back: ``{"result": TEXT}``, or ``{"error": TEXT}``, which raises ``ToolError`` in
the script (the host refused the call, or the tool failed). What the script prints
goes to the host as ``{"out": TEXT}`` lines on the same pipe; the file descriptor of
its standard output is pointed at standard error first, so a program the script starts
cannot write into the bridge.

Imports the standard library only: it runs outside the package, in the box.
"""

import json
import keyword
import os
import sys
from typing import Any, Dict


class ToolError(Exception):
    """A tool call the host refused or that failed; the message is what it said."""


def main() -> None:
    bridge_in = sys.stdin.buffer
    bridge_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # what the script starts writes to stderr, not into the bridge

    def send(message: Dict[str, Any]) -> None:
        bridge_out.write((json.dumps(message) + "\n").encode("utf-8"))

    class Out:
        encoding = "utf-8"

        def write(self, text: str) -> int:
            if text:
                send({"out": text})
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    setup = json.loads(bridge_in.readline())

    def call_tool(name: str, **arguments: object) -> str:
        send({"call": name, "input": arguments})
        line = bridge_in.readline()
        if not line:
            raise SystemExit("run_python: the host closed the bridge")
        reply = json.loads(line)
        if "error" in reply:
            raise ToolError(reply["error"])
        return str(reply["result"])

    namespace: Dict[str, Any] = {"__name__": "__main__", "ToolError": ToolError,
                                 "call_tool": call_tool}
    for name in setup["tools"]:
        if name.isidentifier() and not keyword.iskeyword(name):
            namespace[name] = (lambda n: lambda **arguments: call_tool(n, **arguments))(name)
    sys.stdout = Out()
    sys.stdin = open(os.devnull)
    exec(compile(setup["code"], "<run_python>", "exec"), namespace)


if __name__ == "__main__":  # run as ``python -c``; importing the module runs nothing
    main()
