"""Several `toolfleet worker` processes on one host: each has a node name of its own, a
name a live worker holds is refused, and a dead worker's name is free again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from pydantic import SecretStr

from tests.flower import running_flower
from tests.integration import fleet_tools
from tests.integration.conftest import FLEET_KEY
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.httpapi import HttpSettings, serve_http
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.messages import CallStatus

pytestmark = pytest.mark.integration

START_S = 60  # a prefork worker's start on a loaded machine
NAPS = 4


@dataclass
class Started:
    """A `toolfleet worker` process, in its own process group, its output in `log_path`."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


StartWorker = Callable[..., Started]


@pytest.fixture
def own_settings(redis_url: str) -> Iterator[Settings]:
    """A prefix and a default pool of this test's own: the session fleet's workers neither
    count here nor take these calls (queues are not prefixed). Its keys go after it."""
    own = Settings(
        redis_url=redis_url,
        key_prefix=f"tfnames-{uuid.uuid4().hex[:8]}",
        default_pool=f"names{uuid.uuid4().hex[:6]}",
        tool_modules=["tests.integration.fleet_tools"],
        worker_heartbeat_s=0.5,
        default_timeout_s=20,
        fleet_key=FLEET_KEY,
    )
    yield own
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{own.key_prefix}:*"):
        client.delete(key)
    client.close()


@pytest.fixture
def start_worker(own_settings: Settings, tmp_path: Path) -> Iterator[StartWorker]:
    """Starts `toolfleet worker -c 1 [extra args]` (or `celery ... worker`) as an operator
    would; killed at the end."""
    started: list[Started] = []
    env = {
        **os.environ,
        "TOOLFLEET_REDIS_URL": own_settings.require_redis_url(),
        "TOOLFLEET_KEY_PREFIX": own_settings.key_prefix,
        "TOOLFLEET_TOOL_MODULES": ",".join(own_settings.tool_modules),
        "TOOLFLEET_DEFAULT_POOL": own_settings.default_pool,
        "TOOLFLEET_WORKER_HEARTBEAT_S": str(own_settings.worker_heartbeat_s),
        "TOOLFLEET_FLEET_KEY": FLEET_KEY,
    }

    def start(*args: str, celery: bool = False) -> Started:
        log_path = tmp_path / f"worker-{len(started)}.log"
        command = [sys.executable, "-m", "toolfleet", "worker", "-c", "1", *args]
        if celery:  # Celery's own command, as the README also shows it
            queue = queue_name(own_settings.default_pool)
            command = [sys.executable, "-m", "celery", "-A", "toolfleet.workers.app", "worker"]
            command += ["-Q", queue, "-c", "1", *args]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        started.append(Started(process, log_path))
        return started[-1]

    yield start
    for worker in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(10)


def records(settings: Settings) -> dict[int, str]:
    """pid -> node name of every heartbeat record under the settings' prefix."""
    keys = Keys(settings.key_prefix)
    with redis.Redis.from_url(settings.require_redis_url()) as client:
        values = [client.get(keys.worker(h.decode())) for h in client.zrange(keys.workers(), 0, -1)]
    found = (json.loads(v) for v in values if v is not None)
    return {w["pid"]: w["hostname"] for w in found}


def wait_live(settings: Settings, *workers: Started) -> dict[int, str]:
    """Wait until each worker's own heartbeat record is there; pid -> node name."""
    pids = {w.process.pid for w in workers}

    def ready() -> bool:
        for worker in workers:
            assert worker.process.poll() is None, worker.log()[-3000:]
        return pids <= records(settings).keys()

    wait_for(ready, START_S, f"workers {sorted(pids)} to beat")
    return records(settings)


