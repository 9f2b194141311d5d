"""One orchestrator replica: runners for its agents plus the completions listener."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from types import TracebackType

from orchestrator.agent import Agent
from orchestrator.completions import CompletionListener, Notify
from orchestrator.connections import blocking_client
from orchestrator.model import Model
from orchestrator.runner import Runner
from shared.config import Settings
from shared.errors import ToolfleetError
from shared.keys import Keys


class Orchestrator:
    """`async with Orchestrator([agent], settings) as orch:` - `toolfleet serve` and `run`."""

    def __init__(
        self,
        agents: Sequence[Agent],
        settings: Settings,
        *,
        on_update: Notify | None = None,
        models: dict[str, Model] | None = None,
        claim_idle_ms: int | None = None,
    ) -> None:
        self.settings = settings
        self.replica_id = f"orch-{uuid.uuid4().hex[:12]}"
        models = models or {}
        self.runners = {
            a.name: Runner(a, settings, model=models.get(a.name), replica_id=self.replica_id)
            for a in agents
        }
        self._listener_redis = blocking_client(settings.require_redis_url())
        self.listener = CompletionListener(
            self.runners,
            self._listener_redis,
            Keys(settings.key_prefix),
            self.replica_id,
            on_update=on_update,
            progress_to_model=settings.progress_to_model,
            claim_idle_ms=claim_idle_ms or int(settings.completion_claim_idle_s * 1000),
            # A dead replica's lease expires after lease_ttl_s: look about as often.
            owed_scan_s=settings.lease_ttl_s,
        )

    def runner(self, app_name: str) -> Runner:
        try:
            return self.runners[app_name]
        except KeyError as exc:
            raise ToolfleetError(f"this orchestrator has no agent {app_name!r}") from exc

    async def __aenter__(self) -> Orchestrator:
        for runner in self.runners.values():
            await runner.__aenter__()
        await self.listener.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.listener.stop()
        for runner in self.runners.values():
            await runner.__aexit__(exc_type, exc, tb)
        await self._listener_redis.aclose()
        toolsets = {
            id(t): t for r in self.runners.values() for a in r.agent.walk() for t in a.toolsets
        }
        for toolset in toolsets.values():  # each once, even when shared by agents
            await toolset.close()

    async def wait_until_settled(
        self, app_name: str, session_id: str, timeout_s: float | None
    ) -> bool:
        """Wait until the session has no pending call and owes the model no turn."""
        store = self.runner(app_name).store

        async def settled() -> bool:
            owed = session_id in await store.sessions_to_resume()
            return not owed and not await store.pending_calls(session_id)

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
