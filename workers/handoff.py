"""A call of a tool this worker did not register, handed on to another live worker of its
pool that did, rather than answered ToolNotRegisteredError.

During a rolling restart that adds a tool module to a pool's TOOLFLEET_TOOL_MODULES, the
orchestrator sends calls of the new tool once one new worker of the pool beats, while
the pool's old workers still take messages from the same queue. An old worker that takes
one reads the pool's live workers from their heartbeat records (shared.worker_records);
if another of them registered the tool, it publishes the message again on the same
queue, HAND_ON_DELAY_S later, for another worker to take. It answers as before when no
other live worker of the pool has the tool, when its own record does not list the
message's pool (a routing key naming a pool it does not serve moves nothing onto that
pool's queue), when the message expired, when it has been handed on for HAND_ON_FOR_S,
when the registry cannot be read, or when publishing fails. A call it would hand on
that is closed already (the orchestrator answered it: its deadline passed) is dropped,
neither handed on nor answered again.

A copy published again is a new message of the same call (a new delivery tag, the same
task id, call and signature): a worker that hands a message on never counted or claimed
its delivery (workers/deliveries.py), so the worker that runs the copy counts it as its
first delivery and claims it as such; two copies of one call (the outbox relay's double
publish on RabbitMQ) stay one run, as the second finds the first's claim.

The worker acknowledges (drops) the message only once its copy is published, or the call
answered: an io worker's intake and the worker's Celery consumer (prefork workers) both
pass the `task_unknown` signal what ends it. A worker killed within HAND_ON_DELAY_S of
taking it (SIGKILL, power loss) leaves it unacknowledged, and the broker delivers it
again, as any message of a dead worker (on Redis past the visibility timeout, on
RabbitMQ once the connection is gone); killed between the publish and the
acknowledgement (or stopped, or reconnected, with its consumer's channel gone), both
copies go out, and the second finds the first's claim. An io worker that stops warmly
publishes what it holds before it stops taking acks; what a worker still holds once it
has stopped is left to the broker, which gives the message back (`give_back`), and is
not published: one copy of the call stays.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import redis
from celery import Celery
from pydantic_core import to_json

from toolfleet.shared.celery_wire.build import EMBED
from toolfleet.shared.celery_wire.parse import TaskMessage, header_instant
from toolfleet.shared.keys import QUEUE_PREFIX, Keys
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.worker_records import WorkerInfo, live_workers_sync, tools_of

log = logging.getLogger(__name__)

# How long a message waits before it is published again: an old worker taking it back at
# once would spin on it (a registry read and a publish per turn); at most four turns a
# second per message costs Redis little, and a call a fraction of a second.
HAND_ON_DELAY_S = 0.25
# How long since it was first handed on a message may be handed on again. A worker whose
# record says it has the tool but takes nothing (wedged, or gone with its record current
# for a few heartbeats) leaves the message circulating: answered within this, before the
# orchestrator's default deadline (a 60 s time limit and 15 s grace) would time it out.
HAND_ON_FOR_S = 30.0
# Messages held for their delay at most: past that, a flood is answered, not held.
MAX_HELD = 10_000
# The headers a handed-on message carries: when it was first handed on (epoch seconds),
# and how many times.
HANDED_ON_SINCE = "toolfleet_handed_on_since"
HANDED_ON_TIMES = "toolfleet_handed_on_times"
# A first hand-on time further ahead of this worker's clock is no worker's: taken as now.
CLOCK_SLACK_S = 5.0
# Publishing again is tried this many more times on a connection error, briefly: past
# that the call is answered, not held while the broker is away.
PUBLISH_RETRY_POLICY: dict[str, float] = {
    "max_retries": 2,
    "interval_start": 0.1,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
# How long publishing waits for a connection of the app's producer pool.
PUBLISH_POOL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Resend:
    """A dropped message as it is published again: on `queue`, with its body, headers,
    content type and encoding, and the properties kombu's `publish` takes."""

    queue: str
    body: bytes
    headers: dict[str, Any]
    content_type: str = "application/json"
    content_encoding: str = "utf-8"
    properties: dict[str, Any] = field(default_factory=dict)

    def since(self, now: float) -> float:
        """When the message was first handed on: `now` for a first time, or for a header
        that is no time a worker wrote (not a finite number, or ahead of `now`)."""
        value = self.headers.get(HANDED_ON_SINCE)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return now
        if not math.isfinite(value) or value > now + CLOCK_SLACK_S:
            return now
        return float(value)

    def times(self) -> int:
        """How many times it was handed on before (0 for a header that is not a count)."""
        value = self.headers.get(HANDED_ON_TIMES)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def handed_on(self, now: float) -> Resend:
        """The message as handed on once more at `now`."""
        marks = {HANDED_ON_SINCE: self.since(now), HANDED_ON_TIMES: self.times() + 1}
        return replace(self, headers={**self.headers, **marks})

    def expired(self, now: float) -> bool:
        """Whether its `expires` header is past: no worker may run it now."""
        value = self.headers.get("expires")
        expires = header_instant(value) if isinstance(value, str) else None
        return expires is not None and expires.timestamp() <= now


