"""Prometheus metrics after real turns: `/metrics` of `serve --http` (the orchestrator's
view and the fleet's state) and of a prefork worker (its processes added up)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.integration import metered_tools
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import free_port
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "scales_agent"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def metered(settings: Settings) -> Iterator[Settings]:
    """The tests' settings under a key prefix of this module's own: the fleet gauges read
    the whole prefix, and other tests' tickets that resolve meanwhile must not move them."""
    prefix = f"{settings.key_prefix}-metrics"
    yield settings.model_copy(
        update={
            "key_prefix": prefix,
            "tool_modules": [*settings.tool_modules, "tests.integration.metered_tools"],
        }
    )
    client = redis.Redis.from_url(settings.require_redis_url())
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    client.close()


@pytest.fixture(scope="module")
def worker_metrics_url(metered: Settings) -> Iterator[str]:
    """One prefork worker (2 processes) on the `metered` pool, serving its metrics."""
    port = free_port()
    env = {"TOOLFLEET_WORKER_METRICS_BIND": f"127.0.0.1:{port}"}
    with WorkerGroup(metered, extra_env=env) as group:
        group.start_all([WorkerSpec(["metered"], 2, "scale1")])
        yield f"http://127.0.0.1:{port}/metrics"


def agent() -> Agent:
    model = ScriptedModel(
        [
            call(
                Call("weigh", {"item": "apple"}),
                Call("weigh", {"item": "melon"}),
                Call("weigh", {"item": "anvil", "broken": True}),
            ),
            call(Call("order_scale", {"model": "S-1"})),
            say("two weighed, one failed, a scale is on order"),
            say("the scale arrived"),
        ]
    )
    return Agent(name=APP, tools=[metered_tools.weigh, metered_tools.order_scale], model=model)


@pytest.fixture
async def served(
    metered: Settings, worker_metrics_url: str, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    async with serve_http([agent()], metered, HttpSettings(token=TOKEN), "127.0.0.1", 0) as running:
        yield running


async def scrape(client: httpx.AsyncClient, url: str) -> Samples:
    response = await client.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_after_a_real_turn_count_calls_tickets_and_the_fleet(
    metered: Settings, served: RunningHttp, worker_metrics_url: str
) -> None:
    async with httpx.AsyncClient(headers=bearer(), timeout=WAIT_S) as client:
        before = await scrape(client, f"{served.url}/metrics")
        session_id = (await client.post(f"{served.url}/apps/{APP}/users/u1/sessions")).json()["id"]
        answered = await client.post(
            f"{served.url}/apps/{APP}/users/u1/sessions/{session_id}/messages",
            json={"text": "weigh these"},
        )
        assert answered.status_code == 200, answered.text
        (ticket,) = answered.json()["pending"]
        during = await scrape(client, f"{served.url}/metrics")

        sync = redis.Redis.from_url(metered.require_redis_url())
        completions = Completions(sync, Keys(metered.key_prefix))
        completions.post_result(ticket["call_id"], {"status": "delivered"})
        with pytest.raises(CompletionError):  # not pending: refused, kept as a dead letter
            completions.post_result(f"no-such-call-{uuid.uuid4().hex}", {"status": "x"})
        sync.close()
        assert await served.orch.wait_until_settled(session_key(APP, "u1", session_id), WAIT_S)
        after = await scrape(client, f"{served.url}/metrics")
        on_worker = await scrape(client, worker_metrics_url)

    def grew(name: str, then: Samples = before, now: Samples = after, **labels: str) -> float:
        return value(now, name, **labels) - value(then, name, **labels)

    calls = "toolfleet_tool_call_seconds_count"
    assert grew(calls, tool="weigh", pool="metered", status="success") == 2
    assert grew(calls, tool="weigh", pool="metered", status="error") == 1
    assert grew(calls, tool="order_scale", pool="metered", status="pending") == 1
    assert value(after, "toolfleet_tool_calls_in_flight", pool="metered") == 0
    model = "offline scripted model"
    assert grew("toolfleet_model_call_seconds_count", model=model, status="success") == 4
    assert value(after, "toolfleet_live_workers", pool="metered") == 1
    assert value(after, "toolfleet_queue_depth", pool="metered") == 0
    # The ticket was pending (under a minute old) between the turn and its completion.
    assert value(before, "toolfleet_pending_tickets", age="<1m") == 0
    assert value(during, "toolfleet_pending_tickets", age="<1m") == 1
    assert value(after, "toolfleet_pending_tickets", age="<1m") == 0
    assert grew("toolfleet_completions_total", outcome="applied") == 1
    assert grew("toolfleet_dead_letters") == 1

    # The worker's two processes, added up: every run counted once, with its outcome.
    runs = "toolfleet_tool_run_seconds_count"
    assert value(on_worker, runs, tool="weigh", pool="metered", status="success") == 2
    assert value(on_worker, runs, tool="weigh", pool="metered", status="error") == 1
    assert value(on_worker, runs, tool="order_scale", pool="metered", status="pending") == 1
    # No label holds a session, call or user id.
    labels = {v for samples in (after, on_worker) for _, ls in samples for _, v in ls}
    assert session_id not in labels and ticket["call_id"] not in labels and "u1" not in labels
