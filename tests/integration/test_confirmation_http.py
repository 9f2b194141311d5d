"""Confirmations over the HTTP API and on the approvals page (headless Chromium): the
hint and payload are shown, the payload is edited on the page, and the tool gets it."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration import confirm_tools
from tests.integration.browser import chromium_page
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "trips"


def booked(view: ScriptView) -> str:
    return f"booked: {json.dumps(view.response('book_trip'))}"


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[RunningHttp]:
    counter = str(tmp_path / "trips")
    # As in ADK, the model answers the tool's interim response, then the confirmed run's.
    script = [
        call(Call("book_trip", {"city": "Oslo", "counter_file": counter})),
        say(booked),
        say(booked),
    ]
    agent = Agent(name=APP, tools=[confirm_tools.book_trip_tool], model=ScriptedModel(script))
    http = HttpSettings(token=TOKEN)
    async with serve_http([agent], settings, http, "127.0.0.1", 0) as running:
        yield running


async def ask_for_trip(client: httpx.AsyncClient, user: str) -> tuple[str, dict[str, Any]]:
    """A session whose call waits for a confirmation: (session id, its ticket)."""
    created = await client.post(f"/apps/{APP}/users/{user}/sessions")
    session_id = created.json()["id"]
    answered = await client.post(
        f"/apps/{APP}/users/{user}/sessions/{session_id}/messages", json={"text": "a trip"}
    )
    (ticket,) = answered.json()["pending"]
    return session_id, ticket


async def last_text(client: httpx.AsyncClient, user: str, session_id: str) -> str:
    session = (await client.get(f"/apps/{APP}/users/{user}/sessions/{session_id}")).json()
    assert session["pending"] == []
    text: str = session["events"][-1]["content"]["parts"][0]["text"]
    return text


async def test_the_api_lists_a_confirmation_and_rejecting_it_answers_the_call_once(
    served: RunningHttp,
) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client:
        user = f"u-{uuid.uuid4().hex[:6]}"
        session_id, ticket = await ask_for_trip(client, user)
        listed = (await client.get("/tickets", params={"session_id": session_id})).json()
        (shown,) = listed
        assert shown["kind"] == "confirmation" and "confirm" in shown["actions"]
        assert shown["ticket"]["hint"] == "Book a trip to Oslo?"
        assert shown["ticket"]["payload"] == {"city": "Oslo", "nights": 2}

        # A plain result is refused for it; a rejection is applied once.
        result = await client.post(f"/tickets/{ticket['call_id']}/result", json={"response": {}})
        assert result.status_code == 409, result.text
        url = f"/tickets/{ticket['call_id']}/confirmation"
        rejected = await client.post(url, json={"confirmed": False})
        assert rejected.status_code == 202, rejected.text
        assert await served.orch.wait_until_settled(session_key(APP, user, session_id), WAIT_S)
        again = await client.post(url, json={"confirmed": True})
        assert again.status_code in (404, 409), again.text
        text = await last_text(client, user, session_id)
    assert "ConfirmationRejected" in text


async def test_the_payload_edited_on_the_approvals_page_reaches_the_tool(
    served: RunningHttp,
    chromium: str,
    tmp_path: Path,
) -> None:
    async with (
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client,
        chromium_page(chromium, tmp_path / "profile") as page,
    ):
        user = f"u-{uuid.uuid4().hex[:6]}"
        session_id, ticket = await ask_for_trip(client, user)
        row = f"document.querySelector('tr[data-call-id=\"{ticket['call_id']}\"]')"

        await page.goto(f"{served.url}/approvals#token={TOKEN}")
        await page.wait_for(f"{row} && {row}.querySelector('textarea')", WAIT_S)
        hint = await page.evaluate(f"{row}.querySelector('p.hint').textContent")
        assert hint == "Book a trip to Oslo?"
        shown = json.loads(await page.evaluate(f"{row}.querySelector('textarea').value"))
        assert shown == {"city": "Oslo", "nights": 2}

        edited = json.dumps({"city": "Oslo", "nights": 5})
        await page.evaluate(f"{row}.querySelector('textarea').value = {json.dumps(edited)}")
        await page.click(f'tr[data-call-id="{ticket["call_id"]}"] button[data-decision="confirm"]')
        await page.wait_for(f"!{row}", WAIT_S)
        assert await served.orch.wait_until_settled(session_key(APP, user, session_id), WAIT_S)
        text = await last_text(client, user, session_id)
    assert text == 'booked: {"booked": {"city": "Oslo", "nights": 5}, "runs": 1}'


async def test_a_confirmation_naming_another_question_than_the_calls_is_refused(
    served: RunningHttp,
) -> None:
    """The answer names the question shown (`asked_again`): one the call no longer asks
    (it asked again since) answers 409 and is not applied."""
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client:
        user = f"u-{uuid.uuid4().hex[:6]}"
        session_id, ticket = await ask_for_trip(client, user)
        (shown,) = (await client.get("/tickets", params={"session_id": session_id})).json()
        assert shown["asked_again"] == 0
        url = f"/tickets/{ticket['call_id']}/confirmation"

        stale = await client.post(url, json={"confirmed": True, "asked_again": 1})
        assert stale.status_code == 409, stale.text
        assert "asked again since the question answered was shown" in stale.text
        assert (await client.get(f"/tickets/{ticket['call_id']}")).status_code == 200

        confirmed = await client.post(url, json={"confirmed": True, "asked_again": 0})
        assert confirmed.status_code == 202, confirmed.text
        assert await served.orch.wait_until_settled(session_key(APP, user, session_id), WAIT_S)
        text = await last_text(client, user, session_id)
    assert text == 'booked: {"booked": {"city": "Oslo", "nights": 2}, "runs": 1}'
