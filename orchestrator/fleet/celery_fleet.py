"""Run a turn's calls on the Celery fleet: publish, then await results with deadlines."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.fleet.flights import Flight, InFlight
from toolfleet.orchestrator.fleet.pools import LivePools
from toolfleet.orchestrator.fleet.protocol import PlannedCall, WithFirstSend, cancelled, failed
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.orchestrator.fleet.stopping import CallStopper
from toolfleet.orchestrator.fleet.watch import CallWatch
from toolfleet.orchestrator.sessions.cancels import CancelBoard
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.celery_config import recovery_bound_s, tool_pool, tool_time_limit
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, SessionKey, queue_name
from toolfleet.shared.messages import ToolResult
from toolfleet.shared.redaction import redact_deep, secret_name_set

log = logging.getLogger(__name__)

# Calls published in one write at most: each write is atomic (its messages and their
# record of what was sent), and a wide turn's first calls reach the workers while the
# next ones are encoded, without one script of ten thousand pushes holding Redis.
PUBLISH_BATCH = 200


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
    ) -> AsyncIterator[ToolResult]:
        """Publish calls to their pools' queues and yield one result per call as they finish.

        At most `max_parallel_calls` are out at once, published PUBLISH_BATCH to a write. A
        call whose pool has no live worker, or that misses its deadline, gets an error
        result. `resume`, `with_first_send`: see ToolRunner.run (the latter rides on the
        first publish, if any).
        """
        sent: set[str] = set()
        if resume and calls:
            sent = await self._publisher.recorded(self._keys.dispatched(calls[0].call.session_key))
            log.info("resuming a turn: %d of %d calls were sent already", len(sent), len(calls))
            calls, unsendable = self._split_by_stored_secrets(calls, sent)
            for planned in unsendable:
                yield failed(
                    planned.call,
                    "Interrupted",
                    "the orchestrator restarted before this call was sent, and its secret "
                    "arguments are not stored: call the tool again",
                )
        calls, unserved = await self._split_by_pool_liveness(calls, sent)
        for planned, pool in unserved:
            yield self._no_worker(planned, pool)
        if not calls:
            return
        stream = calls[0].call.reply_to
        session = calls[0].call.session_key
        record_in = self._keys.dispatched(session)
        futures = await self._waiter.expect(
            stream,
            [p.call.call_id for p in calls],
            session_id=calls[0].call.session_id,
            tools={p.call.call_id: p.call.tool for p in calls},
        )
        # Results of calls sent before a takeover are on the stream or on their way.
        waiting = [p for p in calls if p.call.call_id not in sent]
        in_flight = InFlight()
        self._track(in_flight, futures, [p for p in calls if p.call.call_id in sent])
        running = self._running.setdefault(session, {})
        running.update({p.call.call_id: p for p in calls})
        if self._cancels is not None and self._cancels.requested(session):
            self.cancel(session)  # cancelled while the calls were being planned
        try:
            while waiting or in_flight:
                room = self._settings.max_parallel_calls - len(in_flight)
                batch, waiting = waiting[:room], waiting[room:]
                # Answered before it was sent (its session was cancelled): never sent.
                answered = [p for p in batch if futures[p.call.call_id].done()]
                batch = [p for p in batch if not futures[p.call.call_id].done()]
                for planned in answered:
                    yield futures[planned.call.call_id].result()
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
                if not in_flight:  # every call of the batch was answered before it was sent
                    continue
                timeout_s = max(0.0, in_flight.next_deadline() - time.monotonic())
                for flight, result in await in_flight.finished(timeout_s):
                    self._end(flight, result)
                    yield result
                for flight in in_flight.expired(time.monotonic(), self._outage_extends):
                    timed_out = self._timed_out(flight.planned)
                    self._end(flight, timed_out)
                    yield timed_out
        finally:
            for flight in in_flight:  # the consumer stopped early
                if flight.watch is not None:
                    flight.watch.abandon("Abandoned")
            for planned in calls:  # a consumer that stops early must not leak futures
                self._waiter.forget(planned.call.call_id)
                running.pop(planned.call.call_id, None)
            if not running:
                self._running.pop(session, None)

    def cancel(self, session: SessionKey) -> None:
        """Answer the session's awaited calls with a Cancelled error, at once."""
        for planned in list(self._running.get(session, {}).values()):
            self._waiter.answer(cancelled(planned.call))

    async def stop(self, session: SessionKey, call_ids: Sequence[str]) -> None:
        """Have the workers stop these calls (they are closed: none starts after this)."""
        if call_ids and self._stopper is not None:
            await self._stopper.stop(session, call_ids)

    def _track(
        self,
        in_flight: InFlight,
        futures: dict[str, asyncio.Future[ToolResult]],
        sent: Sequence[PlannedCall],
        watches: Sequence[CallWatch] = (),
    ) -> None:
        now = time.monotonic()
        for index, planned in enumerate(sent):
            deadline = now + tool_time_limit(planned.tool, self._settings)
            deadline += self._settings.result_grace_s
            watch = watches[index] if watches else None
            in_flight.add(
                futures[planned.call.call_id], Flight(planned, now, deadline, watch=watch)
            )

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
        bound = recovery_bound_s(self._settings, [flight.planned.tool])
        flight.deadline = max(time.monotonic(), outage_at) + bound + self._settings.result_grace_s
        log.info(
            "call %s: waiting out a Redis outage (%.0f s more)", flight.planned.call.call_id, bound
        )
        return True

    def _split_by_stored_secrets(
        self, calls: Sequence[PlannedCall], sent: set[str]
    ) -> tuple[list[PlannedCall], list[PlannedCall]]:
        """Calls of a resumed turn come from the stored event, where the values of
        secret-named arguments are masked: those never sent cannot be sent now."""
        secrets = secret_name_set(self._settings.secret_arg_names)
        ok: list[PlannedCall] = []
        unsendable: list[PlannedCall] = []
        for planned in calls:
            args = planned.call.args
            masked = planned.call.call_id not in sent and redact_deep(args, secrets) is not args
            (unsendable if masked else ok).append(planned)
        return ok, unsendable

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

    async def _split_by_pool_liveness(
        self, calls: Sequence[PlannedCall], sent: set[str]
    ) -> tuple[list[PlannedCall], list[tuple[PlannedCall, str]]]:
        """Calls whose pool has a live worker that registered their tool (or that were
        sent already), and the others with their pool."""
        served = await self._pools.served()
        if any(not self._runs(p, served) for p in calls):
            self._pools.forget()  # a worker may have started since the last read
            served = await self._pools.served()
        live, unserved = [], []
        for planned in calls:
            if self._runs(planned, served) or planned.call.call_id in sent:
                live.append(planned)
            else:
                unserved.append((planned, tool_pool(planned.tool, self._settings)))
        return live, unserved

    def _runs(self, planned: PlannedCall, served: frozenset[str]) -> bool:
        pool = tool_pool(planned.tool, self._settings)
        return pool in served and self._pools.registered(pool, planned.call.tool)

    def _no_worker(self, planned: PlannedCall, pool: str) -> ToolResult:
        tool = planned.call.tool
        if self._pools.serves(pool):
            # Its message would wait in the queue until the call timed out: no worker of
            # the pool takes a task it does not have.
            log.error(
                "no live worker of pool %r registered tool %r: add its module to "
                "TOOLFLEET_TOOL_MODULES on the workers of pool %s",
                pool, tool, pool,
            )  # fmt: skip
            return failed(
                planned.call,
                "ToolNotRegisteredError",
                f"no live worker of pool {pool} has tool {tool!r}: it is unavailable until "
                f"its module is added to TOOLFLEET_TOOL_MODULES on the workers of pool {pool}",
            )
        log.error(
            "no live worker serves pool %r (tool %s): start one with `toolfleet worker --pool %s`",
            pool, tool, pool,
        )  # fmt: skip
        return failed(
            planned.call,
            "NoWorkerError",
            f"no worker serves pool {pool}: tool {tool!r} is unavailable right now",
        )

    def _dispatch(self, batch: Sequence[PlannedCall]) -> tuple[list[Dispatch], list[CallWatch]]:
        """The messages of `batch` and each call's watch, whose span's traceparent (tracing
        on) its message carries."""
        dispatches, watches = [], []
        for planned in batch:
            pool = tool_pool(planned.tool, self._settings)
            watch = CallWatch.start(planned, pool, self._settings.secret_arg_names)
            watches.append(watch)
            dispatches.append(Dispatch(planned.call, queue_name(pool), watch.traceparent))
        return dispatches, watches

    def _timed_out(self, planned: PlannedCall) -> ToolResult:
        self._waiter.forget(planned.call.call_id)
        limit = tool_time_limit(planned.tool, self._settings)
        log.warning("call %s (%s) missed its deadline", planned.call.call_id, planned.call.tool)
        return failed(
            planned.call,
            "TimeoutError",
            f"tool {planned.call.tool!r} did not answer within {limit:g} s; "
            "it may still be running - do not assume it had no effect",
        )
