"""Live progress of a long turn: done out of total, elapsed, and who runs what."""

from __future__ import annotations

import io
import time

import fakeredis

from tests.support import until
from tests.unit.test_dispatch import make_call
from toolfleet.orchestrator.cli.progress import LOOKED_AT, LiveProgress
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, RunningCall, answered_result

KEYS = Keys("t")
S = session_key("app", "u", "s")


async def started(client: fakeredis.FakeAsyncRedis, call_id: str, worker: str, pid: int) -> None:
    """What a worker records as it starts a call (DeliveryGuard.count)."""
    value = RunningCall(worker=worker, pid=pid, started_at=time.time() - 3)
    await client.hset(KEYS.running(S), call_id, value.model_dump_json())


def dispatched(*call_ids: str) -> CallsDispatched:
    return CallsDispatched(
        "inv", [make_call({}).model_copy(update={"call_id": c}) for c in call_ids]
    )


async def test_the_line_counts_done_and_names_the_running_calls_and_their_workers(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    progress = LiveProgress(io.StringIO(), fake_redis, KEYS, S, quiet_s=0)
    assert await progress.line() is None  # no turn yet
    progress.follow(dispatched("a", "b", "c"))
    await started(fake_redis, "a", "w1@h", 11)
    await started(fake_redis, "b", "w2@h", 22)
    progress.follow(
        CallFinished(
            "inv",
            answered_result(
                make_call({}).model_copy(update={"call_id": "a"}),
                CallStatus.SUCCESS,
                {},
                worker="w1@h",
            ),
        )
    )

    line = await progress.line()
    assert line is not None
    assert line.startswith("  … 1/3 calls done, ")
    assert "running: call_api on w2@h pid 22 3 s" in line
    assert "w1@h" not in line  # done
    assert line.endswith("; 1 waiting for a worker")  # c: no worker took it yet


async def test_a_short_turn_prints_nothing_and_a_long_one_prints_lines(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    out = io.StringIO()
    quiet = LiveProgress(out, fake_redis, KEYS, S, quiet_s=60)
    quiet.follow(dispatched("a"))
    assert await quiet.line() is None

    progress = LiveProgress(out, fake_redis, KEYS, S, every_s=0.01, quiet_s=0)
    progress.follow(dispatched("a", "b"))
    await started(fake_redis, "a", "w1@h", 11)
    async with progress.running():
        await until(lambda: "0/2 calls done" in out.getvalue(), "a progress line", 5)
    assert "running: call_api on w1@h pid 11" in out.getvalue()


async def test_a_wide_turns_line_reads_a_bounded_number_of_calls(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    """A turn of 3,000 calls: the line reads the records of the first LOOKED_AT still out
    and counts the others, so that each refresh costs a bounded read."""
    wide = [f"c{i}" for i in range(3 * LOOKED_AT)]
    progress = LiveProgress(io.StringIO(), fake_redis, KEYS, S, quiet_s=0)
    progress.follow(dispatched(*wide))
    await started(fake_redis, "c0", "w1@h", 11)
    asked: list[int] = []
    hmget = fake_redis.hmget

    async def counted(key: str, fields: list[str]) -> list[object]:
        asked.append(len(fields))
        return list(await hmget(key, fields))

    fake_redis.hmget = counted  # type: ignore[method-assign,assignment]
    line = await progress.line()

    assert asked == [LOOKED_AT]
    assert line is not None and line.startswith(f"  … 0/{3 * LOOKED_AT} calls done, ")
    assert "running: call_api on w1@h pid 11" in line
    assert f"; {LOOKED_AT - 1} waiting for a worker; {2 * LOOKED_AT} more not looked at" in line
