"""The HTTP API and approvals page of `toolfleet serve --http` (FastAPI on uvicorn)."""

from orchestrator.httpapi.api import HttpApi
from orchestrator.httpapi.hub import SessionHub
from orchestrator.httpapi.serving import RunningHttp, serve_http
from orchestrator.httpapi.settings import HttpSettings, parse_bind

__all__ = ["HttpApi", "HttpSettings", "RunningHttp", "SessionHub", "parse_bind", "serve_http"]
