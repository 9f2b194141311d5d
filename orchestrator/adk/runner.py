"""ADK's Runner: `run_async`/`run` yield ADK-shaped events, on toolfleet's own Runner."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from google.genai import types
from pydantic import Field

from toolfleet.orchestrator.adk.completing import run_message
from toolfleet.orchestrator.adk.confirming import with_confirmation_calls
from toolfleet.orchestrator.adk.services import (
    BaseArtifactService,
    BaseMemoryService,
    RedisArtifactService,
    RedisMemoryService,
    check_service,
)
from toolfleet.orchestrator.adk.sessions import BaseSessionService
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner as FleetRunner
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.definition_imports import skipped_at_import
from toolfleet.shared.errors import SessionNotFoundError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import ToolActions


class EventActions(ToolActions):
    """ADK's EventActions on the events a Runner yields: the tool's actions and the
    event's state writes (`state_delta`, which toolfleet's Event keeps beside them)."""

    state_delta: dict[str, Any] = Field(default_factory=dict)


class Runner:
    """`Runner(agent=, app_name=, session_service=)`, as ADK's: one invocation per
    `run_async`, run by toolfleet's loop with the tools on the session service's fleet."""

    def __init__(
        self,
        *,
        agent: Agent,
        app_name: str,
        session_service: BaseSessionService,
        artifact_service: BaseArtifactService | None = None,
        memory_service: BaseMemoryService | None = None,
        plugins: Sequence[BasePlugin] | None = None,
    ) -> None:
        if not isinstance(session_service, BaseSessionService):
            raise TypeError(
                "session_service must be toolfleet's InMemorySessionService() or "
                f"RedisSessionService(settings), not {type(session_service).__name__}"
            )
        check_service(
            artifact_service, BaseArtifactService, RedisArtifactService, "artifact_service"
        )
        check_service(memory_service, BaseMemoryService, RedisMemoryService, "memory_service")
        self.agent = agent
        self.app_name = app_name
        self.session_service = session_service
        self.artifact_service = artifact_service or RedisArtifactService()
        self.memory_service = memory_service or RedisMemoryService()
        # The client's view of the stores the tools use: the session service's Redis.
        for service in (self.artifact_service, self.memory_service):
            if isinstance(service, RedisArtifactService | RedisMemoryService):
                service.attach(session_service.settings_for)
        self._long_running: set[str] | None = None  # read on first run: toolsets are async
        self.plugins = tuple(plugins or ())

    async def run_async(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: types.Content,
        run_config: Any = None,
    ) -> AsyncGenerator[Event, None]:
        """Run one invocation for `new_message`; yield its events as ADK's Runner does
        (the user's message is not yielded). A FunctionResponse part for a pending
        long-running call completes it, and the resumed agent's events follow.

        Called at module level while a worker imports the module for its tools, it
        yields nothing: that is the program's client code, not the tools'."""
        if skipped_at_import("Runner.run_async"):
            return
        await self.session_service.settle(self.app_name, user_id, session_id)
        if self._long_running is None:
            # In a thread: listing a toolset's tools runs its own event loop.
            tools = await asyncio.to_thread(lambda: list(self.agent.all_tools()))
            self._long_running = {t.name for t in tools if t.is_long_running}
        settings = await self.session_service.settings_for(self.agent)
        async with FleetRunner(
            self.agent, settings, app_name=self.app_name, plugins=self.plugins
        ) as runner:
            key = session_key(self.app_name, user_id, session_id)
            try:
                await runner.store.get(key)
            except SessionNotFoundError:
                raise ValueError(f"Session not found: {session_id}") from None  # ADK's error
            async for event in run_message(runner, key, new_message):
                # The client's own message (and a result it sent) is not echoed, as in ADK.
                if event.author in ("user", "completion"):
                    continue
                if event.content or event.actions.escalate or event.confirmation_requests:
                    yield self._shaped(event)

    def run(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: types.Content,
        run_config: Any = None,
    ) -> Generator[Event, None, None]:
        """`run_async` for sync callers, as ADK's: it runs in a thread with an event loop
        of its own, and its events are yielded here as they come (none while a worker
        imports the module for its tools, as `run_async`)."""
        if skipped_at_import("Runner.run"):
            return
        events: queue.Queue[Event | BaseException | None] = queue.Queue()

        async def produce() -> None:
            async for event in self.run_async(
                user_id=user_id, session_id=session_id, new_message=new_message
            ):
                events.put(event)

        def work() -> None:
            try:
                asyncio.run(produce())
            except BaseException as exc:  # handed to the caller's thread, raised there
                events.put(exc)
            finally:
                events.put(None)

        thread = threading.Thread(target=work, name="toolfleet-adk-run", daemon=True)
        thread.start()
        try:
            while (item := events.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            thread.join()

    def _shaped(self, event: Event) -> Event:
        """ADK's view of `event`: its calls of long-running tools named, its state writes
        in its actions, a confirmation request as `adk_request_confirmation` calls."""
        event = with_confirmation_calls(event)
        long_running = self._long_running or set()
        update: dict[str, Any] = {
            "actions": EventActions(**event.actions.model_dump(), state_delta=event.state_delta)
        }
        ids = {c.id or "" for c in event.get_function_calls() if c.name in long_running}
        ids |= set(event.long_running_tool_ids or ())
        if ids:
            update["long_running_tool_ids"] = ids
        return event.model_copy(update=update)
