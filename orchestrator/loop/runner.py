"""Runner: runs an agent's invocations on a replica's sessions and fleet."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from typing import Any

from google.genai import types
from redis.exceptions import RedisError

from toolfleet.orchestrator import contents
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.model_choice import choose_model
from toolfleet.orchestrator.agents.workflow import WorkflowAgent
from toolfleet.orchestrator.fleet.protocol import ToolRunner
from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.invocation import (
    Invocation,
    InvocationEnded,
    Update,
    new_invocation_id,
)
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.loop.spans import invocation_span
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.orchestrator.sessions.leases import LeaseHold, Leases
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared import tracing
from toolfleet.shared.cancellation import (
    KeptCancel,
    cancel_session,
    forget_kept_cancel,
    kept_cancel,
)
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.unicode_text import replaced, without_lone_surrogates


class Runner:
    """`async with Runner(agent, settings) as runner: await runner.ask(...)`.

    Alone, a runner is a replica of its own: it connects from `settings` and closes
    its connections at the end. Inside an Orchestrator, runners share its `replica`.
    `plugins` (BasePlugin) run around every model and tool call of every agent.

    Args:
        agent: The root agent; its name is the app's by default.
        settings: Where to connect (Redis, fleet) and the loop's limits; needed unless
            `replica` is given, whose settings are used then.
        replica: The replica to run on (an Orchestrator's); None: a replica of its own,
            made from `settings` and closed with the runner.
        model: The model of the first LLM agent in the tree, in place of the one its
            `model` field chooses; None: that choice.
        tool_runner: Runs the calls instead of the Celery fleet (tests, benchmarks); only
            for a replica of its own.
        replica_id: The id of a replica of its own; None: a new random one.
        depth: How deep in agent tools this runner runs; 0 at the top.
        app_name: The app whose sessions it runs; None: the root agent's name.
        plugins: Run around every model and tool call of every agent, before each
            agent's own callbacks.

    Raises:
        TypeError: Neither `settings` nor `replica` is given.
        ConfigError: The first LLM agent's model cannot be chosen, saying what to set.
    """

    def __init__(
        self,
        agent: Agent,
        settings: Settings | None = None,
        *,
        replica: Replica | None = None,
        model: Model | None = None,
        tool_runner: ToolRunner | None = None,
        replica_id: str | None = None,
        depth: int = 0,
        app_name: str | None = None,
        plugins: Sequence[BasePlugin] = (),
    ) -> None:
        if replica is None:
            if settings is None:
                raise TypeError("Runner needs settings, or the replica it runs on")
            replica = Replica(settings, replica_id=replica_id, tool_runner=tool_runner)
            self._owned: Replica | None = replica
        else:
            self._owned = None
        self.agent = agent
        self.replica = replica
        self.settings = replica.settings
        self.depth = depth
        self._app_name = app_name
        self.plugins = tuple(plugins)  # app-wide callbacks, before each agent's own
        # A workflow agent calls no model: `model` is its first LLM agent's.
        first = next((a for a in agent.walk() if not isinstance(a, WorkflowAgent)), agent)
        self.model = model or choose_model(first, self.settings)
        self._models: dict[str, Model] = {first.name: self.model}
        self._exit = AsyncExitStack()

    @property
    def app_name(self) -> str:
        """The app whose sessions this runner runs: `app_name`, by default its root
        agent's name (ADK's Runner names it separately)."""
        return self._app_name or self.agent.name

    @property
    def store(self) -> SessionStore:
        """The replica's session store."""
        return self.replica.store

    @property
    def leases(self) -> Leases:
        """The replica's session leases."""
        return self.replica.leases

    @property
    def keys(self) -> Keys:
        """The replica's Redis key names."""
        return self.replica.keys

    @property
    def tool_runner(self) -> ToolRunner:
        """Where the calls run: the replica's fleet."""
        return self.replica.fleet

    async def __aenter__(self) -> Runner:
        if self._owned is not None:
            await self._exit.enter_async_context(self._owned)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._exit.aclose()

    async def run(
        self,
        *,
        user_id: str,
        session_id: str,
        message: str | types.Content,
        state_delta: dict[str, Any] | None = None,
    ) -> AsyncIterator[Update]:
        """Run one invocation, creating the session on first use; yield what happens.

        `message`: the user's text, or their Content (its role made "user").
        `state_delta`: state written with the user's message, before the agent runs."""
        # Taken with the session read. The session is this user's: another's of the same id
        # is another session (its own key, lease and history).
        claim = self.leases.claim(session_key(self.app_name, user_id, session_id))
        # Text UTF-8 cannot carry has its lone surrogates replaced (shared.unicode_text).
        if isinstance(message, str):
            content = contents.content("user", [contents.text_part(replaced(message))])
        else:
            content = contents.encodable(message.model_copy(update={"role": "user"}))
        # Appended in the round trip of the read when it can be (SessionStore.get_and_append).
        user_event = Event(
            invocation_id=new_invocation_id(),
            author="user",
            content=content,
            state_delta=without_lone_surrogates(dict(state_delta or {})),
        )
        session, stored = await self.store.get_and_append(
            self.app_name, user_id, session_id, lease=claim, message=user_event,
            owes_turn=True,
        )  # fmt: skip
        async with self.leases.hold(session.key, claimed=claim) as hold:
            stored_message = user_event if stored else None
            async for update in self.invoke(
                session, content, lease=hold, stored_message=stored_message
            ):
                yield update

    async def invoke(
        self,
        session: Session,
        message: types.Content | None,
        *,
        lease: LeaseHold | None = None,
        release: bool = True,
        stored_message: Event | None = None,
    ) -> AsyncIterator[Update]:
        """Run the loop on a session whose lease this replica holds (`lease`: every write
        is fenced by it, and with `release` it is released with the answer's append -
        pass False when the caller still has writes to make under it).

        Once the invocation ends, the session owes the model nothing. If it fails, it
        still owes nothing - a retry would fail alike - unless a turn is left open (calls
        without responses): then it stays owed, and whoever holds the session next (the
        sweep, or the next message) finishes that turn first. If this process dies
        first, another replica finishes it. The InvocationEnded update comes last.

        `stored_message`: `message` as already appended (with the session read); its
        invocation id is this invocation's.
        """
        invocation_id = stored_message.invocation_id if stored_message is not None else ""
        invocation = self.new_invocation(session, invocation_id=invocation_id)
        invocation.lease = lease
        invocation.release_on_answer = release
        ended: InvocationEnded | None = None
        invocation.span = invocation_span(invocation)
        kept = await self._kept_cancel(session, message)
        try:
            with self.replica.cancels.watch(session.key) as invocation.cancellation:
                if kept is not None:  # the session was cancelled while no replica ran it
                    invocation.cancellation.set(kept.keep_tickets)
                    invocation.cancels_open_turn_only = message is not None
                async for update in run_invocation(invocation, message, stored_message):
                    if isinstance(update, InvocationEnded):
                        ended = update
                    else:
                        yield update
        except BaseException as exc:
            # Its type only: an exception's text may quote what a tool or model was given.
            tracing.finish(invocation.span, error=type(exc).__name__)
            # An agent tool's child stopped (its time limit, a cancellation) keeps what it
            # got too: its worker closes what is left open (agent_tool.py).
            if isinstance(exc, Exception) or self.depth > 0:
                with contextlib.suppress(LeaseLostError, RedisError):  # then it stays owed
                    # Responses the model was given (the model failed after them) are kept.
                    await held.store_held(invocation)
                    if not held.unsettled(invocation) and session.open_turn() is None:
                        await self.store.resumed(session.key, fence=invocation.fence)
            raise
        tracing.finish(
            invocation.span,
            toolfleet__invocation__id=invocation.id,
            toolfleet__end_reason=ended.reason.value if ended is not None else None,
        )
        if not invocation.answered:
            # Ended otherwise (an action, max_steps, a credential): nothing more is owed.
            await self.store.resumed(session.key, fence=invocation.fence)
        if kept is not None:
            await forget_kept_cancel(self.replica.redis, self.keys, session.key)
        if ended is not None:
            yield ended

    async def _kept_cancel(
        self, session: Session, message: types.Content | None
    ) -> KeptCancel | None:
        """The cancellation kept for `session` that this invocation carries out: one that
        came while no replica ran the session, for the work this invocation resumes - the
        open turn, or the model's turn it owes (a new message finds none of its own)."""
        if message is not None and session.open_turn() is None:
            return None
        return await kept_cancel(self.replica.redis, self.keys, session.key)

    async def cancel(
        self, *, user_id: str, session_id: str, keep_tickets: bool = False
    ) -> list[str]:
        """Cancel the user's session wherever it runs: its model call and the calls out on
        the fleet are stopped (each answered once with a Cancelled error), and its pending
        tickets closed unless `keep_tickets`; the ids of the tickets being closed."""
        completions = Completions.of(self.replica.sync_client(), self.keys, self.settings)
        return await asyncio.to_thread(
            cancel_session,
            self.replica.sync_client(),
            self.keys,
            completions,
            session_key(self.app_name, user_id, session_id),
            keep_tickets=keep_tickets,
            source="api",
        )

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
            plugins=self.plugins,
        )

    def model_for(self, agent: Agent) -> Model:
        """Each agent of the tree keeps one model (its offline script, or Gemini)."""
        if agent.name not in self._models:
            self._models[agent.name] = choose_model(agent, self.settings)
        return self._models[agent.name]

    async def ask(self, *, user_id: str, session_id: str, message: str) -> str:
        """Run one invocation and return the agent's last text."""
        answer = ""
        async for update in self.run(user_id=user_id, session_id=session_id, message=message):
            if isinstance(update, Event) and answer_of(update):
                answer = answer_of(update)
        return answer
