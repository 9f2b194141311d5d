"""Requests no client of the API sends, answered as errors that say what is wrong (never
500): odd numbers in queries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import redis
from google.genai import types

from examples import reimbursement
from tests.integration.http_support import bearer
from toolfleet.orchestrator.httpapi import HttpSettings, serve_http
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

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
