"""How often the broker delivered a call: a tool that kills its worker is not run forever."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from toolfleet.shared.group_commit import GroupCommit
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import RunningCall, ToolCall, ToolResult, error_result
from toolfleet.shared.scripts import LuaScript

# A delivery counter outlives any redelivery of its call, then goes.
DELIVERIES_TTL_S = 24 * 3600
# A session's record of started calls goes this long after its last call started.
RUNNING_TTL_S = 3600


# One command for the five of a delivery (its count, its TTL, whether the call is closed,
# who runs it since when, that record's TTL): an io worker admits thousands at once.
# With claims (ARGV[5] = 1) a first delivery (not a redelivery) claims the call's attempt
# first: a second first delivery is a message published twice, and counts as closed.
_COUNT = LuaScript(
    """
if ARGV[5] == '1' and not redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[1]) then
  return {0, 1}
end
local count = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return {count, redis.call('EXISTS', KEYS[2])}
"""
)


@dataclass(frozen=True)
class DeliveryGuard:
    """Counts the broker's deliveries of a call, so a tool that kills its worker stops.

    With acks_late and task_reject_on_worker_lost, Celery requeues a call whose worker
    process died - forever, if the tool itself kills it. Each attempt (`retries`: a
    retry via `self.retry` is a new message, not a crash) is allowed `max_deliveries`.
    """

    client: redis.Redis
    keys: Keys
    max_deliveries: int
    # Whether a message published twice reaches workers (the outbox relay's, on RabbitMQ).
    claims: bool = False
    _commits: GroupCommit = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_commits", GroupCommit(self.client))

    def count(
        self, call: ToolCall, retries: int, worker: str = "", *, redelivered: bool = False
    ) -> tuple[int, bool]:
        """Count one delivery: how many this attempt of the call has had, and whether the
        orchestrator closed the call already (one round trip for both). The same round trip
        records who runs the call since when (`Keys.running`), for live progress. With
        `claims`, a delivery that is not a redelivery of the same message, of an attempt
        another delivery claimed, is a duplicate: (0, True), not counted, not run."""
        args = self._args(call, retries, worker, redelivered)
        # With the counts of the calls admitted at the same moment (an io worker's).
        count, is_closed = self._commits.run_script(_COUNT, 4, *args)
        return int(count), bool(is_closed)

    def count_all(
        self, deliveries: Sequence[tuple[ToolCall, int, str, bool]]
    ) -> list[tuple[int, bool] | Exception]:
        """`count` for many deliveries (call, retries, worker, redelivered) in one round
        trip: an io worker's taken batch. A delivery whose count failed gets its error
        instead; a connection error is raised."""
        runs = [
            (4, *self._args(call, retries, worker, redelivered))
            for call, retries, worker, redelivered in deliveries
        ]
        return [
            reply if isinstance(reply, Exception) else (int(reply[0]), bool(reply[1]))
            for reply in _COUNT.run_all(self.client, runs)
        ]

    def _args(
        self, call: ToolCall, retries: int, worker: str, redelivered: bool
    ) -> tuple[Any, ...]:
        key = self.keys.deliveries(call.call_id, retries)
        claim = f"{key}:claimed"
        claiming = "1" if self.claims and not redelivered else "0"
        running = self.keys.running(call.session_key)
        started = RunningCall(worker=worker, pid=os.getpid(), started_at=time.time())
        closed = self.keys.closed(call.session_key, call.call_id)
        record = started.model_dump_json()
        return (
            *(key, closed, running, claim),
            *(DELIVERIES_TTL_S, call.call_id, record, RUNNING_TTL_S, claiming),
        )

    def exhausted(self, count: int) -> bool:
        """True once `count` deliveries exceed `max_deliveries`: answer WorkerLost, do not run."""
        return count > self.max_deliveries


def worker_lost(call: ToolCall, deliveries: int, *, worker: str, attempt: int) -> ToolResult:
    """The answer to a call not run again: every earlier delivery lost its worker."""
    message = (
        f"tool {call.tool!r} was delivered {deliveries} times and its worker died each "
        "time, so it was not run again"
    )
    return error_result(
        call, "WorkerLost", message, worker=worker, pid=os.getpid(), attempt=attempt
    )
