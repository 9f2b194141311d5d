"""Closing an open turn nobody will finish (loop/closing.py), on fakeredis: only the calls
without a response are answered, in call order, they are closed, the owed mark goes."""

from __future__ import annotations

import fakeredis
from google.genai import types

from toolfleet.orchestrator.loop.closing import WORKER_LOST, close_open_turn
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.keys import Keys, session_key

KEYS = Keys("t")
CHILD = session_key("app", "ann", "p.tf-1")


def model_turn(*call_ids: str) -> Event:
    calls = [
        types.Part(function_call=types.FunctionCall(id=c, name="lookup", args={})) for c in call_ids
    ]
    return Event(
        invocation_id="i", author="child", content=types.Content(role="model", parts=calls)
    )


def responses(*call_ids: str) -> Event:
    parts = [
        types.Part(
            function_response=types.FunctionResponse(id=c, name="lookup", response={"ok": 1})
        )
        for c in call_ids
    ]
    return Event(invocation_id="i", author="child", content=types.Content(role="user", parts=parts))


async def test_the_calls_left_open_get_one_error_each_and_are_closed(
    store: SessionStore, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    session = await store.create("app", "ann", "p.tf-1", owner="child")
    await store.append(session, model_turn("a", "b", "c"), owes_turn=True)
    await store.append(session, responses("b"))  # one came back before the worker died

    closed = await close_open_turn(
        store, session, error_type=WORKER_LOST, why="its worker was lost", fence=None
    )

    assert closed == ["a", "c"]
    stored = await store.get(CHILD)
    assert stored.open_turn() is None
    last = stored.events[-1]
    assert [(r.id, (r.response or {})["error_type"]) for r in last.get_function_responses()] == [
        ("a", WORKER_LOST),
        ("c", WORKER_LOST),
    ]
    assert [r.status.value for r in last.calls] == ["error", "error"]
    assert [await fake_redis.exists(KEYS.closed(CHILD, c)) for c in "abc"] == [1, 0, 1]
    assert not await fake_redis.sismember(KEYS.resume(), CHILD)
    # Nothing is open any more: closing again writes nothing.
    again = await close_open_turn(store, stored, error_type=WORKER_LOST, why="x", fence=None)
    assert again == [] and len((await store.get(CHILD)).events) == len(stored.events)
