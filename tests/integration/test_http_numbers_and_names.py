"""What a caller cannot put in the store through the HTTP API: numbers JSON has no
writing for (NaN, the infinities), and a session where `toolfleet mcp serve` keeps its
calls. Real Redis; the API in-process."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
import redis
from google.genai import types as genai_types

from toolfleet.orchestrator.adk.sessions import RedisSessionService
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.httpapi import HttpSettings
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.app import build_app
from toolfleet.orchestrator.httpapi.guards import NON_FINITE
from toolfleet.orchestrator.httpapi.hub import SessionHub
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.confirmation import SERVED_AGENT, SERVED_SESSION_PREFIX, SERVED_USER
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import PendingCall, ToolCall

pytestmark = pytest.mark.integration

APP = "echo_agent"
ALICE, MCP_NAMESAKE, ADMIN = (f"key-{n}-{uuid.uuid4().hex}" for n in ("alice", "mcp", "admin"))
ADK = f"/adk/apps/{APP}/users"


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API of an orchestrator serving APP, with a key for alice, one for a
    caller whose subject is `mcp` (the app `toolfleet mcp serve` runs its calls in by
    default, and the user it ran them as once), and an admin's."""
    agent = Agent(name=APP, tools=[], model=ScriptedModel([say("hi")] * 10))
    http = HttpSettings(
        api_keys=[
            ApiKey(subject="alice", key=ALICE),
            ApiKey(subject="mcp", key=MCP_NAMESAKE),  # the served calls' app's name
            ApiKey(subject="root", key=ADMIN, roles=("admin",)),
        ]
    )
    hub = SessionHub()
    async with (
        Orchestrator([agent], settings, on_update=hub.publish) as orch,
        HttpApi(orch, hub, http) as served,
    ):
        transport = httpx.ASGITransport(build_app(served), client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "content-type": "application/json"}


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        (f"{ADK}/alice/sessions", "POST", b'{"state": {"x": NaN}}'),
        (f"{ADK}/alice/sessions", "POST", b'{"state": {"user:x": Infinity}}'),
        (f"{ADK}/alice/sessions/{{id}}", "PATCH", b'{"stateDelta": {"x": [-Infinity]}}'),
        (f"/apps/{APP}/users/alice/sessions", "POST", b'{"x": NaN}'),
    ],
)
async def test_nan_and_the_infinities_are_refused_saying_so(
    api: httpx.AsyncClient, path: str, method: str, body: bytes
) -> None:
    """Python's JSON reader takes them; stored, no JSON reader (a browser's, ADK's dev UI)
    could read the state back. Refused before any route runs, with what to send instead;
    the words as text pass."""
    created = await api.post(f"{ADK}/alice/sessions", json={}, headers=bearer(ALICE))
    assert created.status_code == 200, created.text
    path = path.format(id=created.json()["id"])
    refused = await api.request(method, path, content=body, headers=bearer(ALICE))
    assert (refused.status_code, refused.json()["detail"]) == (422, NON_FINITE)
    as_text = b'{"state": {"x": "NaN", "y": "-Infinity"}}'
    taken = await api.post(f"{ADK}/alice/sessions", content=as_text, headers=bearer(ALICE))
    assert taken.json()["state"] == {"x": "NaN", "y": "-Infinity"}


async def test_a_non_finite_number_written_from_python_reads_back_as_null(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    """An ADK program's own session service (or a callback) writes float('inf') into a
    user's state: the state hash keeps null, as the event does, and every session of
    that user still reads back over ADK's routes."""
    user = f"py-{uuid.uuid4().hex[:8]}"
    service = RedisSessionService(settings)
    await service.create_session(
        app_name=APP, user_id=user, session_id="py", state={"user:x": float("inf")}
    )
    await service.create_session(app_name=APP, user_id=user, session_id="later")
    for path in (f"{ADK}/{user}/sessions/py", f"{ADK}/{user}/sessions/later"):
        read = await api.get(path, headers=bearer(ADMIN))
        assert (read.status_code, read.json()["state"]["user:x"]) == (200, None), read.text
    listed = await api.get(f"{ADK}/{user}/sessions", headers=bearer(ADMIN))
    assert listed.status_code == 200 and len(listed.json()) == 2


def served_call(settings: Settings, session_id: str) -> str:
    """A call `toolfleet mcp serve` keeps waiting for a confirmation in `session_id`."""
    call = ToolCall(
        call_id="tf-" + uuid.uuid4().hex, tool="t", args={"to": "x"}, session_id=session_id,
        app_name=APP, user_id=SERVED_USER, invocation_id="inv", agent=SERVED_AGENT,
        reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip
    record = PendingCall.starting(call).model_copy(update={"kind": "confirmation"})
    client = redis.Redis.from_url(settings.require_redis_url())
    assert Completions(client, Keys(settings.key_prefix)).register(record)
    return call.call_id


async def test_no_caller_reaches_the_user_mcp_serve_runs_its_calls_as(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    """`toolfleet mcp serve` runs its calls as a user no HTTP path can name and no caller
    can be (refused as a subject). A caller whose subject is `mcp` is a user of its own:
    neither it nor an admin makes, reads or drops the session those calls wait in, nor
    reaches the `user:` artifacts their tools saved; the calls stay, for their
    approvers."""
    session_id = f"{SERVED_SESSION_PREFIX}orch-0123456789ab"
    call_id = served_call(settings, session_id)
    client = redis.Redis.from_url(settings.require_redis_url())
    artifacts = ArtifactStore(client, Keys(settings.key_prefix))
    notes = genai_types.Part(text="kept by an MCP client's call")
    artifacts.save(APP, SERVED_USER, session_id, "user:notes.txt", notes)
    served = quote(SERVED_USER)
    for caller in (bearer(MCP_NAMESAKE), bearer(ADMIN)):
        for path, body in (
            (f"/apps/{APP}/users/{served}/sessions", {"session_id": session_id}),
            (f"{ADK}/{served}/sessions", {"sessionId": session_id}),
            (f"{ADK}/{served}/sessions/{session_id}", {}),
        ):
            made = await api.post(path, json=body, headers=caller)
            assert made.status_code == 422, (path, made.text)
        for path in (
            f"/apps/{APP}/users/{served}/sessions/{session_id}",
            f"{ADK}/{served}/sessions/{session_id}/artifacts/user:notes.txt",
        ):
            assert (await api.get(path, headers=caller)).status_code == 422, path
        dropped = await api.delete(f"{ADK}/{served}/sessions/{session_id}", headers=caller)
        assert dropped.status_code == 422
    kept = await api.get(f"/tickets/{call_id}", headers=bearer(ADMIN))
    assert kept.status_code == 200, kept.text
    assert artifacts.load(APP, SERVED_USER, session_id, "user:notes.txt") == notes

    # The namesake's sessions are its own, as any user's are, and hold none of it.
    namesake = bearer(MCP_NAMESAKE)
    for own_id in ("mine", session_id):
        own = await api.post(f"{ADK}/mcp/sessions", json={"sessionId": own_id}, headers=namesake)
        assert own.status_code == 200, own.text
        listed = await api.get(f"{ADK}/mcp/sessions/{own_id}/artifacts", headers=namesake)
        assert listed.status_code == 200 and listed.json() == [], listed.text
