"""The function-calling loop of one invocation (docs/design.md, "A tool call, end to end").

Pure orchestration: it talks to Models, a ToolRunner and a SessionStore only, so a
scripted model and an in-process runner can drive it in unit tests.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.genai import types

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.planners import process_planning
from toolfleet.orchestrator.agents.structured import structured_answer
from toolfleet.orchestrator.agents.transfer import offered_tools
from toolfleet.orchestrator.agents.workflow import WorkflowAgent
from toolfleet.orchestrator.contents import content, encodable, text_part
from toolfleet.orchestrator.fleet.protocol import is_cancelled
from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.agent_callbacks import (
    enter_agent,
    leave_agents,
    output_delta,
    store_answer,
)
from toolfleet.orchestrator.loop.callbacks import MODEL_HOOKS, Hooks
from toolfleet.orchestrator.loop.cancelling import closed_by_cancel
from toolfleet.orchestrator.loop.deep_args import drop_deep_args
from toolfleet.orchestrator.loop.invocation import (
    CallFinished,
    CallsDispatched,
    EndReason,
    Invocation,
    InvocationEnded,
    Update,
)
from toolfleet.orchestrator.loop.parking import ask_after_run, asks_after_run, park_turn
from toolfleet.orchestrator.loop.requests import model_request
from toolfleet.orchestrator.loop.spans import generate
from toolfleet.orchestrator.loop.tool_requests import process_requests
from toolfleet.orchestrator.loop.turn import ResponseParts, responses_event, run_calls
from toolfleet.orchestrator.loop.workflow import Progress, close_stray_turns, run_workflow
from toolfleet.orchestrator.models.base_llm import answered
from toolfleet.orchestrator.models.protocol import as_sent, function_calls, loop_call_id
from toolfleet.orchestrator.plugins.context import LlmResponse
from toolfleet.orchestrator.plugins.llm_calls import exceeded_in
from toolfleet.orchestrator.sessions.cancels import CANCELLED_MESSAGE, unless_cancelled
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import LeaseLostError
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.state import TEMP_PREFIX
from toolfleet.shared.tools import ToolRegistry

log = logging.getLogger(__name__)


async def run_invocation(
    inv: Invocation, message: types.Content | None, stored_message: Event | None = None
) -> AsyncIterator[Update]:
    """Run the loop for one message; yield events and progress as they happen.

    `message=None` continues a session as it stands: its last event is the model's
    input (a long-running call's final result, applied by the completions listener), or
    a model turn whose calls were running when its invocation died - that turn is
    finished first, without sending again what was sent. A message that finds such an
    open turn waits for it: the turn's calls are answered first (as the invocation that
    died), so the model never sees a call without its response.

    `stored_message`: the message's event, appended already (by the session read, which
    does so only when no turn is open).
    """
    try:
        async for closed in close_stray_turns(inv):
            yield closed
        open_turn = inv.session.open_turn()
        if open_turn is not None and message is not None:
            own_id, inv.id = inv.id, open_turn.invocation_id
            workflow = inv.agent if isinstance(inv.agent, WorkflowAgent) else None
            if workflow is not None:  # its sub-agent that made the turn answers it
                inv.agent, inv.branch = _turn_agent(workflow, open_turn), open_turn.branch
            async for update in _answer_calls(inv, open_turn, _Ending()):
                yield update
            if inv.cancels_open_turn_only and inv.cancellation is not None:
                inv.cancellation.withdraw()  # the message came after the cancellation
            inv.id, open_turn = own_id, None
            if workflow is not None:  # the message goes to the workflow
                inv.agent, inv.branch = workflow, None
        elif open_turn is not None:  # it goes on as the invocation that died
            inv.id = open_turn.invocation_id
            if open_turn.author == inv.agent.name:  # its before_agent_callback ran then
                inv.entered.append(inv.agent)
        if stored_message is not None:
            yield stored_message
        elif message is not None:
            user_event = Event(invocation_id=inv.id, author="user", content=encodable(message))
            # Owed until answered, an agent tool's child included: the sweep never runs a
            # child (its worker does), but closes its open turn if that worker is lost.
            await held.append(inv, user_event, owes_turn=True)
            yield user_event
        if isinstance(inv.agent, WorkflowAgent):
            runs = run_workflow(inv, run_agent, _progress(inv, inv.agent, message, open_turn))
        else:
            runs = run_agent(inv, open_turn)
        async for update in runs:
            yield update
    finally:
        # temp: state lives for one invocation only.
        for key in [k for k in inv.session.state if k.startswith(TEMP_PREFIX)]:
            del inv.session.state[key]
        try:
            if inv.plugins:  # else no context to build
                await Hooks(inv.agent, inv.plugins).after_run(inv.callback_context())
        except Exception:  # a plugin's cleanup must not hide how the invocation ended
            log.exception("a plugin's after_run_callback failed (invocation %s)", inv.id)


def _progress(
    inv: Invocation, workflow: WorkflowAgent, message: types.Content | None, open_turn: Event | None
) -> Progress | None:
    """For a workflow's invocation resumed (no message: it died, or a call it parked for
    a person was answered), what it did before: it goes on as that invocation. None
    otherwise - a long-running call's result that came after the invocation ended runs
    the workflow anew."""
    events = inv.session.events
    if message is not None or not events:
        return None
    dead = open_turn.invocation_id if open_turn is not None else events[-1].invocation_id
    progress = Progress.of(workflow, events, dead, open_turn, inv.plugins)
    if progress.ended:  # a result that came after its invocation ended: a run of its own
        return None
    inv.id = dead
    return progress


def _turn_agent(agent: Agent, turn: Event) -> Agent:
    """The agent of `agent`'s tree that made `turn` (`agent` if there is none such)."""
    found = agent.find_agent(turn.author)
    return agent if found is None or isinstance(found, WorkflowAgent) else found


