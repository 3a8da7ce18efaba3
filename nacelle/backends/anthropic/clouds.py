"""Claude through Google Cloud's Vertex AI and Amazon Bedrock: the Messages wire
carried by each cloud, with its own address, body and authentication.

``anthropic.vertex(*, model, project=None, region=None, token=None)`` and
``anthropic.bedrock(*, model, region=None, api_key=None, profile=None)`` (both also take
``base_url``, ``max_retries``, ``timeout``, ``stall_timeout`` and ``pricing`` as
``anthropic.Backend`` does) return backends that build the request with the Anthropic
backend's :func:`~nacelle.backends.anthropic.wire.to_wire` and read the answer with its
:class:`~nacelle.backends.anthropic.stream.Accumulator`, so prompt caching, thinking,
replayed signatures (which are portable between the three,
https://platform.claude.com/docs/en/build-with-claude/extended-thinking), tool calls and
usage behave exactly as they do there. What differs, as the official SDK's
``lib/vertex`` and ``lib/bedrock`` do it:

**Vertex AI** (https://platform.claude.com/docs/en/build-with-claude/claude-on-vertex-ai):
``POST {base}/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict``
where ``base`` is ``https://{region}-aiplatform.googleapis.com/v1`` (the ``global``
region: ``https://aiplatform.googleapis.com/v1``; ``us`` and ``eu``: their ``rep``
endpoints); the body carries ``anthropic_version: "vertex-2023-10-16"`` and no ``model``
(the URL names it); the answer is the same SSE stream. Neither cloud takes the
per-tool ``eager_input_streaming`` switch (``_without_eager_input`` says what each
does instead). ``Authorization: Bearer`` comes
from ``token`` or the environment (``gcp.py`` says how, and what each path needs).
The region comes from ``region``, else ``CLOUD_ML_REGION`` (the SDK's variable), else
``GOOGLE_CLOUD_LOCATION``; the project from ``project``, ``ANTHROPIC_VERTEX_PROJECT_ID``,
``GOOGLE_CLOUD_PROJECT`` or the credentials. ``ANTHROPIC_VERTEX_BASE_URL`` replaces
the base, as in the SDK. Tokens are counted at
``.../models/count-tokens:rawPredict`` with the model in the body.

**Bedrock** (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html):
``POST https://bedrock-runtime.{region}.amazonaws.com/model/{modelId}/invoke-with-response-stream``,
the model id (or inference profile or ARN) percent-encoded in the path as botocore
encodes it; the body carries ``anthropic_version: "bedrock-2023-05-31"``, no ``model``
and no ``stream``, and the ``anthropic-beta`` names as an ``anthropic_beta`` list. The
answer is ``application/vnd.amazon.eventstream`` (``eventstream.py``): each ``chunk``
message's payload is ``{"bytes": base64(<an Anthropic stream event>)}``, fed to the
Anthropic accumulator as the SSE event it would have been. Authentication:

- a Bedrock API key (``api_key=``, else ``AWS_BEARER_TOKEN_BEDROCK``) as
  ``Authorization: Bearer`` (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html);
  a ``profile=`` given explicitly means SigV4 even when the variable is set;
- else SigV4 (``aws.py``) with the keys of the environment or the ``~/.aws`` files,
  read again and signed for each attempt (a retry gets a fresh date, rotated temporary
  keys are picked up).

The region is ``region``, else ``AWS_REGION``, ``AWS_DEFAULT_REGION`` or the profile's
(a ``ConfigError`` when none says: the SDK's silent ``us-east-1`` sends a request to a
region nobody chose). ``ANTHROPIC_BEDROCK_BASE_URL`` replaces the address.
Tokens are counted by Bedrock's ``CountTokens``
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html:
``POST /model/{modelId}/count-tokens`` with ``{"input": {"invokeModel": {"body":
base64(the invoke body)}}}``, answering ``{"inputTokens": N}``).

Errors: Bedrock's HTTP errors (``{"message"}``, the type in ``x-amzn-ErrorType``) go
through the same mapping as every provider's (``_http_errors``), so 429, 408 and 5xx
are retried and the rest raised. An exception inside the stream
(``:message-type: exception`` and its ``:exception-type``, the ``ResponseStream`` union
of https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html)
is a :class:`~nacelle.errors.StreamError` whose ``type`` is that name, retryable for
the ones the reference says to retry (throttling, internal server, model stream error,
model timeout, service unavailable) and not for ``validationException``.

What each cloud does not do, in its ``capabilities``:

- the MCP connector: neither ("not supported on Amazon Bedrock and Google Vertex",
  https://platform.claude.com/docs/en/agents-and-tools/mcp-connector, limitations);
- the provider's own tools: Bedrock runs none; Vertex runs web search only (a preview,
  with the ``web-search-2025-03-05`` beta header,
  https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/web-search);
- tool search is left to the local ``search_tools`` tool on both, and context editing
  (``context_management``, a beta the clouds' pages do not list) to nacelle's own
  compaction;
- structured output (``output_config.format``): Bedrock takes it on the models that
  take it first-party (https://docs.aws.amazon.com/bedrock/latest/userguide/structured-output.html);
  on Vertex it is off unless the organization policy
  ``constraints/vertexai.allowedPartnerModelFeatures`` allows ``structured_outputs``,
  and then for the newest models only
  (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/structured_outputs),
  so a Vertex backend does not claim it and ``output_mode="auto"`` uses the final-answer
  tool, which works everywhere.

Model names: a Vertex model is ``claude-sonnet-4-5@20250929``, a Bedrock one
``anthropic.claude-sonnet-4-5-20250929-v1:0``, ``us.anthropic...`` or an ARN. The rules
that depend on the Claude model (sampling, structured output, the price) read the Claude
name inside (``claude_name``). Cost: ``pricing`` when given, else a row for the cloud in
:data:`nacelle.pricing.PRICES` when there is one, else Anthropic's row for that Claude
model — the clouds list Claude at Anthropic's prices on their global endpoints; a
regional endpoint may cost more (Anthropic's pricing page notes a 10% premium on
regional endpoints for the newer models), which ``pricing=`` can say.

Outer ring: imports the standard library, nacelle's core, ``backends._turn``,
``backends._sampling``, ``backends._wire_cache``, and beside it ``wire``, ``stream``, ``claude``,
``bedrock_stream`` (when a Bedrock backend is made), ``aws`` and ``gcp``; never
``__init__``.

A turn's body is the Anthropic wire's ``encode_body`` in the cloud's frame (``_shape``):
each message's JSON encoded once a run, as the Anthropic backend does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from ...backend import Capabilities, Request, TurnEnd
from ...context import RunContext
from ...errors import ConfigError, StreamError
from ...events import Event, _wire_count
from ...messages import Message
from ...native import is_native
from .._sampling import claude_exclusive
from .._turn import Endpoint, check_model, count_tokens, stream_turn
from .._wire_cache import WireCache
from . import aws
from .claude import beta_header, capabilities, has_output_format, is_ping, open_server_calls
from .claude import settings_for
from .gcp import TokenSource, Tokens, project_from_environment
from .stream import Accumulator, Pricing
from .wire import betas, count_tokens_body, encode_body, to_wire

__all__ = ["BEDROCK_VERSION", "BedrockBackend", "VERTEX_VERSION", "VertexBackend", "bedrock",
           "bedrock_capabilities", "claude_name", "vertex", "vertex_capabilities"]

VERTEX_VERSION = "vertex-2023-10-16"
BEDROCK_VERSION = "bedrock-2023-05-31"
VERTEX_WEB_SEARCH_BETA = "web-search-2025-03-05"
FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"
EVENTSTREAM = "application/vnd.amazon.eventstream"

#: What Claude on Vertex AI can do (see the module docstring for what it cannot).
vertex_capabilities = dataclasses.replace(
    capabilities, mcp=False, tool_search=False, structured_output=False,
    context_edits=frozenset(),
    native_tools=frozenset(name for name in capabilities.native_tools
                           if name.split(":")[0] == "web_search"))
#: What Claude on Bedrock can do (see the module docstring for what it cannot).
bedrock_capabilities = dataclasses.replace(
    capabilities, mcp=False, tool_search=False, native_tools=frozenset(),
    context_edits=frozenset())


def claude_name(model: str) -> str:
    """The Claude model a cloud's model id names: ``claude-sonnet-4-5@20250929`` and
    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` (or its ARN) are both
    ``claude-sonnet-4-5-20250929``."""
    name = model.rsplit("/", 1)[-1]
    found = re.search(r"(?:^|\.)anthropic\.(.+)$", name)
    if found is not None:
        name = found.group(1)
    name = re.sub(r"-v\d+(?::\d+)*$", "", name)
    return name.replace("@", "-")


class _Cloud:
    """Claude on a cloud: the Anthropic wire, this cloud's address, body and auth."""

    name = ""
    cloud_capabilities: Capabilities = capabilities

    def __init__(self, model: str, endpoint: Endpoint, pricing: Optional[Pricing]) -> None:
        if pricing is not None and not isinstance(pricing, Pricing):
            raise ConfigError(
                "pricing must be anthropic.Pricing(input, output, cache_read, cache_write)"
                f" in dollars per million tokens, got {type(pricing).__name__}")
        claude = claude_name(model)
        if pricing is None:
            from ...pricing import price_for  # the table: where a backend is made

            pricing = price_for(self.name, model) or price_for("anthropic", claude)
        self.model = model
        self.pricing = pricing
        self._endpoint = endpoint
        self._wire_cache = WireCache()  # each message's JSON, encoded once a run
        self.base_url = endpoint.base_url
        structured = self.cloud_capabilities.structured_output and has_output_format(claude)
        self.capabilities = dataclasses.replace(
            self.cloud_capabilities, cost=pricing is not None, structured_output=structured,
            settings=settings_for(claude), exclusive_settings=claude_exclusive(claude))

    def _body(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        """The body as a dict (a token count sends it inside another)."""
        return self._shape(request, to_wire(request, messages, model=self.model))

    def _shape(self, request: Request, body: Dict[str, Any]) -> Dict[str, Any]:
        """The Anthropic body made this cloud's: its frame only, never ``messages``
        (so a turn's body is the Anthropic wire's cached one in this frame)."""
        raise NotImplementedError

    def _path(self) -> str:
        raise NotImplementedError

    def _headers(self, request: Request) -> Dict[str, str]:
        return {}

    def _accumulator(self, scrub: Any, calls: Mapping[str, Tuple[str, str]]) -> Accumulator:
        return Accumulator(pricing=self.pricing, calls=calls, scrub=scrub)

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its deltas as they arrive, then its TurnEnd."""
        body = encode_body(request, messages, model=self.model, cache=self._wire_cache,
                           shape=functools.partial(self._shape, request))
        calls = open_server_calls(messages)
        return stream_turn(
            self._endpoint, self._path(), body, ctx,
            lambda scrub: self._accumulator(scrub, calls), headers=self._headers(request),
            keepalive=is_ping, request=request, model=self.model)


# -- Vertex AI ---------------------------------------------------------------------------

class VertexBackend(_Cloud):
    """Claude on Vertex AI; made by :func:`vertex`. See the module docstring."""

    name = "vertex"
    cloud_capabilities = vertex_capabilities

    def __init__(self, *, model: str, project: Optional[str], region: str,
                 token: Optional[TokenSource], base_url: str, max_retries: int,
                 timeout: float, stall_timeout: float, pricing: Optional[Pricing]) -> None:
        self._tokens = Tokens(token)
        endpoint = Endpoint(base_url, {}, max_retries=max_retries, timeout=timeout,
                            stall_timeout=stall_timeout, name=self.name,
                            sign=functools.partial(_bearer, self._tokens),
                            auth_hint="check the Google Cloud credentials: the token= given, or "
                                      "the application-default credentials and their access "
                                      "to Vertex AI in this project")
        super().__init__(model, endpoint, pricing)
        self.project = project
        self.region = region

    def __repr__(self) -> str:
        return (f"anthropic.vertex(model={self.model!r}, project={self.project!r}, "
                f"region={self.region!r}, base_url={self.base_url!r})")

    def _models(self) -> str:
        project = self.project or self._tokens.project
        if project is None:
            self._tokens()  # the credentials may name the project
            project = self._tokens.project
        if project is None:
            raise ConfigError("no Google Cloud project for Vertex AI: pass project= to "
                              "anthropic.vertex or set ANTHROPIC_VERTEX_PROJECT_ID")
        return (f"/projects/{_quote(project, safe='')}/locations/{_quote(self.region, safe='')}"
                "/publishers/anthropic/models")

    def _path(self) -> str:
        return f"{self._models()}/{_quote(self.model, safe='@')}:streamRawPredict"

    def _shape(self, request: Request, body: Dict[str, Any]) -> Dict[str, Any]:
        del body["model"]
        _without_eager_input(body)
        body["anthropic_version"] = VERTEX_VERSION
        return body

    def _headers(self, request: Request) -> Dict[str, str]:
        headers = beta_header(request)
        if any(is_native(tool) and getattr(tool, "kind", "") == "web_search"
               for tool in request.tools):
            names = [headers["anthropic-beta"]] if headers else []
            headers = {"anthropic-beta": ",".join(names + [VERTEX_WEB_SEARCH_BETA])}
        return headers

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """The input tokens of ``request``, as Vertex AI counts them."""
        body = count_tokens_body(request, request.messages, model=self.model)
        _without_eager_input(body)
        body["anthropic_version"] = VERTEX_VERSION
        return count_tokens(self._endpoint, f"{self._models()}/count-tokens:rawPredict", body,
                            ctx, "Vertex AI", headers=self._headers(request))


def _without_eager_input(body: Dict[str, Any]) -> bool:
    """Take ``eager_input_streaming`` off the body's tools; True if a tool had it.

    Both clouds validate the body strictly and refuse the per-tool switch ("tools.0.
    custom.eager_input_streaming: Extra inputs are not permitted": Bedrock,
    https://github.com/vercel/ai/pull/17179, probed against InvokeModel; Vertex,
    https://github.com/anomalyco/opencode/issues/24562). Bedrock streams tool input
    as it is written with the older ``fine-grained-tool-streaming-2025-05-14`` beta
    instead (the same probe); Vertex takes neither (its proxy does not support the
    beta, https://github.com/vercel/ai/pull/13574), so there a tool's input arrives as
    the API checks each parameter, in fewer, larger TOOL_INPUT events.
    """
    found = False
    for tool in body.get("tools", ()):
        if isinstance(tool, dict) and tool.pop("eager_input_streaming", None) is not None:
            found = True
    return found


def _bearer(tokens: Tokens, url: str, body: bytes, headers: Mapping[str, str]) -> Dict[str, str]:
    return {"Authorization": f"Bearer {tokens()}"}


def _vertex_base(region: str) -> str:
    special = {"global": "https://aiplatform.googleapis.com/v1",
               "us": "https://aiplatform.us.rep.googleapis.com/v1",
               "eu": "https://aiplatform.eu.rep.googleapis.com/v1"}
    return special.get(region, f"https://{region}-aiplatform.googleapis.com/v1")


def vertex(*, model: str, project: Optional[str] = None, region: Optional[str] = None,
           token: Optional[TokenSource] = None, base_url: Optional[str] = None,
           max_retries: int = 2, timeout: float = 600.0, stall_timeout: float = 600.0,
           pricing: Optional[Pricing] = None) -> VertexBackend:
    """Claude on Google Cloud's Vertex AI (see the module docstring and ``gcp.py``)."""
    check_model(model, "a Claude model on Vertex AI", "claude-sonnet-4-5@20250929")
    region = region or _env("CLOUD_ML_REGION") or _env("GOOGLE_CLOUD_LOCATION")
    if not region or not re.fullmatch(r"[a-z0-9-]+", region):
        raise ConfigError("anthropic.vertex needs a region: pass region= (\"global\", "
                          "\"us-east5\"…) or set CLOUD_ML_REGION" if not region else
                          f"region must be a Google Cloud region name, got {region!r}")
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise ConfigError("project must be a non-empty string or None")
    return VertexBackend(
        model=model, project=project or project_from_environment(), region=region,
        token=token,
        base_url=base_url or _env("ANTHROPIC_VERTEX_BASE_URL") or _vertex_base(region),
        max_retries=max_retries, timeout=timeout, stall_timeout=stall_timeout,
        pricing=pricing)


def _quote(text: str, safe: str) -> str:
    """``urllib.parse.quote``, imported at the first path built rather than with the
    backends (see benchmarks/README.md, row 4)."""
    from urllib.parse import quote

    return quote(text, safe=safe)


def _env(name: str) -> Optional[str]:
    return os.environ.get(name, "").strip() or None


# -- Bedrock -----------------------------------------------------------------------------

class BedrockBackend(_Cloud):
    """Claude on Amazon Bedrock; made by :func:`bedrock`. See the module docstring."""

    name = "bedrock"
    cloud_capabilities = bedrock_capabilities

    def __init__(self, *, model: str, region: str, api_key: Optional[str],
                 profile: Optional[str], base_url: str, max_retries: int, timeout: float,
                 stall_timeout: float, pricing: Optional[Pricing]) -> None:
        # The event-stream decoder is loaded with the first Bedrock backend, not with
        # this module (which Vertex AI shares).
        from .bedrock_stream import BedrockEvents

        self._auth = BedrockAuth(region, api_key, profile)
        endpoint = Endpoint(base_url, {}, max_retries=max_retries, timeout=timeout,
                            stall_timeout=stall_timeout, name=self.name,
                            key_variable="AWS_BEARER_TOKEN_BEDROCK", sign=self._auth,
                            stream_media=EVENTSTREAM, decoder=BedrockEvents,
                            auth_hint="check the Bedrock API key ($AWS_BEARER_TOKEN_BEDROCK or "
                                      "the api_key argument) or the AWS credentials "
                                      "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the "
                                      "profile) and their access to this model")
        super().__init__(model, endpoint, pricing)
        self.region = region
        self.profile = profile

    def __repr__(self) -> str:
        profile = f", profile={self.profile!r}" if self.profile else ""
        return (f"anthropic.bedrock(model={self.model!r}, region={self.region!r}{profile}, "
                f"base_url={self.base_url!r})")

    def _path(self) -> str:
        return f"/model/{_quote(self.model, safe='')}/invoke-with-response-stream"

    def _shape(self, request: Request, body: Dict[str, Any]) -> Dict[str, Any]:
        del body["model"]
        body.pop("stream", None)
        body["anthropic_version"] = BEDROCK_VERSION
        names = betas(request)
        if _without_eager_input(body):
            names.append(FINE_GRAINED_BETA)
        if names:
            body["anthropic_beta"] = names
        return body

    def _accumulator(self, scrub: Any, calls: Mapping[str, Tuple[str, str]]) -> Accumulator:
        from .bedrock_stream import BedrockAccumulator  # loaded by __init__

        return BedrockAccumulator(pricing=self.pricing, calls=calls, scrub=scrub)

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """The input tokens of ``request``, as Bedrock's ``CountTokens`` counts them."""
        import base64  # token counts only

        invoke = self._body(request, request.messages)
        encoded = json.dumps(invoke, ensure_ascii=False, separators=(",", ":")).encode()
        body = {"input": {"invokeModel": {"body": base64.b64encode(encoded).decode("ascii")}}}
        answer = self._endpoint.transport.post_json(
            f"/model/{_quote(self.model, safe='')}/count-tokens", body, ctx)
        tokens = answer.get("inputTokens") if isinstance(answer, dict) else None
        count = _wire_count(tokens) if type(tokens) is int else None
        if count is None:
            raise StreamError("Bedrock's token count had no inputTokens count (a whole "
                              "number of zero or more)")
        return count


class BedrockAuth:
    """Bedrock's authentication for each request: the API key as a bearer token, or a
    SigV4 signature.

    What the environment and the ``~/.aws`` files hold is read again for every request
    (a few dictionary lookups, or two small files): temporary keys that a tool such as
    ``aws sso login`` or a credentials helper rewrites are picked up when they change,
    rather than failing with ``ExpiredToken`` for the rest of the process, and nothing
    read there is kept on the object, so nothing read there is pickled.
    """

    def __init__(self, region: str, api_key: Optional[str], profile: Optional[str]) -> None:
        self.region = region
        self._api_key = api_key
        self._profile = profile

    def __repr__(self) -> str:
        return f"BedrockAuth({self.region!r}, profile={self._profile!r})"

    def __call__(self, url: str, body: bytes, headers: Mapping[str, str]) -> Dict[str, str]:
        key = self._api_key or (
            "" if self._profile else os.environ.get("AWS_BEARER_TOKEN_BEDROCK", "").strip())
        if key:
            return {"Authorization": f"Bearer {key}"}
        return aws.sign("POST", url, headers, body, aws.credentials(self._profile),
                        self.region, "bedrock")


def bedrock(*, model: str, region: Optional[str] = None, api_key: Optional[str] = None,
            profile: Optional[str] = None, base_url: Optional[str] = None,
            max_retries: int = 2, timeout: float = 600.0, stall_timeout: float = 600.0,
            pricing: Optional[Pricing] = None) -> BedrockBackend:
    """Claude on Amazon Bedrock (see the module docstring and ``aws.py``)."""
    check_model(model, "a Claude model on Bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0")
    if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
        raise ConfigError("api_key must be a non-empty string or None (then "
                          "$AWS_BEARER_TOKEN_BEDROCK, or SigV4 with the AWS credentials)")
    if api_key is not None and profile is not None:
        raise ConfigError("give api_key= or profile=, not both: a Bedrock API key is sent "
                          "as it is, a profile's keys sign each request")
    if profile is not None and (not isinstance(profile, str) or not profile.strip()):
        raise ConfigError("profile must name a profile of the AWS files, or be None")
    region = region or aws.region(profile)
    if not region or not re.fullmatch(r"[a-z0-9-]+", region):
        raise ConfigError("anthropic.bedrock needs a region: pass region= (\"us-east-1\"…) "
                          "or set AWS_REGION" if not region else
                          f"region must be an AWS region name, got {region!r}")
    return BedrockBackend(
        model=model, region=region, api_key=api_key, profile=profile,
        base_url=(base_url or _env("ANTHROPIC_BEDROCK_BASE_URL")
                  or f"https://bedrock-runtime.{region}.amazonaws.com"),
        max_retries=max_retries, timeout=timeout, stall_timeout=stall_timeout,
        pricing=pricing)
