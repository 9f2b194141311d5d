"""Runner: connects an agent to Redis and the fleet, and runs invocations."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from types import TracebackType

import redis.asyncio as aioredis
from google.genai import types

from orchestrator.agent import Agent
from orchestrator.connections import blocking_client, command_client, stop_task
from orchestrator.dispatch import CeleryPublisher
from orchestrator.fleet import CeleryFleet, ToolRunner
from orchestrator.loop import Invocation, Update, run_invocation
from orchestrator.model import Model
from orchestrator.models import choose_model
from orchestrator.pools import LivePools
from orchestrator.results import ResultWaiter
from orchestrator.sessions import Event, Session, SessionStore, answer_of
from shared.config import Settings
from shared.keys import Keys


class Runner:
    """`async with Runner(agent, settings) as runner: await runner.ask(...)`."""

    def __init__(
        self,
        agent: Agent,
        settings: Settings,
        *,
        model: Model | None = None,
        tool_runner: ToolRunner | None = None,
        replica_id: str | None = None,
        depth: int = 0,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.model = model or choose_model(agent, settings)
        self.depth = depth
        self._models: dict[str, Model] = {agent.name: self.model}
        self.replica_id = replica_id or f"orch-{uuid.uuid4().hex[:12]}"
        self.keys = Keys(settings.key_prefix)
        url = settings.require_redis_url()
        self._redis = command_client(url)
        self._reader = blocking_client(url)
        self.store = SessionStore(self._redis, self.keys, settings.secret_arg_names)
        self._waiter = ResultWaiter(self._reader, self._redis, self.keys, self.replica_id)
        self.tool_runner: ToolRunner = tool_runner or CeleryFleet(
            CeleryPublisher(self._redis, settings.secret_arg_names),
            self._waiter,
            settings,
            self.keys,
            LivePools(self._redis, self.keys),
        )

    @property
    def redis(self) -> aioredis.Redis:
        return self._redis

    async def __aenter__(self) -> Runner:
        await self._waiter.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._waiter.stop()
        await self._reader.aclose()
        await self._redis.aclose()

    @property
    def app_name(self) -> str:
        return self.agent.name

    async def run(self, *, user_id: str, session_id: str, message: str) -> AsyncIterator[Update]:
        """Run one invocation, creating the session on first use; yield what happens."""
        session = await self.store.get_or_create(self.app_name, user_id, session_id)
        async with self.lease(session.id):
            content = types.Content(role="user", parts=[types.Part(text=message)])
            async for update in self.invoke(session, content):
                yield update

    async def invoke(
        self, session: Session, message: types.Content | None
    ) -> AsyncIterator[Update]:
        """Run the loop on a session whose lease this replica holds.

        Once the invocation ends (or fails: a retry would fail alike), the session owes
        the model nothing; if this process dies first, another replica finishes it.
        """
        open_turn = session.open_turn() if message is None else None
        invocation = self.new_invocation(
            session, invocation_id=open_turn.invocation_id if open_turn else ""
        )
        try:
            async for update in run_invocation(invocation, message):
                yield update
        except Exception:
            await self.store.resumed(session.id)
            raise
        if not invocation.answered:  # ended otherwise (an action, max_steps, a credential)
            await self.store.resumed(session.id)

    def new_invocation(
        self, session: Session, agent_name: str | None = None, invocation_id: str = ""
    ) -> Invocation:
        """An invocation of `agent_name` (default: the session's active agent) on this
        replica's store, fleet and models."""
        name = agent_name or session.active_agent or ""
        return Invocation(
            agent=self.agent.find_agent(name) or self.agent,
            models=self.model_for,
            session=session,
            store=self.store,
            runner=self.tool_runner,
            settings=self.settings,
            keys=self.keys,
            id=invocation_id,
            depth=self.depth,
        )

    def model_for(self, agent: Agent) -> Model:
        """Each agent of the tree keeps one model (its offline script, or Gemini)."""
        if agent.name not in self._models:
            self._models[agent.name] = choose_model(agent, self.settings)
        return self._models[agent.name]

    @contextlib.asynccontextmanager
    async def lease(self, session_id: str, wait_s: float = 0.0) -> AsyncIterator[None]:
        """Hold the session's lease (renewed while held); wait up to `wait_s` for it.

        Each hold has its own token, so two tasks of one replica exclude each other too.
        """
        ttl = self.settings.lease_ttl_s
        token = f"{self.replica_id}/{uuid.uuid4().hex[:8]}"
        await self.store.wait_for_lease(session_id, token, ttl, wait_s)
        renewal = _LeaseRenewal(self.store, session_id, token, ttl)
        try:
            yield
        finally:
            await renewal.stop()
            await self.store.release_lease(session_id, token)

    async def ask(self, *, user_id: str, session_id: str, message: str) -> str:
        """Run one invocation and return the agent's last text."""
        answer = ""
        async for update in self.run(user_id=user_id, session_id=session_id, message=message):
            if isinstance(update, Event) and answer_of(update):
                answer = answer_of(update)
        return answer


class _LeaseRenewal:
    """Renews a held lease every third of its lifetime. A timer, not a task, until a
    renewal is due: most invocations end before that and cost nothing here."""

    def __init__(self, store: SessionStore, session_id: str, token: str, ttl_s: float) -> None:
        self._store = store
        self._session_id = session_id
        self._token = token
        self._ttl_s = ttl_s
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(ttl_s / 3, self._due)

    def _due(self) -> None:
        self._task = asyncio.create_task(self._renew(), name=f"lease {self._session_id}")

    async def _renew(self) -> None:
        await self._store.acquire_lease(self._session_id, self._token, self._ttl_s)
        if not self._stopped:
            self._timer = self._loop.call_later(self._ttl_s / 3, self._due)

    async def stop(self) -> None:
        self._stopped = True
        self._timer.cancel()
        # Never wait on a renewal unbounded: redis-py can swallow a cancellation that
        # lands inside a command (the renewal also checks `_stopped`).
        await stop_task(self._task, timeout_s=1.0)
