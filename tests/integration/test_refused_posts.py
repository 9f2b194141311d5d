"""Every refused post is kept in the dead-letter stream with a reason that says what
happened, whichever path it came by: `toolfleet tickets approve|reject|cancel` and a
credential on a call answered already or unknown, a confirmation posted three times, the
HTTP result, confirmation, credential and cancel routes on a call no longer waiting. On a
real Redis with real worker processes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from examples import reimbursement
from tests.integration import confirm_tools
from tests.integration.http_support import TOKEN, bearer
from tests.support import until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.errors import CompletionError
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.require_redis_url())
    yield client
    client.close()


def dead_letters_of(client: redis.Redis, settings: Settings, call_id: str) -> list[dict[str, Any]]:
    """The dead-letter entries of `call_id`: what was posted (`completion`, JSON) and why."""
    entries = client.xrange(Keys(settings.key_prefix).dead_letters())
    found = [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in entries]
    return [d for d in found if f'"call_id":"{call_id}"' in d["completion"]]


def confirming_agent(transfers: Path) -> Agent:
    """One call of a tool that waits for a person's confirmation, then an answer."""
    model = ScriptedModel(
        [
            call(Call("transfer_money", {"amount": 50, "counter_file": str(transfers)})),
            say("done"),
        ]
    )
    return Agent(name="refusals", tools=tools_in_module(confirm_tools), model=model)


async def cli_status(*args: str) -> int:
    """The exit status of `toolfleet ARGS`, run in a thread (its exact code path)."""
    return await asyncio.to_thread(cli.main, list(args))


async def test_approve_and_reject_refused_by_the_cli_are_dead_lettered_with_why(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], client: redis.Redis
) -> None:
    async with Orchestrator([reimbursement.agent], settings) as orch:
        runner = orch.runner("reimbursement_agent")
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u1", session_id=session_id, message="Reimburse 200$ for meals")
        key = session_key("reimbursement_agent", "u1", session_id)
        (ticket,) = await runner.store.pending_calls(key)
        assert await cli_status("tickets", "approve", ticket.call_id) == 0
        assert await orch.wait_until_settled(key, WAIT_S)

        # Answered already, then unknown: refused (exit status 2) and kept with why.
        assert await cli_status("tickets", "reject", ticket.call_id, "--note", "late") == 2
        assert await cli_status("tickets", "approve", ticket.call_id) == 2
        assert await cli_status("tickets", "cancel", ticket.call_id) == 2
        # `toolfleet tickets credential`'s code path (it reads the credential from a prompt).
        credentials = CredentialStore(client, Keys(settings.key_prefix), settings.credential_key)
        with pytest.raises(CompletionError, match="already has its final result"):
            Completions(client, Keys(settings.key_prefix)).supply_credential(
                ticket.call_id, "s3cret-value", credentials, source="cli"
            )
        unknown = f"tf-{uuid.uuid4().hex[:16]}"
        assert await cli_status("tickets", "reject", unknown) == 2

    answered = dead_letters_of(client, settings, ticket.call_id)
    assert len(answered) == 4, answered
    for letter in answered:
        assert letter["reason"].startswith(
            f"call {ticket.call_id!r} already has its final result (completion "
        ), letter
    assert '"status":"rejected"' in answered[0]["completion"]
    assert '"note":"late"' in answered[0]["completion"]
    assert '"source":"cli"' in answered[0]["completion"]
    assert '"kind":"cancel"' in answered[2]["completion"]
    assert '"kind":"credential"' in answered[3]["completion"]
    assert "s3cret-value" not in str(answered)
    (never,) = dead_letters_of(client, settings, unknown)
    assert never["reason"].startswith(f"no pending call with id {unknown!r}")


async def test_a_confirmation_posted_three_times_is_applied_once_and_twice_refused_as_answered(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    client: redis.Redis,
    tmp_path: Path,
) -> None:
    transfers = tmp_path / "transfers"
    agent = confirming_agent(transfers)
    completions = Completions(client, Keys(settings.key_prefix))
    async with Orchestrator([agent], settings, models={"refusals": agent.model}) as orch:
        runner = orch.runner("refusals")
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u1", session_id=session_id, message="go")
        key = session_key("refusals", "u1", session_id)
        (request,) = await runner.store.pending_calls(key)
        assert request.kind == "confirmation"
        refused = 0
        for _ in range(3):  # at once: the later ones are refused by the poster or the applier
            try:
                completions.confirm(request.call_id, True, source="cli")
            except CompletionError as exc:
                assert "was already answered: confirmed" in str(exc), exc
                refused += 1
        assert await orch.wait_until_settled(key, WAIT_S)
        # The refused ones are dead-lettered, whoever refused them (poster or applier).
        await until(
            lambda: len(dead_letters_of(client, settings, request.call_id)) >= 2,
            "the later confirmations to be refused",
            WAIT_S,
        )
    assert transfers.read_text() == "1"  # the call ran once
    reasons = [d["reason"] for d in dead_letters_of(client, settings, request.call_id)]
    assert len(reasons) == 2, (reasons, refused)
    for reason in reasons:
        assert reason.startswith(f"call {request.call_id!r} was already answered: confirmed")
    with pytest.raises(CompletionError, match="was already answered: confirmed"):
        completions.confirm(request.call_id, False)
    assert len(dead_letters_of(client, settings, request.call_id)) == 3


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[RunningHttp]:
    agent = confirming_agent(tmp_path / "transfers")
    http = HttpSettings(token=TOKEN, max_body_bytes=64 * 1024)
    async with serve_http([agent], settings, http, "127.0.0.1", 0) as running:
        yield running


async def test_the_http_routes_dead_letter_the_posts_they_refuse(
    served: RunningHttp, settings: Settings, client: redis.Redis
) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as api:
        created = await api.post("/apps/refusals/users/u1/sessions", json={})
        session_id = created.json()["id"]
        url = f"/apps/refusals/users/u1/sessions/{session_id}/messages"
        assert (await api.post(url, json={"text": "go"})).status_code == 200
        (ticket,) = (await api.get("/tickets", params={"session_id": session_id})).json()
        call_id = ticket["call_id"]
        # A result for a call that waits for a confirmation: the wrong kind of answer.
        wrong = await api.post(f"/tickets/{call_id}/result", json={"response": {"ok": 1}})
        assert wrong.status_code == 409, wrong.text
        confirmed = await api.post(f"/tickets/{call_id}/confirmation", json={"confirmed": True})
        assert confirmed.status_code == 202, confirmed.text

        completions = Completions(client, Keys(settings.key_prefix))
        await until(
            lambda: all(c.call_id != call_id for c in completions.pending()),
            "the confirmation to be applied",
            WAIT_S,
        )
        again = await api.post(f"/tickets/{call_id}/confirmation", json={"confirmed": False})
        assert again.status_code == 404, again.text
        credential = await api.post(f"/tickets/{call_id}/credential", json={"credential": "x"})
        assert credential.status_code == 404, credential.text
        cancel = await api.post(f"/tickets/{call_id}/cancel")
        assert cancel.status_code == 404, cancel.text
    reasons = [d["reason"] for d in dead_letters_of(client, settings, call_id)]
    assert len(reasons) == 4, reasons
    assert reasons[0].startswith(f"call {call_id!r} waits for a confirmation, not a result")
    for reason in reasons[1:]:
        assert reason.startswith(f"call {call_id!r} was already answered: confirmed"), reason
    assert all('"x"' not in d["completion"] for d in dead_letters_of(client, settings, call_id))