async def run_agent(inv: Invocation, open_turn: Event | None = None) -> AsyncIterator[Update]:
    """Run `inv.agent`, an LLM agent, until its answer (or another ending): model turns
    and their calls, `open_turn` (a resumed turn with calls) first. InvocationEnded last."""
    for _ in range(inv.settings.max_steps):
        if isinstance(inv.agent, WorkflowAgent):  # a transfer handed it the conversation
            async for update in run_workflow(inv, run_agent):
                yield update
            return
        ending = _Ending()
        tools: ToolRegistry | None = None  # the resumed turn's are read again
        if open_turn is not None:
            model_event, open_turn = open_turn, None
        elif inv.halted is not None and inv.halted():  # another branch escalated
            await held.store_held(inv)
            yield InvocationEnded(inv.id, EndReason.ESCALATED)
            return
        else:
            entered = await enter_agent(inv)  # before_agent_callback; stored
            if entered is not None and inv.answered:  # it answered in the agent's place
                turn: tuple[Event, ToolRegistry] | None = (entered, ToolRegistry())
            else:
                if entered is not None:
                    yield entered  # what it wrote to state: the agent runs
                turn = await _model_turn(inv)
            if turn is None:  # cancelled before the model answered: nothing is open
                async for update in _cancelled(inv):
                    yield update
                return
            model_event, tools = turn
            yield model_event
        if inv.answered and tools is not None:  # no calls: the answer ends it, stored
            ending.reason = EndReason.ANSWERED
        else:
            async for update in _answer_calls(inv, model_event, ending, tools=tools):
                yield update
        if ending.reason is not None:
            await held.store_held(inv)  # none by now: every ending writes (a guard)
            async for update in leave_agents(inv, ending.reason):  # after_agent_callback
                yield update
            yield InvocationEnded(inv.id, ending.reason)
            return
    error = f"stopped after max_steps={inv.settings.max_steps} model calls (TOOLFLEET_MAX_STEPS)"
    limit_event = Event(invocation_id=inv.id, author=inv.agent.name, error=error)
    await held.append(inv, limit_event)
    yield limit_event
    yield InvocationEnded(inv.id, EndReason.MAX_STEPS, error)


@dataclass
class _Ending:
    """Set by `_answer_calls` when the turn it answered ends the invocation."""

    reason: EndReason | None = None


