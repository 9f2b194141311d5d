"""The session store under faults and foreign data: a session deleted and made again
by another replica is not mixed with the one cached here; a value or event in Redis
that does not read back is passed over, not a reason no session of its app reads; an
append without a fence is applied once however often it is sent."""

from __future__ import annotations

import fakeredis
import pytest
from google.genai import types
from redis.asyncio.client import Pipeline

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import LeaseClaim
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.keys import Keys, SessionKey, session_key

KEYS = Keys("t")
S1 = session_key("app", "ann", "s1")


def text_event(text: str, author: str = "user") -> Event:
    role = "user" if author == "user" else "model"
    content = types.Content(role=role, parts=[types.Part(text=text)])
    return Event(invocation_id="i", author=author, content=content)


def texts(events: list[Event]) -> list[str | None]:
    return [e.content.parts[0].text if e.content and e.content.parts else None for e in events]


def claim(session: SessionKey, owner: str) -> LeaseClaim:
    return LeaseClaim(session, KEYS.lease(session), owner, 5, KEYS.applied_writes(session))


async def test_a_session_deleted_and_made_again_elsewhere_is_not_mixed_with_the_cached_one(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """Replica A read s1; replica B deletes it (DELETE .../sessions/s1) and the user starts
    s1 again through B. A must show the new history, not the old one's prefix."""
    a, b = SessionStore(fake_redis, KEYS), SessionStore(fake_redis, KEYS)
    old = await a.create("app", "ann", "s1")
    for text in ("old-1", "old-2"):
        await a.append(old, text_event(text))
    assert texts((await a.get(S1)).events) == ["old-1", "old-2"]
    # B deletes it (as adkwire.session_ops.delete_session does) and makes it again.
    await fake_redis.delete(KEYS.session(S1), KEYS.events(S1), KEYS.session_state(S1))
    new = await b.create("app", "ann", "s1")
    for text in ("new-1", "new-2"):
        await b.append(new, text_event(text))
    # The user's next message reaches A: the history A hands the model is the old one.
    session, stored = await a.get_and_append(
        "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("next"),
        owes_turn=True,
    )  # fmt: skip
    assert texts(session.events) == ["new-1", "new-2", "next"], f"stored={stored}"


async def test_one_app_state_value_that_is_not_json_does_not_break_every_session_of_the_app(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    for n in range(3):
        await store.create("app", f"u{n}", "s")
    await fake_redis.hset(KEYS.app_state("app"), "app:banner", "not json {")
    failed = []
    for n in range(3):
        try:
            await SessionStore(fake_redis, KEYS).get(session_key("app", f"u{n}", "s"))
        except Exception as exc:
            failed.append(type(exc).__name__)
    assert failed == [], f"every session of the app fails to read: {failed}"


async def test_one_event_that_is_not_json_does_not_leave_the_session_unreadable_and_owed(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    session = await store.create("app", "ann", "s1")
    await store.append(session, text_event("one"))
    await store.get(S1)  # cached: the next message rides on the read
    await fake_redis.rpush(KEYS.events(S1), b"\xff not json")
    error = None
    try:
        await store.get_and_append(
            "app", "ann", "s1", lease=claim(S1, "replica-a/1"), message=text_event("two"),
            owes_turn=True,
        )  # fmt: skip
    except Exception as exc:
        error = exc
    assert error is None, (
        f"read failed ({type(error).__name__}); lease left held: "
        f"{await fake_redis.get(KEYS.lease(S1))!r}, owed: {await store.sessions_to_resume()}"
    )


async def test_a_create_with_state_whose_reply_is_lost_stores_its_state_event_once(
    fake_redis: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adkwire.session_ops.create_session appends its state event with no fence: a plain
    MULTI/EXEC, which redis-py's retry sends again when the reply is lost."""
    store = SessionStore(fake_redis, KEYS)
    session = await store.create("app", "ann", "s1")
    execute = Pipeline.execute

    async def reply_lost_then_retried(self: Pipeline, *args: object, **kw: object) -> object:
        stack = list(self.command_stack)
        await execute(self, *args, **kw)  # applied; its reply lost: the client sends it again
        self.command_stack = stack
        return await execute(self, *args, **kw)

    monkeypatch.setattr(Pipeline, "execute", reply_lost_then_retried)
    await store.append(session, Event(invocation_id="", author="user", state_delta={"k": 1}))
    monkeypatch.undo()
    assert await fake_redis.llen(KEYS.events(S1)) == 1
