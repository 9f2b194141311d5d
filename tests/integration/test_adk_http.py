"""ADK's routes of `toolfleet serve --http` with real workers, where only toolfleet can be
asked: a confirmation and a credential answered by ADK's function responses through
`/adk/run`, and what bad input gets (an unknown call, another user's call, a malformed
body, a response without its credential): a clear status, and nothing posted."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from examples import bank_account
from tests.integration import confirm_tools
from tests.integration.bank_api import BankApi
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30


def moved(view: ScriptView) -> str:
    return f"moved: {view.response('transfer_money')}"


def paid(view: ScriptView) -> str:
    return f"paid: {view.response('pay_invoice')}"


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[RunningHttp]:
    counter = tmp_path / "transfers"
    script = [
        call(Call("transfer_money", {"amount": 70, "counter_file": str(counter)})),
        say(moved),
    ]
    payer = Agent(
        name="payer", tools=[confirm_tools.transfer_money_tool], model=ScriptedModel(script)
    )
    # Asks to confirm the invoice's amount, then the total with the fee: a say for each
    # response the model gets (the interim ones, then the final).
    invoices = [call(Call("pay_invoice", {"amount": 70, "counter_file": str(tmp_path / "paid")}))]
    invoice_payer = Agent(
        name="invoice_payer",
        tools=[confirm_tools.pay_invoice_tool],
        model=ScriptedModel([*invoices, say(paid), say(paid), say(paid)]),
    )
    async with serve_http(
        [payer, invoice_payer, bank_account.agent], settings, HttpSettings(), "127.0.0.1", 0
    ) as running:
        yield running


@pytest.fixture
async def client(served: RunningHttp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.url + "/adk", timeout=WAIT_S) as opened:
        yield opened


async def new_session(client: httpx.AsyncClient, app: str, user: str) -> str:
    created = await client.post(f"/apps/{app}/users/{user}/sessions", json={})
    assert created.status_code == 200, created.text
    session_id: str = created.json()["id"]
    return session_id


def run_body(app: str, user: str, session_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "appName": app, "userId": user, "sessionId": session_id,
        "newMessage": {"role": "user", "parts": list(parts)},
    }  # fmt: skip


def calls_named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [
        p["functionCall"]
        for e in events
        for p in e.get("content", {}).get("parts", [])
        if "functionCall" in p and p["functionCall"]["name"] == name
    ]


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for e in events for p in e.get("content", {}).get("parts", []) if "text" in p]


async def test_a_confirmation_is_asked_and_answered_as_on_adks_server(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    session_id = await new_session(client, "payer", user)
    asked = await client.post("/run", json=run_body("payer", user, session_id, {"text": "pay 70"}))
    assert asked.status_code == 200, asked.text
    (request,) = calls_named(asked.json(), "adk_request_confirmation")
    assert request["args"]["originalFunctionCall"]["args"]["amount"] == 70
    assert any(request["id"] in e.get("longRunningToolIds", []) for e in asked.json())
    assert not (tmp_path / "transfers").exists()  # nothing runs before the answer

    answer = {
        "id": request["id"],
        "name": "adk_request_confirmation",
        "response": {"confirmed": True},
    }
    answered = await client.post(
        "/run", json=run_body("payer", user, session_id, {"functionResponse": answer})
    )
    assert answered.status_code == 200, answered.text
    assert texts(answered.json())[-1] == "moved: {'moved': 70, 'runs': 1, 'confirmed': True}"
    assert (tmp_path / "transfers").read_text() == "1"
    again = await client.post(
        "/run", json=run_body("payer", user, session_id, {"functionResponse": answer})
    )
    assert again.status_code == 409, again.text  # answered already
    assert (tmp_path / "transfers").read_text() == "1"


async def ask_for_a_balance(
    client: httpx.AsyncClient, bank_api: BankApi
) -> tuple[str, str, str, httpx.Response]:
    """A new user asks the bank agent for a balance, on a new session, with a token the
    bank takes: the user, the token, the session and the answer (a credential request)."""
    user = f"u-{uuid.uuid4().hex[:6]}"
    token = f"tok-{uuid.uuid4().hex}"
    bank_api.valid_tokens.add(token)
    session_id = await new_session(client, "bank_agent", user)
    asked = await client.post(
        "/run", json=run_body("bank_agent", user, session_id, {"text": "Balance of ACC-9?"})
    )
    return user, token, session_id, asked


async def test_a_credential_is_asked_and_supplied_as_on_adks_server(
    client: httpx.AsyncClient, bank_api: BankApi
) -> None:
    user, token, session_id, asked = await ask_for_a_balance(client, bank_api)
    assert asked.status_code == 200, asked.text
    (request,) = calls_named(asked.json(), "adk_request_credential")
    auth = request["args"]["authConfig"]
    assert auth["authScheme"]["type"] == "http" and auth["credentialKey"] == "bank_api"
    assert token not in bank_api.seen_tokens

    answer = filled_in(request, token)  # as ADK's client fills in what it was given
    answered = await client.post(
        "/run", json=run_body("bank_agent", user, session_id, {"functionResponse": answer})
    )
    assert answered.status_code == 200, answered.text
    assert "ACC-9 holds" in texts(answered.json())[-1]
    assert token in bank_api.seen_tokens
    session = (await client.get(f"/apps/bank_agent/users/{user}/sessions/{session_id}")).text
    assert token not in session  # the credential never enters the session


def filled_in(request: dict[str, Any], token: str, **changed: Any) -> dict[str, Any]:
    """ADK's client's answer to an `adk_request_credential` call: the AuthConfig it was
    given with the token filled in (and any field `changed`)."""
    auth = request["args"]["authConfig"]
    filled = {**auth, "exchangedAuthCredential": {"authType": "http", "http": {
        "scheme": "bearer", "credentials": {"token": token}}}, **changed}  # fmt: skip
    return {"id": request["id"], "name": "adk_request_credential", "response": filled}


async def test_a_credential_answer_is_stored_only_for_the_request_it_answers(
    client: httpx.AsyncClient, served: RunningHttp, settings: Settings, bank_api: BankApi
) -> None:
    user, token, session_id, asked = await ask_for_a_balance(client, bank_api)
    (first,) = calls_named(asked.json(), "adk_request_credential")
    call_id = first["args"]["functionCallId"]

    # The user first gives a token the API rejects (over the tickets route, naming the
    # request): the tool asks again, a new request with an id of its own.
    key = session_key("bank_agent", user, session_id)
    store = served.orch.replica.store
    async with httpx.AsyncClient(base_url=served.url, timeout=WAIT_S) as tickets:
        url = f"/tickets/{call_id}/credential"
        named = {"asked_again": 0, "credential_key": "bank_api"}
        wrong = await tickets.post(url, json={"credential": "wrong-token", **named})
        assert wrong.status_code == 202, wrong.text
        handled = served.orch.listener.handled
        while True:  # cleared before the check: an apply in between is not missed
            handled.clear()
            if [c for c in await store.pending_calls(key) if c.asked_again == 1]:
                break
            await asyncio.wait_for(handled.wait(), WAIT_S)
        events = (await client.get(f"/apps/bank_agent/users/{user}/sessions/{session_id}")).json()
        second = calls_named(events["events"], "adk_request_credential")[-1]
        assert second["id"] != first["id"] and second["args"]["functionCallId"] == call_id

        # The first request's answer, sent again (a client's retry): it answers no request
        # the call makes now, whatever token it carries.
        replayed = filled_in(first, token)
        body = run_body("bank_agent", user, session_id, {"functionResponse": replayed})
        got = await client.post("/run", json=body)
        assert got.status_code == 409 and "asked again since" in got.json()["detail"], got.text
        # The request it makes now, naming another credential key.
        other = filled_in(second, token, credentialKey="other_api")
        body = run_body("bank_agent", user, session_id, {"functionResponse": other})
        got = await client.post("/run", json=body)
        assert got.status_code == 409 and "not 'other_api'" in got.json()["detail"], got.text
        # Over the tickets route: the request answered already, or another key.
        for stale in ({"asked_again": 0}, {"asked_again": 1, "credential_key": "other_api"}):
            got = await tickets.post(url, json={"credential": token, **stale})
            assert got.status_code == 409 and "nothing was stored" in got.text, got.text
    keys = Keys(settings.key_prefix)
    with redis.Redis.from_url(settings.require_redis_url()) as sync:
        credentials = CredentialStore(sync, keys, settings.credential_key)
        assert credentials.get("bank_agent", user, bank_account.BANK_AUTH) is None
    assert token not in bank_api.seen_tokens

    # The request it makes now, answered as ADK's client answers it: the call runs.
    body = run_body("bank_agent", user, session_id, {"functionResponse": filled_in(second, token)})
    answered = await client.post("/run", json=body)
    assert answered.status_code == 200, answered.text
    assert "ACC-9 holds" in texts(answered.json())[-1]
    assert bank_api.seen_tokens[-1] == token


def confirmed(request: dict[str, Any]) -> dict[str, Any]:
    """ADK's dev UI's yes to an `adk_request_confirmation` call: its ToolConfirmation as
    JSON text under `response`, under the call's id."""
    answer = {"response": json.dumps({"confirmed": True})}
    return {"id": request["id"], "name": "adk_request_confirmation", "response": answer}


