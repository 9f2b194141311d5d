"""The completions listener on fakeredis: it applies at most `max_applying` entries at
once and reads no more from the stream until one is done, however long the backlog."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import fakeredis
import pytest
import redis

from tests.support import until
from toolfleet.orchestrator.completions.applier import GROUP
from toolfleet.orchestrator.completions.listener import CompletionListener
from toolfleet.orchestrator.completions.resumer import BackgroundTasks
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.keys import Keys

KEYS = Keys("t")


async def test_a_backlog_is_applied_a_bounded_number_at_a_time_and_left_in_the_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = fakeredis.FakeAsyncRedis()
    runner = SimpleNamespace(settings=SimpleNamespace(secret_arg_names=(), max_json_depth=64))
    listener = CompletionListener(
        {"app": cast(Runner, runner)}, client, KEYS, "replica-1",
        block_ms=20, owed_scan_s=3600, claim_idle_ms=3_600_000, max_applying=4,
    )  # fmt: skip
    gate = asyncio.Event()
    running, peak, done = 0, 0, []

    async def handle(stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1
        done.append(entry_id)

    async def nothing_owed() -> None:
        return None

    monkeypatch.setattr(listener, "_handle", handle)
    monkeypatch.setattr(listener.resumer, "resume_owed", nothing_owed)
    stream = KEYS.completions("app")
    await listener.start()
    try:
        for n in range(30):
            await client.xadd(stream, {"completion": f"{n}"})
        await until(lambda: running == 4, "four entries being applied", 10)
        summary: Any = await client.xpending(stream, GROUP)
        assert summary["pending"] == 4  # read by this replica: only those it applies
        gate.set()
        await until(lambda: len(done) == 30, "the whole backlog applied", 10)
        assert peak == 4
        assert len(set(done)) == 30
    finally:
        await listener.stop()
        await client.aclose()


def test_a_bound_below_one_is_refused_saying_so() -> None:
    runner = SimpleNamespace(settings=SimpleNamespace(secret_arg_names=(), max_json_depth=64))
    with pytest.raises(ValueError, match="max_applying is 0; it must be 1 or more"):
        CompletionListener(
            {"app": cast(Runner, runner)}, fakeredis.FakeAsyncRedis(), KEYS, "r", max_applying=0
        )


async def test_background_tasks_are_tracked_until_they_end() -> None:
    tasks = BackgroundTasks()
    gate = asyncio.Event()

    async def work() -> None:
        await gate.wait()

    tasks.spawn(work())
    (task,) = tasks
    assert len(tasks) == 1
    # Done callbacks run in the order they were added: the tracker's first, then this.
    forgotten = asyncio.Event()
    task.add_done_callback(lambda _: forgotten.set())
    gate.set()
    await asyncio.wait_for(forgotten.wait(), timeout=5)
    assert len(tasks) == 0 and list(tasks) == []


@pytest.mark.parametrize(
    "error",
    [
        redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'."),
        ValueError("a record that does not parse"),
    ],
)
async def test_an_error_in_the_read_loop_is_logged_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """Redis refusing a command (out of memory, say) or any other error of a step ended
    the listener's task: the replica applied no completion again until restarted."""
    client = fakeredis.FakeAsyncRedis()
    runner = SimpleNamespace(settings=SimpleNamespace(secret_arg_names=(), max_json_depth=64))
    listener = CompletionListener(
        {"app": cast(Runner, runner)}, client, KEYS, "replica-1",
        block_ms=20, owed_scan_s=3600, claim_idle_ms=10,
    )  # fmt: skip
    failed, done = [], []

    async def take_over_fails() -> None:
        if not failed:
            failed.append(error)
            raise error

    async def handle(stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        done.append(entry_id)

    async def nothing_owed() -> None:
        return None

    monkeypatch.setattr(listener, "_take_over_stale", take_over_fails)
    monkeypatch.setattr(listener, "_handle", handle)
    monkeypatch.setattr(listener.resumer, "resume_owed", nothing_owed)
    await listener.start()
    try:
        await until(lambda: failed, "the failed step", 10)
        await client.xadd(KEYS.completions("app"), {"completion": "{}"})
        await until(lambda: done, "the entry posted after the error handled", 10)
    finally:
        await listener.stop()
        await client.aclose()
