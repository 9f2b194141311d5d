"""The calls of one model turn: validate, dispatch together, collect, answer in order."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from google.genai import types
from pydantic_core import to_json

from toolfleet.orchestrator.agents.structured import SetModelResponseTool, answer_structured
from toolfleet.orchestrator.agents.transfer import TransferTool, answer_transfer
from toolfleet.orchestrator.contents import content, response_part
from toolfleet.orchestrator.fleet.protocol import PlannedCall, WithFirstSend, failed
from toolfleet.orchestrator.loop.callbacks import Hooks
from toolfleet.orchestrator.loop.confirmation import ask_confirmation
from toolfleet.orchestrator.loop.deep_args import deep_args_problem
from toolfleet.orchestrator.loop.duplicates import Duplicates
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Invocation
from toolfleet.orchestrator.loop.tool_callbacks import ToolCallbacks
from toolfleet.orchestrator.plugins.llm_calls import ceiling_of
from toolfleet.orchestrator.sessions.events import CallRecord, Event, merge_deltas
from toolfleet.shared import tracing
from toolfleet.shared.messages import (
    PendingCall,
    ToolActions,
    ToolCall,
    ToolResult,
    error_response,
)
from toolfleet.shared.redaction import SEALED, mentions_sealed
from toolfleet.shared.sealing import Sealer, SealError, unseal
from toolfleet.shared.tools import ToolRegistry

log = logging.getLogger(__name__)


async def run_calls(
    inv: Invocation,
    tools: ToolRegistry,
    calls: list[types.FunctionCall],
    results: dict[str, ToolResult],
    *,
    resume: bool = False,
    with_first_send: WithFirstSend | None = None,
) -> AsyncIterator[CallsDispatched | CallFinished]:
    """Validate all calls, dispatch the valid ones at once, collect every result.
    `with_first_send`: writes to make with the first calls sent (ToolRunner.run).

    Only the first `max_calls_per_turn` calls run; the others are answered with an
    error and never dispatched. `resume`: the turn's invocation died after dispatching
    some of them (ToolRunner.run); the cap picks the same calls again.

    A valid call goes through the tool callbacks (before_tool may answer it: then it is
    never dispatched), then waits for a person if its tool requires a confirmation;
    with dedupe_tool_calls a repeat of an earlier call of the turn is not dispatched
    either, and gets that call's response.
    """
    planned: list[PlannedCall] = []
    callbacks = ToolCallbacks(Hooks(inv.agent, inv.plugins))
    duplicates = Duplicates(inv.settings.dedupe_tool_calls)
    cap = inv.settings.max_calls_per_turn
    depth = inv.settings.max_json_depth
    for index, fc in enumerate(calls):
        args = dict(fc.args or {})
        # Measured first: everything below (size, sealed keys, the schema) recurses.
        too_deep = deep_args_problem(fc.name or "", args, depth)
        envelope = make_envelope(inv, fc.id or "", fc.name or "", {} if too_deep else args)
        if index >= cap:
            results[envelope.call_id] = over_cap(envelope, len(calls), cap)
            continue
        tool = tools.get(envelope.tool)
        if tool is None:
            available = ", ".join(sorted(tools)) or "none"
            results[envelope.call_id] = failed(
                envelope,
                "UnknownTool",
                f"there is no tool named {envelope.tool!r}; available tools: {available}",
            )
            continue
        if too_deep:
            results[envelope.call_id] = failed(envelope, "InvalidArguments", too_deep)
            continue
        size = len(to_json(envelope.args, fallback=str))  # as sent: UTF-8 JSON
        if size > inv.settings.max_payload_bytes:
            results[envelope.call_id] = failed(
                envelope,
                "InvalidArguments",
                f"the arguments are {size} bytes, over the {inv.settings.max_payload_bytes}-byte "
                "limit; pass less data (or a reference to it)",
            )
            continue
        if mentions_sealed(envelope.args):
            # Only the orchestrator seals; a model (or a prompt injected into it) that
            # passes a sealed token of someone else's must not have a worker open it.
            results[envelope.call_id] = failed(
                envelope,
                "InvalidArguments",
                f"the key {SEALED!r} is reserved: it may not appear in a tool's arguments",
            )
            continue
        args, problems = tool.validate(envelope.args)
        if problems:
            detail = "; ".join(str(p) for p in problems)
            results[envelope.call_id] = failed(
                envelope, "InvalidArguments", f"invalid arguments for {tool.name}: {detail}"
            )
            continue
        if isinstance(tool, TransferTool | SetModelResponseTool):
            # Answered here, around the tool callbacks as ADK's function tools are; stored
            # with the others below.
            answer = await callbacks.before(tool, envelope, args)
            if answer is None and isinstance(tool, TransferTool):
                answer = answer_transfer(envelope, tool, args["agent_name"])
            elif answer is None and isinstance(tool, SetModelResponseTool):
                answer = answer_structured(envelope, tool)  # the final answer, as a call
            assert answer is not None
            results[envelope.call_id] = await callbacks.finish(answer)
            continue
        if duplicates.drop(envelope, tool):
            continue
        answer = await callbacks.before(tool, envelope, args)
        if answer is None:  # not sent until a person confirms it
            answer = await ask_confirmation(tool, envelope, args)
        if answer is not None:
            results[envelope.call_id] = await callbacks.finish(answer)
            continue
        planned.append(PlannedCall(envelope, tool, tracing.traceparent(inv.span)))
    for result in list(results.values()):
        for copy in [result, *duplicates.copies(result)]:
            results[copy.call_id] = copy
            yield CallFinished(inv.id, copy)
    if planned:
        yield CallsDispatched(inv.id, [p.call for p in planned])
        skipping = {p.call.call_id for p in planned if getattr(p.tool, "skip_summarization", False)}
        sending = inv.runner.run(
            planned, resume=resume, fence=inv.fence, with_first_send=with_first_send
        )
        async for arrived in sending:
            result = await callbacks.finish(arrived)
            if result.call_id in skipping:  # AgentTool(skip_summarization=True)
                result.actions.skip_summarization = True
            for copy in [result, *duplicates.copies(result)]:
                results[copy.call_id] = copy
                yield CallFinished(inv.id, copy)


def over_cap(call: ToolCall, made: int, cap: int) -> ToolResult:
    """The answer to a call beyond the turn's cap: not run, and the model is told the limit
    and what to do."""
    return failed(
        call,
        "TooManyCalls",
        f"this turn made {made:,} function calls, but the fleet runs at most {cap:,} calls of "
        f"one turn (a guard against runaway turns, TOOLFLEET_MAX_CALLS_PER_TURN): the first "
        f"{cap:,} ran and the other {made - cap:,}, this call ({call.tool}) among them, did "
        "not. If you still need it, call it again in a later turn; make at most "
        f"{cap:,} calls per turn.",
    )


def make_envelope(inv: Invocation, call_id: str, tool: str, args: dict[str, Any]) -> ToolCall:
    """The ToolCall sent for one call: its session's state snapshot, the stream to reply on
    and the run's ceiling on model calls, for an agent tool's run to obey."""
    return ToolCall(
        call_id=call_id,
        tool=tool,
        args=args,
        session_id=inv.session.id,
        app_name=inv.session.app_name,
        user_id=inv.session.user_id,
        invocation_id=inv.id,
        agent=inv.agent.name,
        state=dict(inv.session.state),
        reply_to=inv.keys.results(inv.session.key),
        dispatched_at=time.time(),
        depth=inv.depth,
        max_llm_calls=ceiling_of(inv.plugins),
    )


def pending_call(
    inv: Invocation, result: ToolResult, args: dict[str, Any], **fields: Any
) -> PendingCall:
    """The record of a call that waits (for its final result, or a credential)."""
    defaults: dict[str, Any] = {
        "ticket": result.response,
        "created_at": result.finished_at or time.time(),
        "traceparent": result.traceparent,
    }
    return PendingCall(
        call_id=result.call_id,
        tool=result.tool,
        session_id=inv.session.id,
        app_name=inv.session.app_name,
        user_id=inv.session.user_id,
        agent=inv.agent.name,
        invocation_id=inv.id,
        args=args,
        **{**defaults, **fields},
    )


class ResponseParts:
    """Each result's function response part and call record, made as the result arrives:
    while a wide turn still waits for its other calls, not all at once after the last
    (10,000 of them took the orchestrator's one thread ~140 ms)."""

    def __init__(self, sealer: Sealer | None = None) -> None:
        self._sealer = sealer
        self._made: dict[str, tuple[ToolResult, types.Part, CallRecord]] = {}

    def add(self, result: ToolResult) -> None:
        """Make `result`'s part and record now."""
        self._made[result.call_id] = (result, *self._make(result))

    def of(self, result: ToolResult) -> tuple[types.Part, CallRecord]:
        """`result`'s part and record: those made when it arrived, unless another result
        of the call took its place since (a cancellation's)."""
        made = self._made.get(result.call_id)
        if made is not None and made[0] is result:
            return made[1], made[2]
        return self._make(result)

    def _make(self, result: ToolResult) -> tuple[types.Part, CallRecord]:
        # A copy of the response, as validation would make: the event's is its own.
        response = dict(opened_response(result, self._sealer))
        return response_part(result.call_id, result.tool, response), CallRecord.of(result)


def responses_event(
    invocation_id: str,
    author: str,
    ordered: list[ToolResult],
    sealer: Sealer | None = None,
    state: Mapping[str, Any] | None = None,
    *,
    made: ResponseParts | None = None,
) -> Event:
    """One Content with every function response, in call order: what the model gets, so
    secrets the workers sealed are opened here (and masked again when stored). `state`:
    the session state the calls saw, against which their writes are merged. `made`: the
    parts made as the results arrived (with the same sealer)."""
    parts_made = made if made is not None else ResponseParts(sealer)
    parts, calls = [], []
    for result in ordered:
        part, record = parts_made.of(result)
        parts.append(part)
        calls.append(record)
    actions = ToolActions(
        skip_summarization=bool(ordered) and all(r.actions.skip_summarization for r in ordered),
        transfer_to_agent=next(
            (r.actions.transfer_to_agent for r in ordered if r.actions.transfer_to_agent), None
        ),
        escalate=any(r.actions.escalate for r in ordered),
        artifact_delta={k: v for r in ordered for k, v in r.actions.artifact_delta.items()},
    )
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=content("user", parts),
        state_delta=merge_deltas([r.state_delta for r in ordered], state),
        actions=actions,
        calls=calls,
    )


def opened_response(result: ToolResult, sealer: Sealer | None) -> dict[str, Any]:
    """The result's response with its sealed secrets opened; an error response for the
    model when one does not open (the operator's log says which key to fix)."""
    try:
        opened: dict[str, Any] = unseal(result.response, sealer)
    except SealError as exc:
        log.error("the result of call %s (%s): %s", result.call_id, result.tool, exc)
        return error_response(
            "SealedResultError",
            f"the result of {result.tool!r} held a secret that could not be decrypted; "
            "the tool ran, but its result is not available",
        )
    return opened
