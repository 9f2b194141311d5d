"""ADK's session services: where sessions live, and so which Redis and fleet run them.

`RedisSessionService(settings)` is the fleet's: the Redis of `settings`, served by the
workers already running there. `InMemorySessionService()` is ADK's name for the local
default: as `toolfleet run`, it uses TOOLFLEET_REDIS_URL when set, and otherwise starts
a private server on first use and local workers for each agent a Runner runs on it,
all stopped when the program exits. "In memory" holds: nothing is persisted.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from toolfleet.orchestrator.adk.coroutines import SessionCreation, coroutine_function
from toolfleet.orchestrator.adk.events import with_adk_actions
from toolfleet.orchestrator.adk.local import LocalFleet
from toolfleet.orchestrator.adkwire.session_ops import (
    APPEND_WAIT_S,
    append_under_lease,
    create_with_state,
    delete_session,
    list_app_sessions,
    list_user_sessions,
)
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.config import Settings
from toolfleet.shared.definition_imports import skipped_at_import
from toolfleet.shared.errors import SessionExistsError, SessionNotFoundError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import ToolActions


@dataclass
class ListSessionsResponse:
    """ADK's answer to `list_sessions`: the sessions, without their events."""

    sessions: list[Session] = field(default_factory=list)


class BaseSessionService:
    """ADK's session service interface, on a Redis named by `settings_for`."""

    def __init__(self) -> None:
        # Creations asked for without `await` (older ADK's sync API), by app, user and id.
        self._unawaited: dict[tuple[str, str, str], SessionCreation] = {}

    async def settings_for(self, agent: Agent | None = None) -> Settings:
        """The settings whose Redis holds the sessions (and, with `agent`, whose workers
        serve its tools)."""
        raise NotImplementedError

    @asynccontextmanager
    async def _replica(self) -> AsyncIterator[Replica]:
        # One connection set per call: ADK's sync `run` calls from a thread of its own
        # with its own event loop, where clients of another loop cannot be used.
        async with Replica(await self.settings_for()) as replica:
            yield replica

    @coroutine_function
    def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionCreation:
        """Create a session (a random id when None) with the initial `state`; raise
        SessionExistsError if this user has a session of that id in the app (another
        user's of the same id is another session).

        Awaited, as ADK's async service is. Older ADK's was sync, and its examples call
        it without `await`: the creation is then made when a Runner first runs that
        session, and the returned object's `id` is already the session's.
        """
        new_id = session_id or uuid.uuid4().hex
        creation = SessionCreation(
            lambda: self._create_session(
                app_name=app_name, user_id=user_id, state=state, session_id=new_id
            ),
            app_name=app_name,
            user_id=user_id,
            id=new_id,
        )
        if not skipped_at_import("create_session"):
            self._unawaited[(app_name, user_id, creation.id)] = creation
        return creation

    async def settle(self, app_name: str, user_id: str, session_id: str) -> None:
        """Make the creation of that session, if one was asked for and never awaited."""
        creation = self._unawaited.get((app_name, user_id, session_id))
        if creation is not None:
            await creation

    async def _create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None,
        session_id: str,
    ) -> Session:
        self._unawaited.pop((app_name, user_id, session_id), None)
        async with self._replica() as replica:
            return await create_with_state(replica, app_name, user_id, session_id, state)

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: Any = None
    ) -> Session | None:
        """The session with its events (their actions ADK's EventActions) and state; None
        when there is none for that app and user (as ADK)."""
        async with self._replica() as replica:
            try:
                session = await replica.store.get(session_key(app_name, user_id, session_id))
            except SessionNotFoundError:
                return None
        session.events = [with_adk_actions(e) for e in session.events]
        return session

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store `event` on the session, as ADK's: its state writes (`state_delta`, and
        ADK's `actions.state_delta`) apply by scope, `temp:` ones in memory only; `session`
        gets the stored events and state. A partial event is not stored. Written under
        the session's lease: a running invocation is waited for up to APPEND_WAIT_S
        seconds (then SessionBusyError)."""
        if event.partial:
            return event
        # ADK's view only: the delta applies below; requests and flags not raised (None)
        # are not the tools' actions.
        adk_only = {"state_delta", "requested_tool_confirmations", "requested_auth_configs"}
        actions = event.actions.model_dump(exclude=adk_only, exclude_none=True)
        delta = {**event.state_delta, **getattr(event.actions, "state_delta", {})}
        stored = event.model_copy(update={"state_delta": delta, "actions": ToolActions(**actions)})
        async with self._replica() as replica:
            try:
                current = await append_under_lease(replica, session.key, stored, APPEND_WAIT_S)
            except SessionNotFoundError:
                raise ValueError(f"Session {session.id} not found.") from None  # ADK's
        session.events, session.state = current.events, current.state
        return event

    async def flush(self) -> None:
        """ADK's: every write is stored when its call returns, so nothing is buffered."""

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The user's sessions of the app, without their events; with no user, every
        user's (as ADK's services list them)."""
        async with self._replica() as replica:
            if user_id is None:
                sessions = await list_app_sessions(replica, app_name)
            else:
                sessions = await list_user_sessions(replica, app_name, user_id)
        for session in sessions:
            session.events = []
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session: its events, its session-scoped state and its bookkeeping
        (user and app state stay, as in ADK). Its pending calls are closed with it: a
        result posted for one later is refused, even to a new session of the same id."""
        async with self._replica() as replica:
            await delete_session(replica, app_name, user_id, session_id)


