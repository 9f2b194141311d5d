"""Redis restarted mid-run (append-only on): workers and orchestrator ride it out.

The restart mid-turn runs with the tool queues on Redis and on RabbitMQ
(tests.faults.brokers). On Redis the queues go down and come back with it; on RabbitMQ
they stay up, and what goes down is the outbox a turn's calls are written to and the
relay's lease: the relay must take up the outbox again once Redis is back, as the turn
begun just after the restart shows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis

from tests.faults import probe
from tests.faults.brokers import ON_EACH_BROKER, Broker
from tests.faults.fault_tools import three_steps
from tests.faults.servers import RedisServer
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = ON_EACH_BROKER

SESSIONS = 4  # x 3 calls; 6 worker slots run every slow call at once, and one more turn's
# The result grace of every turn: a call waits out the restart and the broker's recovery
# (on Redis, the worker's consumer tries its lost connection again within 2 s:
# shared.celery_wire.consumer.RECONNECT_MAX_S), which on a loaded machine outlast the
# fault tests' default grace; a lost call is still answered, with an error, long before
# the test stops waiting.
RESTART_GRACE_S = 10.0


async def test_a_redis_restart_mid_turn_loses_no_call(
    settings: Settings,
    workers: WorkerGroup,
    redis_server: RedisServer,
    report_figure: Callable[[str, object], None],
) -> None:
    workers.start(["default"], concurrency=3)
    workers.start(["default"], concurrency=3)
    client = redis.Redis.from_url(settings.require_redis_url())
    broker = Broker(settings, client)
    keys = Keys(settings.key_prefix)

    def all_calls_running() -> bool:
        started = 0
        for i in range(SESSIONS):
            for raw in client.lrange(
                keys.events(session_key(three_steps.name, "u", f"s{i}")), 0, -1
            ):
                started += raw.count(b'"function_call"')
        return started == 3 * SESSIONS and broker.waiting() == 0

    patient = settings.model_copy(update={"result_grace_s": RESTART_GRACE_S})
    next_turn_s: list[float] = []
    async with Runner(three_steps, patient) as runner, Runner(three_steps, patient) as following:

        async def next_turn() -> str:
            answer = await following.ask(user_id="u", session_id="after", message="go")
            next_turn_s.append(time.monotonic() - restarted_at)
            return answer

        asks = [
            asyncio.create_task(runner.ask(user_id="u", session_id=f"s{i}", message="go"))
            for i in range(SESSIONS)
        ]
        # Restart while the slow calls (2 s) run.
        await asyncio.to_thread(wait_for, all_calls_running, 20, "every call to be taken")
        restarted_at = time.monotonic()
        await asyncio.to_thread(redis_server.restart)
        down_s = time.monotonic() - restarted_at
        # A turn begun once Redis is back, by another replica: its calls are sent and run
        # (on Redis once the workers reconnected; on RabbitMQ once a relay took up the outbox).
        following_turn = asyncio.create_task(next_turn())
        answers = await asyncio.wait_for(asyncio.gather(*asks), 60)
        after_restart_s = time.monotonic() - restarted_at
        answers.append(await asyncio.wait_for(following_turn, 60))
        sessions = [
            await runner.store.get(session_key(runner.app_name, "u", session_id))
            for session_id in [*(f"s{i}" for i in range(SESSIONS)), "after"]
        ]

    assert answers == ["finished steps [1, 2, 3]"] * (SESSIONS + 1)
    lost = 0
    for session in sessions:
        responses = [
            p.function_response
            for e in session.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_response
        ]
        calls = [
            p.function_call.id
            for e in session.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_call
        ]
        assert sorted(r.id or "" for r in responses) == sorted(c or "" for c in calls)
        lost += sum(1 for r in responses if "error" in (r.response or {}))
    executions = [
        probe.executions(client, settings.key_prefix, c)
        for s in sessions
        for c in (
            p.function_call.id or ""
            for e in s.events
            for p in (e.content.parts or () if e.content else ())
            if p.function_call
        )
    ]
    client.close()
    assert lost == 0
    report_figure(f"Redis down (SIGTERM -> answering again, {broker.name})", f"{down_s:.2f} s")
    report_figure(
        f"restart -> the turns under way answered ({broker.name})", f"{after_restart_s:.2f} s"
    )
    report_figure(f"restart -> the next turn answered ({broker.name})", f"{next_turn_s[0]:.2f} s")
    report_figure("lost calls", f"{lost} of {3 * (SESSIONS + 1)}")
    report_figure("executions per call (max; >1 = redelivered)", max(executions))