async def _answer_calls(
    inv: Invocation, model_event: Event, ending: _Ending, *, tools: ToolRegistry | None = None
) -> AsyncIterator[Update]:
    """Run the model turn's calls and store their responses, in call order, in one step
    that also closes the calls answered for good; then apply the turn's actions.

    `tools`: those the model was offered; None for a turn resumed from the session (its
    invocation died after sending some calls: only the others are sent now)."""
    agent = inv.agent
    calls = function_calls(model_event.content) if model_event.content else []
    if not calls:
        ending.reason = EndReason.ANSWERED
        return
    resuming = tools is None
    # A new model turn is stored with its first calls sent, in one atomic step (one round
    # trip less, and no "stored but not sent" window); alone if none is sent.
    model_turn = None if resuming else _UnstoredTurn(inv, held.stamp(inv, model_event))
    if tools is None:
        tools = await offered_tools(agent, inv.readonly_context)
    results: dict[str, ToolResult] = {}
    with_first_send = model_turn.stage if model_turn is not None else None
    sent: set[str] = set()
    sealer = Sealer.of(inv.settings)
    # Made, and encoded as stored where the store can join them, while the other calls
    # still run.
    parts = ResponseParts(sealer, inv.store.piece_check)
    async for update in run_calls(
        inv, tools, calls, results, resume=resuming, with_first_send=with_first_send
    ):
        if isinstance(update, CallsDispatched):
            sent.update(c.call_id for c in update.calls)
        elif isinstance(update, CallFinished):
            parts.add(update.result)
        yield update
    if model_turn is not None:
        await model_turn.store_if_unsent()
    ordered = [results[c.id or ""] for c in calls]
    cancellation = inv.cancellation
    if cancellation is not None and cancellation.requested:
        ending.reason = EndReason.CANCELLED  # after this turn's responses are stored
        if not cancellation.keep_tickets:  # nothing of the turn is left waiting
            ordered = [closed_by_cancel(r) for r in ordered]
    waiting = [r for r in ordered if r.actions.waits()]
    if waiting and ending.reason is None and all(asks_after_run(r) for r in waiting):
        # Tools that ran and asked for a confirmation: their interim responses go to the
        # model now, as ADK sends them, and each call runs again once confirmed.
        yield await ask_after_run(inv, calls, waiting)
    elif waiting:
        # The model sees these results only once the credentials are supplied and the
        # calls held back are confirmed (the other calls ran: their results are kept).
        yield await park_turn(inv, model_event.id, calls, ordered)
        confirming = any(r.actions.requested_confirmation for r in ordered)
        if ending.reason is None:
            ending.reason = (
                EndReason.AWAITING_CONFIRMATION if confirming else EndReason.AWAITING_CREDENTIAL
            )
        return
    response_event = responses_event(
        inv.id, agent.name, ordered, sealer, inv.session.state, made=parts
    )
    # A call that asked for a confirmation as it ran stays open: it runs again once
    # confirmed (and its record stays pending till then).
    closed = [
        r.call_id for r in ordered if r.status is not CallStatus.PENDING and not r.actions.waits()
    ]
    # The results' transport forgets them in the step that stores them - but for a
    # ParallelAgent's branch: its session's stream and sent-calls record are the other
    # branches' too, so they are trimmed once every branch is done (loop/workflow.py).
    settle = None if inv.branch else functools.partial(inv.runner.stage_settle, inv.session.key)
    # An agent tool's run past the ceiling on model calls ends this run too, as ADK's
    # nested run raises into its caller: the responses are stored, the model not asked.
    exceeded = exceeded_in(inv.plugins, ordered) if ending.reason is None else None
    if (
        exceeded is None
        and ending.reason is None
        and settle is not None
        and held.holdable(ordered, sent, tools)
    ):
        # Workers' final results: stored with the invocation's next write (held.py). Each
        # worker's post closed its call already: the write has none to close.
        inv.held = inv.store.hold(
            inv.session, response_event, also=settle, pieces=parts.pieces(ordered)
        )
    else:
        # A long-running call's ticket is its worker's to write (opened before the tool
        # ran, its initial response kept in the step that posted it): not written here.
        await held.append(inv, response_event, closed=closed, also=settle)
    if exceeded is not None:
        raise exceeded
    yield response_event
    stopping = [r.call_id for r in ordered if is_cancelled(r)]
    if stopping:  # closed now: a worker still running one of them is told to stop it
        await inv.runner.stop(inv.session.key, stopping)
    if ending.reason is EndReason.CANCELLED:
        return
    async for action_event in _apply_actions(inv, response_event):
        yield action_event
    structured = structured_answer(ordered)
    if structured is not None:  # set_model_response: its arguments are the answer
        answer = content("model", [text_part(structured)])
        answer_event = Event(
            invocation_id=inv.id,
            author=agent.name,
            content=answer,
            state_delta=output_delta(agent, answer),
        )
        await store_answer(inv, answer_event)
        yield answer_event
        ending.reason = EndReason.ANSWERED
    elif response_event.actions.skip_summarization:
        ending.reason = EndReason.SKIPPED_SUMMARY
    elif response_event.actions.escalate and agent.parent is None:
        ending.reason = EndReason.ESCALATED  # the root agent gave up: nobody above answers


