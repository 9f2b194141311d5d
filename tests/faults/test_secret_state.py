"""Secret-named state written by a real worker's tool: sealed in Redis (results streams,
the results feed, the state hashes), masked in stored events and every output (HTTP, SSE,
timeline, metrics, logs, spans), and read back with its real values by a tool of a later
invocation, whose task message carries it sealed."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis

from tests.faults import input_tools
from tests.faults.test_security import _all_values
from tests.integration.http_support import TOKEN, bearer, sse
from tests.support import in_memory_spans, span_text
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.redaction import MASK, SEALED

WAIT_S = 30.0
SEED = uuid.uuid4().hex[:10]
CANARIES = input_tools.state_canaries(SEED)
APP = "state_agent"


def state_agent() -> Agent:
    model = ScriptedModel(
        by_message={
            "remember": [call(Call("remember_secret_state", {"seed": SEED})), say("stored")],
            "recall": [call(Call("recall_secret_state", {})), say("recalled")],
        }
    )
    tools = [input_tools.remember_secret_state, input_tools.recall_secret_state]
    return Agent(name=APP, tools=tools, model=model)


@pytest.fixture
def worker(workers: WorkerGroup) -> WorkerProcess:
    return workers.start(["default"], concurrency=1, name="state")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The `call` of every task message the orchestrator publishes, as the worker gets it."""
    calls: list[dict[str, Any]] = []
    encode = CeleryPublisher.encode

    def recording(self: CeleryPublisher, dispatch: Dispatch) -> str:
        message = encode(self, dispatch)
        _, kwargs, _ = json.loads(base64.b64decode(json.loads(message)["body"]))
        calls.append(json.loads(kwargs["call"]))  # the envelope, sent as JSON text
        return message

    monkeypatch.setattr(CeleryPublisher, "encode", recording)
    return calls


@pytest.fixture
async def served(settings: Settings, worker: WorkerProcess) -> AsyncIterator[RunningHttp]:
    http = HttpSettings(token=TOKEN, max_body_bytes=64 * 1024)
    async with serve_http([state_agent()], settings, http, "127.0.0.1", 0) as running:
        yield running


async def turn(http: httpx.AsyncClient, base: str, text: str) -> list[tuple[str, Any]]:
    """One invocation over SSE: every (event name, data) until the stream ends."""
    async with (
        asyncio.timeout(WAIT_S),
        http.stream("POST", f"{base}/messages/stream", json={"text": text}) as stream,
    ):
        assert stream.status_code == 200
        return [item async for item in sse(stream)]


def result_of(seen: list[tuple[str, Any]], tool: str) -> dict[str, Any]:
    (found,) = [data for name, data in seen if name == "result" and data["tool"] == tool]
    return found


async def test_secret_state_is_sealed_in_redis_masked_everywhere_and_read_back_real(
    served: RunningHttp,
    worker: WorkerProcess,
    sent: list[dict[str, Any]],
    client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as http:
        with in_memory_spans() as spans:
            created = await http.post(f"/apps/{APP}/users/u1/sessions", json={})
            assert created.status_code == 201, created.text
            base = f"/apps/{APP}/users/u1/sessions/{created.json()['id']}"
            stored = await turn(http, base, "remember")
            recalled = await turn(http, base, "recall")
        session = await http.get(base)
        timeline = (await http.get(f"{base}/timeline")).text
        tickets = (await http.get("/tickets")).text
        metrics = (await http.get("/metrics")).text

    written = result_of(stored, "remember_secret_state")
    assert written["status"] == "success", written
    # A later invocation's tool read the real values (their digest), and temp: was gone.
    read = result_of(recalled, "recall_secret_state")
    c = CANARIES
    expected = input_tools.state_digest([c["password"], c["token"], c["api_key"], c["user"], "eu"])
    assert read["response"] == {"digest": expected, "temp_left": False}, read
    # It got them sealed in its task message: the worker opened them.
    snapshot = sent[-1]["state"]
    assert sent[-1]["tool"] == "recall_secret_state"
    for value in (
        snapshot["password"],
        snapshot["user:secret"],
        snapshot["cfg"]["nested"]["token"],
        snapshot["cfg"]["keys"][0]["api_key"],
    ):
        assert set(value) == {SEALED}, snapshot
    # Shown: masked, whatever else of the state stays readable.
    assert session.status_code == 200
    state = session.json()["state"]
    assert state["password"] == state["user:secret"] == MASK
    assert state["cfg"] == {"nested": {"token": MASK}, "keys": [{"api_key": MASK}], "region": "eu"}

    places = {
        "redis": b"\n".join(value for _, value in _all_values(client)).decode(errors="replace"),
        "task messages": json.dumps(sent),
        "GET session": session.text,
        "timeline": timeline,
        "GET /tickets": tickets,
        "metrics": metrics,
        "SSE": json.dumps(stored + recalled),
        "orchestrator log": caplog.text,
        "worker log": worker.log(),
        "spans": span_text(spans),
    }
    found = {place: [v for v in CANARIES.values() if v in text] for place, text in places.items()}
    assert found == {place: [] for place in places}
