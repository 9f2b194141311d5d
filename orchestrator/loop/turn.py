"""The calls of one model turn: validate, dispatch together, collect, answer in order."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.genai import types

from toolfleet.orchestrator.contents import content, response_part
from toolfleet.orchestrator.fleet.protocol import PlannedCall, WithFirstSend
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Invocation
from toolfleet.orchestrator.loop.planning import PLAN_CHUNK, TurnPlan
from toolfleet.orchestrator.release import release_soon
from toolfleet.orchestrator.sessions.encoding import EncodedPieces, encoded
from toolfleet.orchestrator.sessions.events import CallRecord, Event, merge_deltas
from toolfleet.shared.messages import (
    PendingCall,
    ToolActions,
    ToolResult,
    error_response,
)
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

    A wide turn is checked in chunks: its first calls go out while the next are checked
    (the fleet asks for them between its sends). What the turn did with each call - the
    answers made here, then the calls sent - is told once every call is checked, before
    any result of the fleet.
    """
    plan = TurnPlan(inv, tools, results)
    # A resumed turn is checked whole: what was sent before is known only for all of it.
    chunks = plan.chunks(calls, size=max(1, len(calls)) if resume else PLAN_CHUNK)
    try:
        first: list[PlannedCall] = []
        while not first and not plan.done:
            first = await anext(chunks)
        if plan.done:  # checked whole (a narrow turn): told before anything is sent
            for update in plan.announce():
                yield update
        if not first:
            return
        sending = inv.runner.run(
            first,
            resume=resume,
            fence=inv.fence,
            with_first_send=with_first_send,
            more=None if plan.done else chunks,
        )
        arrived: list[ToolResult] = []  # kept while calls are still being checked
        async for result in sending:
            arrived.append(result)
            if not plan.done:
                continue
            if not plan.announced:
                for update in plan.announce():
                    yield update
            for each in arrived:
                for finished in await plan.finish(each):
                    yield finished
            arrived = []
        if not plan.announced:  # the fleet answered nothing after the last check
            for update in plan.announce():
                yield update
        for each in arrived:
            for finished in await plan.finish(each):
                yield finished
    finally:
        await chunks.aclose()
        release_soon(plan)


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
    (10,000 of them took the orchestrator's one thread ~140 ms). With `names_secret`
    (the store's check of a stored text), each is encoded as stored then too, for the
    responses event's write to join (`pieces`)."""

    def __init__(
        self, sealer: Sealer | None = None, names_secret: Callable[[str], bool] | None = None
    ) -> None:
        self._sealer = sealer
        self._names_secret = names_secret
        self._made: dict[str, _Made] = {}

    def add(self, result: ToolResult) -> None:
        """Make `result`'s part and record now."""
        self._made[result.call_id] = self._make(result)

    def of(self, result: ToolResult) -> tuple[types.Part, CallRecord]:
        """`result`'s part and record: those made when it arrived, unless another result
        of the call took its place since (a cancellation's)."""
        made = self._of(result)
        return made.part, made.record

    def pieces(self, ordered: Sequence[ToolResult]) -> EncodedPieces | None:
        """The encoded parts and records of `ordered`'s responses event; None without
        `names_secret`."""
        if self._names_secret is None:
            return None
        parts, calls, names_secret = [], [], False
        for result in ordered:
            made = self._of(result).encoded
            if made is None:  # made before encoding was on: cannot be
                return None
            parts.append(made[0])
            calls.append(made[1])
            names_secret = names_secret or made[2]
        return EncodedPieces(parts, calls, names_secret)

    def _of(self, result: ToolResult) -> _Made:
        made = self._made.get(result.call_id)
        if made is not None and made.result is result:
            return made
        return self._make(result)

    def _make(self, result: ToolResult) -> _Made:
        # A copy of the response, as validation would make: the event's is its own.
        response = dict(opened_response(result, self._sealer))
        part = response_part(result.call_id, result.tool, response)
        record = CallRecord.of(result)
        check = self._names_secret
        if check is None:
            return _Made(result, part, record, None)
        part_text, record_text = encoded(part), encoded(record)
        return _Made(
            result, part, record, (part_text, record_text, check(part_text) or check(record_text))
        )


@dataclass(frozen=True)
class _Made:
    """A result's part and record, and with the pieces' encoding on, their stored text and
    whether either may name a secret."""

    result: ToolResult
    part: types.Part
    record: CallRecord
    encoded: tuple[str, str, bool] | None


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
        calls=tuple(calls),
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
