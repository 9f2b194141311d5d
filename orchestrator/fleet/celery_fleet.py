"""Run a turn's calls on the Celery fleet: publish, then await results with deadlines."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.fleet.flights import Flight, InFlight
from toolfleet.orchestrator.fleet.pools import LivePools
from toolfleet.orchestrator.fleet.prepared import PreparedCall
from toolfleet.orchestrator.fleet.protocol import PlannedCall, WithFirstSend, cancelled, failed
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.orchestrator.fleet.stopping import CallStopper
from toolfleet.orchestrator.fleet.watch import CallWatch
from toolfleet.orchestrator.release import release_soon
from toolfleet.orchestrator.sessions.cancels import CancelBoard
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.celery_config import recovery_bound_s, tool_pool, tool_time_limit
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, SessionKey, agent_tool_child, queue_name
from toolfleet.shared.messages import ToolCall, ToolResult
from toolfleet.shared.state_snapshots import (
    INLINE_STATE_MAX_BYTES,
    StateSnapshot,
    digest_of,
)
from toolfleet.shared.tools import FunctionTool

log = logging.getLogger(__name__)

# Calls published in one write at most: each write is atomic (its messages and their
# record of what was sent), and a wide turn's first calls reach the workers while the
# next ones are encoded, without one script of ten thousand pushes holding Redis.
PUBLISH_BATCH = 200
# How much longer than the latest a call can start its state snapshot stays.
SNAPSHOT_SLACK_S = 300


class CeleryFleet:
    """Runs calls as Celery tasks on the workers' pools and awaits their results on
    the session's stream, each with its deadline (a ToolRunner)."""

    def __init__(
        self,
        publisher: CeleryPublisher,
        waiter: ResultWaiter,
        settings: Settings,
        keys: Keys,
        pools: LivePools,
        stopper: CallStopper | None = None,
        cancels: CancelBoard | None = None,
    ) -> None:
        self._publisher = publisher
        self._waiter = waiter
        self._settings = settings
        self._keys = keys
        self._pools = pools
        self._stopper = stopper
        self._cancels = cancels  # a cancellation that came before the calls were awaited
        self._running: dict[SessionKey, dict[str, PlannedCall]] = {}  # session -> awaited calls

    async def run(
        self,
        calls: Sequence[PlannedCall],
        *,
        resume: bool = False,
        fence: Fence | None = None,
        with_first_send: WithFirstSend | None = None,
        more: AsyncIterator[Sequence[PlannedCall]] | None = None,
    ) -> AsyncIterator[ToolResult]:
        """Publish calls to their pools' queues and yield one result per call as they finish.

        At most `max_parallel_calls` are out at once, published PUBLISH_BATCH to a write. A
        call whose pool has no live worker, or that misses its deadline, gets an error
        result. `resume`, `with_first_send`, `more`: see ToolRunner.run (the model turn
        rides on the first publish, if any; the next calls of `more` are asked for after
        each round of publishing, until there are none).
        """
        if not calls:
            return
        sent: set[str] = set()
        tools: dict[int, FunctionTool] = {}  # the turn's tools so far, for snapshots' TTL
        states = TurnStates(self._publisher, self._keys, lambda: self._snapshot_ttl_s(tools))
        prepared = self._prepare_all(calls, states, tools)
        first = prepared[0].call
        session = first.session_key
        if resume:
            sent = await self._publisher.recorded(self._keys.dispatched(session))
            if sent:
                log.info("resuming: %d of %d calls were sent already", len(sent), len(prepared))
            prepared, unsendable = _split_by_stored_secrets(prepared, sent)
            for each in unsendable:
                yield failed(
                    each.call,
                    "Interrupted",
                    "the orchestrator restarted before this call was sent, and its secret "
                    "arguments are not stored: call the tool again",
                )
        record_in = self._keys.dispatched(session)
        futures: dict[str, asyncio.Future[ToolResult]] = {}
        running = self._running.setdefault(session, {})
        waiting: list[PreparedCall] = []
        in_flight = InFlight()
        added: list[PreparedCall] = []  # every call this run awaits
        try:
            live, unserved = await self._take_on(
                first, prepared, sent, futures, running, added, reread=resume
            )
            for each in unserved:
                yield self._no_worker(each)
            # Results of calls sent before a takeover are on the stream or on their way.
            waiting = [p for p in live if p.call_id not in sent]
            self._track(in_flight, futures, [p for p in live if p.call_id in sent])
            while waiting or in_flight or more is not None:
                room = self._settings.max_parallel_calls - len(in_flight)
                batch, waiting = waiting[:room], waiting[room:]
                # Answered before it was sent (its session was cancelled): never sent.
                answered = [p for p in batch if futures[p.call_id].done()]
                batch = [p for p in batch if not futures[p.call_id].done()]
                for each in answered:
                    yield futures[each.call_id].result()
                for start in range(0, len(batch), PUBLISH_BATCH):
                    part = batch[start : start + PUBLISH_BATCH]
                    dispatches, watches = self._dispatch(part)
                    try:
                        await self._publisher.publish(
                            dispatches, record_in=record_in, fence=fence, also=with_first_send
                        )
                    except BaseException as exc:
                        for watch in watches:
                            watch.abandon(type(exc).__name__)
                        raise
                    with_first_send = None
                    self._track(in_flight, futures, part, watches)
                if more is not None:  # the turn's next calls, while those sent start
                    chunk = await anext(more, None)
                    if chunk is None:
                        more = None
                    elif chunk:
                        next_ones = self._prepare_all(chunk, states, tools)
                        live, unserved = await self._take_on(
                            first, next_ones, sent, futures, running, added
                        )
                        for each in unserved:
                            yield self._no_worker(each)
                        waiting += live
                    continue
                if not in_flight:  # every call of the batch was answered before it was sent
                    continue
                timeout_s = max(0.0, in_flight.next_deadline() - time.monotonic())
                for flight, result in await in_flight.finished(timeout_s):
                    self._end(flight, result)
                    yield result
                for flight in in_flight.expired(time.monotonic(), self._outage_extends):
                    timed_out = self._timed_out(flight.prepared)
                    self._end(flight, timed_out)
                    yield timed_out
        finally:
            for flight in in_flight:  # the consumer stopped early
                if flight.watch is not None:
                    flight.watch.abandon("Abandoned")
            for each in added:  # a consumer that stops early must not leak futures
                self._waiter.forget(each.call_id)
                running.pop(each.call_id, None)
            if not running:
                self._running.pop(session, None)
            release_soon(prepared, added, futures, waiting, in_flight, sent)

    async def _take_on(
        self,
        first: ToolCall,
        prepared: Sequence[PreparedCall],
        sent: set[str],
        futures: dict[str, asyncio.Future[ToolResult]],
        running: dict[str, PlannedCall],
        added: list[PreparedCall],
        *,
        reread: bool = False,
    ) -> tuple[list[PreparedCall], list[PreparedCall]]:
        """The calls of `prepared` a live worker can run (or sent already), their futures
        registered before they are sent (no result can slip past) and marked running -
        a cancellation that came meanwhile answers them at once; and those no worker
        can run, to answer. `reread`: see ResultWaiter.expect."""
        calls, unserved = await self._split_by_pool_liveness(prepared, sent)
        if not calls:
            return calls, unserved
        futures.update(
            await self._waiter.expect(
                first.reply_to,
                [p.call_id for p in calls],
                session_id=first.session_id,
                tools={p.call_id: p.call.tool for p in calls},
                reread=reread,
            )
        )
        added += calls
        running.update({p.call_id: p.planned for p in calls})
        session = first.session_key
        if self._cancels is not None and self._cancels.requested(session):
            self.cancel(session)  # cancelled while the calls were being planned
        return calls, unserved

    def cancel(self, session: SessionKey) -> None:
        """Answer the session's awaited calls with a Cancelled error, at once."""
        for planned in list(self._running.get(session, {}).values()):
            self._waiter.answer(cancelled(planned.call))

    async def stop(self, session: SessionKey, call_ids: Sequence[str]) -> None:
        """Have the workers stop these calls (they are closed: none starts after this),
        and the calls an agent tool's child session of one of them has out: the child's
        run stops with its call, but those run on other workers."""
        if not call_ids or self._stopper is None:
            return
        await self._stopper.stop(session, call_ids)
        children = [agent_tool_child(session, call_id) for call_id in call_ids]
        sent = await asyncio.gather(
            *(self._publisher.recorded(self._keys.dispatched(child)) for child in children)
        )
        for child, ids in zip(children, sent, strict=True):
            if ids:
                await self.stop(child, sorted(ids))

    def _track(
        self,
        in_flight: InFlight,
        futures: dict[str, asyncio.Future[ToolResult]],
        sent: Sequence[PreparedCall],
        watches: Sequence[CallWatch] = (),
    ) -> None:
        now = time.monotonic()
        for index, each in enumerate(sent):
            deadline = now + each.time_limit_s + self._settings.result_grace_s
            watch = watches[index] if watches else None
            in_flight.add(futures[each.call_id], Flight(each, now, deadline, watch=watch))

    @staticmethod
    def _end(flight: Flight, result: ToolResult) -> None:
        if flight.watch is not None:
            flight.watch.end(result)

    def _outage_extends(self, flight: Flight) -> bool:
        """A Redis outage while the call was out may have stranded its message in a
        worker's reservation: the broker redelivers it within the recovery bound, so
        wait that long (once) before answering with a timeout."""
        outage_at = self._waiter.last_outage_at
        if flight.extended or outage_at < flight.sent_at:
            return False
        flight.extended = True
        bound = recovery_bound_s(self._settings, [flight.prepared.planned.tool])
        flight.deadline = max(time.monotonic(), outage_at) + bound + self._settings.result_grace_s
        log.info(
            "call %s: waiting out a Redis outage (%.0f s more)", flight.prepared.call_id, bound
        )
        return True

    async def settle(self, session: SessionKey) -> None:
        """Trim the session's results stream up to what was yielded; drop its sent-calls set."""
        await self._waiter.settle(
            self._keys.results(session), forget=self._keys.dispatched(session)
        )

    def stage_settle(self, session: SessionKey, batch: WriteBatch) -> None:
        """`settle` as commands of `batch`, the atomic step that stores the results."""
        self._waiter.stage_settle(
            batch, self._keys.results(session), forget=self._keys.dispatched(session)
        )

    def _prepare_all(
        self, calls: Sequence[PlannedCall], states: TurnStates, tools: dict[int, FunctionTool]
    ) -> list[PreparedCall]:
        """`calls` prepared; their tools added to the turn's `tools` (a snapshot made
        after a new one stays as long as that tool's calls need)."""
        known = len(tools)
        prepared = [self._prepare(planned, states) for planned in calls]
        tools.update({id(c.tool): c.tool for c in calls})
        if len(tools) > known:
            states.retime()
        return prepared

    def _prepare(self, planned: PlannedCall, states: TurnStates) -> PreparedCall:
        pool = tool_pool(planned.tool, self._settings)
        limit = tool_time_limit(planned.tool, self._settings)
        queue, publisher = queue_name(pool), self._publisher
        return PreparedCall(
            planned, pool, limit, lambda call: publisher.dispatch(call, queue, states.of(call))
        )

    def _snapshot_ttl_s(self, tools: dict[int, FunctionTool]) -> int:
        """How long the state snapshots of calls of `tools` stay: past the latest a call
        can start (its deadline, moved once by a Redis outage's recovery bound), with
        slack."""
        found = list(tools.values())
        longest = max((tool_time_limit(t, self._settings) for t in found), default=0.0)
        bound = recovery_bound_s(self._settings, found)
        return math.ceil(longest + self._settings.result_grace_s + bound) + SNAPSHOT_SLACK_S

    async def _split_by_pool_liveness(
        self, calls: Sequence[PreparedCall], sent: set[str]
    ) -> tuple[list[PreparedCall], list[PreparedCall]]:
        """Calls whose pool has a live worker that registered their tool (or that were
        sent already), and the others."""
        served = await self._pools.served()
        if any(not self._runs(p, served) for p in calls):
            self._pools.forget()  # a worker may have started since the last read
            served = await self._pools.served()
        live: list[PreparedCall] = []
        unserved: list[PreparedCall] = []
        for each in calls:
            (live if self._runs(each, served) or each.call_id in sent else unserved).append(each)
        return live, unserved

    def _runs(self, prepared: PreparedCall, served: frozenset[str]) -> bool:
        return prepared.pool in served and self._pools.registered(prepared.pool, prepared.call.tool)

    def _no_worker(self, prepared: PreparedCall) -> ToolResult:
        pool, tool = prepared.pool, prepared.call.tool
        if self._pools.serves(pool):
            # Its message would wait in the queue until the call timed out: no worker of
            # the pool takes a task it does not have.
            log.error(
                "no live worker of pool %r registered tool %r: add its module to "
                "TOOLFLEET_TOOL_MODULES on the workers of pool %s",
                pool, tool, pool,
            )  # fmt: skip
            return failed(
                prepared.call,
                "ToolNotRegisteredError",
                f"no live worker of pool {pool} has tool {tool!r}: it is unavailable until "
                f"its module is added to TOOLFLEET_TOOL_MODULES on the workers of pool {pool}",
            )
        log.error(
            "no live worker serves pool %r (tool %s): start one with `toolfleet worker --pool %s`",
            pool, tool, pool,
        )  # fmt: skip
        return failed(
            prepared.call,
            "NoWorkerError",
            f"no worker serves pool {pool}: tool {tool!r} is unavailable right now",
        )

    def _dispatch(self, batch: Sequence[PreparedCall]) -> tuple[list[Dispatch], list[CallWatch]]:
        """The messages of `batch` and each call's watch, whose span's traceparent (tracing
        on) its message carries."""
        dispatches, watches = [], []
        for each in batch:
            dispatch = each.dispatch
            watch = CallWatch.start(each.planned, each.pool, dispatch.shown_args)
            watches.append(watch)
            traceparent = watch.traceparent  # None with tracing off: the dispatch as it is
            dispatches.append(dispatch if traceparent is None else dispatch.traced(traceparent))
        return dispatches, watches

    def _timed_out(self, prepared: PreparedCall) -> ToolResult:
        call = prepared.call
        self._waiter.forget(call.call_id)
        log.warning("call %s (%s) missed its deadline", call.call_id, call.tool)
        return failed(
            call,
            "TimeoutError",
            f"tool {call.tool!r} did not answer within {prepared.time_limit_s:g} s; "
            "it may still be running - do not assume it had no effect",
        )


