"""A cancellation is kept on its session for the replica that resumes it: it stops the
work that was the session's last when it came, and nothing after it."""

from __future__ import annotations

import fakeredis

from toolfleet.shared.cancellation import cancel_session, forget_kept_cancel, kept_cancel
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, session_key

KEYS = Keys("t")
SESSION = session_key("app", "u", "s")


def cancelled(server: fakeredis.FakeServer, *, keep_tickets: bool = False) -> None:
    client = fakeredis.FakeRedis(server=server)
    cancel_session(client, KEYS, Completions(client, KEYS), SESSION, keep_tickets=keep_tickets)


async def test_a_kept_cancellation_applies_while_nothing_was_added_to_the_session() -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeAsyncRedis(server=server)
    await client.rpush(KEYS.events(SESSION), "the user's message", "the model's turn")
    await client.sadd(KEYS.dispatched(SESSION), "c1", "c2")

    cancelled(server, keep_tickets=True)

    kept = await kept_cancel(client, KEYS, SESSION)
    assert kept is not None and kept.keep_tickets
    # The calls its open turn sent are closed at once: a worker does not start them.
    assert await client.exists(KEYS.closed(SESSION, "c1"), KEYS.closed(SESSION, "c2")) == 2
    await forget_kept_cancel(client, KEYS, SESSION)
    assert await kept_cancel(client, KEYS, SESSION) is None


async def test_a_kept_cancellation_the_session_moved_past_goes_unapplied() -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeAsyncRedis(server=server)
    await client.rpush(KEYS.events(SESSION), "the user's message")
    cancelled(server)
    # A live replica stopped the turn (its responses stored), or a message came after.
    await client.rpush(KEYS.events(SESSION), "what came after")

    assert await kept_cancel(client, KEYS, SESSION) is None
    assert not await client.exists(KEYS.cancelled(SESSION))  # gone, not kept to mislead
