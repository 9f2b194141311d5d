"""The function-calling loop of one invocation (DESIGN: "The loop").

Pure orchestration: it talks to Models, a ToolRunner and a SessionStore only, so a
scripted model and an in-process runner can drive it in unit tests.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator

from google.genai import types

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.instructions import render_instruction
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation, InvocationEnded, Update
from toolfleet.orchestrator.loop.parking import park_turn
from toolfleet.orchestrator.loop.turn import pending_calls, responses_event, run_calls
from toolfleet.orchestrator.models.protocol import (
    CLIENT_CALL_ID_PREFIX,
    ModelRequest,
    function_calls,
)
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.messages import ToolResult
from toolfleet.shared.state import TEMP_PREFIX
from toolfleet.shared.tools import ToolRegistry


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
                yield InvocationEnded(inv.id, EndReason.ANSWERED)
                return
            results: dict[str, ToolResult] = {}
            async for update in run_calls(inv, tools, calls, results, resume=resuming):
                yield update
            ordered = [results[c.id or ""] for c in calls]
            if any(r.actions.requested_auth for r in ordered):
                # The model sees these results only once the credentials are supplied.
                yield await park_turn(inv, model_event.id, calls, ordered)
                yield InvocationEnded(inv.id, EndReason.AWAITING_CREDENTIAL)
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
                yield InvocationEnded(inv.id, EndReason.SKIPPED_SUMMARY)
                return
            if response_event.actions.escalate and agent.parent is None:
                # The root agent gave up its turn: nobody above to answer.
                yield InvocationEnded(inv.id, EndReason.ESCALATED)
                return
        error = (
            f"stopped after max_steps={inv.settings.max_steps} model calls (TOOLFLEET_MAX_STEPS)"
        )
        limit_event = Event(invocation_id=inv.id, author=inv.agent.name, error=error)
        await inv.store.append(inv.session, limit_event)
        yield limit_event
        yield InvocationEnded(inv.id, EndReason.MAX_STEPS, error)
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
