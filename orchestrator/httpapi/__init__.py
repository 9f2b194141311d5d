"""The HTTP API and approvals page of `toolfleet serve --http` (FastAPI on uvicorn)."""

from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.hub import SessionHub
from toolfleet.orchestrator.httpapi.serving import RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import HttpSettings, parse_bind

__all__ = ["HttpApi", "HttpSettings", "RunningHttp", "SessionHub", "parse_bind", "serve_http"]
