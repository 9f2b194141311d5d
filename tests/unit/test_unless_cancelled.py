"""unless_cancelled: the model call raced against a session's cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from toolfleet.orchestrator.sessions.cancels import Cancellation, unless_cancelled


async def silent_model(started: asyncio.Event, stopped: asyncio.Event) -> str:
    """A model call that never answers; `stopped` once it is cancelled."""
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        stopped.set()
    return "unreachable"


async def test_a_cancellation_during_the_work_stops_it_and_gives_none() -> None:
    cancellation = Cancellation()
    started, stopped = asyncio.Event(), asyncio.Event()

    racing = asyncio.create_task(unless_cancelled(silent_model(started, stopped), cancellation))
    await started.wait()
    cancellation.set(keep_tickets=False)
    assert await asyncio.wait_for(racing, 5) is None
    assert stopped.is_set()
    assert not cancellation.racing  # nothing left registered


async def test_work_that_ends_first_keeps_its_value() -> None:
    cancellation = Cancellation()

    async def model_call() -> str:
        return "answer"

    assert await unless_cancelled(model_call(), cancellation) == "answer"
    cancellation.set(keep_tickets=False)  # after: changes nothing
    assert await unless_cancelled(model_call(), None) == "answer"


async def test_an_already_cancelled_session_does_not_run_the_work() -> None:
    cancellation = Cancellation()
    cancellation.set(keep_tickets=True)
    ran = False

    async def model_call() -> str:
        nonlocal ran
        ran = True
        return "answer"

    assert await unless_cancelled(model_call(), cancellation) is None
    assert not ran


async def test_cancelling_the_caller_still_raises_and_stops_the_work() -> None:
    cancellation = Cancellation()
    started, stopped = asyncio.Event(), asyncio.Event()

    caller = asyncio.create_task(unless_cancelled(silent_model(started, stopped), cancellation))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert stopped.is_set()
    assert not cancellation.requested


async def next_iteration() -> None:
    """Suspend until the loop's next iteration (a future the loop resolves then)."""
    loop = asyncio.get_running_loop()
    resumed = loop.create_future()
    loop.call_soon(resumed.set_result, None)
    await resumed


async def cancelled_while(
    work: Coroutine[Any, Any, str], started: asyncio.Event
) -> tuple[str | None, int]:
    """Run `work` under unless_cancelled in a task of its own, cancel the session once
    `started` is set; what unless_cancelled returned, and the task's cancelling() count
    after one more await."""
    cancellation = Cancellation()

    async def caller() -> tuple[str | None, int]:
        value = await unless_cancelled(work, cancellation)
        await next_iteration()  # a task still being cancelled raises at its next await
        task = asyncio.current_task()
        assert task is not None
        return value, task.cancelling()

    racing = asyncio.create_task(caller())
    await started.wait()
    cancellation.set(keep_tickets=False)
    return await asyncio.wait_for(racing, 5)


async def test_the_caller_goes_on_uncancelled_after_a_cancellation() -> None:
    # The work runs in the caller's own task: once it is stopped, that task is not left
    # being cancelled, and its next await (the loop storing the cancellation) completes.
    started, stopped = asyncio.Event(), asyncio.Event()
    assert await cancelled_while(silent_model(started, stopped), started) == (None, 0)


async def test_work_that_swallows_the_cancellation_keeps_its_value() -> None:
    started = asyncio.Event()

    async def stubborn_model() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "answered anyway"
        return "unreachable"

    assert await cancelled_while(stubborn_model(), started) == ("answered anyway", 0)


async def test_a_cancellation_and_the_callers_own_cancel_together_raise() -> None:
    cancellation = Cancellation()
    started, stopped = asyncio.Event(), asyncio.Event()

    caller = asyncio.create_task(unless_cancelled(silent_model(started, stopped), cancellation))
    await started.wait()
    cancellation.set(keep_tickets=False)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert stopped.is_set()
