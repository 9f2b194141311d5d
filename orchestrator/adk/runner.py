"""ADK's Runner: `run_async`/`run` yield ADK-shaped events, on toolfleet's own Runner."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any, NoReturn, Self

from google.genai import types

from toolfleet.orchestrator.adk.app import App, resolved_app
from toolfleet.orchestrator.adk.completing import run_message
from toolfleet.orchestrator.adk.debug import print_event
from toolfleet.orchestrator.adk.events import with_adk_actions
from toolfleet.orchestrator.adk.run_config import LlmCallLimit, RunConfig, checked_run_config
from toolfleet.orchestrator.adk.services import (
    BaseArtifactService,
    BaseMemoryService,
    InMemoryArtifactService,
    InMemoryMemoryService,
    RedisArtifactService,
    RedisMemoryService,
    check_service,
)
from toolfleet.orchestrator.adk.sessions import BaseSessionService, InMemorySessionService
from toolfleet.orchestrator.adk.unsupported import refuse_unported_run_args
from toolfleet.orchestrator.adk.unsupported import run_live as not_ported_run_live
from toolfleet.orchestrator.adkwire.confirming import (
    held_back_responses,
    shows_adk_client,
    with_confirmation_calls,
)
from toolfleet.orchestrator.adkwire.credentials import with_credential_calls
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import worker_output
from toolfleet.orchestrator.loop.runner import Runner as FleetRunner
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.definition_imports import skipped_at_import
from toolfleet.shared.errors import SessionNotFoundError
from toolfleet.shared.keys import session_key


class Runner:
    """`Runner(app=App(...), session_service=)` or `Runner(agent=, app_name=,
    session_service=)`, as ADK's: one invocation per `run_async`, run by toolfleet's
    loop with the tools on the session service's fleet and the app's plugins around
    every model and tool call.

    Args:
        app: The App to run (its name, root agent and plugins); or give `agent` and
            `app_name` instead.
        app_name: The app's name with `agent`; with `app`, it replaces the app's name.
        agent: The root agent, when no `app` is given.
        plugins: With `agent`: run around every model and tool call; with `app`, refused
            (the app's own are used).
        artifact_service: Toolfleet's artifact service; None: the session service's Redis.
        session_service: Where the sessions are stored and whose fleet runs the tools.
        memory_service: Toolfleet's memory service; None: the session service's Redis.
        plugin_close_timeout: Seconds `close` gives each plugin's `close`.
        auto_create_session: `run_async` creates a session it does not find, instead of
            raising ValueError.

    Raises:
        TypeError: A service is not toolfleet's, saying what to pass instead.
        ValueError: Both or neither of `app` and `agent` are given, `agent` comes without
            `app_name`, or `plugins` come with `app`.
    """

    def __init__(
        self,
        *,
        app: App | None = None,
        app_name: str | None = None,
        agent: Agent | None = None,
        plugins: Sequence[BasePlugin] | None = None,
        artifact_service: BaseArtifactService | None = None,
        session_service: BaseSessionService,
        memory_service: BaseMemoryService | None = None,
        plugin_close_timeout: float = 5.0,
        auto_create_session: bool = False,
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
        self.app = resolved_app(app, app_name, agent, plugins)
        assert self.app.root_agent is not None  # App's validator, or resolved_app's
        self.agent: Agent = self.app.root_agent
        self.app_name = app_name or self.app.name
        self.plugins = tuple(self.app.plugins)
        self.plugin_close_timeout = plugin_close_timeout
        self.auto_create_session = auto_create_session
        self.session_service = session_service
        self.artifact_service = artifact_service or RedisArtifactService()
        self.memory_service = memory_service or RedisMemoryService()
        # The client's view of the stores the tools use: the session service's Redis.
        for service in (self.artifact_service, self.memory_service):
            if isinstance(service, RedisArtifactService | RedisMemoryService):
                service.attach(session_service.settings_for)
        self._long_running: set[str] | None = None  # read on first run: toolsets are async

    async def run_async(
        self,
        *,
        user_id: str,
        session_id: str,
        invocation_id: str | None = None,
        new_message: types.Content | None = None,
        state_delta: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
        yield_user_message: bool = False,
        abort_signal: asyncio.Event | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Run one invocation for `new_message`; yield its events as ADK's Runner does
        (the user's message only with `yield_user_message`). `state_delta` is written
        with the message, before the agent runs. A FunctionResponse part for a pending
        long-running call completes it, and the resumed agent's events follow. A model
        call past `run_config.max_llm_calls` raises LlmCallsLimitExceededError.

        ADK's `invocation_id` (resuming a paused invocation) and `abort_signal` raise
        NotPortedError: an invocation waiting on calls goes on by itself once they are
        answered (send their function responses as the message), and a run is stopped
        with `toolfleet cancel` or the HTTP API's cancel.

        Called at module level while a worker imports the module for its tools, it
        yields nothing: that is the program's client code, not the tools'."""
        if skipped_at_import("Runner.run_async"):
            return
        refuse_unported_run_args(invocation_id=invocation_id, abort_signal=abort_signal)
        if new_message is None or not new_message.parts:
            raise ValueError("No parts in the new_message.")  # ADK's, without a resumption
        limit = LlmCallLimit(checked_run_config(run_config).max_llm_calls)
        await self.session_service.settle(self.app_name, user_id, session_id)
        if self._long_running is None:
            # In a thread: listing a toolset's tools runs its own event loop.
            tools = await asyncio.to_thread(lambda: list(self.agent.all_tools()))
            self._long_running = {t.name for t in tools if t.is_long_running}
        settings = await self.session_service.settings_for(self.agent)
        async with FleetRunner(
            self.agent, settings, app_name=self.app_name, plugins=(*self.plugins, limit)
        ) as runner:
            key = session_key(self.app_name, user_id, session_id)
            try:
                await runner.store.get(key)
            except SessionNotFoundError:
                if not self.auto_create_session:
                    raise ValueError(  # ADK's error and advice
                        f"Session not found: {session_id}. Create it first with "
                        "session_service.create_session(), or pass "
                        "auto_create_session=True to the Runner."
                    ) from None
                await self.session_service.create_session(
                    app_name=self.app_name, user_id=user_id, session_id=session_id
                )
            async for event in run_message(runner, key, new_message, state_delta):
                # The client's own message (and a result it sent) is echoed only if asked.
                if event.author == "completion" or (
                    event.author == "user" and not yield_user_message
                ):
                    continue
                if shows_adk_client(event):
                    worker_output.drain()  # a local tool's lines before what follows its call
                    yield self._shaped(event)
                    held_back = held_back_responses(event)
                    if held_back is not None:  # ADK's error responses for them
                        yield self._shaped(held_back)

    def run(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: types.Content,
        state_delta: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
    ) -> Generator[Event, None, None]:
        """`run_async` for sync callers, as ADK's: it runs in a thread with an event loop
        of its own, and its events are yielded here as they come (none while a worker
        imports the module for its tools, as `run_async`)."""
        if skipped_at_import("Runner.run"):
            return
        events: queue.Queue[Event | BaseException | None] = queue.Queue()

        async def produce() -> None:
            async for event in self.run_async(
                user_id=user_id,
                session_id=session_id,
                new_message=new_message,
                state_delta=state_delta,
                run_config=run_config,
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

    def run_live(self, *args: Any, **kwargs: Any) -> NoReturn:
        """ADK's live (bidirectional) streaming, which toolfleet does not have: raises
        NotPortedError, pointing at `run_async`."""
        not_ported_run_live(*args, **kwargs)

    async def run_debug(
        self,
        user_messages: str | list[str],
        *,
        user_id: str = "debug_user_id",
        session_id: str = "debug_session_id",
        run_config: RunConfig | None = None,
        quiet: bool = False,
        verbose: bool = False,
    ) -> list[Event]:
        """ADK's quick try-out: each message in turn on one session (made on first use),
        the agents' answers printed unless `quiet` (their calls and results too when
        `verbose`); every event returned."""
        session = await self.session_service.get_session(
            app_name=self.app_name, user_id=user_id, session_id=session_id
        )
        if session is None:
            await self.session_service.create_session(
                app_name=self.app_name, user_id=user_id, session_id=session_id
            )
        events: list[Event] = []
        for message in [user_messages] if isinstance(user_messages, str) else user_messages:
            async for event in self.run_async(
                user_id=user_id,
                session_id=session_id,
                new_message=types.UserContent(parts=[types.Part(text=message)]),
                run_config=run_config,
            ):
                if not quiet:
                    print_event(event, verbose=verbose)
                events.append(event)
        return events

    async def close(self) -> None:
        """Close the agents' toolsets and the plugins that have a `close` (each given
        `plugin_close_timeout` seconds), as ADK's; RuntimeError names the plugins that
        failed to close."""
        for each in self.agent.walk():
            for toolset in each.toolsets:
                await toolset.close()
        failed = []
        for plugin in self.plugins:
            close = getattr(plugin, "close", None)
            if close is None:
                continue
            try:
                await asyncio.wait_for(close(), self.plugin_close_timeout)
            except Exception as exc:
                failed.append(f"{plugin.name} ({type(exc).__name__})")
        if failed:
            raise RuntimeError(f"plugins failed to close: {', '.join(failed)}")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _shaped(self, event: Event) -> Event:
        """ADK's view of `event`: its calls of long-running tools named, its state writes
        in its actions, a confirmation request as `adk_request_confirmation` calls and a
        credential request as `adk_request_credential` calls."""
        event = with_adk_actions(with_credential_calls(with_confirmation_calls(event)))
        long_running = self._long_running or set()
        ids = {c.id or "" for c in event.get_function_calls() if c.name in long_running}
        ids |= set(event.long_running_tool_ids or ())
        if ids:
            event.long_running_tool_ids = ids  # the copy's own
        return event


class InMemoryRunner(Runner):
    """ADK's InMemoryRunner: a Runner on the local default services (a private server
    and local workers unless TOOLFLEET_REDIS_URL is set), app name "InMemoryRunner"
    unless given.

    Args:
        agent: The root agent, when no `app` is given.
        app_name: The app's name; default "InMemoryRunner" when no `app` is given.
        plugins: With `agent`: run around every model and tool call.
        app: The App to run, instead of `agent`.
        plugin_close_timeout: Seconds `close` gives each plugin's `close`.

    Raises:
        ValueError: Both or neither of `app` and `agent` are given, or `plugins` come
            with `app`.
    """

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        app_name: str | None = None,
        plugins: Sequence[BasePlugin] | None = None,
        app: App | None = None,
        plugin_close_timeout: float = 5.0,
    ) -> None:
        super().__init__(
            app=app,
            app_name="InMemoryRunner" if app is None and app_name is None else app_name,
            agent=agent,
            plugins=plugins,
            session_service=InMemorySessionService(),
            artifact_service=InMemoryArtifactService(),
            memory_service=InMemoryMemoryService(),
            plugin_close_timeout=plugin_close_timeout,
        )
