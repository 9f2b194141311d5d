"""Cancellations reach the replica through its result reader (fakeredis): only those
posted after it started, each once; and an awaited call is answered at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import fakeredis
import pytest

from toolfleet.orchestrator.fleet.protocol import cancelled
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.shared.cancellation import CANCEL_FIELD, CancelRequest, cancel_session
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import ToolCall

KEYS = Keys("t")
S1 = session_key("a", "u", "s1")


def request(session_id: str) -> dict[str, str]:
    cancelled = CancelRequest(app_name="a", user_id="u", session_id=session_id, at=time.time())
    return {CANCEL_FIELD: cancelled.model_dump_json()}


@pytest.fixture
async def seen(
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
) -> AsyncIterator[tuple[ResultWaiter, asyncio.Queue[CancelRequest]]]:
    await fake_redis.xadd(KEYS.cancels(), request("before-start"))  # of an earlier run
    got: asyncio.Queue[CancelRequest] = asyncio.Queue()
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "r1", block_ms=20, on_cancel=got.put_nowait)
    await waiter.start()
    yield waiter, got
    await waiter.stop()
    await reader.aclose()


async def test_only_cancellations_posted_after_start_are_delivered(
    seen: tuple[ResultWaiter, asyncio.Queue[CancelRequest]],
    fake_server: fakeredis.FakeServer,
) -> None:
    _, got = seen
    client = fakeredis.FakeRedis(server=fake_server)
    completions = Completions(client, KEYS)
    assert cancel_session(client, KEYS, completions, S1, keep_tickets=True) == []
    first = await asyncio.wait_for(got.get(), 5)
    assert (first.session_key, first.keep_tickets) == (S1, True)
    assert got.empty()  # "before-start" was not replayed


async def test_an_awaited_call_is_answered_at_once_and_its_late_result_dropped(
    seen: tuple[ResultWaiter, asyncio.Queue[CancelRequest]],
) -> None:
    waiter, _ = seen
    futures = await waiter.expect(KEYS.results(S1), ["c1"], session_id="s1")
    call = ToolCall(
        call_id="c1", tool="t", args={}, session_id="s1", app_name="a", user_id="u",
        invocation_id="i", agent="a", reply_to=KEYS.results(S1), dispatched_at=0,
    )  # fmt: skip
    assert waiter.answer(cancelled(call))
    result = await asyncio.wait_for(futures["c1"], 5)
    assert result.response["error_type"] == "Cancelled"
    assert not waiter.answer(cancelled(call))  # answered once
