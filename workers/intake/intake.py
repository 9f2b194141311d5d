"""An io worker's intake: threads that take its queues' messages in batches and run each
on a thread of its own, up to the worker's concurrency."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from celery import Celery

from toolfleet.shared.celery_wire.consumer import TASK_EVENTS_PERIOD_S
from toolfleet.shared.celery_wire.parse import TaskMessage
from toolfleet.shared.gc_policy import worker_policy
from toolfleet.workers.intake.eta import EtaQueue
from toolfleet.workers.intake.events import TaskEvents
from toolfleet.workers.intake.in_flight import InFlight
from toolfleet.workers.intake.runner import MessageRunner
from toolfleet.workers.intake.source import Source, Taken, Taker
from toolfleet.workers.intake.steps import Steps

log = logging.getLogger(__name__)

# Messages one take gets at most: several io workers on a queue share a wide turn.
BATCH = 64
# How long a taker blocks on an empty queue before it checks whether to stop.
WAIT_S = 1
# Threads running the admit and conclude steps of coroutine calls.
STEP_THREADS = 16


class Slots:
    """The calls one worker process may run at once, and how many of them are free."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._used = 0
        self._changed = threading.Condition()

    def reserve(self, limit: int, timeout_s: float) -> int:
        """Reserve up to `limit` slots, once at least one is free; how many (0 after
        `timeout_s`). Each is given back with `release`."""
        with self._changed:
            self._changed.wait_for(lambda: self._used < self.total, timeout_s)
            reserved = min(limit, self.total - self._used)
            self._used += reserved
            return reserved

    def wait_idle(self) -> None:
        """Wait until no slot is used: every call taken has ended."""
        with self._changed:
            self._changed.wait_for(lambda: self._used == 0)

    def release(self, count: int = 1) -> None:
        """Give back `count` reserved slots."""
        with self._changed:
            self._used -= count
            self._changed.notify_all()


