"""How often the broker delivered a call: a tool that kills its worker is not run forever."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import redis
from pydantic_core import to_json

from toolfleet.shared.group_commit import GroupCommit
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall, ToolResult, error_result
from toolfleet.shared.scripts import LUA_ITEM_REPLY, LuaScript, only_reply, run_items

# A delivery counter outlives any redelivery of its call, then goes.
DELIVERIES_TTL_S = 24 * 3600
# A session's record of started calls goes this long after its last call started.
RUNNING_TTL_S = 3600


# One command for the five of each delivery (its count, its TTL, whether the call is
# closed, who runs it since when, that record's TTL), for a batch of deliveries: an io
# worker admits thousands at once, and one script run per delivery cost the worker more
# than the script. KEYS: four per delivery (its count, the call's closed marker, the
# session's running record, the attempt's claim); ARGV[1] the count's TTL, ARGV[2] the
# record's, then three per delivery (call id, record, its claim). With a claim (a token
# of its own; '0': none), a first delivery (not a redelivery) claims the call's attempt
# first: a second first delivery is a message published twice, and counts as closed. The
# same claim found again is this delivery's own count sent again (its reply was lost):
# it gets the count it made, not counted twice. Each delivery's
# reply is {count, closed}, or its own error: one that fails fails no other. A
# session's record has its TTL renewed once per run, however many of its calls the run
# counts (a wide turn's are all one session's).
_COUNT = LuaScript(
    LUA_ITEM_REPLY
    + """
local renewed = {}
local function count(k, a)
  if ARGV[a + 2] ~= '0' then
    local claimed = redis.call('GET', KEYS[k + 4])
    if claimed == ARGV[a + 2] then
      return {tonumber(redis.call('GET', KEYS[k + 1])), redis.call('EXISTS', KEYS[k + 2])}
    elseif claimed then
      return {0, 1}
    end
    redis.call('SET', KEYS[k + 4], ARGV[a + 2], 'EX', ARGV[1])
  end
  local n = redis.call('INCR', KEYS[k + 1])
  redis.call('EXPIRE', KEYS[k + 1], ARGV[1])
  redis.call('HSET', KEYS[k + 3], ARGV[a], ARGV[a + 1])
  if not renewed[KEYS[k + 3]] then
    redis.call('EXPIRE', KEYS[k + 3], ARGV[2])
    renewed[KEYS[k + 3]] = true
  end
  return {n, redis.call('EXISTS', KEYS[k + 2])}
end
local replies = {}
for i = 0, #KEYS / 4 - 1 do
  replies[i + 1] = item_reply(pcall(count, 4 * i, 3 + 3 * i))
end
return replies
"""
)
# `_COUNT`'s arguments before each delivery's own.
_COMMON = (DELIVERIES_TTL_S, RUNNING_TTL_S)
# Deliveries counted by one run of the script at most: a larger batch goes as several
# runs in one pipeline, so that no run holds Redis for long.
COUNT_BATCH = 256


@dataclass(frozen=True)
class DeliveryGuard:
    """Counts the broker's deliveries of a call, so a tool that kills its worker stops.

    With acks_late and task_reject_on_worker_lost, Celery requeues a call whose worker
    process died - forever, if the tool itself kills it. Each attempt (`retries`: a
    retry via `self.retry` is a new message, not a crash) of each send of the call (a
    call runs again once confirmed, or with the user's credential) is allowed
    `max_deliveries`.
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
        keys, args = self._args(call, retries, worker, redelivered)
        # With the counts of the calls admitted at the same moment (a sync io worker's).
        replies = self._commits.run_script(_COUNT, 4, *keys, *_COMMON, *args)
        count, is_closed = only_reply(replies)
        return int(count), bool(is_closed)

    def count_all(
        self, deliveries: Sequence[tuple[ToolCall, int, str, bool]]
    ) -> list[tuple[int, bool] | Exception]:
        """`count` for many deliveries (call, retries, worker, redelivered) in one round
        trip: an io worker's taken batch. A delivery whose count failed gets its error
        instead; a connection error is raised."""
        items = [self._args(*delivery) for delivery in deliveries]
        send = partial(_COUNT.run_all, self.client)
        return [
            reply if isinstance(reply, Exception) else (int(reply[0]), bool(reply[1]))
            for reply in run_items(send, _COMMON, items, COUNT_BATCH)
        ]

    def _args(
        self, call: ToolCall, retries: int, worker: str, redelivered: bool
    ) -> tuple[tuple[str, str, str, str], tuple[str, str, str]]:
        """One delivery's keys and arguments of `_COUNT`."""
        key = self.keys.deliveries(call.call_id, retries, call.dispatched_at)
        claiming = unique_hex() if self.claims and not redelivered else "0"
        session = call.session_key
        # RunningCall's JSON, written without building one (a model per call admitted).
        started = {
            "worker": worker,
            "pid": os.getpid(),
            "started_at": time.time(),
            "waiting_for": None,
        }
        record = to_json(started).decode()
        keys = (
            key,
            self.keys.closed(session, call.call_id),
            self.keys.running(session),
            f"{key}:claimed",
        )
        return keys, (call.call_id, record, claiming)

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
