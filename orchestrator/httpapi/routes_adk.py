"""ADK api_server's routes for apps, sessions, state and artifacts, at ADK_PREFIX: the
paths, bodies and status codes ADK's clients and dev UI use, on the fleet's sessions."""

# No `from __future__ import annotations`: FastAPI reads the route signatures.

import asyncio
import platform
import re
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from toolfleet.orchestrator.adkwire.session_ops import (
    append_under_lease,
    create_with_state,
    delete_session,
    list_user_sessions,
)
from toolfleet.orchestrator.httpapi.adk_wire import (
    CreateSessionRequest,
    State,
    UpdateMemoryRequest,
    UpdateSessionRequest,
    adk_artifact_version,
    adk_session,
)
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.wire import ID_PATTERN, FiniteJSONResponse, SessionId, User
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.artifacts import ArtifactStore, ArtifactVersion
from toolfleet.shared.errors import SessionExistsError, SessionNotFoundError
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.memory import MemoryStore
from toolfleet.shared.redaction import SEALED, mentions_sealed
from toolfleet.shared.version import version

# Where ADK's routes are served: toolfleet's own routes share some of ADK's paths with
# other bodies, and ADK's clients and dev UI take a base URL (ADK's own --url_prefix).
ADK_PREFIX = "/adk"
# ADK's app names are its agent folders' names: any id-like name this replica serves.
AppName = Annotated[str, Path(pattern=ID_PATTERN, description="The app (agent) name.")]
VersionId = Annotated[
    str, Path(pattern=r"^(latest|[0-9]{1,9})$", description="A version number, or latest.")
]
# More versions than a Redis list can hold: a version past it is no artifact's.
MAX_VERSIONS = 2**32
# The artifact routes' paths under a name: a DELETE of one of them is no artifact's.
_VERSION_PATHS = re.compile(r"/versions(/(latest|[0-9]+))?(/metadata)?$")


def refuse_state_write(caller: Caller, state: dict[str, Any] | None) -> None:
    """422 when `state` holds the reserved key `$sealed`; 403 when `caller` writes
    app-wide state it may not (ADK's server lets any client: here the app's every user
    reads it)."""
    if mentions_sealed(state):
        # Only the orchestrator seals: the store keeps a sealed value as it is and a worker
        # opens it for the tool, so a token copied from someone else's call or state would
        # hand their secret to this session's tools.
        raise ApiError(
            422,
            f"the key {SEALED!r} is reserved: state written over HTTP may not hold it; "
            "write the secret's value itself (it is sealed when stored)",
        )
    shared = caller.shared_state_in(state)
    if shared:
        raise ApiError(
            403,
            f"{caller.subject!r} may not write app-wide state ({', '.join(shared)}): every "
            "user of the app reads it; only an admin may write it over HTTP (a tool writes "
            "it through tool_context.state)",
        )


def adk_public_router() -> APIRouter:
    """ADK's routes that need no caller: health and version."""
    router = APIRouter(prefix=ADK_PREFIX, tags=["adk"])

    @router.get("/health", summary="ADK's health check")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/version", summary="The server's version, as ADK's api_server says it")
    async def server_version() -> dict[str, str]:
        return {
            "version": version(),
            "language": "python",
            "language_version": platform.python_version(),
        }

    return router