class _UnstoredTurn:
    """A model turn with calls, not stored yet: it goes in the write that sends its first
    calls (`stage`), or alone when none is sent (all invalid, say)."""

    def __init__(self, inv: Invocation, event: Event) -> None:
        self._inv = inv
        self._event = event
        self._stored = False

    def stage(self, batch: WriteBatch) -> Callable[[Sequence[Any]], Awaitable[None]]:
        """Add the turn's append to `batch` (after the held responses of the turn before,
        if any); answer what to call with the batch's replies."""
        inv = self._inv
        carrying = held.take(inv)
        earlier = None if carrying is None else inv.store.stage_held(batch, inv.session, carrying)
        staged = inv.store.stage_append(batch, inv.session, self._event)

        async def written(replies: Sequence[Any]) -> None:
            self._stored = True
            await inv.store.appended(staged, replies, inv.fence, earlier=earlier)
            held.carried(inv)

        return written

    async def store_if_unsent(self) -> None:
        """Store the turn now if no send carried it."""
        if not self._stored:
            await held.append(self._inv, self._event)
            self._stored = True


async def _cancelled(inv: Invocation) -> AsyncIterator[Update]:
    """End a cancelled invocation that has nothing open: a last event says so."""
    event = Event(invocation_id=inv.id, author=inv.agent.name, error=CANCELLED_MESSAGE)
    await held.append(inv, event)
    yield event
    yield InvocationEnded(inv.id, EndReason.CANCELLED, CANCELLED_MESSAGE)


async def _model_turn(inv: Invocation) -> tuple[Event, ToolRegistry] | None:
    """Ask the agent's model for its next turn; the turn and the tools the model was
    offered, or None if the session is cancelled first. An answer (no calls) is stored
    here; a turn with calls by `_answer_calls`."""
    if inv.cancellation is not None and inv.cancellation.requested:
        return None
    if inv.lease is not None and inv.lease.renewal.lost:
        raise LeaseLostError(
            f"session {inv.session.id!r}: the lease was lost; not calling the model again"
        )
    agent = inv.agent
    tools = await offered_tools(agent, inv.readonly_context)
    request = await model_request(inv, tools)
    await process_requests(inv, request)  # the tools' own changes, as ADK's
    hooks = Hooks(agent, inv.plugins)
    # A planner rewrites the answer with a callback context too (its state writes kept).
    wants_context = hooks.any_of(MODEL_HOOKS) or agent.planner is not None
    context = inv.callback_context() if wants_context else None
    response = None if context is None else await hooks.before_model(context, request)
    if response is None:
        # Nothing is stored until the model answers: a cancellation may stop it here.
        model = inv.models(agent)
        generated = await unless_cancelled(  # on_model_error_callback may answer a failure
            hooks.generate(lambda: generate(inv, model, as_sent(request)), context, request),
            inv.cancellation,
        )
        if generated is None:
            return None
        # As it arrives, before the callbacks see it: they may serialize it.
        drop_deep_args(generated, inv.settings.max_json_depth)
        response = LlmResponse(encodable(generated))
        if context is not None:
            response = await hooks.after_model(context, response)
    if agent.planner is not None and context is not None:  # after the callbacks, as ADK
        process_planning(agent.planner, context, response.content)
    # A callback's LlmResponse may carry an error code, or nothing: no turn to store.
    content = with_call_ids(answered(response, f"the model callbacks of {agent.name!r}"))
    if context is not None:
        # What a callback or the planner answered or changed, before anything serializes
        # the turn (without them, the model's turn was made safe as it arrived).
        drop_deep_args(content, inv.settings.max_json_depth)
        content = encodable(content)
    # What the model callbacks wrote to state is stored with the turn (output_key's too).
    model_event = Event(
        invocation_id=inv.id,
        author=agent.name,
        content=content,
        state_delta={
            **(context.state.delta if context is not None else {}),
            **output_delta(agent, content),
        },
    )
    # An answer without calls ends the invocation: the session owes nothing from here,
    # and the lease can go in the same transaction.
    inv.answered = not function_calls(content)
    if not inv.answered:
        return model_event, tools  # stored with its calls (_answer_calls)
    await store_answer(inv, model_event)
    return model_event, tools


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
            await held.append(inv, error_event)
            yield error_event
    elif actions.escalate and not isinstance(inv.agent.parent, WorkflowAgent):
        # Under a workflow agent the agent answers; a LoopAgent stops after it.
        target = inv.agent.parent
    if target is not None and target is not inv.agent:
        inv.agent = target
        # ADK's: the next message goes to an LLM agent whose ancestors are all LLM
        # agents, not into a workflow (it runs again from its root, or its caller).
        if inv.answers_call and not isinstance(target, WorkflowAgent):
            await inv.store.set_active_agent(inv.session.key, target.name, fence=inv.fence)


def with_call_ids(content: types.Content) -> types.Content:
    """Give every function call an id of the loop's, unique across sessions (the model's
    id, kept inside, goes back only to the model), keeping everything else as returned."""
    for call in function_calls(content):
        call.id = loop_call_id(call.id)
    return content
