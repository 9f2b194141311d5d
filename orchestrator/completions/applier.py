"""Apply one posted completion: a final result (once per call), progress, or a
credential; refuse what cannot apply into the dead-letter stream."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import redis.asyncio as aioredis
from google.genai import types

from toolfleet.orchestrator.completions.credentials import rerun_with_credential
from toolfleet.orchestrator.completions.resumer import SessionResumer
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.loop.turn import responses_event
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.shared.completions import DEAD_LETTERS_MAXLEN, dead_letter_fields
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, Completion, PendingCall
from toolfleet.shared.pending import PendingCalls

log = logging.getLogger(__name__)

GROUP = "orchestrators"
APPLIED_TTL_S = 7 * 24 * 3600  # how long a call id stays "already completed"


class CompletionApplier:
    """Applies the entries of the apps' completions streams (consumer group GROUP)."""

    def __init__(
        self,
        runners: Mapping[str, Runner],
        client: aioredis.Redis,
        keys: Keys,
        resumer: SessionResumer,
        *,
        progress_to_model: bool = False,
    ) -> None:
        self._runners = {keys.completions(app): runner for app, runner in runners.items()}
        self._redis = client
        self._keys = keys
        self._pending = PendingCalls(keys)
        self._resumer = resumer
        self._progress_to_model = progress_to_model

    @property
    def streams(self) -> list[str]:
        """The completions streams of this replica's apps."""
        return list(self._runners)

    async def apply(self, stream: str, entry_id: str, raw: bytes, completion: Completion) -> None:
        """Apply the entry (or refuse it); called in posting order per session."""
        runner = self._runners[stream]
        owner = await self._redis.get(self._keys.applied(completion.call_id))
        claim = json.loads(owner) if owner is not None else None
        if claim is not None and claim["entry"] == entry_id:
            # Applied by a replica that crashed before acknowledging: finish its work.
            await self._redis.xack(stream, GROUP, entry_id)
            await self._resumer.resume_if_owed(runner, claim["session"])
            return
        pending = await self._pending.aget(self._redis, completion.call_id)
        if pending is None:
            reason = (
                f"call {completion.call_id!r} already has its final result"
                if owner is not None
                else f"no pending call with id {completion.call_id!r}"
            )
            await self.refuse(stream, entry_id, raw, reason)
            return
        async with runner.leases.hold(pending.session_id, wait_s=self._resumer.lease_wait_s):
            if completion.kind == "credential" or pending.kind == "credential":
                if completion.kind != pending.kind:
                    await self.refuse(
                        stream, entry_id, raw, f"{pending.call_id!r} expects a {pending.kind}"
                    )
                    return
                await self._apply_credential(runner, stream, entry_id, pending)
            elif completion.final:
                await self._apply_final(runner, stream, entry_id, raw, completion, pending)
            else:
                await self._apply_progress(runner, stream, entry_id, completion, pending)

    async def refuse(self, stream: str, entry_id: str, raw: bytes, reason: str) -> None:
        """Keep the entry in the dead-letter stream with `reason`, and acknowledge it."""
        log.warning("refused completion %s: %s", entry_id, reason)
        await self._redis.xadd(
            self._keys.dead_letters(),
            dead_letter_fields(raw, reason),  # type: ignore[arg-type]
            maxlen=DEAD_LETTERS_MAXLEN,
            approximate=True,
        )
        await self._redis.xack(stream, GROUP, entry_id)

    async def _apply_final(
        self,
        runner: Runner,
        stream: str,
        entry_id: str,
        raw: bytes,
        completion: Completion,
        pending: PendingCall,
    ) -> None:
        claim = json.dumps({"entry": entry_id, "session": pending.session_id})
        key = self._keys.applied(completion.call_id)
        if not await self._redis.set(key, claim, nx=True, ex=APPLIED_TTL_S):
            await self.refuse(
                stream, entry_id, raw, f"duplicate final result for {completion.call_id!r}"
            )
            return
        session = await runner.store.get(pending.session_id)
        event = _response_event(pending, completion)
        await runner.store.append(session, event, resolved=pending)
        await self._redis.xack(stream, GROUP, entry_id)
        log.info(
            "applied the final result of %s (%s) from %s",
            pending.call_id,
            pending.tool,
            completion.source,
        )
        await self._resumer.notify(session.id, event)
        await self._resumer.continue_session(runner, pending.session_id)

    async def _apply_credential(
        self, runner: Runner, stream: str, entry_id: str, pending: PendingCall
    ) -> None:
        """The user supplied a credential: run the call again; finish the turn if complete."""
        session = await runner.store.get(pending.session_id)
        result = await rerun_with_credential(runner, session, pending)
        if result.actions.requested_auth:  # still missing, or rejected by the tool
            updated = pending.model_copy(update={"ticket": result.actions.requested_auth})
            event = Event(
                invocation_id=pending.invocation_id,
                author=pending.agent,
                credential_requests=[
                    {
                        "call_id": pending.call_id,
                        "tool": pending.tool,
                        "auth_config": updated.ticket,
                    }
                ],
            )
            await runner.store.append(session, event, pending=[updated])
            await self._redis.xack(stream, GROUP, entry_id)
            await self._resumer.notify(session.id, event)
            return
        ordered = await runner.store.parked.complete(pending.turn_id or "", result)
        await self._redis.xack(stream, GROUP, entry_id)
        if ordered is None:
            return  # another call of the turn still waits for its credential
        event = responses_event(pending.invocation_id, pending.agent, ordered)
        await runner.store.append(session, event, resolved=pending)
        await self._resumer.notify(session.id, event)
        await self._resumer.continue_session(runner, session.id)

    async def _apply_progress(
        self,
        runner: Runner,
        stream: str,
        entry_id: str,
        completion: Completion,
        pending: PendingCall,
    ) -> None:
        session = await runner.store.get(pending.session_id)
        updated = pending.model_copy(update={"progress": [*pending.progress, completion.response]})
        event = _response_event(pending, completion)
        if not self._progress_to_model:
            event = event.model_copy(update={"content": None, "progress": completion.response})
        await runner.store.append(session, event, pending=[updated])
        await self._redis.xack(stream, GROUP, entry_id)
        await self._resumer.notify(session.id, event)
        if self._progress_to_model:
            await self._resumer.continue_session(runner, session.id)


def _response_event(pending: PendingCall, completion: Completion) -> Event:
    """The posted result as the call's function response, under the original call id."""
    response = types.FunctionResponse(
        id=pending.call_id, name=pending.tool, response=completion.response
    )
    return Event(
        invocation_id=pending.invocation_id,
        author="completion",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        calls=[
            CallRecord(
                call_id=pending.call_id,
                tool=pending.tool,
                status=CallStatus.SUCCESS if completion.final else CallStatus.PENDING,
                worker=completion.source,
                started_at=pending.created_at,
                finished_at=completion.posted_at,
            )
        ],
    )
