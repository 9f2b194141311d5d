"""Every error as JSON `{"detail": ..., "status": ...}` with the status that fits it."""

from __future__ import annotations

import logging
import re
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from toolfleet.orchestrator.httpapi.wire import ErrorBody
from toolfleet.shared.errors import (
    CallNotPendingError,
    CompletionError,
    CompletionsFullError,
    ConfigError,
    InvalidCompletionError,
    ModelError,
    PayloadTooLargeError,
    SessionError,
    SessionNotFoundError,
    ToolfleetError,
)

log = logging.getLogger(__name__)


FASTAPI_UNPARSABLE_BODY = "There was an error parsing the body"


class ApiError(Exception):
    """An error answered with this status and detail (raised by the routes)."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


# The status of each toolfleet error, most specific first (the first match wins).
STATUS_BY_TYPE: tuple[tuple[type[Exception], int], ...] = (
    (CallNotPendingError, 404),  # unknown call, or never long-running
    (PayloadTooLargeError, 413),  # a result or payload over TOOLFLEET_MAX_PAYLOAD_BYTES
    (InvalidCompletionError, 422),  # a result that is not a JSON object, or nested too deep
    (CompletionsFullError, 503),  # the orchestrators are behind: retry later
    (CompletionError, 409),  # the call's state refuses it: completed, awaits a credential
    (SessionNotFoundError, 404),
    (SessionError, 409),  # exists already, or another invocation holds it
    (ModelError, 502),
    (ConfigError, 500),
    (redis.ConnectionError, 503),
    (redis.TimeoutError, 503),
)


def status_of(exc: Exception) -> int:
    """The HTTP status of an error raised by toolfleet (or by Redis), by its type."""
    if isinstance(exc, ApiError):
        return exc.status
    return next((status for kind, status in STATUS_BY_TYPE if isinstance(exc, kind)), 500)


def detail_of(exc: Exception) -> str:
    """The error's message for the client (a generic one for unexpected errors)."""
    status = status_of(exc)
    if status == 500 and not isinstance(exc, ToolfleetError):
        return "internal error; the orchestrator's log has the details"
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return f"Redis is unreachable: {exc}"
    return str(exc)


def error_response(
    status: int, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """The JSON body every error has: `{"detail": ..., "status": ...}` (and `extra`)."""
    body = ErrorBody(detail=detail, status=status, **extra)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """The methods of every route whose path matches (the documented ones, and the page's)."""
    path = request.url.path
    methods: set[str] = set()
    paths: dict[str, dict[str, Any]] = request.app.openapi().get("paths", {})
    for template, operations in paths.items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            methods |= {method.upper() for method in operations}
    for route in request.app.routes:  # routes outside the schema (the page, the docs)
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path):
            methods |= set(getattr(route, "methods", None) or ())
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _describe(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    problems = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in errors
    ]
    parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems]
    return "invalid request: " + "; ".join(parts), problems


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error as JSON with the status that fits it."""

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.detail, exc.headers)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 400 and detail == FASTAPI_UNPARSABLE_BODY:
            # A body that is not even text (not UTF-8): as bad a body as invalid JSON.
            return error_response(422, "invalid request: the body is not UTF-8 encoded JSON")
        if exc.status_code == 405:
            # Starlette names the methods of the first route matching the path only.
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return error_response(exc.status_code, detail, headers or None)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        detail, problems = _describe(list(exc.errors()))
        return error_response(422, detail, errors=problems)

    async def on_toolfleet(request: Request, exc: Exception) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc)
        return error_response(status, detail_of(exc))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, detail_of(exc))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ToolfleetError, on_toolfleet)
    app.add_exception_handler(redis.RedisError, on_toolfleet)
    app.add_exception_handler(Exception, on_unexpected)


# What any authenticated route may answer besides its own statuses.
COMMON_ERRORS = (400, 401, 403, 413, 422, 503)


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses, each with the ErrorBody schema."""
    meaning = {
        400: "Malformed request",
        401: "Missing or wrong bearer token",
        403: "Refused origin or host",
        404: "Not found",
        409: "Conflict",
        413: "Request body too large",
        422: "Invalid request body or parameters",
        502: "The model failed",
        503: "Redis or the fleet is unavailable",
    }
    return {s: {"model": ErrorBody, "description": meaning.get(s, "Error")} for s in statuses}
