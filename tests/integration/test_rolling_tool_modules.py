"""A rolling restart that adds a tool module to a pool: while the pool's old workers
(without the tool) still take messages from its queue beside a new worker that has it,
every call of the new tool runs, none is answered ToolNotRegisteredError - with the tool
queues on Redis, and on RabbitMQ (a vhost of the module's own; skipped, with the reason,
where RabbitMQ is not there, except under CI=true)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.rabbit import rabbit_vhost
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess, WorkerSpec
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult

pytestmark = pytest.mark.integration

OLD_MODULES = ["tests.integration.rolling_tools"]
NEW_MODULES = [*OLD_MODULES, "tests.integration.rolling_added_tools"]
# Calls sent at once: the old worker takes some of them, whichever worker is faster.
CALLS = 20
WAIT_S = 30.0


@pytest.fixture(scope="module", params=["redis", "amqp"])
def rolling(
    request: pytest.FixtureRequest, settings: Settings
) -> Iterator[tuple[Settings, WorkerProcess, WorkerProcess]]:
    """Pools `rolling` (prefork) and `rolling_io` (io intake), each with an old worker
    loading rolling_tools only, and a new one loading rolling_added_tools too, under a
    key prefix of their own, on the broker of the parameter. Yields the settings and the
    two old workers."""
    with ExitStack() as stack:
        broker = stack.enter_context(rabbit_vhost()) if request.param == "amqp" else None
        common = settings.model_copy(
            update={
                "key_prefix": f"{settings.key_prefix}-rolling-{request.param}",
                "io_pools": ["rolling_io"],
                "broker_url": broker,
            }
        )
        olds = stack.enter_context(
            WorkerGroup(common.model_copy(update={"tool_modules": OLD_MODULES}))
        )
        news = stack.enter_context(
            WorkerGroup(common.model_copy(update={"tool_modules": NEW_MODULES}))
        )
        old_cpu, old_io = olds.start_all(
            [WorkerSpec(["rolling"], 1, "old-rolling"), WorkerSpec(["rolling_io"], 4, "old-rio")]
        )
        news.start_all(
            [WorkerSpec(["rolling"], 1, "new-rolling"), WorkerSpec(["rolling_io"], 4, "new-rio")]
        )
        yield common, old_cpu, old_io


async def send(settings: Settings, calls: list[ToolCall], pool: str, stream: str) -> None:
    """Publish `calls` on `pool`'s queue at once, as the orchestrator (on RabbitMQ, its
    outbox relay) does."""
    client = aioredis.Redis.from_url(settings.require_redis_url())
    publisher = CeleryPublisher(client, signer=CallSigner.of(settings.fleet_key))
    dispatches = [publisher.dispatch(c, queue_name(pool)) for c in calls]
    if settings.broker_is_amqp:
        relay = AmqpPublisher(settings.require_broker_url())
        relay.publish([publisher.encode(d) for d in dispatches])
        relay.close()
    else:
        await publisher.publish(dispatches, record_in=f"{stream}:sent")
    await client.aclose()


def envelope(tool: str, stream: str, word: str) -> ToolCall:
    return ToolCall(
        call_id=uuid.uuid4().hex, tool=tool, args={"word": word}, session_id="s-rolling",
        app_name="rolling_agent", user_id="u1", invocation_id="i", agent="rolling_agent",
        state={}, reply_to=stream, dispatched_at=time.time(),
    )  # fmt: skip


def results(settings: Settings, stream: str, count: int) -> list[ToolResult]:
    """The first `count` results posted on `stream`, waiting up to WAIT_S for them."""
    found: list[ToolResult] = []
    last, deadline = "0", time.monotonic() + WAIT_S
    with redis.Redis.from_url(settings.require_redis_url()) as client:
        while len(found) < count and time.monotonic() < deadline:
            block_ms = max(1, int((deadline - time.monotonic()) * 1000))
            for _, entries in client.xread({stream: last}, block=block_ms) or ():
                for entry_id, fields in entries:
                    last = entry_id
                    found.append(
                        ToolResult.model_validate(json.loads(fields[RESULT_FIELD.encode()]))
                    )
    return found


@pytest.mark.parametrize(
    ("tool", "pool", "which"), [("added", "rolling", 1), ("added_io", "rolling_io", 2)]
)
async def test_calls_of_an_added_tool_all_run_while_an_old_worker_takes_some(
    rolling: tuple[Settings, WorkerProcess, WorkerProcess], tool: str, pool: str, which: int
) -> None:
    settings, old = rolling[0], rolling[which]
    assert isinstance(old, WorkerProcess)
    stream = f"{settings.key_prefix}:results:rolling-{uuid.uuid4().hex[:6]}"
    calls = [envelope(tool, stream, f"w{n}") for n in range(CALLS)]
    await send(settings, calls, pool, stream)

    found = results(settings, stream, CALLS)

    errors = [r.response for r in found if r.status is not CallStatus.SUCCESS]
    assert errors == []  # none told the model the tool does not exist
    assert sorted(r.call_id for r in found) == sorted(c.call_id for c in calls)
    assert {r.call_id: r.response for r in found} == {c.call_id: c.args for c in calls}
    # The old worker took some, and handed them on to the new one.
    assert f"has no tool {tool!r}: call " in old.log()
    assert f"handed on to pool {pool}, where new-" in old.log()
    keys = Keys(settings.key_prefix)
    with redis.Redis.from_url(settings.require_redis_url()) as sync:
        closed = [sync.exists(keys.closed(c.session_key, c.call_id)) for c in calls]
    assert closed == [1] * CALLS
