"""A worker whose Redis went away for a while takes calls again soon after it is back.

Celery's consumer tries the broker again on kombu's schedule unless told otherwise: 2 s
after the loss, then 6, 12, 20, 30, 42 s. A worker whose Redis came back (a restart, a
Sentinel promotion) in between sat idle until its next try: here, 12 s after the loss.
toolfleet's consumer waits RECONNECT_MAX_S at the most between two tries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis

from tests.faults.fault_tools import step
from tests.faults.servers import RedisServer
from tests.support import until
from toolfleet import CallStatus
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.shared.celery_wire.consumer import RECONNECT_MAX_S
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

# The outage: past kombu's own second try (6 s after the loss), well short of its third.
DOWN_S = 6.5
# Beyond the consumer's next try: the heartbeat's and the orchestrator's own retries, the
# turn itself, a loaded machine.
SLACK_S = 1.5

one_step = Agent(
    name="one_step",
    instruction="Run the step.",
    tools=[step],
    offline_script=[call(Call("step", {"n": 1, "seconds": 0.05})), say("done")],
)


async def test_a_worker_takes_calls_again_soon_after_redis_is_back(
    settings: Settings,
    workers: WorkerGroup,
    redis_server: RedisServer,
    report_figure: Callable[[str, object], None],
) -> None:
    """Given a prefork worker whose Redis was killed and stays down for DOWN_S, when it
    is back, a new turn's call is answered within RECONNECT_MAX_S (and some slack): the
    worker's consumer has tried again by then and taken the call."""
    worker = workers.start(["default"], concurrency=1)
    redis_server.kill()
    await asyncio.sleep(DOWN_S)  # ok: the outage lasts this long
    redis_server.start()
    back_at = time.monotonic()
    # Its heartbeat (a client of its own) beats again first: the orchestrator counts it live.
    client = redis.Redis.from_url(settings.require_redis_url())
    live_until = Keys(settings.key_prefix).workers()

    def beats_again() -> bool:
        return (client.zscore(live_until, worker.hostname) or 0) > time.time()

    await until(beats_again, "the worker to beat again", 10)
    client.close()
    async with Runner(one_step, settings) as runner:
        updates = runner.run(user_id="u", session_id="after", message="go")
        (result,) = [u.result async for u in updates if isinstance(u, CallFinished)]
    answered_s = time.monotonic() - back_at

    assert (result.status, result.response) == (CallStatus.SUCCESS, {"step": 1, "done": True})
    assert worker.alive()
    assert answered_s < RECONNECT_MAX_S + SLACK_S, worker.log()[-3000:]
    report_figure(
        f"Redis back after {DOWN_S:.1f} s down -> a new call answered", f"{answered_s:.2f} s"
    )
