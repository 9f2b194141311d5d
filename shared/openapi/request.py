"""One HTTP call of an OpenAPI operation with httpx: the request from the model's arguments,
the response read up to a bound (shared.openapi.body), secrets masked in what comes back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import httpx

from toolfleet.shared.errors import ToolError
from toolfleet.shared.openapi.body import ACCEPT_ENCODING, fitted, read_bounded
from toolfleet.shared.openapi.spec import Operation
from toolfleet.shared.redaction import secret_name_set
from toolfleet.shared.remote_auth import Secrets

# What a response may bring back to the model, in bytes; the rest is cut and marked.
DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024
# How much of an error body the model is shown, in characters.
ERROR_BODY_CHARS = 2000
# A path value percent-decoded this many times and still changing is refused.
MAX_DECODINGS = 8


class HttpStatusError(ToolError):
    """The API answered an error status; the message (for the model) has the status and body."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class Prepared:
    """What to send: the method, the URL and its query, the headers and the JSON body."""

    method: str
    url: str
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False


def prepare(
    op: Operation, base_url: str, args: Mapping[str, Any], headers: Mapping[str, str]
) -> Prepared:
    """The request for `op` with the model's `args`: path parameters percent-encoded (a
    value cannot leave its path segment), the others in the query, headers or cookies.
    A header of `headers` (the toolset's own, the credential's) is never replaced by an
    argument, whatever its case.

    ToolError (the model's error response) for a path value that would name another
    path: see `segment`."""
    path = op.path
    sent = Prepared(op.method.upper(), "", headers=dict(headers))
    own = {name.lower() for name in headers}  # the toolset's own: never the model's
    for param in op.parameters:
        if param.arg not in args or args[param.arg] is None:
            continue
        value = args[param.arg]
        if param.location == "path":
            path = path.replace("{" + param.name + "}", segment(param.arg, _text(value)))
        elif param.location == "query":
            sent.params[param.name] = value if isinstance(value, list) else _text(value)
        elif param.location == "header":
            if param.name.lower() not in own:
                sent.headers[param.name] = _text(value)
        else:
            sent.cookies[param.name] = _text(value)
    has_body = op.body_schema is not None and "body" in args
    url = base_url.rstrip("/") + "/" + path.lstrip("/")
    return Prepared(
        sent.method, url, sent.params, sent.headers, sent.cookies, args.get("body"), has_body
    )


def segment(arg: str, value: str) -> str:
    """`value` as one path segment, every reserved character percent-encoded (`/` too).

    Refused (ToolError): an empty value, and one that holds a `.` or `..` segment between
    slashes or backslashes, as given or once percent-decoded any number of times (`..`,
    `%2e%2e`, `%252E.`, `a/../b`). A client or server that normalises or decodes the path
    again would otherwise take it to another path of the API."""
    decoded = value
    for _ in range(MAX_DECODINGS):
        if value == "" or any(p in (".", "..") for p in re.split(r"[/\\]", decoded)):
            raise ToolError(
                f"argument {arg!r} is {value!r}: a path argument may not be empty or be "
                "(or contain) a '.' or '..' segment, even percent-encoded; pass the value itself"
            )
        once = unquote(decoded)
        if once == decoded:
            return quote(value, safe="")
        decoded = once
    raise ToolError(f"argument {arg!r} is percent-encoded over {MAX_DECODINGS} times")


def secret_arguments(op: Operation, args: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The values, as sent, of `args` for parameters with a secret name (their own or
    their argument's, case-insensitive): kept out of logs and results."""
    secret = secret_name_set(names)
    return [
        _text(args[p.arg])
        for p in op.parameters
        if args.get(p.arg) is not None and secret & {p.arg.lower(), p.name.lower()}
    ]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


async def send(
    client: httpx.AsyncClient,
    request: Prepared,
    secrets: Secrets,
    max_bytes: int,
    max_result_bytes: int,
) -> dict[str, Any]:
    """Send `request`; the response as {"status_code", "body"} (JSON decoded when it is
    JSON). The body is read up to `max_bytes` decoded bytes (and no further than
    `max_result_bytes`), and the result is cut to `max_result_bytes` of JSON (what the
    worker may send), "truncated": true when anything was cut. An HTTP error status
    raises HttpStatusError (a ToolError) with the status and the (masked, shortened)
    body: the model's error response."""
    extra: dict[str, Any] = {"json": request.body} if request.has_body else {}
    headers = {k: v for k, v in request.headers.items() if k.lower() != "accept-encoding"}
    headers["Accept-Encoding"] = ACCEPT_ENCODING  # codings read_bounded decodes in bounds
    async with client.stream(
        request.method,
        request.url,
        params=request.params,
        headers=headers,
        cookies=request.cookies,
        **extra,
    ) as response:
        raw, truncated = await read_bounded(response, min(max_bytes, max_result_bytes))
    decoded = _decode(raw, response.headers.get("content-type", ""), truncated)
    if truncated:  # the cut may end inside a secret value, where masking cannot see it
        decoded = _without_secret_start(decoded, secrets.values)
    body = secrets.mask(decoded)
    if response.is_error:
        shown = body if isinstance(body, str) else json.dumps(body)
        if len(shown) > ERROR_BODY_CHARS:
            shown = shown[:ERROR_BODY_CHARS] + "... (cut)"
        raise HttpStatusError(
            f"HTTP {response.status_code} {response.reason_phrase} from {request.method} "
            f"{secrets.mask(str(response.url.copy_with(query=None)))}: {shown}",
            response.status_code,
        )
    result: dict[str, Any] = {"status_code": response.status_code, "body": body}
    if truncated:
        result["truncated"] = True
    return fitted(result, max_result_bytes)


def _without_secret_start(text: str, values: Iterable[str]) -> str:
    """`text` without its end where that end is the start of a secret value."""
    for value in values:
        for size in range(min(len(value) - 1, len(text)), 0, -1):
            if text.endswith(value[:size]):
                text = text[:-size]
                break
    return text


def _decode(raw: bytes, content_type: str, truncated: bool) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type and not truncated:
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text
