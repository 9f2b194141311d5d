"""An io worker's intake: threads that take its queues' messages in batches and run each
on a thread of its own, up to the worker's concurrency."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import redis
from celery import Celery
from celery.events.dispatcher import EventDispatcher

from toolfleet.shared.celery_wire.consumer import TASK_EVENTS_PERIOD_S
from toolfleet.shared.celery_wire.parse import MalformedMessage, TaskMessage, decode, tag_of
from toolfleet.shared.celery_wire.redis_queue import BrokerQueue
from toolfleet.shared.gc_policy import freeze_startup_heap
from toolfleet.shared.outages import resilient_client
from toolfleet.workers.intake.broker import Acks
from toolfleet.workers.intake.eta import EtaQueue
from toolfleet.workers.intake.runner import MessageRunner
from toolfleet.workers.intake.sweep import Sweeper

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
    """Takes `queues` for worker `hostname` of `app`, running `concurrency` calls at once,
    the calls of sync tools on at most `threads` threads."""

    def __init__(
        self,
        app: Celery,
        url: str,
        queues: Sequence[str],
        hostname: str,
        concurrency: int,
        *,
        threads: int,
        send_events: bool,
        restore_interval_s: float,
    ) -> None:
        self.queues = list(queues)
        self._client = resilient_client(url)
        self._slots = Slots(concurrency)
        # A thread per running call for sync tools, up to `threads`: the others wait here
        # for one. Coroutine calls hold none, so `concurrency` may be in the thousands; they
        # need threads only for their two short steps (admit, conclude): a few, so that a
        # wide turn's steps do not contend for the interpreter across a thousand threads.
        self.threads = min(threads, concurrency)
        self._calls = ThreadPoolExecutor(self.threads, thread_name_prefix="toolfleet-call")
        self._steps = ThreadPoolExecutor(
            min(STEP_THREADS, concurrency), thread_name_prefix="toolfleet-step"
        )
        self._acks = Acks(self._client)
        self._sweeper = Sweeper(app, restore_interval_s)
        self._events: EventDispatcher | None = None
        if send_events:
            self._events = app.events.Dispatcher(
                app.connection_for_write(),
                hostname=hostname,
                groups=["task"],
                buffer_group=["task"],
                buffer_limit=10_000,  # flushed every TASK_EVENTS_PERIOD_S, not by size
            )
        self._stopping = threading.Event()
        self._runner = MessageRunner(
            app,
            hostname,
            ack=self._acks.ack,
            events=self._events,
            submit=self._submit,
        )
        self._eta = EtaQueue(lambda message: self._run_due([message]))
        self._threads = [
            threading.Thread(target=self._take, args=(q,), name=f"toolfleet-take-{q}", daemon=True)
            for q in self.queues
        ]
        self._threads.append(
            threading.Thread(target=self._send_events, name="toolfleet-task-events", daemon=True)
        )

    def start(self) -> None:
        """Start taking messages (a thread per queue), acking, sweeping and sending events."""
        freeze_startup_heap()
        self._acks.start()
        self._sweeper.start()
        self._eta.start()
        for thread in self._threads:
            thread.start()
        log.info(
            "intake: taking %s in batches of up to %d, %d calls at once (sync tools' on %d "
            "threads)",
            ", ".join(self.queues),
            BATCH,
            self._slots.total,
            self.threads,
        )

    def stop(self, *, wait: bool) -> None:
        """Take no more messages; with `wait`, let the running calls finish first (a warm
        shutdown). Messages of calls still running stay unacknowledged: the broker's sweep
        redelivers them to another worker."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for thread in self._threads:
            thread.join()
        for message in self._eta.stop():  # never ran: another worker runs it at its ETA
            self._sweeper.requeue(message.tag)
            self._slots.release()
        if wait:  # coroutine calls hold no thread: wait for their slots, not the threads
            self._slots.wait_idle()
        self._steps.shutdown(wait=wait)
        self._calls.shutdown(wait=wait)
        self._acks.stop()
        self._sweeper.stop()
        if self._events is not None:
            self._events.flush()
            self._events.close()

    def _take(self, name: str) -> None:
        queue = BrokerQueue(self._client, name)
        while not self._stopping.is_set():
            reserved = self._slots.reserve(BATCH, WAIT_S)
            if not reserved:
                continue
            try:
                batch = queue.take(reserved)
            except redis.RedisError:
                self._slots.release(reserved)
                log.warning("taking messages from %s failed; trying again", name, exc_info=True)
                self._stopping.wait(WAIT_S)
                continue
            for raw in batch.malformed:
                log.error("dropped a message that is not kombu's JSON from %s: %r", name, raw[:200])
            started = self._start(batch.messages)
            self._slots.release(reserved - started)
            if not batch.messages and not batch.malformed:
                self._wait(queue)

    def _wait(self, queue: BrokerQueue) -> None:
        try:
            queue.wait(WAIT_S)
        except redis.RedisError:
            log.warning("waiting on %s failed; trying again", queue.queue, exc_info=True)
            self._stopping.wait(WAIT_S)

    def _start(self, raws: Sequence[bytes]) -> int:
        """Start running the messages in `raws`, each on a slot reserved for it; how many
        started. One that is malformed or cannot start is dropped, logged and acknowledged
        (running it again would not help)."""
        due: list[TaskMessage] = []
        started = 0
        for raw in raws:
            message = self._receive(raw)
            if message is None:
                continue
            started += 1
            eta = message.eta()
            if eta is not None and eta > datetime.now(UTC):
                self._eta.hold(message, eta)  # its slot stays reserved; no thread waits
            else:
                due.append(message)
        self._run_due(due)
        return started

    def _receive(self, raw: bytes) -> TaskMessage | None:
        """The message in `raw`, Flower told it was received; or None: it was dropped."""
        try:
            message = decode(raw)
            self._runner.received(message)
            return message
        except MalformedMessage as exc:
            log.error("dropped a malformed message: %s (starts %r)", exc, raw[:200])
        except Exception:
            log.exception("dropped a message that could not start (starts %r)", raw[:200])
        tag = tag_of(raw)
        if tag is not None:
            self._acks.ack(tag)
        return None

    def _run_due(self, messages: Sequence[TaskMessage]) -> None:
        """Run messages due now: their coroutine calls together on a step thread, each
        sync tool's call on a thread of its own."""
        coroutines: list[TaskMessage] = []
        for message in messages:
            if self._runner.holds_no_thread(message):
                coroutines.append(message)
            else:
                self._calls.submit(self._run, [message])
        if coroutines:
            self._steps.submit(self._run, coroutines)

    def _run(self, messages: list[TaskMessage]) -> None:
        """Run messages on this intake thread; the slot of each is free once it has ended."""
        runs = [(message, self._slot_release()) for message in messages]
        try:
            self._runner.run(runs)
        except BaseException:
            log.exception("running taken messages failed")
            for _, done in runs:
                done()

    def _slot_release(self) -> Callable[[], None]:
        """What frees one slot, once, even if called again."""
        once = threading.Lock()

        def done() -> None:
            if once.acquire(blocking=False):
                self._slots.release()

        return done

    def _submit(self, step: Callable[[], None]) -> None:
        """Run a later step of a message's run on an intake thread."""
        try:
            self._steps.submit(step)
        except RuntimeError:  # the pool is shut down (a cold shutdown): run it here
            step()

    def _send_events(self) -> None:
        while not self._stopping.wait(TASK_EVENTS_PERIOD_S):
            if self._events is None:
                return
            try:
                self._events.flush()
            except Exception:
                log.warning("sending task events failed", exc_info=True)
