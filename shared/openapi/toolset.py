"""OpenAPIToolset: one tool per operation of an OpenAPI spec, called with httpx on workers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx
from google.genai import types

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError, ToolError, ToolfleetError
from toolfleet.shared.http_logs import hidden_in_http_logs, mask_http_logs, masked
from toolfleet.shared.openapi.request import (
    DEFAULT_MAX_RESPONSE_BYTES,
    HttpStatusError,
    prepare,
    secret_arguments,
    send,
)
from toolfleet.shared.openapi.spec import Operation, load_spec, operations
from toolfleet.shared.remote_auth import (
    AWAITING_CREDENTIAL,
    Secrets,
    credential_header,
    stored_credential,
)
from toolfleet.shared.tools import FunctionTool, ToolOptions
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

# HTTP statuses that mean the credential was refused: ask the user for it again.
REFUSED = (401, 403)
# Settings for a call made off a worker (a test, a script): the default limits and names.
_DEFAULTS = Settings.model_construct()


class OpenAPIToolset(BaseToolset):
    """The operations of an OpenAPI 3 spec as tools, as ADK's OpenAPIToolset.

    Each operation becomes a tool named after its operationId (snake_case): its path,
    query, header and cookie parameters are arguments by name, a JSON request body is the
    `body` argument. Workers make the calls with httpx; an HTTP error status becomes the
    model's error response with the status and the body, secrets masked.

    Args:
        spec_dict: The spec as a dict (or pass `spec_str`, JSON or YAML).
        spec_str: The spec as text.
        base_url: Where to send calls; default: the spec's first server URL.
        auth: The user's credential for the API, through toolfleet's credential store: the
            first call asks the user for it (`request_credential`), later calls send it.
            "bearer" and "oauth2" go in `Authorization: Bearer`; "api_key" where the spec's
            apiKey security scheme says (header or query), else `X-API-Key`.
        headers: Headers sent with every call (read on the worker, e.g. from its
            environment); their values are masked in every result.
        tool_filter: Only these tools (names before the prefix).
        tool_name_prefix: Offer every tool as "<prefix>_<name>".
        timeout_s: Each HTTP call's time limit, in seconds.
        max_response_bytes: A longer response body is cut there, marked "truncated" (and
            so is one whose result is over TOOLFLEET_MAX_PAYLOAD_BYTES of JSON). Counted
            as decoded: a compressed body is inflated no further than the bound.
        pool: The pool whose workers make the calls (default: the default io pool).
    """

    def __init__(
        self,
        *,
        spec_dict: Mapping[str, Any] | None = None,
        spec_str: str | None = None,
        base_url: str | None = None,
        auth: AuthConfig | None = None,
        headers: Mapping[str, str] | None = None,
        tool_filter: list[str] | None = None,
        tool_name_prefix: str | None = None,
        timeout_s: float = 30.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        pool: str | None = None,
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        # I/O-bound calls: many at once per worker process, on its event loop.
        self.options = ToolOptions(pool=pool, kind="io")
        spec = load_spec(spec_dict, spec_str)
        api = _Api(
            base_url=base_url or _server_url(spec),
            auth=auth,
            auth_place=_api_key_place(spec),
            headers=dict(headers or {}),
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
        )
        self._tools = [RestApiTool(api.without_own_parameters(op), api) for op in operations(spec)]
        mask_http_logs()  # before any call: httpx's lines hold request URLs

    async def get_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[FunctionTool]:
        """A tool per operation (the same objects every time)."""
        return self._function_tools()

    def all_tools(self) -> Iterable[FunctionTool]:
        """Every tool: the spec was read when the toolset was made, so no event loop is
        needed, and this answers inside one too (the HTTP API lists tools there)."""
        return self.offered(self._function_tools())

    def _function_tools(self) -> list[FunctionTool]:
        return [replace(t.as_function_tool(), options=self.options) for t in self._tools]


class _Api:
    """How to reach the API: shared by the toolset's tools."""

    def __init__(
        self,
        *,
        base_url: str,
        auth: AuthConfig | None,
        auth_place: tuple[str, str],
        headers: dict[str, str],
        timeout_s: float,
        max_response_bytes: int,
    ) -> None:
        self.base_url = base_url
        self.auth = auth
        self.auth_place = auth_place
        self.headers = headers
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes

    def without_own_parameters(self, operation: Operation) -> Operation:
        """`operation` less the parameters this API sets on every call - its headers and
        the credential's header or query parameter: the model may not replace them."""
        headers = set(self.headers)
        query: set[str] = set()
        if self.auth is not None:
            place, name = self.auth_place
            if self.auth.scheme != "api_key":
                headers.add("Authorization")
            elif place == "query":
                query.add(name)
            else:
                headers.add(name)
        return operation.without("header", headers).without("query", query)


