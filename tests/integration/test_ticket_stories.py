"""The words around tickets (`asked`, `agent_said`) kept between listings: only for the
calls still pending, however the tickets are read."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from google.genai import types

from examples import reimbursement
from tests.integration.http_support import bearer
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.pending import PendingCalls

pytestmark = pytest.mark.integration

APP = "reimbursement_agent"
TOOL = "ask_for_approval"


@pytest.fixture
async def served(
    settings: Settings, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    http = HttpSettings(token="stories-token-" + uuid.uuid4().hex)
    async with serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running:
        yield running


async def open_ticket(served: RunningHttp, user: str) -> PendingCall:
    """A session of `user` whose agent said something as it made a long-running call, and
    that call's ticket."""
    store = served.orch.replica.store
    session = await store.create(APP, user)
    call_id = "c-" + uuid.uuid4().hex
    asked = Event(
        invocation_id="inv-1",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="Reimburse $250.")]),
    )
    await store.append(session, asked)
    call = types.FunctionCall(id=call_id, name=TOOL, args={"amount": 250})
    turn = Event(
        invocation_id="inv-1",
        author=APP,
        content=types.Content(
            role="model",
            parts=[types.Part(text="Asking your manager."), types.Part(function_call=call)],
        ),
    )
    pending = PendingCall(
        call_id=call_id,
        tool=TOOL,
        session_id=session.id,
        app_name=APP,
        user_id=user,
        agent=APP,
        invocation_id="inv-1",
        args={"amount": 250},
        ticket={"status": "pending"},
        created_at=time.time(),
    )
    await store.append(session, turn, pending=[pending])
    return pending


async def close_ticket(served: RunningHttp, call: PendingCall) -> None:
    batch = WriteBatch()
    PendingCalls(served.orch.replica.keys).stage_drop(batch, call.session_key, call.call_id)
    await batch.run(served.orch.replica.redis)


async def test_reading_tickets_one_by_one_keeps_nothing_once_they_are_closed(
    served: RunningHttp,
) -> None:
    token = served.api.http.token
    assert token is not None
    headers = bearer(token.get_secret_value())
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=30) as client:
        # A webhook reads each ticket before it answers it, and never lists them.
        for _ in range(5):
            call = await open_ticket(served, "u-" + uuid.uuid4().hex[:6])
            read = await client.get(f"/tickets/{call.call_id}")
            assert read.status_code == 200, read.text
            assert read.json()["agent_said"] == "Asking your manager."
            await close_ticket(served, call)
        assert served.api.ticket_stories == {}

        # The listing keeps the stories of the calls pending, and forgets closed ones.
        call = await open_ticket(served, "u-" + uuid.uuid4().hex[:6])
        listed = await client.get("/tickets", params={"app": APP})
        assert [t["agent_said"] for t in listed.json() if t["call_id"] == call.call_id] == [
            "Asking your manager."
        ]
        assert call.call_id in served.api.ticket_stories
        await close_ticket(served, call)
        assert (await client.get("/tickets")).status_code == 200
        assert call.call_id not in served.api.ticket_stories
