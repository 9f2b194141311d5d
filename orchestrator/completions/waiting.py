"""A call that waits gets its answer: the user's credential or a person's confirmation
(the call runs again), a rejection or a cancellation (an error, and it never runs).
For a parked turn, once every call of it has its result, the model gets them all; a
call that asked while its turn went on gets its final response alone."""

from __future__ import annotations

from functools import partial

import redis.asyncio as aioredis

from toolfleet.orchestrator.completions.credentials import (
    cancelled,
    confirmed_envelope,
    rejected,
    rerun_with_credential,
)
from toolfleet.orchestrator.completions.resumer import SessionResumer
from toolfleet.orchestrator.loop.parking import confirmation_request, credential_request
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.loop.turn import responses_event
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.fencing import write
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.shared.batch import Stage, WriteBatch, together
from toolfleet.shared.confirmation import ToolConfirmation
from toolfleet.shared.messages import Completion, PendingCall, ToolResult
from toolfleet.shared.redaction import redact_deep
from toolfleet.shared.sealing import Sealer


class WaitingCalls:
    """Applies the answers to calls that wait for the user (credential, confirmation)."""

    def __init__(self, client: aioredis.Redis, resumer: SessionResumer) -> None:
        self._redis = client
        self._resumer = resumer

    async def apply(
        self,
        runner: Runner,
        pending: PendingCall,
        hold: LeaseHold,
        consume: Stage,
        answer: ToolConfirmation | None = None,
        cancel: Completion | None = None,
    ) -> bool:
        """Run the call (again) with the credential now stored or as confirmed (`answer`),
        or answer it with an error if rejected or cancelled (`cancel`); `consume` stages
        the completion's acknowledgement into the step that stores the outcome. True
        once the turn is complete and the agent is to answer it."""
        session = await runner.store.get(pending.session_key)
        also = consume
        if cancel is not None:
            result = cancelled(runner, session, pending)
        elif answer is not None and not answer.confirmed:
            result = rejected(runner, session, pending)
        else:
            result = await rerun_with_credential(runner, session, pending, hold, answer)
            # Its result leaves the results stream in the step that stores it, not before:
            # a replica that takes over after a fault finds it there, and runs nothing again.
            also = together(consume, partial(runner.tool_runner.stage_settle, session.key))
        if result.actions.waits():  # still missing, rejected by the tool, or asked again
            auth, asked = result.actions.requested_auth, result.actions.requested_confirmation
            updated = pending.model_copy(
                update={
                    # A new question: an answer posted for an earlier one is not its.
                    "asked_again": pending.asked_again + 1,
                    "ticket": auth or asked or {},
                    "kind": "credential" if auth else "confirmation",
                    "envelope": confirmed_envelope(runner, session, pending, answer)
                    if auth
                    else None,
                }
            )
            requests = [
                credential_request(pending.call_id, pending.tool, auth or {}, updated.asked_again)
            ]
            confirming = [
                confirmation_request(
                    pending.call_id,
                    pending.tool,
                    # As the record keeps them: secret-named values sealed, shown masked.
                    redact_deep(pending.args, runner.settings.secret_arg_names),
                    asked or {},
                    updated.asked_again,
                )
            ]
            event = Event(
                invocation_id=pending.invocation_id,
                author=pending.agent,
                credential_requests=requests if auth else (),
                confirmation_requests=() if auth else confirming,
            )
            await runner.store.append(
                session, event, pending=[updated], also=also, fence=hold.fence
            )
            await self._resumer.notify(session.key, event)
            return False
        if pending.turn_id is None:
            # A call that ran and asked while its turn went on: its final response is
            # applied alone, as a long-running call's is.
            ordered: list[ToolResult] | None = [result]
        else:
            parked = await runner.store.parked.complete(
                pending.turn_id, result, hold.fence, pending.session_key
            )
            ordered, also = parked.ordered, together(parked.stage, also)
        if ordered is None:  # another call of the turn still waits
            batch = WriteBatch()
            also(batch)
            await write(self._redis, batch, hold.fence)
            return False
        sealer = Sealer.of(runner.settings)
        event = responses_event(
            pending.invocation_id, pending.agent, ordered, sealer, session.state
        )
        await runner.store.append(session, event, resolved=pending, also=also, fence=hold.fence)
        await self._resumer.notify(session.key, event)
        return cancel is None or cancel.resume