async def test_a_confirmation_answer_is_taken_only_for_the_question_it_answers(
    client: httpx.AsyncClient, served: RunningHttp, tmp_path: Path
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    session_id = await new_session(client, "invoice_payer", user)
    body = run_body("invoice_payer", user, session_id, {"text": "pay the invoice"})
    asked = await client.post("/run", json=body)
    assert asked.status_code == 200, asked.text
    (first,) = calls_named(asked.json(), "adk_request_confirmation")
    assert first["args"]["toolConfirmation"]["payload"] == {"amount": 70}

    # The person says yes to 70, as ADK's dev UI answers: the tool runs, finds the fee,
    # and asks again for 100, a question with an id of its own, which ends the request.
    yes = run_body("invoice_payer", user, session_id, {"functionResponse": confirmed(first)})
    answered = await client.post("/run", json=yes)
    assert answered.status_code == 200, answered.text
    (second,) = calls_named(answered.json(), "adk_request_confirmation")
    assert second["id"] == first["id"] + "~1"
    assert second["args"]["toolConfirmation"]["payload"] == {"amount": 100}
    asked_of = first["args"]["originalFunctionCall"]
    assert second["args"]["originalFunctionCall"] == asked_of  # the same call, as ADK shows
    key = session_key("invoice_payer", user, session_id)
    store = served.orch.replica.store

    # A yes to the first question, sent now (a late answer, a replay): it answers no
    # question the call asks, and does not confirm the 100.
    replayed = run_body("invoice_payer", user, session_id, {"functionResponse": confirmed(first)})
    got = await client.post("/run", json=replayed)
    assert got.status_code == 409 and "asked again since" in got.json()["detail"], got.text
    # A question the call never asked, and a number the loop does not write.
    for made_up, status in ((first["id"] + "~2", 409), (first["id"] + "~01", 404)):
        answer = {**confirmed(first), "id": made_up}
        body = run_body("invoice_payer", user, session_id, {"functionResponse": answer})
        got = await client.post("/run", json=body)
        assert got.status_code == status, got.text
    assert not (tmp_path / "paid").exists()
    assert [c.asked_again for c in await store.pending_calls(key)] == [1]

    # The question asked now, answered as ADK's dev UI answers it: the call runs, once.
    answer = run_body("invoice_payer", user, session_id, {"functionResponse": confirmed(second)})
    answered = await client.post("/run", json=answer)
    assert answered.status_code == 200, answered.text
    assert texts(answered.json())[-1] == "paid: {'paid': 100, 'runs': 1}"
    again = await client.post("/run", json=answer)
    assert again.status_code == 409, again.text  # answered already
    assert (tmp_path / "paid").read_text() == "1"


async def test_bad_function_responses_get_a_clear_status_and_post_nothing(
    client: httpx.AsyncClient, served: RunningHttp
) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    hers = await new_session(client, "payer", alice)
    asked = await client.post("/run", json=run_body("payer", alice, hers, {"text": "pay 70"}))
    (request,) = calls_named(asked.json(), "adk_request_confirmation")
    his = await new_session(client, "payer", bob)
    yes = {"confirmed": True}

    unknown = {"id": "tf-nope", "name": "transfer_money", "response": {"ok": True}}
    got = await client.post(
        "/run", json=run_body("payer", alice, hers, {"functionResponse": unknown})
    )
    assert got.status_code == 404 and "tf-nope" in got.json()["detail"]
    # Alice's call answered from bob's session: no such call there.
    theirs = {"id": request["id"], "name": "adk_request_confirmation", "response": yes}
    refused = {**run_body("payer", bob, his, {"functionResponse": theirs}), "stateDelta": {"x": 1}}
    got = await client.post("/run", json=refused)
    assert got.status_code == 404
    # The state it carried was not written: a refused message writes nothing.
    bobs = await client.get(f"/apps/payer/users/{bob}/sessions/{his}")
    assert bobs.status_code == 200 and "x" not in bobs.json()["state"]
    # A confirmation's answer without the id of its request.
    bare = {"id": "x", "name": "adk_request_confirmation", "response": yes}
    got = await client.post("/run", json=run_body("payer", alice, hers, {"functionResponse": bare}))
    assert got.status_code == 422 and "adk-confirm-" in got.json()["detail"]
    # A credential's answer with no credential in it.
    empty = {"id": "adk-credential-c", "name": "adk_request_credential", "response": {}}
    got = await client.post(
        "/run", json=run_body("payer", alice, hers, {"functionResponse": empty})
    )
    assert got.status_code in (404, 422)
    # Malformed bodies and unknown apps and sessions.
    assert (await client.post("/run", json={"appName": "payer"})).status_code == 422
    assert (await client.post("/run", content=b"{not json")).status_code == 422
    missing = run_body("nobody", alice, hers, {"text": "hi"})
    assert (await client.post("/run", json=missing)).status_code == 404
    gone = run_body("payer", alice, "no-such-session", {"text": "hi"})
    got = await client.post("/run_sse", json=gone)
    assert got.status_code == 404 and got.json()["detail"] == "Session not found: no-such-session"

    # Alice's call still waits, and her answer still works.
    still = {t.call_id for t in await served.orch.replica.store.pending_calls()}
    assert request["args"]["originalFunctionCall"]["id"] in still
    mine = await client.post(
        "/run", json=run_body("payer", alice, hers, {"functionResponse": theirs})
    )
    assert mine.status_code == 200 and texts(mine.json())[-1].startswith("moved:")


async def test_the_apps_are_listed_as_adks_server_lists_them(client: httpx.AsyncClient) -> None:
    assert (await client.get("/list-apps")).json() == ["bank_agent", "invoice_payer", "payer"]
    detailed = (await client.get("/list-apps", params={"detailed": "true"})).json()
    payer = next(a for a in detailed["apps"] if a["name"] == "payer")
    assert payer == {
        "name": "payer", "rootAgentName": "payer", "description": "", "language": "python",
        "isComputerUse": False, "agents": None,
    }  # fmt: skip
