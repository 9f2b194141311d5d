"""A session's timeline (JSON), under the session's own path and access rules."""

# No `from __future__ import annotations`: FastAPI reads the route signatures.

from typing import Annotated

from fastapi import APIRouter, Path

from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, documented
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.timeline import Timeline, timeline_of
from toolfleet.orchestrator.httpapi.wire import APP, APP_PATTERN, SessionId, User


def timeline_router(api: HttpApi) -> APIRouter:
    """`GET .../sessions/{session_id}/timeline`: what the timeline page draws. A caller sees
    only its own sessions' (an admin any), as with the session itself."""
    router = APIRouter(tags=["sessions"], responses=documented(*COMMON_ERRORS, 404))
    served = {"enum": sorted(api.orch.runners)}
    App = Annotated[str, Path(pattern=APP_PATTERN, description=APP, json_schema_extra=served)]

    @router.get(
        "/apps/{app}/users/{user_id}/sessions/{session_id}/timeline",
        response_model=Timeline,
        summary="A session's turns: each call's run on its worker process, and its tickets",
    )
    async def session_timeline(
        app: App, user_id: User, session_id: SessionId, caller: Who
    ) -> Timeline:
        session = await api.session(caller, app, user_id, session_id)
        return timeline_of(session, await api.store.pending_calls(session.key))

    return router
