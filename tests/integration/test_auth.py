"""Tool authentication: request_credential, supplying it, reuse per user, no leaks."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import redis

from examples import bank_account
from tests.integration.bank_api import BankApi
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, SessionKey, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30


@pytest.fixture
async def orchestrator(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[Orchestrator]:
    model = ScriptedModel(bank_account.agent.offline_script or [])
    async with Orchestrator([bank_account.agent], settings, models={"bank_agent": model}) as orch:
        yield orch


async def ask(orch: Orchestrator, user: str) -> tuple[SessionKey, SessionStore]:
    """Ask on a new session of `user`: its key, and the store holding it."""
    runner = orch.runner("bank_agent")
    session_id = uuid.uuid4().hex
    await runner.ask(user_id=user, session_id=session_id, message="Balance of ACC-7?")
    return session_key("bank_agent", user, session_id), runner.store


def every_value(client: redis.Redis) -> bytes:
    """All of Redis's data, as one blob to search for a canary."""
    blobs: list[bytes] = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        if kind == b"string":
            blobs.append(client.get(key) or b"")
        elif kind == b"list":
            blobs.extend(client.lrange(key, 0, -1))
        elif kind == b"hash":
            blobs.extend(client.hgetall(key).values())
        elif kind == b"set":
            blobs.extend(client.smembers(key))
        elif kind == b"stream":
            blobs.extend(v for _, fields in client.xrange(key) for v in fields.values())
    return b"\n".join(blobs)


async def test_credential_is_requested_supplied_reused_per_user_and_never_leaks(
    orchestrator: Orchestrator, settings: Settings, bank_api: BankApi, fleet: WorkerGroup
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    bank_api.valid_tokens.add(canary)
    user = f"ann-{uuid.uuid4().hex[:6]}"
    model = orchestrator.runner("bank_agent").model_for(bank_account.agent)

    # First call: the tool asks; the invocation pauses; the model has seen no response.
    session_a, store = await ask(orchestrator, user)
    (request,) = await store.pending_calls(session_a)
    assert request.kind == "credential" and request.tool == "get_account_balance"
    assert request.ticket["key"] == "bank_api" and request.ticket["scheme"] == "bearer"
    assert len(model.requests) == 1  # type: ignore[attr-defined]
    session = await store.get(session_a)
    assert [
        e.credential_requests[0]["call_id"] for e in session.events if e.credential_requests
    ] == [request.call_id]

    # It is listed with the tickets, and a plain result is refused for it.
    client = redis.Redis.from_url(settings.require_redis_url())
    completions = Completions(client, Keys(settings.key_prefix))
    assert request.call_id in [c.call_id for c in completions.pending()]
    with pytest.raises(CompletionError, match="waits for a credential"):
        completions.post_result(request.call_id, {"token": "x"})

    # The user supplies it: the call runs again with it and the model answers.
    store_sync = CredentialStore(client, Keys(settings.key_prefix), settings.credential_key)
    completions.supply_credential(request.call_id, canary, store_sync)
    assert await orchestrator.wait_until_settled(session_a, WAIT_S)
    session = await store.get(session_a)
    assert session.events[-1].content is not None
    assert "Account ACC-7 holds 1234.5 EUR." in json.dumps(
        session.events[-1].model_dump(mode="json")
    )
    assert bank_api.seen_tokens[-1] == canary

    # A later session of the same user is not asked again; another user is.
    session_b, _ = await ask(orchestrator, user)
    assert await store.pending_calls(session_b) == []
    later = await store.get(session_b)
    assert "Account ACC-7 holds 1234.5 EUR." in str(later.events[-1].content)
    session_c, _ = await ask(orchestrator, f"bob-{uuid.uuid4().hex[:6]}")
    (other,) = await store.pending_calls(session_c)
    assert other.kind == "credential"

    # The token is nowhere: not in Redis (sessions, streams, queues), worker logs, the model.
    assert canary.encode() not in every_value(client)
    for worker in fleet.workers:
        assert canary not in worker.log()
    seen_by_model = json.dumps([r.contents for r in model.requests], default=str)  # type: ignore[attr-defined]
    assert canary not in seen_by_model
    client.close()


async def test_a_rejected_credential_is_asked_for_again(
    orchestrator: Orchestrator, settings: Settings, bank_api: BankApi
) -> None:
    user = f"cy-{uuid.uuid4().hex[:6]}"
    session_id, store = await ask(orchestrator, user)
    (request,) = await store.pending_calls(session_id)
    client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    completions = Completions(client, keys)
    completions.supply_credential(
        request.call_id, "wrong-token", CredentialStore(client, keys, settings.credential_key)
    )
    runner = orchestrator.runner("bank_agent")

    async def asked_again() -> bool:
        pending = await store.pending_calls(session_id)
        session = await store.get(session_id)
        return bool(pending) and len([e for e in session.events if e.credential_requests]) == 2

    while not await asked_again():
        orchestrator.listener.handled.clear()
        await asyncio.wait_for(orchestrator.listener.handled.wait(), WAIT_S)
    assert "wrong-token" in bank_api.seen_tokens
    assert await runner.store.pending_calls(session_id)  # still waiting, nothing answered
    client.close()


async def test_credential_requests_are_listed_and_answered_over_http(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], bank_api: BankApi
) -> None:
    canary = f"canary-http-{uuid.uuid4().hex}"
    bank_api.valid_tokens.add(canary)
    user, user_key = f"dee-{uuid.uuid4().hex[:6]}", f"key-{uuid.uuid4().hex}"
    http = HttpSettings(token=TOKEN, api_keys=[ApiKey(subject=user, key=user_key)])
    async with (
        serve_http([bank_account.agent], settings, http, "127.0.0.1", 0) as served,
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client,
    ):
        created = await client.post(f"/apps/bank_agent/users/{user}/sessions", json={})
        session_id = created.json()["id"]
        url = f"/apps/bank_agent/users/{user}/sessions/{session_id}/messages"
        first = await client.post(url, json={"text": "Balance of ACC-9?"})
        assert first.status_code == 200, first.text
        tickets = (await client.get("/tickets", params={"session_id": session_id})).json()
        (ticket,) = tickets
        assert ticket["tool"] == "get_account_balance"
        wrong_kind = await client.post(
            f"/tickets/{ticket['call_id']}/result", json={"response": {}}
        )
        assert wrong_kind.status_code == 409

        # Only the ticket's own user, not even the operator: it is stored as theirs.
        url = f"/tickets/{ticket['call_id']}/credential"
        by_operator = await client.post(url, json={"credential": canary})
        assert by_operator.status_code == 403, by_operator.text
        supplied = await client.post(url, json={"credential": canary}, headers=bearer(user_key))
        assert supplied.status_code == 202, supplied.text
        runner = served.orch.runner("bank_agent")
        key = session_key("bank_agent", user, session_id)
        assert await served.orch.wait_until_settled(key, WAIT_S)
        session = await runner.store.get(key)
        assert "Account ACC-9 holds 1234.5 EUR." in str(session.events[-1].content)
        assert bank_api.seen_tokens[-1] == canary
