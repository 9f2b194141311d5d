"""Runner: connects an agent to Redis and the fleet, and runs invocations."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from types import TracebackType

import redis.asyncio as aioredis
from google.genai import types

from orchestrator.agent import Agent
from orchestrator.connections import blocking_client, command_client
from orchestrator.dispatch import CeleryPublisher
from orchestrator.fleet import CeleryFleet, ToolRunner
from orchestrator.leases import LeaseHold, LeaseRenewal
from orchestrator.loop import Invocation, Update, run_invocation
from orchestrator.model import Model
from orchestrator.models import choose_model
from orchestrator.pools import LivePools
from orchestrator.results import ResultWaiter
from orchestrator.sessions import Event, LeaseClaim, Session, SessionStore, answer_of
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
        token = self._lease_token()
        claim = LeaseClaim(token, self.settings.lease_ttl_s)  # taken with the session read
        session = await self.store.get_or_create(self.app_name, user_id, session_id, lease=claim)
        async with self.lease(session.id, held_as=token) as hold:
            content = types.Content(role="user", parts=[types.Part(text=message)])
            async for update in self.invoke(session, content, lease=hold):
                yield update

    async def invoke(
        self, session: Session, message: types.Content | None, *, lease: LeaseHold | None = None
    ) -> AsyncIterator[Update]:
        """Run the loop on a session whose lease this replica holds (`lease`: released
        with the answer's append, one round trip less).

        Once the invocation ends (or fails: a retry would fail alike), the session owes
        the model nothing; if this process dies first, another replica finishes it.
        """
        invocation = self.new_invocation(session)
        invocation.lease = lease
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

    def _lease_token(self) -> str:
        # Each hold has its own token, so two tasks of one replica exclude each other too.
        return f"{self.replica_id}/{uuid.uuid4().hex[:8]}"

    @contextlib.asynccontextmanager
    async def lease(
        self, session_id: str, wait_s: float = 0.0, *, held_as: str | None = None
    ) -> AsyncIterator[LeaseHold]:
        """Hold the session's lease (renewed while held); wait up to `wait_s` for it.
        `held_as`: the token it was already taken with (SessionStore.get's `lease`)."""
        ttl = self.settings.lease_ttl_s
        token = held_as or self._lease_token()
        if held_as is None:
            await self.store.wait_for_lease(session_id, token, ttl, wait_s)
        renewal = LeaseRenewal(self.store, session_id, token, ttl)
        hold = LeaseHold(self.store, session_id, token, renewal)
        try:
            yield hold
        finally:
            await hold.renewal.stop()
            if not hold.released:
                await self.store.release_lease(session_id, token)

    async def ask(self, *, user_id: str, session_id: str, message: str) -> str:
        """Run one invocation and return the agent's last text."""
        answer = ""
        async for update in self.run(user_id=user_id, session_id=session_id, message=message):
            if isinstance(update, Event) and answer_of(update):
                answer = answer_of(update)
        return answer
