"""The FastAPI application over an HttpApi: routes, error handlers, guards, the page."""

from __future__ import annotations

from importlib import resources

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from toolfleet.orchestrator.httpapi.adk_dev_ui import install_dev_ui
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.errors import install_error_handlers
from toolfleet.orchestrator.httpapi.guards import (
    AccessMiddleware,
    BodyLimitMiddleware,
    NoFramingMiddleware,
    TrustedProxies,
    current_caller,
)
from toolfleet.orchestrator.httpapi.routes_adk import adk_public_router, adk_sessions_router
from toolfleet.orchestrator.httpapi.routes_adk_run import adk_run_router
from toolfleet.orchestrator.httpapi.routes_cancel import cancel_router
from toolfleet.orchestrator.httpapi.routes_confirmations import confirmations_router
from toolfleet.orchestrator.httpapi.routes_metrics import metrics_router
from toolfleet.orchestrator.httpapi.routes_sessions import sessions_router
from toolfleet.orchestrator.httpapi.routes_streams import streams_router
from toolfleet.orchestrator.httpapi.routes_tickets import health_router, tickets_router
from toolfleet.orchestrator.httpapi.routes_timeline import timeline_router
from toolfleet.shared.version import version

STATIC = resources.files("toolfleet.orchestrator.httpapi") / "static"


def build_app(api: HttpApi) -> FastAPI:
    """The FastAPI application of `api`: its routes, error handlers and guards."""
    app = FastAPI(
        title="toolfleet",
        version=version(),
        description=(
            "Sessions, messages with their events as Server-Sent Events, long-running "
            "tickets and their completion, and health, of one orchestrator replica. "
            "Every error is JSON `{detail, status}`."
        ),
    )
    install_error_handlers(app)
    app.state.authenticator = api.authenticator
    auth = [Depends(current_caller)]  # every route but health and the page's files
    app.include_router(sessions_router(api), dependencies=auth)
    app.include_router(streams_router(api), dependencies=auth)
    app.include_router(timeline_router(api), dependencies=auth)
    app.include_router(tickets_router(api), dependencies=auth)
    app.include_router(confirmations_router(api), dependencies=auth)
    app.include_router(cancel_router(api), dependencies=auth)
    app.include_router(adk_sessions_router(api), dependencies=auth)
    app.include_router(adk_run_router(api), dependencies=auth)
    app.include_router(health_router(api))
    app.include_router(adk_public_router())
    install_dev_ui(app, api, auth)
    app.include_router(metrics_router(api))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> RedirectResponse:
        return RedirectResponse("approvals")

    @app.get("/approvals", include_in_schema=False)
    async def approvals_page() -> HTMLResponse:
        html = (STATIC / "approvals.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers=PAGE_HEADERS)

    @app.get("/timeline", include_in_schema=False)
    async def timeline_page() -> HTMLResponse:
        # The page alone: the session it shows is in its query, read with the caller's token.
        html = (STATIC / "timeline.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers=PAGE_HEADERS)

    app.add_middleware(
        AccessMiddleware,
        open_api=not api.http.auth_required(),
        proxies=TrustedProxies(api.http.trusted_proxies),
        allow_proxies=api.http.allow_no_auth,
    )
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=api.http.max_body_bytes,
        max_depth=api.settings.max_json_depth,
    )
    app.add_middleware(NoFramingMiddleware)  # outermost: refusals are not framed either
    return app


# The page loads only its own script and style, and talks only to this server.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
