"""Secrets at any depth, in arguments and results, through real workers: the tool gets
the real values, and the canaries are in none of Redis, the task messages (Flower's
argsrepr included), the HTTP API, the SSE stream, the logs, the spans or Celery's log of
a message for an unregistered task.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import redis

from tests.faults import input_tools
from tests.faults.test_security import _all_values
from tests.integration.http_support import TOKEN, bearer, sse
from tests.support import in_memory_spans, span_text, until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher, Dispatch
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name, session_key
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.sealing import Sealer

WAIT_S = 30.0
RUN = uuid.uuid4().hex[:10]
NESTED = f"CANARY-NESTED-{RUN}"  # {'auth': {'api_key': ...}}
PASSWORD = f"CANARY-PASSWORD-{RUN}"  # top-level `password`
RESULT = NESTED.replace("NESTED", "RESULT")  # what the tool returns as `token`
CANARIES = (NESTED, PASSWORD, RESULT)
QUEUE = queue_name("default")


def canary_agent() -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(
        [
            call(
                Call(
                    "use_nested_secret",
                    {"auth": {"api_key": NESTED}, "password": PASSWORD, "note": "n1"},
                ),
                Call("open_secret_ticket", {"auth": {"api_key": NESTED}, "subject": "s1"}),
            ),
            say("done"),
        ]
    )
    tools = [input_tools.use_nested_secret, input_tools.secret_ticket_tool]
    return Agent(name="canary_agent", tools=tools, model=model), model


@pytest.fixture
def worker(workers: WorkerGroup) -> WorkerProcess:
    return workers.start(["default"], concurrency=1, name="canary")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every task message the orchestrator publishes, as pushed onto the queue."""
    messages: list[str] = []
    encode = CeleryPublisher.encode

    def recording(self: CeleryPublisher, dispatch: Dispatch) -> str:
        message = encode(self, dispatch)
        messages.append(message)
        return message

    monkeypatch.setattr(CeleryPublisher, "encode", recording)
    return messages


@pytest.fixture
async def served(settings: Settings, worker: WorkerProcess) -> AsyncIterator[RunningHttp]:
    agent, _ = canary_agent()
    http = HttpSettings(token=TOKEN, max_body_bytes=64 * 1024)
    async with serve_http([agent], settings, http, "127.0.0.1", 0) as running:
        yield running


def readable(message: str) -> str:
    """A queued message with its base64 body decoded: everything a broker client sees."""
    body = base64.b64decode(json.loads(message)["body"]).decode()
    return message + body


def message_for_unknown_task(settings: Settings) -> str:
    """A message like the orchestrator's, secrets and all, for a task no worker knows."""
    session = uuid.uuid4().hex
    envelope = ToolCall(
        call_id=f"unknown-{uuid.uuid4().hex[:8]}", tool=f"no_such_tool_{RUN}",
        args={"auth": {"api_key": NESTED}, "password": PASSWORD}, session_id=session,
        app_name="canary_agent", user_id="u1", invocation_id="inv-unknown",
        agent="canary_agent",
        reply_to=Keys(settings.key_prefix).results(session_key("canary_agent", "u1", session)),
        dispatched_at=time.time(),
    )  # fmt: skip
    signer = CallSigner.of(settings.fleet_key)
    publisher = CeleryPublisher(None, settings.secret_arg_names, Sealer.of(settings), signer=signer)  # type: ignore[arg-type]
    return publisher.encode(publisher.dispatch(envelope, QUEUE))


async def test_nested_secrets_reach_the_tool_and_nothing_else(
    settings: Settings,
    served: RunningHttp,
    worker: WorkerProcess,
    sent: list[str],
    client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as http,
    ):
        with in_memory_spans() as spans:  # the orchestrator's; the workers' in test_tracing
            created = await http.post("/apps/canary_agent/users/u1/sessions", json={})
            assert created.status_code == 201, created.text
            base = f"/apps/canary_agent/users/u1/sessions/{created.json()['id']}"
            async with (
                asyncio.timeout(WAIT_S),
                http.stream("POST", f"{base}/messages/stream", json={"text": "go"}) as stream,
            ):
                assert stream.status_code == 200
                seen = [item async for item in sse(stream)]
        tickets = (await http.get("/tickets")).text
        session = (await http.get(base)).text

    results = {data["tool"]: data for name, data in seen if name == "result"}
    used = results["use_nested_secret"]
    # The tool got the real values: it hashed them.
    expected = hashlib.sha256(f"{NESTED}|{PASSWORD}".encode()).hexdigest()
    assert used["status"] == "success" and used["response"]["digest"] == expected
    assert used["response"]["token"] == "***" and used["response"]["nested"] == {"secret": "***"}
    (calls,) = [data["calls"] for name, data in seen if name == "calls"]
    assert calls[0]["args"] == {"auth": {"api_key": "***"}, "password": "***", "note": "n1"}
    assert any(name == "pending" for name, _ in seen)  # the ticket is open
    assert "open_secret_ticket" in tickets and '"api_key":"***"' in tickets.replace(" ", "")
    assert '"digest"' in session  # the stored responses are there, masked
    assert '\\"api_key\\": \\"***\\"' in span_text(spans)  # the arguments, masked

    # Celery's log of an unregistered task shows the whole message body.
    client.lpush(QUEUE, message_for_unknown_task(settings))
    marker = f"Received unregistered task of type 'tool.no_such_tool_{RUN}'"
    await until(lambda: marker in worker.log(), "the worker to log the unregistered task", WAIT_S)

    assert len(sent) == 3  # the turn's two calls and the unknown task's
    argsreprs = [json.loads(m)["headers"]["argsrepr"] for m in sent]
    assert any("'auth': {'api_key': '***'}" in a for a in argsreprs), argsreprs
    places = {
        "redis": b"\n".join(value for _, value in _all_values(client)).decode(errors="replace"),
        "task messages": "\n".join(readable(m) for m in sent),
        "GET /tickets": tickets,
        "GET session": session,
        "SSE": json.dumps(seen),
        "orchestrator log": caplog.text,
        "worker log": worker.log(),
        "spans": span_text(spans),
    }
    found = {place: [c for c in CANARIES if c in text] for place, text in places.items()}
    assert found == {place: [] for place in places}
