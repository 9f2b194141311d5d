"""ADK's artifact and memory services, on toolfleet's Redis stores.

Tools reach artifacts and memory through their ToolContext on the workers, which use
the fleet's Redis (ArtifactStore, MemoryStore). These services are the client's side
of the same stores, with ADK's method names: a program saves the artifact a tool
will load, or searches what its users said. A Runner attaches them to its session
service's Redis; given `settings`, they use that Redis on their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis
from google.genai import types

from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.memory import MemoryStore, SearchMemoryResponse
from toolfleet.shared.outages import resilient_client

SettingsSource = Callable[[], Awaitable[Settings]]
T = TypeVar("T")


class _OnRedis:
    """A service on the Redis of `settings`, or of the session service it is attached to."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        self._source: SettingsSource | None = None

    def attach(self, source: SettingsSource) -> None:
        """Use the Redis that `source` (a session service's settings) names, unless the
        service was given settings of its own."""
        if self._settings is None:
            self._source = source

    async def _on_redis(self, work: Callable[[redis.Redis, Keys], T]) -> T:
        """Run `work` with a client of this service's Redis, off the event loop."""
        if self._settings is not None:
            settings = self._settings
        elif self._source is not None:
            settings = await self._source()
        else:
            raise RuntimeError(
                f"{type(self).__name__}() is not attached to a session service: pass it to "
                f"a Runner first, or give it settings ({type(self).__name__}(Settings()))"
            )

        def run() -> T:
            with resilient_client(settings.require_redis_url()) as client:
                return work(client, Keys(settings.key_prefix))

        return await asyncio.to_thread(run)


class BaseArtifactService:
    """ADK's artifact service interface."""

    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: types.Part
    ) -> int:
        """Store a new version of `filename`; return its version (from 0)."""
        raise NotImplementedError

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        filename: str,
        version: int | None = None,
    ) -> types.Part | None:
        """The latest (or given) version of `filename`, or None."""
        raise NotImplementedError

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> list[str]:
        """The filenames of the session's and the user's (`user:`) artifacts."""
        raise NotImplementedError

    async def list_versions(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> list[int]:
        """The versions of `filename`, oldest first; empty when there is none."""
        raise NotImplementedError

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> None:
        """Forget `filename` and every version of it."""
        raise NotImplementedError


class BaseMemoryService:
    """ADK's memory service interface."""

    async def add_session_to_memory(self, session: Session) -> None:
        """Make the session's events searchable."""
        raise NotImplementedError

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """Past events of the user's sessions matching `query`, newest first."""
        raise NotImplementedError


class RedisArtifactService(_OnRedis, BaseArtifactService):
    """Artifacts in the fleet's Redis, the ones tools' `save_artifact`/`load_artifact` use.

    Args:
        settings: Whose Redis it uses; None: the Redis of the session service of the
            Runner it is given to.
    """

    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: types.Part
    ) -> int:
        """Store a new version of `filename`; return its version (from 0)."""
        return await self._on_redis(
            lambda r, k: ArtifactStore(r, k).save(app_name, user_id, session_id, filename, artifact)
        )

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        filename: str,
        version: int | None = None,
    ) -> types.Part | None:
        """The latest (or given) version of `filename`, or None."""
        return await self._on_redis(
            lambda r, k: ArtifactStore(r, k).load(app_name, user_id, session_id, filename, version)
        )

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> list[str]:
        """The filenames of the session's and the user's (`user:`) artifacts."""
        return await self._on_redis(
            lambda r, k: ArtifactStore(r, k).list(app_name, user_id, session_id)
        )

    async def list_versions(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> list[int]:
        """The versions of `filename`, oldest first; empty when there is none."""
        found = await self._on_redis(
            lambda r, k: ArtifactStore(r, k).versions(app_name, user_id, session_id, filename)
        )
        return [v.version for v in found]

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> None:
        """Forget `filename` and every version of it."""
        await self._on_redis(
            lambda r, k: ArtifactStore(r, k).delete(app_name, user_id, session_id, filename)
        )


class RedisMemoryService(_OnRedis, BaseMemoryService):
    """Memory in the fleet's Redis: the sessions added to a user's memory (until the first
    is added, every stored session of theirs), as tools' `search_memory` reads it (a word
    match, like ADK's in-memory service).

    Args:
        settings: Whose Redis it uses; None: the Redis of the session service of the
            Runner it is given to.
    """

    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session to its user's memory, as ADK's: searches read its events (for
        as long as it lives, TOOLFLEET_SESSION_TTL_S). Until a user's first session is
        added, every stored session of theirs is their memory."""
        await self._on_redis(
            lambda r, k: MemoryStore(r, k).add(session.app_name, session.user_id, session.id)
        )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """Past events of the user's sessions sharing a word with `query`, newest first."""
        return await self._on_redis(lambda r, k: MemoryStore(r, k).search(app_name, user_id, query))


# ADK's in-memory names: the same stores (the session service's Redis is private when
# it runs the embedded default, so nothing outlives the program there either).
InMemoryArtifactService = RedisArtifactService
InMemoryMemoryService = RedisMemoryService


def check_service(service: object, base: type, default: type, what: str) -> None:
    """Refuse a service the workers cannot use, saying what to pass instead."""
    if service is None or isinstance(service, default):
        return
    raise TypeError(
        f"{what}={type(service).__name__}(): toolfleet's tools run on workers, which keep "
        f"{what.removesuffix('_service')}s in the fleet's Redis; pass {default.__name__}() "
        f"or leave {what} out"
        + ("" if isinstance(service, base) else f" (it is not a {base.__name__} either)")
    )
