"""The function-calling loop of one invocation (DESIGN: "The loop").

Pure orchestration: it talks to Models, a ToolRunner and a SessionStore only, so a
scripted model and an in-process runner can drive it in unit tests.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from google.genai import types

from orchestrator.agent import Agent
from orchestrator.credentials import park_turn
from orchestrator.fleet import ToolRunner
from orchestrator.instructions import render_instruction
from orchestrator.leases import LeaseHold
from orchestrator.model import CLIENT_CALL_ID_PREFIX, Model, ModelRequest, function_calls
from orchestrator.sessions import Event, Session, SessionStore
from orchestrator.turn import (
    CallFinished,
    CallsDispatched,
    pending_calls,
    responses_event,
    run_calls,
)
from shared.config import Settings
from shared.context import TEMP_PREFIX
from shared.keys import Keys
from shared.messages import ToolResult
from shared.tools import ToolRegistry
from shared.toolsets import ReadonlyContext

__all__ = ["CallFinished", "CallsDispatched", "Invocation", "Update", "run_invocation"]

Update = Event | CallsDispatched | CallFinished


@dataclass
class Invocation:
    agent: Agent  # the agent answering now; transfer_to_agent and escalate change it
    models: Callable[[Agent], Model]
    session: Session
    store: SessionStore
    runner: ToolRunner
    settings: Settings
    keys: Keys
    id: str = ""
    depth: int = 0  # agent-tool nesting: 0 for a user's invocation
    answered: bool = False  # the model's answer is stored (and the session owes nothing)
    lease: LeaseHold | None = None  # released in the answer's transaction when given

    def __post_init__(self) -> None:
        self.id = self.id or f"inv-{uuid.uuid4().hex}"

    def readonly_context(self) -> ReadonlyContext:
        return ReadonlyContext.of(
            self.session.state,
            agent_name=self.agent.name,
            invocation_id=self.id,
            session_id=self.session.id,
            user_id=self.session.user_id,
            app_name=self.session.app_name,
        )


async def run_invocation(inv: Invocation, message: types.Content | None) -> AsyncIterator[Update]:
    """Run the loop for one message; yield events and progress as they happen.

    `message=None` continues a session as it stands: its last event is the model's
    input (a long-running call's final result, applied by the completions listener), or
    a model turn whose calls were running when its invocation died - that turn is
    finished first, without sending again what was sent.
    """
    try:
        open_turn = None
        if message is not None:
            user_event = Event(invocation_id=inv.id, author="user", content=message)
            await inv.store.append(inv.session, user_event, owes_turn=True)
            yield user_event
        else:
            open_turn = inv.session.open_turn()
            if open_turn is not None:  # it goes on as the invocation that died
                inv.id = open_turn.invocation_id
        for _ in range(inv.settings.max_steps):
            agent = inv.agent
            tools = await agent.tools_for(inv.readonly_context())
            resuming = open_turn is not None
            if open_turn is not None:
                model_event, open_turn = open_turn, None
            else:
                model_event = await _model_turn(inv, agent, tools)
                yield model_event
            calls = function_calls(model_event.content) if model_event.content else []
            if not calls:
                return
            results: dict[str, ToolResult] = {}
            async for update in run_calls(inv, tools, calls, results, resume=resuming):
                yield update
            ordered = [results[c.id or ""] for c in calls]
            if any(r.actions.requested_auth for r in ordered):
                # The model sees these results only once the credentials are supplied.
                yield await park_turn(inv, model_event.id, calls, ordered)
                return
            response_event = responses_event(inv.id, agent.name, ordered)
            pending = pending_calls(inv, calls, ordered)
            # The results' transport forgets them in the transaction that stores them.
            settle = functools.partial(inv.runner.stage_settle, inv.session.id)
            await inv.store.append(inv.session, response_event, pending=pending, also=settle)
            yield response_event
            async for action_event in _apply_actions(inv, response_event):
                yield action_event
            if response_event.actions.skip_summarization:
                return
            if response_event.actions.escalate and agent.parent is None:
                return  # the root agent gave up its turn: nobody above to answer
        error = (
            f"stopped after max_steps={inv.settings.max_steps} model calls (TOOLFLEET_MAX_STEPS)"
        )
        limit_event = Event(invocation_id=inv.id, author=inv.agent.name, error=error)
        await inv.store.append(inv.session, limit_event)
        yield limit_event
    finally:
        # temp: state lives for one invocation only.
        for key in [k for k in inv.session.state if k.startswith(TEMP_PREFIX)]:
            del inv.session.state[key]


async def _model_turn(inv: Invocation, agent: Agent, tools: ToolRegistry) -> Event:
    """Ask the agent's model for its next turn and persist it."""
    authors, contents = inv.session.authored_contents()
    request = ModelRequest(
        agent_name=agent.name,
        instruction=render_instruction(agent, inv.session.state),
        contents=contents,
        tools=list(tools.values()),
        authors=authors,
    )
    content = with_call_ids(await inv.models(agent).generate(request))
    model_event = Event(invocation_id=inv.id, author=agent.name, content=content)
    # An answer without calls ends the invocation: the session owes nothing from here,
    # and the lease can go in the same transaction.
    inv.answered = not function_calls(content)
    if not inv.answered:
        await inv.store.append(inv.session, model_event)
        return model_event
    release = await inv.lease.release_in() if inv.lease is not None else None
    await inv.store.append(inv.session, model_event, owes_turn=False, also=release)
    if inv.lease is not None:
        inv.lease.released = True
    return model_event


async def _apply_actions(inv: Invocation, event: Event) -> AsyncIterator[Event]:
    """transfer_to_agent hands the conversation to another agent; escalate to the parent."""
    actions = event.actions
    target: Agent | None = None
    if actions.transfer_to_agent:
        target = inv.agent.root.find_agent(actions.transfer_to_agent)
        if target is None:
            names = ", ".join(a.name for a in inv.agent.root.walk())
            error = f"transfer_to_agent: no agent named {actions.transfer_to_agent!r} ({names})"
            error_event = Event(invocation_id=inv.id, author=inv.agent.name, error=error)
            await inv.store.append(inv.session, error_event)
            yield error_event
    elif actions.escalate:
        target = inv.agent.parent
    if target is not None and target is not inv.agent:
        inv.agent = target
        await inv.store.set_active_agent(inv.session.id, target.name)


def with_call_ids(content: types.Content) -> types.Content:
    """Give every function call an id, keeping everything else exactly as returned."""
    seen: set[str] = set()
    for part in content.parts or ():
        call = part.function_call
        if call is None:
            continue
        if not call.id or call.id in seen:
            call.id = f"{CLIENT_CALL_ID_PREFIX}{uuid.uuid4().hex[:16]}"
        seen.add(call.id)
    return content
