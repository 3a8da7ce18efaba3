"""The HTTP plumbing every client in nacelle shares — the model backends
(``backends/_http*.py``) and the MCP client over HTTP (``mcp/http.py``, ``mcp/auth*``) —
written once:

- :mod:`~nacelle._net.headers`: what a request's headers may hold (names and values
  HTTP can carry, an API key without stray characters), refused before any request is
  made with an error that names the header and never repeats its value;
- :mod:`~nacelle._net.secrets`: hiding secrets in text made from an answer (the values
  of secret-looking headers, tokens in their raw and URL-encoded forms) and naming a
  URL without its user info, query or fragment;
- :mod:`~nacelle._net.sockets`: finding the socket under a ``requests`` response
  (urllib3 2.x and 1.26 keep it in different places) to bound a read in time or to
  wake a thread blocked reading it.

Outer ring: the core never imports it. Imports the standard library and
``nacelle.errors``; never ``requests`` (a response is only walked by attribute).
"""
