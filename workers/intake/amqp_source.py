"""The intake's source on RabbitMQ: its queues consumed over a connection of its own.

One thread owns the connection (py-amqp's is one thread's at a time): it receives the
deliveries into the inbox the intake takes from, with a prefetch window of the worker's
concurrency, and sends the acks other threads make, a few milliseconds' worth at a time
and as few as the ack window allows. When the connection drops (RabbitMQ restarts), the
broker delivers its unacknowledged messages again, with their redelivered flag set: the
thread forgets what that connection held and connects again. Tags carry the number of
their connection, so an ack meant for an earlier connection is never sent on a later
one (RabbitMQ delivered that message again).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from celery import Celery
from kombu import Connection, Queue

from toolfleet.shared.celery_wire.rabbitmq import mark_unreadable_properties, read_ahead
from toolfleet.workers.intake.ack_window import AckWindow
from toolfleet.workers.intake.amqp_inbox import AmqpTaker, Inbox
from toolfleet.workers.intake.source import Taker

log = logging.getLogger(__name__)

# How long the connection's thread waits for a delivery while some are unsettled: the
# acks made meanwhile go out within it.
ACK_PERIOD_S = 0.005
# ... and while none is (no ack can come): also how soon the thread of a worker asked to
# stop notices, and the worker's warm shutdown waits for it.
IDLE_WAIT_S = 0.2
# How often the thread checks the connection's heartbeats, per heartbeat timeout (and at
# least every IDLE_WAIT_S): it sends one when it sent nothing for half the timeout, so
# RabbitMQ, which closes a connection silent for 2 timeouts, hears from a busy worker.
HEARTBEAT_CHECKS_PER_TIMEOUT = 4
# The first and the longest wait between attempts to connect.
RECONNECT_S = (0.5, 10.0)
# A connection that dropped after this long is made again at once, the waits between
# attempts starting over; one that dropped sooner waits as a failed attempt does.
STEADY_S = 10.0
# AMQP's prefetch count is 16 bits wide.
MAX_PREFETCH = 65_535


class AmqpSource:
    """`queues` (Celery's declarations of them) on the RabbitMQ of `app`, with a prefetch
    window of `prefetch` messages; `name` names the connection in RabbitMQ's management."""

    def __init__(self, app: Celery, queues: Sequence[Queue], prefetch: int, name: str) -> None:
        self._app = app
        self._queues = list(queues)
        self._prefetch = max(1, min(prefetch, MAX_PREFETCH))
        self._name = name
        self._inbox = Inbox()
        self._takers: list[Taker] = [AmqpTaker(self._inbox, ",".join(q.name for q in queues))]
        self._window = AckWindow()  # of the current connection; the thread's own
        self._settling: list[tuple[str, bool]] = []  # (tag, requeue), from any thread
        self._lock = threading.Lock()
        self._connection_number = 0  # of the current connection (tags carry it)
        self._connected = False
        self._taking = False
        self._stop_taking = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolfleet-amqp", daemon=True)

    @property
    def takers(self) -> list[Taker]:
        """One taker for every queue: they share the connection's prefetch window."""
        return self._takers

    def start(self) -> None:
        """Connect and consume, from a thread of its own."""
        self._thread.start()

    def ack(self, tag: str) -> None:
        """Acknowledge `tag` within about ACK_PERIOD_S."""
        with self._lock:
            self._settling.append((tag, False))

    def requeue(self, tag: str) -> None:
        """Put the message `tag` back on its queue."""
        with self._lock:
            self._settling.append((tag, True))

    def holds(self, tag: str) -> bool:
        """Whether `tag` came over the connection that is open now."""
        return self._connected and _split(tag)[0] == self._connection_number

    def keep(self, tags: Sequence[str]) -> None:
        """Nothing to do: RabbitMQ keeps a delivery this worker's until its channel closes."""

    def stop_taking(self) -> None:
        """Cancel the consumers and give back what was received and not taken; the
        takers' waits end at once."""
        self._stop_taking.set()
        self._inbox.end_waits()

    def stop(self) -> None:
        """Send the acks made so far and close the connection: RabbitMQ delivers what it
        held unacknowledged again."""
        self._stop_taking.set()
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        wait_s = RECONNECT_S[0]
        while not self._stopping.is_set():
            connection = self._app.connection_for_read(
                heartbeat=self._app.conf.broker_heartbeat,
                transport_options={"client_properties": {"connection_name": self._name}},
            )
            try:
                channel = self._open(connection)
            except Exception:
                log.warning(
                    "connecting to RabbitMQ for %s failed; trying again in %.1f s",
                    self._takers[0].name, wait_s, exc_info=True,
                )  # fmt: skip
                self._lose(connection)
                wait_s = self._back_off(wait_s)
                continue
            opened_at = time.monotonic()
            try:
                self._consume(connection, channel)
            except Exception:
                # One that drops soon after it opened may drop the same way again (what
                # RabbitMQ delivers first fails it): the next waits, longer each time.
                steady = time.monotonic() - opened_at >= STEADY_S
                wait_s = RECONNECT_S[0] if steady else wait_s
                log.warning(
                    "the connection to RabbitMQ dropped: its unacknowledged messages are "
                    "delivered again; connecting again in %.1f s",
                    0.0 if steady else wait_s,
                    exc_info=True,
                )
                self._lose(connection)
                if not steady:
                    wait_s = self._back_off(wait_s)
            else:
                self._close(connection)

    def _back_off(self, wait_s: float) -> float:
        """Wait `wait_s` (less if the worker stops); the wait after it."""
        self._stopping.wait(wait_s)
        return min(2 * wait_s, RECONNECT_S[1])

    def _open(self, connection: Connection) -> Any:
        """Connect and start consuming; py-amqp's channel."""
        connection.ensure_connection(max_retries=1)
        read_ahead(connection)
        mark_unreadable_properties(connection)  # such a message is dropped, not read forever
        channel: Any = connection.channel()  # py-amqp's Channel (kombu types it StdChannel)
        channel.basic_qos(0, self._prefetch, False)  # per consumer: quorum queues' only kind
        for queue in self._queues:
            queue.bind(channel).declare()  # as Celery's consumer declares it
        self._connection_number += 1
        self._window = AckWindow()
        self._taking = not self._stop_taking.is_set()
        if self._taking:
            for queue in self._queues:
                channel.basic_consume(queue.name, callback=self._received, no_ack=False)
        self._connected = True
        if self._connection_number > 1:
            log.info("intake: connected to RabbitMQ again, taking %s", self._takers[0].name)
        return channel

    def _received(self, message: Any) -> None:
        """A delivery (on the connection's thread, as it is read)."""
        tag = int(message.delivery_info["delivery_tag"])
        if not self._taking:  # stopping: back to the queue, for another worker
            message.channel.basic_reject(tag, requeue=True)
            return
        self._window.delivered(tag)
        self._inbox.put(f"{self._connection_number}:{tag}", message)

    def _consume(self, connection: Connection, channel: Any) -> None:
        # A turn reads one delivery at most, so a wide batch's deliveries and acks hold
        # the check back by a turn, not by the batch.
        beat_s = _heartbeat_period_s(connection)
        beat_at = time.monotonic()
        while not self._stopping.is_set():
            if self._stop_taking.is_set() and self._taking:
                self._cancel(channel)
            self._settle(channel)
            wait_s = ACK_PERIOD_S if self._window.unsettled else beat_s
            with contextlib.suppress(socket.timeout):
                connection.drain_events(timeout=wait_s)
            if time.monotonic() - beat_at >= beat_s:
                beat_at = time.monotonic()
                connection.heartbeat_check()  # raises once RabbitMQ went silent
        self._settle(channel)

    def _settle(self, channel: Any) -> None:
        """Send the acks and requeues made since the last time."""
        with self._lock:
            settling, self._settling = self._settling, []
        window = self._window
        for tag, requeue in settling:
            number, delivery_tag = _split(tag)
            if number != self._connection_number:
                continue  # RabbitMQ took it back with that connection
            if not requeue:
                window.finish(delivery_tag)
            elif window.forget(delivery_tag):
                channel.basic_reject(delivery_tag, requeue=True)
        plan = window.plan()
        if plan.multiple is not None:
            channel.basic_ack(plan.multiple, multiple=True)
        for delivery_tag in plan.singles:
            channel.basic_ack(delivery_tag)

    def _cancel(self, channel: Any) -> None:
        """Consume no more; what was received and not taken goes back to its queue."""
        self._taking = False
        for consumer_tag in list(channel.callbacks):
            channel.basic_cancel(consumer_tag)
        for tag, _ in self._inbox.clear():
            _, delivery_tag = _split(tag)
            if self._window.forget(delivery_tag):
                channel.basic_reject(delivery_tag, requeue=True)

    def _lose(self, connection: Connection) -> None:
        """Forget a connection that failed: RabbitMQ delivers its messages again."""
        self._connected = False
        self._inbox.clear()
        with contextlib.suppress(Exception):
            connection.collect()

    def _close(self, connection: Connection) -> None:
        self._connected = False
        with contextlib.suppress(Exception):
            connection.release()


def _heartbeat_period_s(connection: Connection) -> float:
    """How often the thread checks the heartbeats of `connection` (connected): a fraction
    of the timeout it negotiated, at most IDLE_WAIT_S."""
    timeout_s = float(connection.get_heartbeat_interval() or 0)
    if timeout_s <= 0:
        return IDLE_WAIT_S
    return min(IDLE_WAIT_S, timeout_s / HEARTBEAT_CHECKS_PER_TIMEOUT)


def _split(tag: str) -> tuple[int, int]:
    """The connection number and the delivery tag in an intake's `tag`."""
    number, _, delivery_tag = tag.partition(":")
    return int(number), int(delivery_tag)
