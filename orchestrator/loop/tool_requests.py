"""ADK's `process_llm_request`: tools of the agent that change its model request.

Before each model call, after the request is built and before the before_model
callbacks (ADK's order), every tool of the agent with a `process_llm_request` gets
the request and a RequestContext: load_artifacts adds the artifacts the model asked
for, load_memory tells it about memory, preload_memory adds memories, ExampleTool
adds examples. The artifacts and memory are read here, from the fleet's Redis, for
this session and its user only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import redis
from google.genai import types

from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.memory import MemoryStore, SearchMemoryResponse
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.toolsets import BaseToolset

T = TypeVar("T")


def redis_client(settings: Settings) -> redis.Redis:
    """A client of the fleet's Redis, for the stores a request hook reads."""
    return resilient_client(settings.require_redis_url())


class RequestContext:
    """ADK's ToolContext as `process_llm_request` sees it: the invocation (its state
    read-only) and the session's artifacts and its user's memory."""

    def __init__(self, inv: Invocation) -> None:
        session = inv.session
        self.agent_name = inv.agent.name
        self.invocation_id = inv.id
        self.session_id = session.id
        self.app_name = session.app_name
        self.user_id = session.user_id
        self.state: Mapping[str, Any] = MappingProxyType(dict(session.state))
        self._settings = inv.settings
        self._keys = inv.keys
        self._client: redis.Redis | None = None
        self.user_content = _user_content(inv)

    async def _on_redis(self, work: Callable[[redis.Redis, Keys], T]) -> T:
        if self._client is None:  # only when a hook reads: ExampleTool needs no Redis
            self._client = redis_client(self._settings)
        client = self._client
        return await asyncio.to_thread(work, client, self._keys)

    async def list_artifacts(self) -> list[str]:
        """Names of the session's and the user's artifacts."""
        app, user, session = self.app_name, self.user_id, self.session_id
        return await self._on_redis(lambda r, k: ArtifactStore(r, k).list(app, user, session))

    async def load_artifact(self, filename: str, version: int | None = None) -> types.Part | None:
        """The latest (or given) version of an artifact of this session or user, or None."""
        app, user, session = self.app_name, self.user_id, self.session_id
        return await self._on_redis(
            lambda r, k: ArtifactStore(r, k).load(app, user, session, filename, version)
        )

    async def search_memory(self, query: str) -> SearchMemoryResponse:
        """Past events of this user's sessions that share a word with `query`."""
        app, user = self.app_name, self.user_id
        return await self._on_redis(lambda r, k: MemoryStore(r, k).search(app, user, query))

    def close(self) -> None:
        """Close the Redis client, if a hook opened one."""
        if self._client is not None:
            self._client.close()


def _user_content(inv: Invocation) -> types.Content | None:
    """The user's last message in the session: the one this invocation answers."""
    for event in reversed(inv.session.events):
        content = event.content
        if (
            event.author == "user"
            and content is not None
            and any(p.text for p in content.parts or ())
        ):
            return content
    return None


async def process_requests(inv: Invocation, request: ModelRequest) -> None:
    """Run the `process_llm_request` of each of the agent's tools that has one, in the
    order of the agent's tools."""
    hooks: list[Callable[..., Awaitable[None]]] = [
        hook
        for tool in inv.agent.tools
        if not isinstance(tool, BaseToolset)
        and callable(hook := getattr(tool, "process_llm_request", None))
    ]
    if not hooks:
        return
    context = RequestContext(inv)
    try:
        for hook in hooks:
            await hook(tool_context=context, llm_request=request)
    finally:
        context.close()
