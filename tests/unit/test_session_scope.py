"""A session id names a session only within its app and user, as in ADK (fakeredis).

Another user's session of the same id is another session: whoever took the id first,
the other gets a session of their own under it - never "exists already" (which would
tell them the id is in use), never "busy" because of the first one's lease. Neither
reads, changes, leases, owes or cancels the other's.
"""

from __future__ import annotations

import fakeredis
import pytest
from google.genai import types

from toolfleet.orchestrator.sessions.cancels import CancelBoard
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.cancellation import CANCEL_FIELD, CancelRequest, cancel_session
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, SessionKey, session_key, session_parts
from toolfleet.shared.messages import PendingCall

KEYS = Keys("t")
ANN = session_key("app", "ann", "s1")
BOB = session_key("app", "bob", "s1")  # the same id, another user
ANN_ELSEWHERE = session_key("other-app", "ann", "s1")  # the same id and user, another app


def said(text: str, delta: dict[str, object] | None = None) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(invocation_id="i", author="user", content=content, state_delta=delta or {})


def texts(events: list[Event]) -> list[str | None]:
    return [e.content.parts[0].text if e.content and e.content.parts else None for e in events]


def ticket(key: SessionKey, call_id: str) -> PendingCall:
    app, user, session_id = session_parts(key)
    return PendingCall(
        call_id=call_id, tool="ask_for_approval", session_id=session_id, app_name=app,
        user_id=user, agent="agent", invocation_id="i", ticket={"status": "pending"},
        created_at=0.0,
    )  # fmt: skip


async def anns_session(store: SessionStore, leases: Leases) -> None:
    """Ann's session "s1": her message and state, a ticket, a turn owed, and her lease
    held by the replica running it."""
    claim = leases.claim(ANN)
    session, stored = await store.get_and_append(
        "app", "ann", "s1", lease=claim, message=said("my pin is 1234", {"pin": "1234"}),
        owes_turn=True,
    )  # fmt: skip
    assert stored
    await store.append(session, said("pending"), pending=[ticket(ANN, "c-ann")], fence=claim.fence)


@pytest.mark.parametrize("first", ["ann", "bob"])
@pytest.mark.parametrize("replica", ["same", "another"])
async def test_another_user_taking_the_same_id_gets_a_session_of_their_own(
    fake_redis: fakeredis.FakeAsyncRedis, first: str, replica: str
) -> None:
    store = SessionStore(fake_redis, KEYS)
    others = store if replica == "same" else SessionStore(fake_redis, KEYS)
    leases = Leases(fake_redis, KEYS, "replica-a", ttl_s=30)
    if first == "bob":  # bob takes the predictable id before ann does
        assert (await others.create("app", "bob", "s1")).id == "s1"
    await anns_session(store, leases)
    if first == "ann":  # the create that answered "exists already": now bob's own session
        created = await others.create("app", "bob", "s1")
        assert (created.user_id, created.events, created.state) == ("bob", [], {})
    # Bob runs his "s1" while ann's lease is held: not busy, and nothing of hers in it.
    bob_leases = Leases(fake_redis, KEYS, "replica-b", ttl_s=30)
    claim = bob_leases.claim(BOB)
    bobs = await others.get_or_create("app", "bob", "s1", lease=claim)
    assert (bobs.id, bobs.user_id, bobs.events, bobs.state) == ("s1", "bob", [], {})
    await others.append(bobs, said("hi", {"mood": "fine"}), owes_turn=True, fence=claim.fence)
    # Ann's app of another name: another session again.
    elsewhere = await others.get_or_create("other-app", "ann", "s1")
    assert (elsewhere.events, elsewhere.state) == ([], {})

    anns = await SessionStore(fake_redis, KEYS).get(ANN)
    assert (anns.id, anns.user_id) == ("s1", "ann")
    assert texts(anns.events) == ["my pin is 1234", "pending"] and anns.state == {"pin": "1234"}
    assert texts((await store.get(BOB)).events) == ["hi"]
    assert (await store.get(BOB)).state == {"mood": "fine"}
    assert await fake_redis.get(KEYS.lease(ANN)) is not None  # still ann's replica's
    assert await fake_redis.get(KEYS.lease(ANN)) != await fake_redis.get(KEYS.lease(BOB))
    assert [c.call_id for c in await store.pending_calls(ANN)] == ["c-ann"]
    assert await store.pending_calls(BOB) == [] == await store.pending_calls(ANN_ELSEWHERE)
    assert await store.sessions_to_resume() == sorted([ANN, BOB])  # each owes its own turn
    assert await fake_redis.smembers(KEYS.user_sessions("app", "bob")) == {b"s1"}


async def test_cancelling_another_users_session_of_the_same_id_leaves_yours_alone(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    """Bob cancels his "s1": his ticket closes and his invocation stops; ann's "s1", running
    on the same replica, keeps its ticket and runs on."""
    store = SessionStore(fake_redis, KEYS)
    await anns_session(store, Leases(fake_redis, KEYS, "replica-a", ttl_s=30))
    bobs = await store.create("app", "bob", "s1")
    await store.append(bobs, said("pending"), pending=[ticket(BOB, "c-bob")])
    client = fakeredis.FakeRedis(server=fake_server)
    completions = Completions(client, KEYS)
    board = CancelBoard()
    with board.watch(ANN) as anns_run, board.watch(BOB) as bobs_run:
        assert cancel_session(client, KEYS, completions, BOB) == ["c-bob"]
        ((_, ((_, fields),)),) = client.xread({KEYS.cancels(): "0"})
        request = CancelRequest.model_validate_json(fields[CANCEL_FIELD.encode()])
        assert request.session_key == BOB and board.cancel(request)
        assert bobs_run.requested and not anns_run.requested
    assert completions.get("c-ann").session_key == ANN  # still pending, still hers
    posted = client.xrange(KEYS.completions("app"))
    assert [p[1][b"completion"].count(b'"c-bob"') for p in posted] == [1]  # bob's only
    client.close()


def test_a_session_key_names_one_app_user_and_id() -> None:
    """No two (app, user, id) share a key, whatever characters they hold, and the key
    gives them back; a bare id is not a key."""
    named = [
        ("a:b", "c", "d"), ("a", "b:c", "d"), ("a/b", "c", "d"), ("a", "b/c", "d"),
        ("a", "b", "c/d"), ("a%2Fb", "c", "d"), ("a", "b", "s1"), ("a", "b ", "s1"),
    ]  # fmt: skip
    assert len({session_key(*n) for n in named}) == len(named)
    for parts in named:
        assert session_parts(session_key(*parts)) == parts
    assert session_key("reimbursement_agent", "alice", "s-1") == "reimbursement_agent/alice/s-1"
    for bare in ("s1", "a/b", "a/b/c/d", "a//c"):
        with pytest.raises(ValueError, match="is not a session key"):
            session_parts(SessionKey(bare))
