"""The exception tree, and the three functions that classify a failure.

Every error nacelle raises on purpose is a :class:`NacelleError`, named for what
happened rather than where::

    NacelleError
    ├── ConfigError (also ValueError)   the caller asked for something invalid
    │   ├── settings.SettingsError      a settings file, variable or flag that cannot be used
    │   │   ├── cli.backends.MissingKey  no key for the backend the command was asked for
    │   │   ├── cli.tool_choice.UnknownTool  a --tools name that is not one of the run's tools
    │   │   └── cli.extra_tools.NameTaken  a --functions function named like another tool
    │   └── skills.FrontMatterError     a SKILL.md whose front matter cannot be read
    ├── ConversationError (also ValueError)  saved conversation JSON that cannot be read
    ├── bounded_json.TooDeep (also ValueError)  JSON nested past its reader's depth cap
    ├── validation.UnusableSchema       a schema that cannot check input (a remote $ref…)
    ├── CheckpointError                 a checkpoint that cannot be trusted or resumed
    ├── Unsupported                     the backend cannot do a requested feature
    ├── APIError                        the provider answered with an HTTP error status
    ├── TransportError                  no usable response: refused, reset, timed out
    ├── StreamError                     a 200 stream carried an error, stalled, or made no sense
    │   └── StreamTruncated             the body ended before the stream's final event
    ├── Cancelled                       the run was cancelled (or reached its deadline)
    ├── RetryBudgetExceeded             the retry budget's wall-clock deadline passed
    ├── sessions.SessionError           a session store could not read or write
    │   ├── sessions.SessionNotFound (also LookupError)  no session by that name
    │   └── sessions.CorruptSession     a saved file that cannot be read (left as it is)
    ├── mcp.MCPError                    the local MCP client failed
    │   ├── mcp.SessionExpired          an HTTP server no longer knows the session
    │   └── mcp.auth_flows.MCPAuthError  authorizing with an HTTP MCP server failed
    ├── cli.logdb.LogsError            the log of CLI runs cannot be used (damaged, or newer)
    ├── cli.models.ListingError         a provider's model list could not be read
    ├── cli.resume.Undecided            ``nacelle resume`` was not told what to do with a call
    ├── serve.agui_input.InputError (also ValueError)  a RunAgentInput without AG-UI's shape
    ├── toolsets.confine.PathError      a tool's path cannot be used
    │   └── toolsets.confine.PathRefused  the path would leave the root
    ├── toolsets.ssrf.FetchError        a fetch failed
    │   └── toolsets.ssrf.FetchRefused (also ValueError)  the guard refused a URL
    ├── toolsets.memory.MemoryCommandError  a memory command that cannot be done
    ├── toolsets.shell.CommandTimedOut  a command ran past its limit and was killed
    ├── toolsets.shell.SupervisorLost   a command's supervisor died before reporting
    └── toolsets.search.RegexTimedOut   a search's pattern ran past its time bound

The ones named with a module (under ``nacelle.``) live beside the code that raises
them; this module cannot import them, so ``tests/test_errors.py`` checks that the
drawing lists every ``NacelleError`` subclass the package defines.

Whether a failure is worth another attempt is a property of the failure, so it
lives here: :func:`transient` marks an error as worth retrying, :func:`retryable`
answers the question for any exception, and :func:`attempt` tells which attempt
failed. What an error of nacelle's own carries — a status, a provider's error
code or type, a request id, a ``retry_after``, whether it is retryable — is given to
its constructor as keywords (``StreamError(message, *, code=None, retry_after=None,
...)``), so it is whole when raised; :func:`transient` is for an error made elsewhere. ``retryable`` says nothing about whether output was already shown; acting on
it only while nothing was yielded is ``Retry``'s rule.

No error here ever holds an API key: messages are built from statuses, provider
error types and short body previews, never from request headers.

Leaf module: imports the standard library only.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, TypeVar, Union

__all__ = [
    "APIError",
    "Cancelled",
    "CheckpointError",
    "ConfigError",
    "ConversationError",
    "NacelleError",
    "RetryBudgetExceeded",
    "StreamError",
    "StreamTruncated",
    "TransportError",
    "Unsupported",
    "attempt",
    "retryable",
    "transient",
]

E = TypeVar("E", bound=BaseException)

# Statuses worth another request, as the official SDKs retry them: timeouts, lock
# conflicts, rate limits and every server-side failure (529 "overloaded" included).
RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class NacelleError(Exception):
    """The root of every error nacelle raises on purpose."""


class ConfigError(NacelleError, ValueError):
    """The caller configured something invalid: a missing backend, an empty system
    prompt, a duplicate tool name, an unknown setting."""


class ConversationError(NacelleError, ValueError):
    """Conversation JSON given to ``loads`` is malformed; the message names the path
    of the offending value (``[2].parts[0].type``, say)."""


class CheckpointError(NacelleError):
    """A checkpoint cannot be read or resumed: malformed JSON, an unknown version, a
    bad signature or none when a key was given, a pending call that does not match its
    fingerprint, or a tool the resuming agent lacks. Not a ValueError: a tampered
    checkpoint is a security event, not a bad argument to be caught with the rest."""


class Unsupported(NacelleError):
    """A backend was asked for a feature its capabilities lack.

    Raised at construction (or when a run starts, for conversation content), never
    as a silent downgrade.
    """

    def __init__(self, backend: str, feature: str, hint: str = "") -> None:
        self.backend = backend
        self.feature = feature
        self.hint = hint
        message = f"backend {backend!r} does not support {feature}"
        if hint:
            message += f"; {hint}"
        super().__init__(message)

    def __reduce__(self) -> Tuple[Any, ...]:  # keep pickling working with the keyword-free signature
        return (type(self), (self.backend, self.feature, self.hint))


class APIError(NacelleError):
    """The provider answered with an HTTP error status.

    ``retryable`` follows the status rule (408, 409, 429, 5xx) unless the provider
    said otherwise (``x-should-retry``).
    """

    def __init__(
        self,
        status: int,
        type: str = "",
        message: str = "",
        request_id: str = "",
        retry_after: Optional[float] = None,
        *,
        retryable: Optional[bool] = None,
    ) -> None:
        self.status = status
        self.type = type
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after
        self.retryable = status in RETRYABLE_STATUSES if retryable is None else retryable
        text = f"HTTP {status}"
        if type:
            text += f" {type}"
        if message:
            text += f": {message}"
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (
            _rebuild_api_error,
            (self.status, self.type, self.message, self.request_id, self.retry_after,
             self.retryable),
        )


def _rebuild_api_error(status: int, type: str, message: str, request_id: str,
                       retry_after: Optional[float], retryable: Optional[bool]) -> "APIError":
    return APIError(status, type, message, request_id, retry_after, retryable=retryable)


class TransportError(NacelleError):
    """No usable response arrived: the connection was refused or reset before a
    response, or a connect or read timeout passed. Always worth another attempt."""

    retryable = True


class StreamError(NacelleError):
    """A 200 stream went wrong: an error event inside it, a stall with no progress,
    or content that makes no sense (a data line that is not JSON, say).

    What the provider said comes in as keywords and is there when the error is
    raised: ``code`` (an in-band error code, a string or a number), ``type`` (the
    provider's error type, Anthropic's ``overloaded_error`` say), ``request_id``,
    ``retry_after`` (seconds the provider asked to wait, or None) and ``retryable``
    (None keeps the class's rule: a plain StreamError is not worth another attempt,
    a :class:`StreamTruncated` is).
    """

    retryable = False

    def __init__(self, message: str = "", *, code: Union[str, int, None] = None,
                 type: str = "", request_id: str = "", retry_after: Optional[float] = None,
                 retryable: Optional[bool] = None) -> None:
        super().__init__(message)
        self.code = code
        self.type = type
        self.request_id = request_id
        self.retry_after = retry_after
        if retryable is not None:
            self.retryable = retryable


class StreamTruncated(StreamError):
    """The body ended, or the connection dropped, before the stream's final event.

    The answer is incomplete, and another attempt may well finish it.
    """

    retryable = True


class Cancelled(NacelleError):
    """The run was cancelled: by the caller's cancel event, by leaving the stream, or
    because its deadline passed."""


class RetryBudgetExceeded(NacelleError):
    """The wall-clock budget given to ``Retry`` ran out.

    Distinct from :class:`Cancelled`: nobody asked the run to stop, it ran out of time.
    ``budget`` is the seconds of the ``Retry`` that reports it (None when a context's
    deadline raised it bare) and ``attempt`` the attempt it ran out on (read with
    :func:`attempt`).
    """

    def __init__(self, message: str = "", *, attempt: int = 0,
                 budget: Optional[float] = None) -> None:
        super().__init__(message)
        self.budget = budget
        if attempt:
            _set_attempt(self, attempt)


def transient(err: E) -> E:
    """Mark ``err`` as worth retrying and return it (``raise transient(StreamError(...))``)."""
    err.__dict__["_nacelle_transient"] = True
    return err


def retryable(err: BaseException) -> bool:
    """Tell whether another attempt might succeed where ``err`` failed.

    True for errors marked :func:`transient`, objects whose ``retryable`` attribute is
    true, :class:`TransportError` and :class:`StreamTruncated`; false for everything
    else, cancellations included.
    """
    if isinstance(err, (Cancelled, RetryBudgetExceeded, KeyboardInterrupt)):
        return False
    if getattr(err, "__dict__", {}).get("_nacelle_transient"):
        return True
    # TransportError and StreamTruncated say so as a class; an error given
    # ``retryable=`` when it was made says so itself.
    return getattr(err, "retryable", False) is True


def attempt(err: BaseException) -> int:
    """The attempt (1, 2, …) on which ``err`` happened; 0 when nothing retried it."""
    return int(getattr(err, "__dict__", {}).get("_nacelle_attempt", 0))


def _set_attempt(err: BaseException, number: int) -> None:
    """Record the attempt number on ``err``; used by ``Retry``."""
    err.__dict__["_nacelle_attempt"] = number
