"""A worker asked to stop does not sit out the waits it is in: an io intake's blocking
wait for its queue is cut short on real Redis."""

from __future__ import annotations

import threading
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.workers.intake.unblocking import UnblockableWaits

pytestmark = pytest.mark.integration

# Far longer than the test may take: a wait of this long is over only if it was cut.
BLOCK_S = 60
ENDS_WITHIN_S = 10


def blocked_in(control: redis.Redis, connection: int, command: str) -> bool:
    """Whether Redis reports `connection` blocked in `command`."""
    return any(
        int(c["id"]) == connection and c.get("cmd") == command for c in control.client_list()
    )


def test_a_cut_ends_the_wait_in_progress_at_once_and_refuses_later_ones(redis_url: str) -> None:
    control = redis.Redis.from_url(redis_url)
    waits = UnblockableWaits(redis_url, control)
    key = f"tftest-wait-{uuid.uuid4().hex}"  # never pushed to: only a cut ends the wait
    connection = int(waits.client.client_id())  # the waits' one connection
    returned = threading.Event()
    replies: list[object] = []

    def wait() -> None:
        waits.run(lambda client: replies.append(client.blpop([key], BLOCK_S)))
        returned.set()

    threading.Thread(target=wait, daemon=True).start()
    try:
        wait_for(lambda: blocked_in(control, connection, "blpop"), ENDS_WITHIN_S, "the wait")
        waits.cut()
        assert returned.wait(ENDS_WITHIN_S), "the cut left the wait blocked"
        assert replies == [None]  # ended as a timeout, nothing taken
        later: list[object] = []
        waits.run(lambda client: later.append(client.blpop([key], BLOCK_S)))
        assert later == []  # never sent: the waits were cut
    finally:
        waits.cut()
        waits.close()
        control.close()


def test_a_cut_with_no_wait_in_progress_returns_and_refuses_the_next(redis_url: str) -> None:
    control = redis.Redis.from_url(redis_url)
    waits = UnblockableWaits(redis_url, control)
    try:
        waits.cut()
        ran: list[object] = []
        waits.run(lambda client: ran.append(client.blpop(["tftest-never"], BLOCK_S)))
        assert ran == []
    finally:
        waits.close()
        control.close()


def test_where_an_acl_refuses_the_client_commands_the_wait_runs_its_course(
    redis_url: str,
) -> None:
    control = redis.Redis.from_url(redis_url)
    user, password = f"tftest-noclient-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    control.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], channels=["*"],
        commands=["+@all", "-client"],
    )  # fmt: skip
    parts = urlsplit(redis_url)
    restricted = urlunsplit(
        parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}")
    )
    waits = UnblockableWaits(restricted, redis.Redis.from_url(restricted))
    try:
        replies: list[object] = []
        waits.run(lambda client: replies.append(client.blpop([f"tftest-{user}"], 1)))
        assert replies == [None]  # it waited, and timed out as it would have
        waits.cut()  # the unblock is refused: nothing raises
    finally:
        waits.close()
        control.acl_deluser(user)
        control.close()
