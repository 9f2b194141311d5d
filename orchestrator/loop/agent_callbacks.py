"""ADK's agent callbacks and output_key: what runs as an agent takes the invocation
over, when it answers, and once the invocation is done.

As in ADK, an agent is entered when an invocation starts with it and when a transfer
hands it the conversation (its before_agent_callback runs then); once the invocation
has its answer, the after_agent_callback of every agent entered runs, the last one
first - unless a before_agent_callback answered, which ends the invocation there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.genai import types
from pydantic import ValidationError

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.callbacks import called, listed
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation
from toolfleet.orchestrator.models.protocol import function_calls, text_of
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.errors import ModelError

# Endings after which the agents' after_agent_callbacks run (ADK: the agent's run
# finished; not when it paused for a person or a credential, or was cancelled).
_FINISHED = (EndReason.ANSWERED, EndReason.SKIPPED_SUMMARY, EndReason.ESCALATED)


async def enter_agent(inv: Invocation) -> Event | None:
    """Run the before_agent_callback of the agent answering now if it was not entered
    last; the event it made, stored (None if it made none). A Content it returned answers
    in the agent's place and ends the invocation: `inv.answered` is set."""
    agent = inv.agent
    if inv.entered and inv.entered[-1] is agent:
        return None
    inv.entered.append(agent)
    event = await _agent_event(inv, agent, "before_agent_callback")
    if event is None:
        return None
    if event.content is not None:
        inv.answered_by_callback = True
        await store_answer(inv, event)
    else:
        await held.append(inv, event)
    return event


async def leave_agents(inv: Invocation, reason: EndReason) -> AsyncIterator[Event]:
    """The after_agent_callbacks of the agents entered, the last entered first; each
    event one of them made, stored."""
    if reason not in _FINISHED or inv.answered_by_callback:
        return
    for agent in reversed(inv.entered):
        event = await _agent_event(inv, agent, "after_agent_callback")
        if event is not None:
            await held.append(inv, event)
            yield event


async def store_answer(inv: Invocation, event: Event) -> None:
    """Store the event that answers the invocation: the session owes nothing from here,
    and the lease goes in the same write - unless an after_agent_callback may still
    write (then the lease is released when the invocation lets it go)."""
    inv.answered = True
    after = any(listed(a.after_agent_callback) for a in inv.entered) or any(
        type(p).after_agent_callback is not BasePlugin.after_agent_callback for p in inv.plugins
    )
    release = inv.lease is not None and inv.release_on_answer and not after
    if inv.lease is not None and release:
        await inv.lease.renewal.stop()
    owes_turn = False if inv.answers_call else None  # a workflow runs on: still owed
    await held.append(inv, event, owes_turn=owes_turn, release=release)
    if inv.lease is not None and release:
        inv.lease.released = True


def output_delta(agent: Agent, content: types.Content) -> dict[str, Any]:
    """With `output_key`, the state delta that saves a final answer's text under it, as
    ADK saves it: the text without thoughts; with `output_schema`, its JSON validated and
    saved as a dict. Empty for a turn with calls or without text."""
    if not agent.output_key or function_calls(content):
        return {}
    if not any(p.text is not None and not p.thought for p in content.parts or ()):
        return {}
    text = text_of(content)
    if agent.output_schema is None:
        return {agent.output_key: text}
    if not text.strip():
        return {}
    try:
        value = agent.output_schema.model_validate_json(text).model_dump(exclude_none=True)
    except ValidationError as exc:
        raise ModelError(
            f"agent {agent.name!r} answered with text that is not the JSON of its "
            f"output_schema {agent.output_schema.__name__}, so it cannot be saved to "
            f"state[{agent.output_key!r}]: {exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']}"
        ) from exc
    return {agent.output_key: value}


async def _agent_event(inv: Invocation, agent: Agent, hook: str) -> Event | None:
    """Run the plugins' then `agent`'s callbacks of `hook` until one returns a Content
    (ADK's order); the event carrying it and what they wrote to state, or None if they
    did neither."""
    callbacks = listed(getattr(agent, hook))
    if not callbacks and not inv.plugins:
        return None
    context = inv.callback_context(agent)
    answer: object = None
    who = ""
    for plugin in inv.plugins:
        answer = await getattr(plugin, hook)(agent=agent, callback_context=context)
        if answer is not None:
            who = plugin.name
            break
    for callback in callbacks if answer is None else ():
        answer = await called(callback, callback_context=context)
        if answer is not None:
            who = getattr(callback, "__qualname__", repr(callback))
            break
    if answer is not None and not isinstance(answer, types.Content):
        raise TypeError(
            f"{hook} {who!r} of agent {agent.name!r} returned {type(answer).__name__}: "
            "return a google.genai types.Content or None"
        )
    if answer is None and not context.state.delta:
        return None
    if answer is not None and answer.role is None:
        answer = answer.model_copy(update={"role": "model"})
    delta = dict(context.state.delta)
    if answer is not None and hook == "before_agent_callback":
        # ADK's LlmAgent saves a before_agent_callback's answer under output_key, as
        # it saves a model's final answer.
        delta.update(output_delta(agent, answer))
    return Event(invocation_id=inv.id, author=agent.name, content=answer, state_delta=delta)
