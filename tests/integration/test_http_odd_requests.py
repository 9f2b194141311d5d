"""Requests few clients send, answered promptly, and as errors that say what is wrong
(never 500): odd numbers in queries, text UTF-8 cannot carry, an intermediate result over
ADK's `/run`, ADK's event stream past the caller's cap."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import redis
from google.genai import types

from examples import reimbursement
from tests.integration.http_support import bearer
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import PendingCall

pytestmark = pytest.mark.integration

APP = "reimbursement_agent"
TOKEN = "odd-requests-" + uuid.uuid4().hex


@pytest.fixture
async def client(
    settings: Settings, orchestrator_env: dict[str, str]
) -> AsyncIterator[httpx.AsyncClient]:
    http = HttpSettings(token=TOKEN)
    async with (
        serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running,
        httpx.AsyncClient(base_url=running.url, headers=bearer(TOKEN), timeout=30) as opened,
    ):
        yield opened


async def test_an_artifact_version_past_any_list_is_not_found(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    created = await client.post(f"/adk/apps/{APP}/users/u1/sessions", json={})
    session_id = created.json()["id"]
    client_redis = redis.Redis.from_url(settings.require_redis_url())
    store = ArtifactStore(client_redis, Keys(settings.key_prefix))
    store.save(APP, "u1", session_id, "note.txt", types.Part(text="v0"))
    url = f"/adk/apps/{APP}/users/u1/sessions/{session_id}/artifacts/note.txt"
    assert (await client.get(url, params={"version": 0})).json() == {"text": "v0"}
    for version in (-1, 1, 2**63, 10**30, -(10**30)):
        answer = await client.get(url, params={"version": version})
        assert answer.status_code == 404, (version, answer.text)


async def test_an_intermediate_result_over_adks_run_answers_once_it_is_applied(
    settings: Settings, orchestrator_env: dict[str, str]
) -> None:
    # Far longer than the answer may take: a message waiting for the call's final result
    # would wait this long.
    http = HttpSettings(token=TOKEN, max_wait_s=120)
    async with (
        serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running,
        httpx.AsyncClient(base_url=running.url, headers=bearer(TOKEN), timeout=20) as client,
    ):
        call = await long_running_call(running, "u1")
        progress = {
            "id": call.call_id,
            "name": call.tool,
            "response": {"status": "reviewing"},
            "willContinue": True,
        }
        body = {
            "appName": APP,
            "userId": "u1",
            "sessionId": call.session_id,
            "newMessage": {"role": "user", "parts": [{"functionResponse": progress}]},
        }
        answered = await client.post("/adk/run", json=body)
        assert answered.status_code == 200, answered.text
        store = running.orch.replica.store
        stored = await store.get(call.session_key)
        assert [e.progress for e in stored.events if e.author == "completion"] == [
            {"status": "reviewing"}
        ]
        assert [c.call_id for c in await store.pending_calls(call.session_key)] == [call.call_id]


async def long_running_call(served: RunningHttp, user: str) -> PendingCall:
    """A new session of `user` whose agent's long-running call waits for its result."""
    store = served.orch.replica.store
    session = await store.create(APP, user)
    args = {"purpose": "team meal", "amount": 250}
    call = types.FunctionCall(id="c-" + uuid.uuid4().hex, name="ask_for_approval", args=args)
    asked = Event(
        invocation_id="inv-1",
        author=APP,
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )
    await store.append(session, asked)
    pending = PendingCall(
        call_id=call.id or "",
        tool="ask_for_approval",
        session_id=session.id,
        app_name=APP,
        user_id=user,
        agent=APP,
        invocation_id="inv-1",
        args=args,
        ticket={"status": "pending"},
        created_at=time.time(),
    )
    answer = types.FunctionResponse(id=call.id, name=call.name, response=pending.ticket)
    responses = Event(
        invocation_id="inv-1",
        author=APP,
        content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
    )
    await store.append(session, responses, pending=[pending])
    return pending


async def test_adks_run_sse_is_an_event_stream_within_the_callers_cap(
    settings: Settings, orchestrator_env: dict[str, str]
) -> None:
    key = "u1-key-" + uuid.uuid4().hex
    http = HttpSettings(api_keys=[ApiKey(subject="u1", key=key)], max_streams_per_caller=1)
    headers = bearer(key)
    async with (
        serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running,
        httpx.AsyncClient(base_url=running.url, headers=headers, timeout=30) as client,
    ):
        session = await running.orch.replica.store.create(APP, "u1")
        body = {
            "appName": APP,
            "userId": "u1",
            "sessionId": session.id,
            "newMessage": {"role": "user", "parts": [{"text": "Reimburse $20 for a taxi."}]},
        }
        watch = f"/apps/{APP}/users/u1/sessions/{session.id}/stream"
        async with client.stream("GET", watch) as watching:
            assert watching.status_code == 200
            refused = await client.post("/adk/run_sse", json=body)
            assert refused.status_code == 429, refused.text
            assert running.api.streams.open() == 1
        stored = await running.orch.replica.store.get(session.key)
        assert stored.events == []  # nothing ran


async def test_text_utf8_cannot_carry_in_state_and_results_is_stored_replaced(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    """A lone surrogate escape ("\\ud800") in posted state or results becomes U+FFFD, as
    in a message: the state is stored, the refused result kept."""
    lone = '"\\ud800"'
    json_body = {"Content-Type": "application/json"}
    base = f"/adk/apps/{APP}/users/operator/sessions"
    created = await client.post(base, content=f'{{"state": {{"k": {lone}}}}}', headers=json_body)
    assert created.status_code == 200, created.text
    # Its own keys: app-wide state other tests of this app wrote is merged in too.
    assert created.json()["state"]["k"] == "\ufffd"
    session_id = created.json()["id"]
    patched = await client.patch(
        f"{base}/{session_id}", content=f'{{"stateDelta": {{"p": {lone}}}}}', headers=json_body
    )
    assert patched.status_code == 200, patched.text
    assert {k: patched.json()["state"][k] for k in ("k", "p")} == {"k": "\ufffd", "p": "\ufffd"}
    # A result posted for a call that is not pending is refused and kept as a dead letter.
    refused = await client.post(
        "/tickets/no-such-call/result",
        content=f'{{"response": {{"r": {lone}}}}}',
        headers=json_body,
    )
    assert refused.status_code == 404, refused.text