class TurnStates:
    """The state each call of a run is sent with: inline when small, else a snapshot
    stored apart (shared.state_snapshots), made once for the calls that share a state."""

    def __init__(self, publisher: CeleryPublisher, keys: Keys, ttl_s: Callable[[], int]) -> None:
        self._publisher = publisher
        self._keys = keys
        self._ttl_s = ttl_s  # asked for the first snapshot, and again after `retime`
        self._ttl: int | None = None
        self._last: tuple[dict[str, Any], StateSnapshot | None] | None = None

    def retime(self) -> None:
        """Calls of another tool joined the run: the next snapshot is made anew, with the
        TTL asked again (it must outlast their deadlines too)."""
        self._ttl = None
        self._last = None

    def of(self, call: ToolCall) -> StateSnapshot | None:
        """The snapshot `call`'s state goes in, or None: inline."""
        # The calls of a turn share one state (a before-tool callback may change it for
        # the calls after it): compared, equal states are sealed and hashed once.
        last = self._last
        if last is not None and (last[0] is call.state or last[0] == call.state):
            return last[1]
        text = self._publisher.sealed_state(call.state)
        snapshot = None
        if len(text) > INLINE_STATE_MAX_BYTES:
            digest = digest_of(text)
            key = self._keys.state_snapshot(call.session_key, digest)
            if self._ttl is None:
                self._ttl = self._ttl_s()
            snapshot = StateSnapshot(key, text, digest, self._ttl)
        self._last = (call.state, snapshot)
        return snapshot


def _split_by_stored_secrets(
    calls: Sequence[PreparedCall], sent: set[str]
) -> tuple[list[PreparedCall], list[PreparedCall]]:
    """Calls of a resumed turn come from the stored event, where the values of
    secret-named arguments are masked: those never sent cannot be sent now."""
    ok: list[PreparedCall] = []
    unsendable: list[PreparedCall] = []
    for each in calls:
        (unsendable if each.call_id not in sent and each.has_masked_args else ok).append(each)
    return ok, unsendable
