"""Mistakes a user's type checker must catch, one a line, each marked ``# E: <what> [code]``.

tests/typing/test_mistakes.py runs mypy --strict on this file and expects an error,
with that error code, on every marked line and nowhere else. The file is never run.
"""

import nacelle


@nacelle.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@nacelle.tool(read_only=True, timeout=5.0)
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


# A tool keeps its function's signature and return type when called directly.
add(1, "2")  # E: a str for an int parameter [arg-type]
shout(loud=True)  # E: a parameter the function does not have [call-arg]
add(1, 2).upper()  # E: an int has no upper() [attr-defined]
nacelle.tool(read_onyl=True)  # E: a misspelt option of @tool [call-overload]