def resend_of_received(message: Any, queue: str) -> Resend | None:
    """The Resend of a message Celery's consumer received (kombu's `Message`, of either
    broker), or None when it lacks what publishing needs."""
    body = getattr(message, "body", None)
    if isinstance(body, str):
        body = body.encode(getattr(message, "content_encoding", None) or "utf-8")
    headers = getattr(message, "headers", None)
    if not isinstance(body, bytes) or not isinstance(headers, Mapping):
        return None
    return Resend(
        queue,
        body,
        dict(headers),
        str(getattr(message, "content_type", None) or "application/json"),
        str(getattr(message, "content_encoding", None) or "utf-8"),
        _publish_properties(getattr(message, "properties", None) or {}),
    )


def resend_of_taken(message: TaskMessage, queue: str) -> Resend:
    """The Resend of a message an io worker's intake took (its body made again: a call's
    message carries no callbacks, and a forged one's are not passed on)."""
    body = to_json((message.args, message.kwargs, EMBED))
    return Resend(
        queue, body, dict(message.headers), properties=_publish_properties(message.properties)
    )


def _publish_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """What kombu's `publish` takes of a message's properties, of the types it takes."""
    priority = properties.get("priority")
    chosen: dict[str, Any] = {"delivery_mode": 2}  # persistent, as Celery sends a task
    if isinstance(priority, int) and not isinstance(priority, bool) and 0 <= priority <= 255:
        chosen["priority"] = priority
    for name in ("correlation_id", "reply_to"):
        value = properties.get(name)
        if isinstance(value, str) and value:
            chosen[name] = value
    return chosen


# Publishes a Resend on its queue; raises when the broker did not take it.
Publish = Callable[[Resend], None]


def kombu_publisher(app: Celery) -> Publish:
    """Publishes through `app`'s producer pool, on its broker (Redis or RabbitMQ), to the
    default exchange: each message goes to the queue its routing key names, as the
    orchestrator and its outbox relay send it."""

    def publish(resend: Resend) -> None:
        producers: Any = app.producer_pool  # kombu's ProducerPool, untyped in the stubs
        with producers.acquire(block=True, timeout=PUBLISH_POOL_TIMEOUT_S) as producer:
            producer.publish(
                resend.body,
                exchange="",
                routing_key=resend.queue,
                headers=resend.headers,
                content_type=resend.content_type,
                content_encoding=resend.content_encoding,
                retry=True,
                retry_policy=PUBLISH_RETRY_POLICY,
                **resend.properties,
            )

    return publish


class Outcome(Enum):
    """What becomes of a message of a tool this worker lacks."""

    ANSWER = "answer"  # answered ToolNotRegisteredError now
    HAND_ON = "hand on"  # published again for a worker that has the tool
    CLOSED = "closed"  # answered already: neither answered again nor handed on


@dataclass(frozen=True)
class Decision:
    """An outcome, the live workers that have the tool (HAND_ON), or why it is answered."""

    outcome: Outcome
    holders: tuple[str, ...] = ()
    reason: str = ""


def holders(workers: list[WorkerInfo], worker: str, pool: str, tool: str) -> tuple[str, ...]:
    """The live workers other than `worker` that serve `pool` and registered `tool` for
    it; none when `worker`'s own record does not list `pool` (or is not there). A worker
    that does not say which tools it has is not counted: it may lack the tool too."""
    mine = next((w for w in workers if w.hostname == worker), None)
    if mine is None or pool not in mine.pools:
        return ()
    return tuple(
        w.hostname
        for w in workers
        if w.hostname != worker and pool in w.pools and tool in tools_of(w, pool)
    )


def decide(
    client: redis.Redis,
    keys: Keys,
    call: ToolCall,
    resend: Resend,
    worker: str,
    now: float,
    hand_on_for_s: float = HAND_ON_FOR_S,
) -> Decision:
    """Whether `worker` hands `call`'s message on, answers it, or drops it (closed). A
    Redis error is logged, and the call answered."""
    if now - resend.since(now) >= hand_on_for_s:
        return Decision(Outcome.ANSWER, reason=f"handed on for {hand_on_for_s:g} s already")
    if resend.expired(now):
        return Decision(Outcome.ANSWER, reason="its message expired")
    pool, tool = resend.queue.removeprefix(QUEUE_PREFIX), call.tool
    if not resend.queue.startswith(QUEUE_PREFIX):
        return Decision(Outcome.ANSWER, reason=f"queue {resend.queue!r} is no tool pool's")
    try:
        found = holders(live_workers_sync(client, keys), worker, pool, tool)
        if not found:
            return Decision(Outcome.ANSWER, reason=f"no other live worker of pool {pool} has it")
        if client.exists(keys.closed(call.session_key, call.call_id)):
            return Decision(Outcome.CLOSED)
    except redis.RedisError as exc:
        log.warning("could not read the live workers of pool %s: %s", pool, exc)
        return Decision(Outcome.ANSWER, reason="the live workers could not be read")
    return Decision(Outcome.HAND_ON, holders=found)


