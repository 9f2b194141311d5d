"""A worker asked to stop does not sit out its waits: Celery's event loop is woken by the
shutdown request, and an io intake's wait for RabbitMQ deliveries ends at once."""

from __future__ import annotations

import select
import threading
from typing import Any
from unittest.mock import Mock

from celery import Celery
from celery.signals import worker_shutting_down
from kombu.asynchronous import Hub

from toolfleet.workers.intake.amqp_inbox import Inbox
from toolfleet.workers.shutdown_wake import install_shutdown_wake

# Far longer than the test may take: a wait of this long is over only if it was ended.
BLOCK_S = 60.0
ENDS_WITHIN_S = 10.0


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def wake_step(app: Celery) -> Any:
    (step,) = [s for s in app.steps["consumer"] if s.label == "toolfleet shutdown wake"]
    return step(Mock())


def test_a_shutdown_request_makes_the_event_loop_poll_return_and_the_loop_drains_it() -> None:
    app = Celery("wake-test", set_as_current=False)
    install_shutdown_wake(app)
    hub = Hub()
    try:
        wake_step(app).register_with_event_loop(Mock(), hub)
        (fd,) = [fd for fd in hub.readers]
        assert not readable(fd)  # nothing to wake the poll before the request
        # As Celery's SIGTERM handler announces it, in the worker's main process.
        worker_shutting_down.send(sender="w@h", sig="SIGTERM", how="Warm", exitcode=0)
        assert readable(fd)  # the hub's poll returns at once, not after its timeout
        next(hub.create_loop())  # one turn of the loop: the reader drains the pipe
        assert not readable(fd)
    finally:
        hub.close()


def test_ending_an_inbox_s_waits_returns_the_one_in_progress_and_every_later_one() -> None:
    inbox = Inbox()
    returned = threading.Event()

    def wait() -> None:
        inbox.wait(BLOCK_S)
        returned.set()

    threading.Thread(target=wait, daemon=True).start()
    inbox.end_waits()
    assert returned.wait(ENDS_WITHIN_S), "the wait went on"
    later = threading.Thread(target=inbox.wait, args=(BLOCK_S,), daemon=True)
    later.start()
    later.join(ENDS_WITHIN_S)
    assert not later.is_alive()