class RedisSessionService(BaseSessionService):
    """Sessions on the fleet's Redis (`settings`), run by the workers serving it.

    Args:
        settings: The fleet's settings; None: read from the TOOLFLEET_* variables.

    Raises:
        ConfigError: The settings name no Redis (TOOLFLEET_REDIS_URL).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.settings.require_redis_url()  # says what to set when there is none

    async def settings_for(self, agent: Agent | None = None) -> Settings:
        """The fleet's settings: its workers serve the agents already."""
        return self.settings


_shared_fleet: LocalFleet | None = None
_shared_fleet_lock = threading.Lock()


def _process_fleet() -> LocalFleet:
    """The one local fleet of this process's default services: ADK programs (the
    reference's among them) make a new InMemorySessionService for each query, and each
    would otherwise start a server and workers of its own."""
    global _shared_fleet
    with _shared_fleet_lock:
        if _shared_fleet is None:
            _shared_fleet = LocalFleet(Settings())
        return _shared_fleet


class InMemorySessionService(BaseSessionService):
    """ADK's local default: TOOLFLEET_REDIS_URL when set, else a private server and local
    workers started on first use and stopped at exit. The services a process makes
    without settings share that server and its workers; sessions are told apart by app,
    user and id (a new service's `create_session` with a used id starts it afresh).

    Args:
        settings: Settings of a local fleet of this service's own (its Redis when they
            name one, else a private server); None: the process's shared one.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__()
        self._fleet = LocalFleet(settings) if settings is not None else _process_fleet()

    async def settings_for(self, agent: Agent | None = None) -> Settings:
        """The local fleet's settings, with workers for `agent`'s tools when given."""
        return await self._fleet.settings_for(agent)

    async def _create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None,
        session_id: str,
    ) -> Session:
        """As the base; an id the same app and user used before starts a new session in
        its place, as ADK's in-memory service did when the reference's examples (which
        create their session again for each query) were written."""
        try:
            return await super()._create_session(
                app_name=app_name, user_id=user_id, state=state, session_id=session_id
            )
        except SessionExistsError:
            old = await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
            if old is None:
                raise  # gone meanwhile (expired): nothing to replace
        await self.delete_session(app_name=app_name, user_id=user_id, session_id=old.id)
        return await super()._create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )
