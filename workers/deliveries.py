"""How often the broker delivered a call: a tool that kills its worker is not run forever."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import redis
from pydantic_core import to_json

from toolfleet.shared.config import Settings
from toolfleet.shared.group_commit import GroupCommit
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys
from toolfleet.shared.liveness import heartbeat_ttl_s
from toolfleet.shared.messages import ToolCall, ToolResult, error_result
from toolfleet.shared.scripts import LUA_ITEM_REPLY, LuaScript, only_reply, run_items

log = logging.getLogger(__name__)

# A delivery counter outlives any redelivery of its call, then goes.
DELIVERIES_TTL_S = 24 * 3600
# How long a delivery's claim lives after its last renewal while the delivery runs
# (renewed every third of it), unless set (`claim_lease_s`); once the delivery ends the
# claim is settled: kept as long as the count.
CLAIM_LEASE_S = 6.0
# Beyond a claim's lease, before a redelivery looks at it again: renewed, or gone.
_LOOK_AGAIN_MARGIN_S = 0.05
# A session's record of started calls goes this long after its last call started.
RUNNING_TTL_S = 3600


# One command for the five of each delivery (its count, its TTL, whether the call is
# closed, who runs it since when, that record's TTL), for a batch of deliveries: an io
# worker admits thousands at once, and one script run per delivery cost the worker more
# than the script. KEYS: four per delivery (its count, the call's closed marker, the
# session's running record, the attempt's claim); ARGV[1] the count's TTL, ARGV[2] the
# record's, ARGV[3] a claim's lease in ms, then four per delivery (call id, record, its
# claim, whether the broker redelivered it).
#
# With a claim (a token of its own; '0': none), a delivery claims the call's attempt
# first, for the lease: its worker renews the claim while the delivery runs and settles
# it (keeps it as long as the count) when it ends. A first delivery that finds another's
# claim is a message published twice, and counts as closed. A redelivery may be the very
# message whose worker died holding the claim: it takes the attempt over once the lease
# lapsed. Finding a live lease, it gets {-ms left, 0}: its caller looks again after that,
# as a first delivery (a claim still there was renewed: its delivery runs). A settled
# claim (its TTL beyond the lease) is one whose delivery ended: a copy found it. The
# same claim found again is this delivery's own count sent again (its reply was lost):
# it gets the count it made, not counted twice. Each delivery's reply is {count,
# closed}, or its own error: one that fails fails no other. A session's record has its
# TTL renewed once per run, however many of its calls the run counts (a wide turn's are
# all one session's).
_COUNT = LuaScript(
    LUA_ITEM_REPLY
    + """
local renewed = {}
local lease = tonumber(ARGV[3])
local function count(k, a)
  if ARGV[a + 2] ~= '0' then
    local claimed = redis.call('GET', KEYS[k + 4])
    if claimed == ARGV[a + 2] then
      return {tonumber(redis.call('GET', KEYS[k + 1])), redis.call('EXISTS', KEYS[k + 2])}
    elseif claimed then
      local left = redis.call('PTTL', KEYS[k + 4])
      if ARGV[a + 3] == '1' and left >= 0 and left <= lease then
        return {-math.max(left, 1), 0}
      end
      return {0, 1}
    end
    redis.call('SET', KEYS[k + 4], ARGV[a + 2], 'PX', lease)
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
  replies[i + 1] = item_reply(pcall(count, 4 * i, 4 + 4 * i))
end
return replies
"""
)
# Sets the TTL (ARGV[1], ms) of each claim (KEYS) still held by its token (ARGV[i + 1]):
# a lease renewed, or a claim settled. The number of claims it found held.
_EXTEND = LuaScript(
    """
local held = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ARGV[1])
    held = held + 1
  end
end
return held
"""
)
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
    # How long a claim outlives its worker: a redelivery of its message waits this long
    # at most before it takes the call over.
    lease_s: float = CLAIM_LEASE_S
    _commits: GroupCommit = field(init=False, repr=False, compare=False)
    _leases: _Leases = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_commits", GroupCommit(self.client))
        object.__setattr__(self, "_leases", _Leases(self.client, self.lease_s))

    @property
    def _common(self) -> tuple[int, int, int]:
        """`_COUNT`'s arguments before each delivery's own."""
        return DELIVERIES_TTL_S, RUNNING_TTL_S, max(1, int(self.lease_s * 1000))

    def count(
        self, call: ToolCall, retries: int, worker: str = "", *, redelivered: bool = False
    ) -> tuple[int, bool]:
        """Count one delivery: how many this attempt of the call has had, and whether the
        orchestrator closed the call already (one round trip for both). The same round trip
        records who runs the call since when (`Keys.running`), for live progress. With
        `claims`, a delivery of an attempt another delivery claimed is a duplicate: (0,
        True), not counted, not run - but a redelivery whose claim's lease lapsed (its
        worker died) takes it over. A delivery counted holds its claim until `settle`."""
        keys, args = self._args(call, retries, worker, redelivered)
        # With the counts of the calls admitted at the same moment (a sync io worker's).
        reply = self._count_one(keys, args)
        if reply[0] < 0:  # a live claim: its worker may have died holding this message
            time.sleep(-reply[0] / 1000 + _LOOK_AGAIN_MARGIN_S)
            args = (*args[:3], "0")  # a claim still there was renewed: its delivery runs
            reply = self._count_one(keys, args)
        self._hold(keys, args, reply)
        return reply

    def _count_one(self, keys: tuple[str, ...], args: tuple[str, ...]) -> tuple[int, bool]:
        replies = self._commits.run_script(_COUNT, 4, *keys, *self._common, *args)
        count, is_closed = only_reply(replies)
        return int(count), bool(is_closed)

    def count_all(
        self, deliveries: Sequence[tuple[ToolCall, int, str, bool]]
    ) -> list[tuple[int, bool] | Exception]:
        """`count` for many deliveries (call, retries, worker, redelivered) in one round
        trip: an io worker's taken batch. A delivery whose count failed gets its error
        instead; a connection error is raised."""
        items = [self._args(*delivery) for delivery in deliveries]
        replies = self._count_items(items)
        self._hold_all(items, replies)  # renewed from now: the waits below may be long
        again = [at for at, r in enumerate(replies) if not isinstance(r, Exception) and r[0] < 0]
        if again:  # live claims: their workers may have died holding these messages
            waits = [-r[0] for r in replies if not isinstance(r, Exception) and r[0] < 0]
            time.sleep(max(waits) / 1000 + _LOOK_AGAIN_MARGIN_S)
            looked = []
            for at in again:  # a claim still there was renewed: its delivery runs
                keys, args = items[at]
                looked.append((keys, (*args[:3], "0")))
            replies_again = self._count_items(looked)
            self._hold_all(looked, replies_again)
            for at, reply in zip(again, replies_again, strict=True):
                replies[at] = reply
        return replies

    def _hold_all(
        self,
        items: Sequence[tuple[tuple[str, ...], tuple[str, ...]]],
        replies: Sequence[tuple[int, bool] | Exception],
    ) -> None:
        for (keys, args), reply in zip(items, replies, strict=True):
            if not isinstance(reply, Exception):
                self._hold(keys, args, reply)

    def _count_items(
        self, items: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]
    ) -> list[tuple[int, bool] | Exception]:
        send = partial(_COUNT.run_all, self.client)
        return [
            reply if isinstance(reply, Exception) else (int(reply[0]), bool(reply[1]))
            for reply in run_items(send, self._common, items, COUNT_BATCH)
        ]

    def _hold(self, keys: tuple[str, ...], args: tuple[str, ...], reply: tuple[int, bool]) -> None:
        """Renew the claim a counted delivery made while it runs."""
        if args[2] != "0" and reply[0] > 0:
            self._leases.hold(keys[3], args[2])

    def settle(self, attempts: Sequence[tuple[ToolCall, int]]) -> None:
        """The deliveries of these attempts (call, retries) counted here ended (ran, or
        were not run), in one round trip: each claim is kept, no longer renewed, as long
        as its count - a copy of its message delivered after is a duplicate."""
        if self.claims:
            self._leases.settle([self._claim_key(call, retries) for call, retries in attempts])

    def allow_retry(self, call: ToolCall, retries: int) -> None:
        """Record that this worker retries `call` as attempt `retries` (Celery's count of
        retries before it), before it sends the retry: `retried` finds it."""
        self.client.set(self._retry_key(call, retries), 1, ex=DELIVERIES_TTL_S)

    def retried(self, call: ToolCall, retries: int) -> bool:
        """Whether a worker retried `call` as attempt `retries` (`allow_retry`). A message's
        `retries` header is not signed: a copy of a call's message with it raised would
        otherwise be counted as a new attempt and run the tool again beside the first."""
        return bool(self.client.exists(self._retry_key(call, retries)))

    def _retry_key(self, call: ToolCall, retries: int) -> str:
        return f"{self.keys.deliveries(call.call_id, retries, call.dispatched_at)}:retry"

    def _claim_key(self, call: ToolCall, retries: int) -> str:
        return f"{self.keys.deliveries(call.call_id, retries, call.dispatched_at)}:claimed"

    def _args(
        self, call: ToolCall, retries: int, worker: str, redelivered: bool
    ) -> tuple[tuple[str, str, str, str], tuple[str, str, str, str]]:
        """One delivery's keys and arguments of `_COUNT`."""
        key = self.keys.deliveries(call.call_id, retries, call.dispatched_at)
        claiming = unique_hex() if self.claims else "0"
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
        return keys, (call.call_id, record, claiming, "1" if redelivered else "0")

    def exhausted(self, count: int) -> bool:
        """True once `count` deliveries exceed `max_deliveries`: answer WorkerLost, do not run."""
        return count > self.max_deliveries


def uses_claims(settings: Settings) -> bool:
    """Whether a worker's deliveries claim their calls: on RabbitMQ, where the outbox
    relay may publish a call twice; and with a fleet key on either broker, where a copy
    of a running call's signed message, written again by a client of the broker, must
    not run the tool a second time beside the first (a count alone lets up to
    max_deliveries run, as redeliveries of a dead worker's call)."""
    return settings.broker_is_amqp or bool(settings.fleet_key)


def claim_lease_s(settings: Settings) -> float:
    """How long a delivery's claim outlives its worker: as long as the worker's heartbeat
    record. A redelivery of a dead worker's message waits that long at most before it runs."""
    return heartbeat_ttl_s(settings.worker_heartbeat_s)


def worker_lost(call: ToolCall, deliveries: int, *, worker: str, attempt: int) -> ToolResult:
    """The answer to a call not run again: every earlier delivery lost its worker."""
    message = (
        f"tool {call.tool!r} was delivered {deliveries} times and its worker died each "
        "time, so it was not run again"
    )
    return error_result(
        call, "WorkerLost", message, worker=worker, pid=os.getpid(), attempt=attempt
    )


class _Leases:
    """The claims of this process's deliveries that run: renewed from a thread, every third
    of their lease, and settled when their delivery ends. A forked pool child holds its
    own (a thread does not survive the fork)."""

    def __init__(self, client: redis.Redis, lease_s: float) -> None:
        self._client = client
        self._lease_s = lease_s
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}
        self._pid = 0  # the process whose thread renews them; 0: none yet

    def hold(self, key: str, token: str) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a new process: its own claims and thread
                self._held.clear()
                self._pid = os.getpid()
                renewing = threading.Thread(
                    target=self._renew, name="toolfleet-claims", daemon=True
                )
                renewing.start()
            self._held[key] = token

    def settle(self, keys: Sequence[str]) -> None:
        with self._lock:
            ours = self._pid == os.getpid()
            held = [(key, self._held.pop(key, None) if ours else None) for key in keys]
        self._extend([(key, token) for key, token in held if token is not None], DELIVERIES_TTL_S)

    def _renew(self) -> None:
        pid = os.getpid()
        while True:
            time.sleep(self._lease_s / 3)  # ok: a renewal period, not a wait for a result
            with self._lock:
                if self._pid != pid:
                    return
                held = list(self._held.items())
            try:
                self._extend(held, self._lease_s)
            except redis.RedisError as exc:  # the next period tries again
                log.warning("could not renew the claims of %d running calls: %s", len(held), exc)

    def _extend(self, held: Sequence[tuple[str, str]], ttl_s: float) -> None:
        """Set the TTL of each claim still held by its token, in one round trip; a script
        run per COUNT_BATCH claims, so that none holds Redis for long."""
        if not held:
            return
        ttl_ms = max(1, int(ttl_s * 1000))
        with self._client.pipeline(transaction=False) as pipe:
            for at in range(0, len(held), COUNT_BATCH):
                part = held[at : at + COUNT_BATCH]
                keys, tokens = [key for key, _ in part], [token for _, token in part]
                pipe.evalsha(_EXTEND.sha, len(keys), *keys, ttl_ms, *tokens)
            try:
                pipe.execute()
            except redis.exceptions.NoScriptError:
                for at in range(0, len(held), COUNT_BATCH):
                    part = held[at : at + COUNT_BATCH]
                    keys, tokens = [key for key, _ in part], [token for _, token in part]
                    _EXTEND.run_sync(self._client, len(keys), *keys, ttl_ms, *tokens)