class Intake:
    """Takes the messages of `source` for worker `hostname` of `app`, running
    `concurrency` calls at once, the calls of sync tools on at most `threads` threads."""

    def __init__(
        self,
        app: Celery,
        source: Source,
        hostname: str,
        concurrency: int,
        *,
        threads: int,
        task_events: Callable[[], bool],
    ) -> None:
        self._source = source
        self._slots = Slots(concurrency)
        # A thread per running call for sync tools, up to `threads`: the others wait here
        # for one. Coroutine calls hold none, so `concurrency` may be in the thousands; they
        # need threads only for their two short steps (admit, conclude): a few, so that a
        # wide turn's steps do not contend for the interpreter across a thousand threads.
        self.threads = min(threads, concurrency)
        self._calls = ThreadPoolExecutor(self.threads, thread_name_prefix="toolfleet-call")
        self._steps = Steps(min(STEP_THREADS, concurrency))
        # Flower's task events, while `task_events()` says they are wanted.
        self._events = TaskEvents(app, hostname, task_events)
        self._stopping = threading.Event()
        self._in_flight = InFlight()
        self._runner = MessageRunner(
            app,
            hostname,
            ack=source.ack,
            events=self._events,
            submit=self._submit,
        )
        self._eta = EtaQueue(lambda message: self._run_due([message]), keep=source.keep)
        self._threads = [
            threading.Thread(
                target=self._take, args=(taker,), name=f"toolfleet-take-{taker.name}", daemon=True
            )
            for taker in source.takers
        ]
        self._threads.append(
            threading.Thread(target=self._send_events, name="toolfleet-task-events", daemon=True)
        )

    def start(self) -> None:
        """Start taking messages (a thread per taker), acking and sending events."""
        worker_policy()
        self._source.start()
        self._eta.start()
        for thread in self._threads:
            thread.start()
        log.info(
            "intake: taking %s in batches of up to %d, %d calls at once (sync tools' on %d "
            "threads)",
            ", ".join(taker.name for taker in self._source.takers),
            BATCH,
            self._slots.total,
            self.threads,
        )

    def stop(self, *, wait: bool) -> None:
        """Take no more messages; with `wait`, let the running calls finish first (a warm
        shutdown). Messages of calls still running stay unacknowledged: the broker
        delivers them again, to another worker."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._source.stop_taking()
        for thread in self._threads:
            thread.join()
        for message in self._eta.stop():  # never ran: another worker runs it at its ETA
            self._source.requeue(message.tag)
            self._slots.release()
        if wait:  # coroutine calls hold no thread: wait for their slots, not the threads
            self._slots.wait_idle()
        self._steps.shutdown(wait=wait)
        self._calls.shutdown(wait=wait)
        self._source.stop()
        self._events.close()

    def _take(self, taker: Taker) -> None:
        while not self._stopping.is_set():
            reserved = self._slots.reserve(BATCH, WAIT_S)
            if not reserved:
                continue
            taken = taker.take(reserved)
            started = self._start(taken)
            self._slots.release(reserved - started)
            if not taken:
                taker.wait(WAIT_S)

    def _start(self, taken: Taken) -> int:
        """Start running the messages `taken`, each on a slot reserved for it; how many
        started. One that cannot run is dropped, logged and acknowledged (running it
        again would not help)."""
        for dropped in taken.dropped:
            log.error("dropped %s (starts %r)", dropped.reason, dropped.raw[:200])
            if dropped.tag is not None:
                self._source.ack(dropped.tag)
        due: list[TaskMessage] = []
        started = 0
        for message in taken.messages:
            try:
                self._runner.received(message)
                held = self._held(message)
            except Exception:  # whatever a message holds, the taker goes on
                log.exception("dropped a message that could not start (task %s)", message.task_id)
                self._source.ack(message.tag)
                continue
            started += 1
            if not held:
                due.append(message)
        self._run_due(due)
        return started

    def _held(self, message: TaskMessage) -> bool:
        """Whether `message` waits here for its ETA, its slot kept reserved (no thread
        waits): it is due later, and this worker would run it then."""
        eta = message.eta()
        if eta is None or eta <= datetime.now(UTC) or not self._runner.may_hold(message):
            return False
        self._eta.hold(message, eta)
        return True

    def _run_due(self, messages: Sequence[TaskMessage]) -> None:
        """Run messages due now: their coroutine calls together on a step thread, each
        sync tool's call on a thread of its own. One the broker took back meanwhile (its
        connection dropped) is left to its next delivery; a copy of one running here
        waits for it to end."""
        coroutines: list[TaskMessage] = []
        for message in messages:
            if not self._source.holds(message.tag):
                self._slots.release()
            elif not self._in_flight.enter(message):
                continue  # it runs once the copy running now has ended
            elif self._runner.holds_no_thread(message):
                coroutines.append(message)
            else:
                self._calls.submit(self._run, [message])
        if coroutines:
            self._steps.admit(lambda: self._run(coroutines))

    def _run(self, messages: list[TaskMessage]) -> None:
        """Run messages on this intake thread; the slot of each is free once it has ended."""
        runs = [(message, self._ended(message)) for message in messages]
        try:
            self._runner.run(runs)
        except BaseException:
            log.exception("running taken messages failed")
            for _, done in runs:
                done()

    def _ended(self, message: TaskMessage) -> Callable[[], None]:
        """What ends `message`'s run, once, even if called again: its slot is free, and
        the copies of it that waited run."""
        once = threading.Lock()

        def done() -> None:
            if once.acquire(blocking=False):
                self._slots.release()
                copies = self._in_flight.leave(message)
                if copies:
                    with contextlib.suppress(RuntimeError):  # a cold shutdown's: given back
                        self._run_due(copies)

        return done

    def _submit(self, step: Callable[[], None]) -> None:
        """Run a later step of a message's run (its conclusion) on an intake thread."""
        self._steps.conclude(step)

    def _send_events(self) -> None:
        while not self._stopping.wait(TASK_EVENTS_PERIOD_S):
            self._events.flush()
