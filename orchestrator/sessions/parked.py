"""Turns parked until the user supplies a credential (tool authentication) or a
person answers a confirmation request.

A parked turn keeps its calls' results in one Redis hash, with their call order,
until each call that asked for a credential has run again with it. Their responses
are kept as the workers sealed them; a secret-named value not sealed (no fleet key)
is masked, as in the session's events. State writes are kept sealed (in clear without a
fleet key): the turn applies them when it resumes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import redis.asyncio as aioredis

from toolfleet.orchestrator.connections import decoded
from toolfleet.orchestrator.sessions.fencing import Fence, write
from toolfleet.shared.batch import Stage, WriteBatch
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import ToolResult
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, redact_deep, secret_name_set
from toolfleet.shared.sealing import Sealer

log = logging.getLogger(__name__)

ORDER_FIELD = "__order__"
PARKED_TTL_S = 7 * 24 * 3600


class ParkedTurns:
    """The results of parked turns, by turn id (the model event that made the calls)."""

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys,
        secret_names: Iterable[str] = DEFAULT_SECRET_NAMES,
        sealer: Sealer | None = None,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._secrets = secret_name_set(secret_names)
        self._pending = PendingCalls(keys, self._secrets)
        self._sealer = sealer

    def _record(self, result: ToolResult) -> str:
        response = redact_deep(result.response, self._secrets, keep_sealed=True)
        # State writes are applied when the turn resumes: sealed, never masked (a
        # worker's come sealed; a callback's are sealed here).
        delta = (
            result.state_delta if self._sealer is None else self._sealer.seal(result.state_delta)
        )
        update = {"response": response, "state_delta": delta}
        return result.model_copy(update=update).model_dump_json()

    async def park(self, turn_id: str, ordered: list[ToolResult], fence: Fence | None) -> None:
        """Keep the results that are final; the others wait for the user."""
        fields = {r.call_id: self._record(r) for r in ordered if not r.actions.waits()}
        fields[ORDER_FIELD] = json.dumps([r.call_id for r in ordered])
        key = self._keys.parked(turn_id)
        batch = WriteBatch()
        batch.hset(key, mapping=fields)
        batch.expire(key, PARKED_TTL_S)
        await write(self._redis, batch, fence)

    async def complete(
        self, turn_id: str, result: ToolResult, fence: Fence | None, session: SessionKey
    ) -> ParkedCompletion:
        """Add a call's result (run again with its credential or confirmation, or
        rejected): every result of the turn in call order once none is missing, else
        None; with what the step that stores the outcome must also write - the record
        gone, or the call no longer waiting (`session`: the call's). Until that step, the
        turn is as it was: added again, the result replaces itself."""
        key = self._keys.parked(turn_id)
        batch = WriteBatch()
        batch.hset(key, result.call_id, self._record(result))
        batch.add("HGETALL", key)
        _, raw = await write(self._redis, batch, fence)
        # HGETALL's reply: a dict from a transaction, a flat list from a fenced script.
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        fields = {decoded(k): v for k, v in pairs}
        if ORDER_FIELD not in fields:
            # The record outlived its TTL: the turn's other results are gone, this one
            # is answered alone (and the record the write made again goes with it).
            log.warning("parked turn %s expired: call %s answered alone", turn_id, result.call_id)
            return ParkedCompletion([result], lambda b: b.delete(key))
        order: list[str] = json.loads(fields[ORDER_FIELD])
        if any(call_id not in fields for call_id in order):
            call_id = result.call_id
            return ParkedCompletion(None, lambda b: self._pending.stage_drop(b, session, call_id))
        ordered = [ToolResult.model_validate_json(fields[call_id]) for call_id in order]
        return ParkedCompletion(ordered, lambda b: b.delete(key))


@dataclass(frozen=True)
class ParkedCompletion:
    """What adding a result to a parked turn gave: every result of the turn (None: some
    still wait), and `stage`, the writes that make it so in the step storing the outcome."""

    ordered: list[ToolResult] | None
    stage: Stage