def adk_sessions_router(api: HttpApi) -> APIRouter:
    """ADK's routes for apps, sessions, state and artifacts, for the caller's own sessions
    (another user's answer 404, as if they did not exist)."""
    router = APIRouter(
        prefix=ADK_PREFIX, tags=["adk"], responses=documented(*COMMON_ERRORS, 404, 409)
    )
    base = "/apps/{app_name}/users/{user_id}/sessions"
    replica = api.orch.replica
    names = api.settings.secret_arg_names

    def shaped(session: Session) -> dict[str, Any]:
        return adk_session(session, api.tools.long_running(session.app_name), names)

    def artifacts() -> ArtifactStore:
        return ArtifactStore(replica.sync_client(), api.keys)

    async def owned(caller: Who, app_name: str, user_id: str, session_id: str) -> Session:
        try:
            return await api.session(caller, app_name, user_id, session_id)
        except ApiError:
            raise ApiError(404, "Session not found") from None  # ADK's words

    @router.get("/list-apps", summary="The apps this replica serves")
    async def list_apps(detailed: bool = False) -> Any:
        if not detailed:
            return sorted(api.orch.runners)
        apps = [
            {
                "name": name,
                "rootAgentName": runner.agent.name,
                "description": runner.agent.description,
                "language": "python",
                "isComputerUse": False,
                "agents": None,  # as ADK lists its apps
            }
            for name, runner in sorted(api.orch.runners.items())
        ]
        return {"apps": apps}

    @router.get(base + "/{session_id}", summary="A session, as ADK's Session")
    async def get_session(
        app_name: AppName, user_id: User, session_id: SessionId, caller: Who
    ) -> FiniteJSONResponse:
        return FiniteJSONResponse(shaped(await owned(caller, app_name, user_id, session_id)))

    @router.get(base, summary="A user's sessions, without their events")
    async def list_sessions(app_name: AppName, user_id: User, caller: Who) -> FiniteJSONResponse:
        api.runner(app_name)
        api.user(caller, user_id)
        out = []
        for session in await list_user_sessions(replica, app_name, user_id):
            listed = shaped(session)  # ADK lists sessions without their events
            out.append({**listed, "events": []})
        return FiniteJSONResponse(out)

    async def create(
        caller: Who,
        app_name: str,
        user_id: str,
        session_id: str | None,
        state: dict[str, Any] | None,
    ) -> FiniteJSONResponse:
        api.runner(app_name)
        api.new_session(caller, user_id, session_id)
        refuse_state_write(caller, state)
        try:
            session = await create_with_state(replica, app_name, user_id, session_id, state)
        except SessionExistsError:
            raise ApiError(409, f"Session already exists: {session_id}") from None
        if state:
            session = await replica.store.get(session.key)
        return FiniteJSONResponse(shaped(session))

    @router.post(base, summary="Create a session with an initial state")
    async def create_session(
        app_name: AppName, user_id: User, caller: Who, req: CreateSessionRequest | None = None
    ) -> FiniteJSONResponse:
        req = req or CreateSessionRequest()
        return await create(caller, app_name, user_id, req.session_id, req.state)

    @router.post(base + "/{session_id}", summary="Create a session of this id (ADK: deprecated)")
    async def create_session_with_id(
        app_name: AppName,
        user_id: User,
        session_id: SessionId,
        caller: Who,
        state: State | None = None,
    ) -> FiniteJSONResponse:
        return await create(caller, app_name, user_id, session_id, state)

    @router.delete(base + "/{session_id}", summary="Delete a session and its pending calls")
    async def remove_session(
        app_name: AppName, user_id: User, session_id: SessionId, caller: Who
    ) -> Response:
        api.runner(app_name)
        api.session_of(caller, user_id, session_id)
        await delete_session(replica, app_name, user_id, session_id)
        return FiniteJSONResponse(None)

    @router.patch(base + "/{session_id}", summary="Write state without running the agent")
    async def update_session(
        app_name: AppName,
        user_id: User,
        session_id: SessionId,
        req: UpdateSessionRequest,
        caller: Who,
    ) -> FiniteJSONResponse:
        session = await owned(caller, app_name, user_id, session_id)
        refuse_state_write(caller, req.state_delta)
        event = Event(invocation_id="p-" + unique_hex(), author="user", state_delta=req.state_delta)
        try:
            stored = await append_under_lease(replica, session.key, event)
        except SessionNotFoundError:
            raise ApiError(404, "Session not found") from None
        return FiniteJSONResponse(shaped(stored))

    @router.patch("/apps/{app_name}/users/{user_id}/memory", summary="Add a session to memory")
    async def add_session_to_memory(
        app_name: AppName, user_id: User, req: UpdateMemoryRequest, caller: Who
    ) -> FiniteJSONResponse:
        await owned(caller, app_name, user_id, req.session_id)
        store = MemoryStore(replica.sync_client(), api.keys)
        await asyncio.to_thread(store.add, app_name, user_id, req.session_id)
        return FiniteJSONResponse(None)

    @router.get("/apps/{app_name}/app-info", summary="The app's root agent")
    async def app_info(app_name: AppName) -> dict[str, Any]:
        agent = api.runner(app_name).agent
        return {
            "name": app_name,
            "rootAgentName": agent.name,
            "description": agent.description,
            "language": "python",
            "isComputerUse": False,
        }

    artifact_base = base + "/{session_id}/artifacts"

    @router.get(artifact_base, summary="The session's (and the user's) artifact names")
    async def list_artifact_names(
        app_name: AppName, user_id: User, session_id: SessionId, caller: Who
    ) -> list[str]:
        await owned(caller, app_name, user_id, session_id)
        return await asyncio.to_thread(artifacts().list, app_name, user_id, session_id)

    async def versions_of(
        caller: Who, app_name: str, user_id: str, session_id: str, name: str
    ) -> tuple[ArtifactVersion, ...]:
        await owned(caller, app_name, user_id, session_id)
        return await asyncio.to_thread(artifacts().versions, app_name, user_id, session_id, name)

    @router.get(artifact_base + "/{artifact_name:path}/versions/metadata")
    async def list_artifact_versions_metadata(
        app_name: AppName, user_id: User, session_id: SessionId, artifact_name: str, caller: Who
    ) -> list[dict[str, Any]]:
        found = await versions_of(caller, app_name, user_id, session_id, artifact_name)
        uri = _artifact_uri(app_name, user_id, session_id, artifact_name)
        return [adk_artifact_version(v, f"{uri}/versions/{v.version}") for v in found]

    @router.get(artifact_base + "/{artifact_name:path}/versions/{version_id}/metadata")
    async def get_artifact_version_metadata(
        app_name: AppName,
        user_id: User,
        session_id: SessionId,
        artifact_name: str,
        version_id: VersionId,
        caller: Who,
    ) -> dict[str, Any]:
        found = await versions_of(caller, app_name, user_id, session_id, artifact_name)
        wanted = _version_of(version_id)
        chosen = found[-1:] if wanted is None else [v for v in found if v.version == wanted]
        if not chosen:
            raise ApiError(404, "Artifact version not found")
        uri = _artifact_uri(app_name, user_id, session_id, artifact_name)
        return adk_artifact_version(chosen[0], f"{uri}/versions/{chosen[0].version}")

    @router.get(artifact_base + "/{artifact_name:path}/versions")
    async def list_artifact_versions(
        app_name: AppName, user_id: User, session_id: SessionId, artifact_name: str, caller: Who
    ) -> list[int]:
        found = await versions_of(caller, app_name, user_id, session_id, artifact_name)
        return [v.version for v in found]

    async def load(
        app_name: str, user_id: str, session_id: str, name: str, version: int | None
    ) -> FiniteJSONResponse:
        not_found = ApiError(404, "Artifact not found")
        if version is not None and not 0 <= version < MAX_VERSIONS:
            raise not_found  # Redis reads a negative index from the end, a huge one not at all
        part = await asyncio.to_thread(
            artifacts().load, app_name, user_id, session_id, name, version
        )
        if part is None:
            raise not_found
        return FiniteJSONResponse(part.model_dump(mode="json", by_alias=True, exclude_none=True))

    @router.get(artifact_base + "/{artifact_name:path}/versions/{version_id}")
    async def load_artifact_version(
        app_name: AppName,
        user_id: User,
        session_id: SessionId,
        artifact_name: str,
        version_id: VersionId,
        caller: Who,
    ) -> FiniteJSONResponse:
        await owned(caller, app_name, user_id, session_id)
        return await load(app_name, user_id, session_id, artifact_name, _version_of(version_id))

    @router.get(artifact_base + "/{artifact_name:path}")
    async def load_artifact(
        app_name: AppName,
        user_id: User,
        session_id: SessionId,
        artifact_name: str,
        caller: Who,
        version: Annotated[int | None, Query()] = None,
    ) -> FiniteJSONResponse:
        await owned(caller, app_name, user_id, session_id)
        return await load(app_name, user_id, session_id, artifact_name, version)

    @router.delete(artifact_base + "/{artifact_name:path}", responses=documented(405))
    async def delete_artifact(
        app_name: AppName, user_id: User, session_id: SessionId, artifact_name: str, caller: Who
    ) -> FiniteJSONResponse:
        if _VERSION_PATHS.search(artifact_name):
            detail = "versions are only read: DELETE the artifact itself"
            raise ApiError(405, detail, headers={"Allow": "GET"})
        await owned(caller, app_name, user_id, session_id)
        await asyncio.to_thread(artifacts().delete, app_name, user_id, session_id, artifact_name)
        return FiniteJSONResponse(None)

    return router


def _version_of(version_id: str) -> int | None:
    """A version path segment: "latest" (None) or a version number; 422 otherwise."""
    if version_id == "latest":
        return None
    try:
        return int(version_id)
    except ValueError:
        raise ApiError(422, "Invalid version ID") from None


def _artifact_uri(app_name: str, user_id: str, session_id: str, name: str) -> str:
    return f"{ADK_PREFIX}/apps/{app_name}/users/{user_id}/sessions/{session_id}/artifacts/{name}"