@dataclass(order=True)
class _Held:
    """A message waiting for its delay, then published; `answer` when that fails; then
    `after` (its original acknowledged)."""

    due: float  # monotonic
    seq: int
    resend: Resend = field(compare=False)
    call_id: str = field(compare=False)
    answer: Callable[[], None] = field(compare=False)
    after: Callable[[], None] | None = field(compare=False, default=None)


class HandOff:
    """Hands messages of tools this worker lacks on to the live workers of their pool that
    have them, each HAND_ON_DELAY_S after it was taken, from a thread of its own (Celery's
    consumer thread, or the intake's, never waits for a publish)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        publish: Publish,
        delay_s: float = HAND_ON_DELAY_S,
        hand_on_for_s: float = HAND_ON_FOR_S,
        max_held: int = MAX_HELD,
    ) -> None:
        self._client = client
        self._keys = keys
        self._publish = publish
        self._delay_s = delay_s
        self._hand_on_for_s = hand_on_for_s
        self._max_held = max_held
        self._held: list[_Held] = []
        self._seq = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def take(
        self,
        call: ToolCall,
        resend: Resend,
        worker: str,
        answer: Callable[[], None],
        after: Callable[[], None] | None = None,
    ) -> Outcome:
        """HAND_ON: `call`'s message is held, to be published again (`answer` is called
        instead if that fails), and `after` once either is done. CLOSED: it is to be
        dropped. ANSWER: it is to be answered now. `after` is called only for HAND_ON."""
        now = time.time()
        decision = decide(self._client, self._keys, call, resend, worker, now, self._hand_on_for_s)
        if decision.outcome is Outcome.CLOSED:
            log.warning("call %s of tool %r is closed already: dropped", call.call_id, call.tool)
            return Outcome.CLOSED
        if decision.outcome is Outcome.ANSWER:
            log.info(
                "call %s of tool %r not handed on: %s", call.call_id, call.tool, decision.reason
            )
            return Outcome.ANSWER
        if not self._hold(resend.handed_on(now), call.call_id, answer, after):
            return Outcome.ANSWER
        log.warning(
            "worker %s has no tool %r: call %s handed on to pool %s, where %s have it",
            worker, call.tool, call.call_id, resend.queue.removeprefix(QUEUE_PREFIX),
            ", ".join(decision.holders),
        )  # fmt: skip
        return Outcome.HAND_ON

    def _hold(
        self,
        resend: Resend,
        call_id: str,
        answer: Callable[[], None],
        after: Callable[[], None] | None,
    ) -> bool:
        with self._changed:
            if len(self._held) >= self._max_held:
                log.warning(
                    "%d messages wait to be handed on: call %s answered", self._max_held, call_id
                )
                return False
            due = time.monotonic() + self._delay_s
            held = _Held(due, next(self._seq), resend, call_id, answer, after)
            heapq.heappush(self._held, held)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="toolfleet-handoff", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return True

    def flush(self) -> None:
        """Publish every held message now, its delay cut short."""
        for each in self._take_all():
            self._send(each)

    def give_back(self) -> None:
        """The worker has stopped: publish now each held message acknowledged already (no
        `after`: no other copy of it is left), and drop the others unpublished - their
        originals are unacknowledged, and the broker delivers them again (at once where
        the worker's channel closed warmly, past the visibility timeout otherwise)."""
        for each in self._take_all():
            if each.after is None:
                self._send(each)
            else:
                log.warning(
                    "call %s not handed on: the worker stopped; the broker delivers its "
                    "message again",
                    each.call_id,
                )

    def _take_all(self) -> list[_Held]:
        """Every held message, in order, held no longer."""
        with self._changed:
            held, self._held = self._held, []
        return sorted(held)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._held or self._held[0].due > time.monotonic():
                    wait_s = self._held[0].due - time.monotonic() if self._held else None
                    self._changed.wait(wait_s)
                due = heapq.heappop(self._held)
            self._send(due)

    def _send(self, held: _Held) -> None:
        """Publish one message; on any error, log it and answer its call instead (else it
        would be lost where its original is acknowledged already). Then `after`."""
        try:
            self._publish(held.resend)
        except Exception as exc:  # a broker error of either transport, or a pool timeout
            log.error("could not hand call %s on: %s; answering it", held.call_id, exc)
            try:
                held.answer()
            except Exception:  # this thread serves the other held messages still
                log.exception("answering call %s failed", held.call_id)
        if held.after is not None:
            try:
                held.after()
            except Exception:
                log.exception("ending the message of call %s failed", held.call_id)
