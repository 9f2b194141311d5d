"""One orchestrator replica: its connections, runners for its agents, and the
completions listener that applies long-running results and resumes sessions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.completions.listener import CompletionListener
from toolfleet.orchestrator.completions.resumer import Notify
from toolfleet.orchestrator.connections import decoded
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import SessionKey

# How often a wait for an answer checks the store when no completion wakes it.
ANSWER_POLL_S = 1.0


class Orchestrator:
    """`async with Orchestrator([agent], settings) as orch:` - `toolfleet serve` and `run`.

    One replica serving the apps of `agents`: a runner for each, and a listener that
    applies posted completions and resumes the sessions they answer.

    Args:
        agents: The root agents, one app each, named by the agent's name.
        settings: Where to connect, the loop's limits and the completions' timings.
        on_update: Called with the session key and each update of a session that a
            completion resumed (sync or async); None: not told.
        models: Models by agent name, in place of what each agent's `model` chooses.
        claim_idle_ms: How long a completion stays unacknowledged before another replica
            claims it; None: TOOLFLEET_COMPLETION_CLAIM_IDLE_S.
        plugins: Run around every model and tool call of every app's agents.

    Raises:
        ConfigError: An agent's model cannot be chosen, saying what to set.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        settings: Settings,
        *,
        on_update: Notify | None = None,
        models: dict[str, Model] | None = None,
        claim_idle_ms: int | None = None,
        plugins: Sequence[BasePlugin] = (),
    ) -> None:
        self.settings = settings
        self.replica = Replica(settings)
        models = models or {}
        self.runners = {
            a.name: Runner(a, replica=self.replica, model=models.get(a.name), plugins=plugins)
            for a in agents
        }
        self.listener = CompletionListener(
            self.runners,
            self.replica.blocking_client(),
            self.replica.keys,
            self.replica.id,
            commands=self.replica.redis,
            on_update=on_update,
            progress_to_model=settings.progress_to_model,
            claim_idle_ms=claim_idle_ms or int(settings.completion_claim_idle_s * 1000),
            # A dead replica's lease expires after lease_ttl_s: look about as often.
            owed_scan_s=settings.lease_ttl_s,
            session_ttl_s=settings.session_ttl_s,
        )
        self._exit = AsyncExitStack()

    @property
    def replica_id(self) -> str:
        """This replica's id: the consumer name and the prefix of its lease tokens."""
        return self.replica.id

    def runner(self, app_name: str) -> Runner:
        """The runner of app `app_name` (its root agent's name)."""
        try:
            return self.runners[app_name]
        except KeyError as exc:
            raise ConfigError(
                f"this orchestrator has no agent {app_name!r}; it serves "
                f"{', '.join(self.runners) or 'none'} (toolfleet serve --agent module:attribute)"
            ) from exc

    async def __aenter__(self) -> Orchestrator:
        # Undone in reverse: the listener stops, the connections close, then toolsets.
        self._exit.push_async_callback(self._close_toolsets)
        await self._exit.enter_async_context(self.replica)
        await self.listener.start()
        self._exit.push_async_callback(self.listener.stop)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._exit.aclose()

    async def _close_toolsets(self) -> None:
        toolsets = {
            id(t): t for r in self.runners.values() for a in r.agent.walk() for t in a.toolsets
        }
        for toolset in toolsets.values():  # each once, even when shared by agents
            await toolset.close()

    async def wait_until_answered(
        self,
        session: SessionKey,
        call_ids: Collection[str],
        timeout_s: float,
        entries: Collection[str] = (),
        asked: Mapping[str, int] | None = None,
    ) -> bool:
        """Wait until none of `call_ids` is pending in the session, none of the completion
        stream's `entries` (intermediate results, which leave their call pending) waits
        to be applied to it, and the session owes the model no turn: they were applied
        and the agent, if resumed, answered. False when `timeout_s` passed first.
        `asked`: the question each call asked when it was answered (its `asked_again`);
        one that asks again since waits for its new answer, not here.

        Checked after each completion this replica's listener handles, and at least every
        second (a result applied elsewhere, or a confirmed call's run, wakes no listener
        here)."""
        store = self.replica.store
        wanted = set(call_ids)
        posted = set(entries)

        async def answered() -> bool:
            # Pending first: a result's apply drops its call (or leaves the session's
            # order) and marks the turn owed in one step, so the owed mark read after it
            # is never older.
            for call in await store.pending_calls(session):
                if call.call_id in wanted and call.asked_again <= (asked or {}).get(
                    call.call_id, call.asked_again
                ):
                    return False
            if posted:
                order = self.replica.keys.completion_order(session)
                waiting = await self.replica.redis.lrange(order, 0, -1)
                if posted & {decoded(entry) for entry in waiting}:
                    return False
            return session not in await store.sessions_to_resume()

        async def wait() -> None:
            while True:
                self.listener.handled.clear()
                if await answered():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.listener.handled.wait(), ANSWER_POLL_S)

        try:
            await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def wait_until_settled(self, session: SessionKey, timeout_s: float | None) -> bool:
        """Wait until the session (`session_key` of its app, user and id) has no pending
        call and owes the model no turn."""
        store = self.replica.store

        async def settled() -> bool:
            if await store.pending_calls(session):  # before the owed mark, as above
                return False
            return session not in await store.sessions_to_resume()

        async def wait() -> None:
            while True:
                self.listener.handled.clear()
                if await settled():
                    return
                await self.listener.handled.wait()

        try:
            await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            return False
        return True
