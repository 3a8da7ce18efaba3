"""nacelle: a synchronous, minimal-dependency agent SDK.

An agent is a loop around a model with tools attached; nacelle is one tested
version of that loop. A run is a generator of typed events; nothing in the core
prints, and diagnostics go to the ``nacelle`` logger (which has a NullHandler, so
nothing appears unless the application configures logging).

``import nacelle`` loads the standard library and nacelle's own core modules only:
``requests`` and ``jsonschema`` are imported where they are first used, so the
package is cheap to import and works when vendored as a bare folder.
"""

from typing import TYPE_CHECKING

from .agent import Agent as Agent
from .agent import Result as Result
from .backend import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from .backend import Backend as Backend
from .backend import Cache as Cache
from .backend import CallProfile as CallProfile
from .backend import Capabilities as Capabilities
from .backend import Effort as Effort
from .backend import MCPServer as MCPServer
from .backend import ModelSettings as ModelSettings
from .backend import Request as Request
from .backend import Thinking as Thinking
from ._pause import PAUSE as PAUSE
from .context import Budget as Budget
from .context import CancelEvent as CancelEvent
from .context import RunContext as RunContext
from .context import ToolContext as ToolContext
from .errors import APIError as APIError
from .errors import Cancelled as Cancelled
from .errors import CheckpointError as CheckpointError
from .errors import ConfigError as ConfigError
from .errors import ConversationError as ConversationError
from .errors import NacelleError as NacelleError
from .errors import RetryBudgetExceeded as RetryBudgetExceeded
from .errors import StreamError as StreamError
from .errors import StreamTruncated as StreamTruncated
from .errors import TransportError as TransportError
from .errors import Unsupported as Unsupported
from .errors import attempt as attempt
from .errors import retryable as retryable
from .errors import transient as transient
from .events import Event as Event
from .events import Kind as Kind
from .events import Stop as Stop
from .events import ToolEvent as ToolEvent
from .events import Usage as Usage
from .toolcalls import ToolSink as ToolSink
from .toolcalls import run_tool as run_tool
from .messages import Document as Document
from .messages import Finish as Finish
from .messages import Image as Image
from .messages import Message as Message
from .messages import ProviderBlock as ProviderBlock
from .messages import Reasoning as Reasoning
from .messages import Role as Role
from .messages import Citation as Citation
from .messages import Text as Text
from .messages import ToolCall as ToolCall
from .messages import ToolResult as ToolResult
from .messages import assistant_text as assistant_text
from .messages import dumps as dumps
from .messages import loads as loads
from .messages import trim as trim
from .messages import user_text as user_text
from .output import Schema as Schema
from .tools import Tool as Tool
from .tools import tool as tool
from .tools import tools_by_name as tools_by_name

# What a plain Agent run does not use is imported at its first use, by name
# (``nacelle.Retry``, ``from nacelle import Retry``), so ``import nacelle`` does not pay
# for it (PEP 562, https://peps.python.org/pep-0562/); ``__all__`` and ``dir(nacelle)``
# still list it, and type checkers read the imports below.
if TYPE_CHECKING:
    from .checkpoint import Checkpoint as Checkpoint
    from .compaction import Compaction as Compaction
    from .fallback import Fallback as Fallback
    from .hooks import MAX_INJECT as MAX_INJECT
    from .hooks import HookEvent as HookEvent
    from .hooks import HookPoint as HookPoint
    from .hooks import HookResult as HookResult
    from .hooks import detached as detached
    from .hooks import with_timeout as with_timeout
    from .partial import PartialJSON as PartialJSON
    from .partial import partial_json as partial_json
    from .retry import Retry as Retry
    from .retry import RetryOptions as RetryOptions
    from .subagent import subagent_tool as subagent_tool
    from .token_estimate import estimate_tokens as estimate_tokens
    from .tool_search import ToolSearch as ToolSearch

_LAZY = {
    "Checkpoint": "checkpoint",
    "Compaction": "compaction",
    "Fallback": "fallback",
    "HookEvent": "hooks",
    "HookPoint": "hooks",
    "HookResult": "hooks",
    "MAX_INJECT": "hooks",
    "detached": "hooks",
    "with_timeout": "hooks",
    "PartialJSON": "partial",
    "partial_json": "partial",
    "Retry": "retry",
    "RetryOptions": "retry",
    "subagent_tool": "subagent",
    "estimate_tokens": "token_estimate",
    "ToolSearch": "tool_search",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module("." + module, __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "APIError",
    "Agent",
    "Backend",
    "Budget",
    "Cache",
    "CallProfile",
    "CancelEvent",
    "Cancelled",
    "Capabilities",
    "Checkpoint",
    "CheckpointError",
    "Citation",
    "Compaction",
    "ConfigError",
    "ConversationError",
    "DEFAULT_MAX_TOKENS",
    "Document",
    "Effort",
    "Event",
    "Fallback",
    "Finish",
    "HookEvent",
    "HookPoint",
    "HookResult",
    "Image",
    "Kind",
    "MAX_INJECT",
    "MCPServer",
    "Message",
    "ModelSettings",
    "NacelleError",
    "PAUSE",
    "PartialJSON",
    "ProviderBlock",
    "Reasoning",
    "Request",
    "Result",
    "Retry",
    "RetryBudgetExceeded",
    "RetryOptions",
    "Role",
    "RunContext",
    "Schema",
    "Stop",
    "StreamError",
    "StreamTruncated",
    "Text",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolEvent",
    "ToolResult",
    "ToolSearch",
    "ToolSink",
    "TransportError",
    "Unsupported",
    "Usage",
    "assistant_text",
    "attempt",
    "detached",
    "dumps",
    "estimate_tokens",
    "loads",
    "partial_json",
    "retryable",
    "run_tool",
    "subagent_tool",
    "tool",
    "tools_by_name",
    "transient",
    "trim",
    "user_text",
    "with_timeout",
]

# The NullHandler goes on now when logging is loaded anyway; else at the first lookup of
# a nacelle logger, before any record (nacelle/_loggers.py), so importing the package
# does not import logging.
from ._loggers import install_null_handler_if_loaded as _install_null_handler_if_loaded

_install_null_handler_if_loaded()
del _install_null_handler_if_loaded