async def test_two_workers_started_without_a_name_are_both_live_and_both_serve_calls(
    own_settings: Settings, start_worker: StartWorker, tmp_path: Path
) -> None:
    first, second = start_worker(), start_worker()

    names = wait_live(own_settings, first, second)

    pool = own_settings.default_pool
    assert names.keys() == {first.process.pid, second.process.pid}  # no record of another
    assert {n.partition("@")[0] for n in names.values()} == {
        f"{pool}.{first.process.pid}",
        f"{pool}.{second.process.pid}",
    }
    naps = [Call("nap", {"seconds": 0.5, "label": str(i)}) for i in range(NAPS)]
    model = ScriptedModel([call(*naps), say("rested")])
    agent = Agent(name="names_agent", tools=[fleet_tools.nap], model=model)
    http = HttpSettings(token=SecretStr("t"))
    served = serve_http([agent], own_settings, http, "127.0.0.1", 0)
    async with served as running, httpx.AsyncClient(base_url=running.url) as client:
        health = (await client.get("/health")).json()
    assert health["status"] == "ok"
    assert health["pools"][pool] == {"workers": 2, "needed": True}
    async with Runner(agent, own_settings) as runner:
        updates = [u async for u in runner.run(user_id="u1", session_id="s1", message="go")]

    results = [u.result for u in updates if isinstance(u, CallFinished)]
    assert [r.response for r in results if r.status is not CallStatus.SUCCESS] == []
    assert len(results) == NAPS
    # One call at a time per worker (-c 1): four half-second naps share both.
    assert {r.worker for r in results} == set(names.values())
    # Flower lists both (one name for two workers was one worker to it).
    login = ("admin", "names-pw")
    with running_flower(own_settings, names.values(), tmp_path, login, START_S) as flower:
        listed = flower.get("/api/workers?status=true").json()
    assert {n: listed[n] for n in names.values()} == dict.fromkeys(names.values(), True)


def test_a_name_a_live_worker_holds_is_refused_with_what_to_change(
    own_settings: Settings, start_worker: StartWorker
) -> None:
    holder = start_worker("--name", "twin@%h")
    (name,) = wait_live(own_settings, holder).values()

    refused = start_worker("--name", "twin@%h")

    assert refused.process.wait(START_S) == 2, refused.log()[-3000:]
    assert f"toolfleet: worker name {name} is held by a live worker " in refused.log()
    assert f"(pid {holder.process.pid} on " in refused.log()
    assert "start this one with another --name" in refused.log()
    assert holder.process.poll() is None
    assert records(own_settings) == {holder.process.pid: name}  # its record untouched


def test_the_name_of_a_worker_that_died_is_free_again(
    own_settings: Settings, start_worker: StartWorker
) -> None:
    dead = start_worker("--name", "phoenix@%h")
    (name,) = wait_live(own_settings, dead).values()
    os.killpg(dead.process.pid, signal.SIGKILL)  # no clean stop: its claim must expire
    dead.process.wait(10)
    claim = Keys(own_settings.key_prefix).worker_name(name)
    with redis.Redis.from_url(own_settings.require_redis_url()) as client:
        wait_for(lambda: not client.exists(claim), 10, "the dead worker's claim to expire")

    heir = start_worker("--name", "phoenix@%h")

    assert wait_live(own_settings, heir) == {heir.process.pid: name}
    third = start_worker("--name", "phoenix@%h")
    assert third.process.wait(START_S) == 2, third.log()[-3000:]
    assert f"(pid {heir.process.pid} on " in third.log()


def test_of_two_workers_started_at_once_with_one_name_one_gets_it(
    own_settings: Settings, start_worker: StartWorker
) -> None:
    racers = [start_worker("--name", "racer@%h") for _ in range(2)]

    wait_for(lambda: any(r.process.poll() is not None for r in racers), START_S, "a refusal")

    (loser,) = [r for r in racers if r.process.poll() is not None]
    (winner,) = [r for r in racers if r is not loser]
    assert loser.process.returncode == 2, loser.log()[-3000:]
    assert f"(pid {winner.process.pid} on " in loser.log()
    (name,) = wait_live(own_settings, winner).values()
    assert name.startswith("racer@")


def test_celerys_own_command_refuses_its_default_name_to_a_second_worker_plainly(
    own_settings: Settings, start_worker: StartWorker
) -> None:
    first = start_worker(celery=True)
    (name,) = wait_live(own_settings, first).values()
    assert name.startswith("celery@")  # Celery's default: one name per host

    second = start_worker(celery=True)

    assert second.process.wait(START_S) == 1, second.log()[-3000:]
    assert f"Error: worker name {name} is held by a live worker " in second.log()
    assert "-n for celery worker" in second.log() and "Traceback" not in second.log()
    third = start_worker("-n", "other@%h", celery=True)  # what the README says to do
    assert wait_live(own_settings, first, third).keys() == {first.process.pid, third.process.pid}
