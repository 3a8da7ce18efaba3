"""Model backends. Each submodule is imported on its own
(``from nacelle.backends import anthropic``); importing this package loads none of
them, and none of them imports another."""