class RestApiTool(BaseTool):
    """One operation of an OpenAPI spec, called on a worker."""

    def __init__(self, operation: Operation, api: _Api) -> None:
        super().__init__(name=operation.name, description=operation.description)
        self.operation = operation
        self._api = api

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.operation.name,
            description=self.operation.description,
            parameters_json_schema=self.operation.parameters_json_schema(),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Call the operation with the model's arguments (and the user's credential)."""
        api = self._api
        headers = dict(api.headers)
        query: dict[str, str] = {}
        token = None
        if api.auth is not None:
            token = stored_credential(tool_context, api.auth)
            if token is None:
                return dict(AWAITING_CREDENTIAL)
            name, value = credential_header(api.auth, token, api.auth_place[1])
            in_query = api.auth.scheme == "api_key" and api.auth_place[0] == "query"
            (query if in_query else headers)[name] = value
        request = prepare(self.operation, api.base_url, args, headers)
        request.params.update(query)
        settings = _worker_settings(tool_context)
        names = tuple(settings.secret_arg_names)
        sent = [*api.headers.values(), *([token] if token else [])]
        sent += secret_arguments(self.operation, args, names)
        secrets = Secrets(values=(*sent, *(quote(v, safe="") for v in sent)), names=names)
        limit = settings.max_payload_bytes
        # The credential and secret-named arguments are masked in httpx's log lines too.
        with hidden_in_http_logs(secrets.values):
            async with httpx.AsyncClient(timeout=api.timeout_s, follow_redirects=False) as c:
                try:
                    return await send(c, request, secrets, api.max_response_bytes, limit)
                except HttpStatusError as exc:
                    if api.auth is not None and exc.status_code in REFUSED:
                        tool_context.request_credential(api.auth)
                    raise
                except httpx.HTTPError as exc:  # the model's error, logged nowhere
                    where = str(httpx.URL(request.url).copy_with(query=None))
                    error = f"{request.method} {where} failed: {type(exc).__name__}: {exc}"
                    raise ToolError(masked(secrets.mask(error))) from None


def _worker_settings(tool_context: ToolContext) -> Settings:
    """The worker's settings: its payload limit (a longer response is cut to fit it, not
    refused whole) and secret argument names; the defaults off a worker."""
    try:
        return tool_context.settings
    except ToolfleetError:
        return _DEFAULTS


def _server_url(spec: Mapping[str, Any]) -> str:
    servers = spec.get("servers")
    first = servers[0] if isinstance(servers, list) and servers else None
    url = first.get("url") if isinstance(first, Mapping) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ToolDefinitionError(
            [
                f"OpenAPIToolset: the spec has no absolute server URL ({url!r}): pass "
                "base_url='https://api.example.com'"
            ]
        )
    return url


def _api_key_place(spec: Mapping[str, Any]) -> tuple[str, str]:
    """Where the spec's first apiKey security scheme puts the key: (header|query, name)."""
    components = spec.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, Mapping) else None
    for scheme in schemes.values() if isinstance(schemes, Mapping) else ():
        if not isinstance(scheme, Mapping) or scheme.get("type") != "apiKey":
            continue
        if scheme.get("in") in ("header", "query") and isinstance(scheme.get("name"), str):
            return str(scheme["in"]), str(scheme["name"])
    return "header", "X-API-Key"
