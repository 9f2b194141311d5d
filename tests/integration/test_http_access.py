"""Who may do what over HTTP: callers with API keys and roles, against every route.

A matrix of callers x endpoints, each cell allowed or denied; another user's sessions and
tickets answer 404 (their existence does not leak), a ticket one may see but not act on
answers 403, and a denied request changes nothing. Unknown keys get 401; event streams
are capped per caller (429).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
import redis
from google.genai import types as genai_types

from examples import bank_account, reimbursement
from tests.integration.bank_api import BankApi
from tests.integration.http_support import bearer
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
REIMBURSE = "reimbursement_agent"
BANK = "bank_agent"
ALICE = f"alice-{uuid.uuid4().hex[:6]}"  # the user whose sessions and tickets are probed
ROLES: dict[str, list[str]] = {
    "admin": ["admin"],
    "approver": [f"approver:{REIMBURSE}"],
    "other_approver": [f"approver:{BANK}"],
    "service": [f"service:{REIMBURSE}/ask_for_approval"],
    "other_service": [f"service:{REIMBURSE}/reimburse"],
    ALICE: [],
    "bob": [],
}
KEYS = {name: f"key-{name}-{uuid.uuid4().hex}" for name in ROLES}
JWT_SECRET = uuid.uuid4().hex + uuid.uuid4().hex
EVERYONE = set(ROLES)

# Who may do what (everyone else is denied).
OWNER = {"admin", ALICE}
ALLOWED: dict[str, set[str]] = {
    "create_session": OWNER,
    "list_sessions": OWNER,
    "get_session": OWNER,
    "send_message": OWNER,
    "watch_session": OWNER,
    "see_approval": {"admin", "approver", "service", ALICE},
    "approve": {"admin", "approver", "service"},
    "reject": {"admin", "approver", "service"},
    "post_result": {"admin", "service"},
    "see_credential_request": {"admin", ALICE},
    "supply_credential": {ALICE},
    "cancel_session": OWNER,
    "see_timeline": OWNER,
    "cancel_ticket": {"admin", "approver", "service", ALICE},
}


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], bank_api: BankApi
) -> AsyncIterator[RunningHttp]:
    keys = [ApiKey(subject=n, roles=tuple(r), key=KEYS[n]) for n, r in ROLES.items()]
    http = HttpSettings(
        api_keys=keys,
        max_streams_per_caller=2,
        jwt_secret=JWT_SECRET,
        jwt_audience="toolfleet-tests",
        jwt_issuer="https://idp.test",
    )
    agents = [reimbursement.agent, bank_account.agent]
    async with serve_http(agents, settings, http, "127.0.0.1", 0) as running:
        yield running


@dataclass
class Clients:
    url: str
    by_name: dict[str, httpx.AsyncClient]

    def __getitem__(self, name: str) -> httpx.AsyncClient:
        return self.by_name[name]


@pytest.fixture
async def clients(served: RunningHttp) -> AsyncIterator[Clients]:
    opened = {
        name: httpx.AsyncClient(base_url=served.url, headers=bearer(KEYS[name]), timeout=WAIT_S)
        for name in ROLES
    }
    try:
        yield Clients(served.url, opened)
    finally:
        for client in opened.values():
            await client.aclose()


async def pending_approval(client: httpx.AsyncClient, user: str = ALICE) -> tuple[str, str]:
    """A new session of `user` waiting for an approval: (session id, ticket id)."""
    created = await client.post(f"/apps/{REIMBURSE}/users/{user}/sessions", json={})
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    url = f"/apps/{REIMBURSE}/users/{user}/sessions/{session_id}/messages"
    answered = await client.post(url, json={"text": "Reimburse $250 for a team meal."})
    assert answered.status_code == 200, answered.text
    (ticket,) = answered.json()["pending"]
    return session_id, ticket["call_id"]


async def pending_credential(client: httpx.AsyncClient) -> str:
    """A new session of Alice's whose balance lookup waits for her API token: its ticket id."""
    created = await client.post(f"/apps/{BANK}/users/{ALICE}/sessions", json={})
    session_id = created.json()["id"]
    url = f"/apps/{BANK}/users/{ALICE}/sessions/{session_id}/messages"
    answered = await client.post(url, json={"text": "Balance of ACC-9?"})
    (ticket,) = answered.json()["pending"]
    assert ticket["kind"] == "credential"
    call_id: str = ticket["call_id"]
    return call_id


def expect(action: str, caller: str, sees: bool = True) -> int | None:
    """None when `caller` may do `action`; else the status it must get: 403 for a ticket it
    may see, 404 for anything else (another user's resource does not exist for it)."""
    if caller in ALLOWED[action]:
        return None
    return 403 if sees else 404


def ok(response: httpx.Response, *statuses: int) -> None:
    assert response.status_code in statuses, f"{response.request.url}: {response.text}"


async def test_every_caller_gets_exactly_what_its_roles_allow(
    clients: Clients, served: RunningHttp
) -> None:
    alice = clients[ALICE]
    session_id, approval_id = await pending_approval(alice)
    credential_id = await pending_credential(alice)
    base = f"/apps/{REIMBURSE}/users/{ALICE}/sessions"
    results: dict[tuple[str, str], int] = {}

    async def probe(action: str, caller: str, method: str, url: str, body: Any = None) -> int:
        response = await clients[caller].request(method, url, json=body)
        results[(action, caller)] = response.status_code
        return response.status_code

    for name in ROLES:
        c = clients[name]
        # The user's own resources: everyone else gets 404, as if there were none.
        status = await probe("list_sessions", name, "GET", base)
        assert status == (200 if name in OWNER else 404)
        status = await probe("get_session", name, "GET", f"{base}/{session_id}")
        assert status == (200 if name in OWNER else 404)
        status = await probe("create_session", name, "POST", base, {})
        assert status == (201 if name in OWNER else 404)
        status = await probe("see_timeline", name, "GET", f"{base}/{session_id}/timeline")
        assert status == (200 if name in OWNER else 404)
        watch = f"{base}/{session_id}/stream"
        async with c.stream("GET", watch, params={"until_answer": True}) as streamed:
            results[("watch_session", name)] = streamed.status_code
        assert streamed.status_code == (200 if name in OWNER else 404)
        if name not in OWNER:  # denied: no invocation starts (the owners' run below)
            text = {"text": "Reimburse $1 please"}
            url = f"{base}/{session_id}/messages"
            status = await probe("send_message", name, "POST", url, text)
            assert status == 404
            assert (await c.post(f"{url}/stream", json=text)).status_code == 404

        # Tickets: listed and shown only to those who may see them, with their actions.
        listed = (await c.get("/tickets")).json()
        by_id = {t["call_id"]: t for t in listed}
        sees_approval = name in ALLOWED["see_approval"]
        sees_credential = name in ALLOWED["see_credential_request"]
        assert (approval_id in by_id) == sees_approval, name
        assert (credential_id in by_id) == sees_credential, name
        if sees_approval:
            # Who may see the ticket reads what the user asked; the timeline's link only
            # for who may see the session.
            assert by_id[approval_id]["asked"] == "Reimburse $250 for a team meal.", name
            has_link = by_id[approval_id]["timeline"] is not None
            assert has_link == (name in ALLOWED["see_timeline"]), name
            may = set(by_id[approval_id]["actions"])
            assert ("approve" in may) == (name in ALLOWED["approve"]), name
            assert ("result" in may) == (name in ALLOWED["post_result"]), name
        if sees_credential:
            may = set(by_id[credential_id]["actions"])
            assert may == ({"credential"} if name == ALICE else set()), name
        shown = await probe("see_approval", name, "GET", f"/tickets/{approval_id}")
        assert shown == (200 if sees_approval else 404)
        if sees_approval:
            one = (await c.get(f"/tickets/{approval_id}")).json()
            assert (one["timeline"] is not None) == (name in ALLOWED["see_timeline"]), name
        shown = await probe("see_credential_request", name, "GET", f"/tickets/{credential_id}")
        assert shown == (200 if sees_credential else 404)

        # Denied actions on tickets: 403 where the ticket is visible, else 404; nothing changes.
        for action, path, body in (
            ("approve", f"/tickets/{approval_id}/approve", {}),
            ("reject", f"/tickets/{approval_id}/reject", {}),
            ("post_result", f"/tickets/{approval_id}/result", {"response": {"status": "x"}}),
        ):
            wanted = expect(action, name, sees_approval)
            if wanted is not None:
                status = await probe(action, name, "POST", path, body)
                assert status == wanted, (action, name)
        # Cancelling: a session by its owner only; a ticket by whoever may act on it.
        if name not in OWNER:
            url = f"{base}/{session_id}/cancel"
            assert await probe("cancel_session", name, "POST", url, {}) == 404
        wanted = expect("cancel_ticket", name, sees_approval)
        if wanted is not None:
            url = f"/tickets/{approval_id}/cancel"
            assert await probe("cancel_ticket", name, "POST", url) == wanted, name
        wanted = expect("supply_credential", name, sees_credential)
        if wanted is not None:
            path = f"/tickets/{credential_id}/credential"
            status = await probe("supply_credential", name, "POST", path, {"credential": "stolen"})
            assert status == wanted, name

    # Nothing a denied caller sent changed the tickets.
    still = {t["call_id"] for t in (await clients["admin"].get("/tickets")).json()}
    assert {approval_id, credential_id} <= still

    # The allowed actions, each on a ticket of its own: accepted and applied.
    for action, verb in (("approve", "approve"), ("reject", "reject"), ("post_result", "result")):
        for name in sorted(ALLOWED[action]):
            decided_session, ticket_id = await pending_approval(alice)
            body: dict[str, Any] = {"response": {"status": "approved"}} if verb == "result" else {}
            status = await probe(action, name, "POST", f"/tickets/{ticket_id}/{verb}", body)
            assert status == 202, (action, name)
            decided = session_key(REIMBURSE, ALICE, decided_session)
            assert await served.orch.wait_until_settled(decided, WAIT_S)
    for name in sorted(ALLOWED["cancel_ticket"]):
        cancelled_session, ticket_id = await pending_approval(alice)
        status = await probe("cancel_ticket", name, "POST", f"/tickets/{ticket_id}/cancel")
        assert status == 202, name
        closed = session_key(REIMBURSE, ALICE, cancelled_session)
        assert await served.orch.wait_until_settled(closed, WAIT_S)
    for name in sorted(OWNER):
        cancelled_session, ticket_id = await pending_approval(alice)
        cancelled = await clients[name].post(f"{base}/{cancelled_session}/cancel", json={})
        results[("cancel_session", name)] = cancelled.status_code
        assert cancelled.status_code == 202, name
        assert cancelled.json()["closing_tickets"] == [ticket_id]
    supplied = await alice.post(
        f"/tickets/{credential_id}/credential", json={"credential": "alice-own-token"}
    )
    results[("supply_credential", ALICE)] = supplied.status_code
    assert supplied.status_code == 202, supplied.text
    for name in OWNER:
        created = await clients[name].post(base, json={})
        url = f"{base}/{created.json()['id']}/messages"
        answered = await clients[name].post(url, json={"text": "Reimburse $20 for a taxi."})
        results[("send_message", name)] = answered.status_code
        assert answered.status_code == 200 and "reimbursed" in answered.json()["answer"]

    # Every cell of the matrix was tried.
    assert {(a, n) for a in ALLOWED for n in ROLES} == set(results)


async def test_unknown_or_missing_keys_get_401_and_me_names_the_caller(clients: Clients) -> None:
    async with httpx.AsyncClient(base_url=clients.url, timeout=WAIT_S) as anonymous:
        missing = await anonymous.get("/tickets")
        assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
        for token in ("key-admin", KEYS["admin"] + "x", "a.b.c", KEYS["admin"].upper()):
            wrong = await anonymous.get("/apps", headers=bearer(token))
            assert wrong.status_code in (401, 403), token
        assert (await anonymous.get("/health")).status_code == 200  # no token needed
    me = (await clients["approver"].get("/me")).json()
    assert me == {"subject": "approver", "roles": [f"approver:{REIMBURSE}"]}


async def test_event_streams_are_capped_per_caller(clients: Clients) -> None:
    alice = clients[ALICE]
    session_id, _ = await pending_approval(alice)
    watch = f"/apps/{REIMBURSE}/users/{ALICE}/sessions/{session_id}/stream"
    async with alice.stream("GET", watch) as first, alice.stream("GET", watch) as second:
        assert first.status_code == second.status_code == 200
        third = await alice.get(watch)
        assert third.status_code == 429 and "MAX_STREAMS_PER_CALLER" in third.json()["detail"]
        # Another caller has a share of its own.
        async with clients["admin"].stream("GET", watch) as others:
            assert others.status_code == 200
    # Closed streams give their slots back.
    async with asyncio.timeout(WAIT_S):
        while True:
            async with alice.stream("GET", watch) as again:
                if again.status_code == 200:
                    break


def a_jwt(subject: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"sub": subject, "aud": "toolfleet-tests", "iss": "https://idp.test", "exp": now + 60}
    return jwt.encode({**payload, **claims}, JWT_SECRET, algorithm="HS256")


async def test_a_jwt_acts_as_its_subject_and_a_bad_one_gets_401(clients: Clients) -> None:
    session_id, _ = await pending_approval(clients[ALICE])
    url = f"/apps/{REIMBURSE}/users/{ALICE}/sessions/{session_id}"
    async with httpx.AsyncClient(base_url=clients.url, timeout=WAIT_S) as anonymous:
        mine = await anonymous.get(url, headers=bearer(a_jwt(ALICE)))
        assert mine.status_code == 200 and mine.json()["id"] == session_id
        assert (await anonymous.get(url, headers=bearer(a_jwt("bob")))).status_code == 404
        expired = a_jwt(ALICE, exp=int(time.time()) - 600)
        assert (await anonymous.get(url, headers=bearer(expired))).status_code == 401
        wrong_audience = a_jwt(ALICE, aud="another-service")
        assert (await anonymous.get(url, headers=bearer(wrong_audience))).status_code == 401
        forged = jwt.encode(
            {"sub": ALICE, "aud": "toolfleet-tests", "iss": "https://idp.test", "exp": 2**31},
            "not-the-secret-" * 3,
            algorithm="HS256",
        )
        assert (await anonymous.get(url, headers=bearer(forged))).status_code == 401


def sse_data(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each message of a Server-Sent Events body's lines."""
    out, name = [], ""
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            out.append((name, json.loads(line.removeprefix("data: "))))
    return out


async def test_another_users_session_id_is_neither_revealed_nor_blocked(
    clients: Clients, served: RunningHttp
) -> None:
    """Given alice's session waiting on a ticket, bob using its id is answered as for any
    id: unknown until he creates it, then a session of his own (201, never "exists
    already"). Every route on it - read, message, tickets, cancel, timeline, list, event
    stream - is about his session only, and alice's stays whole and out of his reach."""
    alice, bob, approver = clients[ALICE], clients["bob"], clients["approver"]
    session_id, alices_ticket = await pending_approval(alice)
    hers = f"/apps/{REIMBURSE}/users/{ALICE}/sessions/{session_id}"
    before = (await alice.get(hers)).json()
    base = f"/apps/{REIMBURSE}/users/bob/sessions"
    his = f"{base}/{session_id}"
    never_used = f"never-{uuid.uuid4().hex}"
    for path in (his, f"{base}/{never_used}"):  # the same answer for both ids
        for method, suffix in (("GET", ""), ("GET", "/timeline"), ("POST", "/cancel")):
            unknown = await bob.request(
                method, path + suffix, json={} if method == "POST" else None
            )
            assert unknown.status_code == 404, unknown.text
            assert (
                unknown.json()["detail"]
                == f"unknown session {path.rsplit('/')[-1]!r} of user 'bob'"
            )

    created = await bob.post(base, json={"session_id": session_id})
    assert created.status_code == 201, created.text
    assert {k: created.json()[k] for k in ("id", "user_id", "events", "pending", "state")} == {
        "id": session_id, "user_id": "bob", "events": [], "pending": [], "state": {}
    }  # fmt: skip
    assert (await bob.post(base, json={"session_id": never_used})).status_code == 201
    again = await bob.post(base, json={"session_id": session_id})
    assert again.status_code == 409  # his own id, taken by himself: that he may know

    # Bob's message opens his own ticket; cancelling his session closes only that one.
    sent = await bob.post(f"{his}/messages", json={"text": "Reimburse $250 for a team meal."})
    assert sent.status_code == 200, sent.text
    (bobs_ticket,) = [t["call_id"] for t in sent.json()["pending"]]
    assert bobs_ticket != alices_ticket
    listed = (await bob.get("/tickets", params={"session_id": session_id})).json()
    assert [t["call_id"] for t in listed] == [bobs_ticket]
    cancelled = await bob.post(f"{his}/cancel", json={})
    assert cancelled.status_code == 202 and cancelled.json()["closing_tickets"] == [bobs_ticket]
    assert await served.orch.wait_until_settled(session_key(REIMBURSE, "bob", session_id), WAIT_S)
    assert (await alice.get(f"/tickets/{alices_ticket}")).status_code == 200  # still open
    timeline = (await bob.get(f"{his}/timeline")).json()
    assert alices_ticket not in json.dumps(timeline) and bobs_ticket in json.dumps(timeline)
    (summary,) = [s for s in (await bob.get(base)).json() if s["id"] == session_id]
    assert summary["pending"] == 0 and summary["user_id"] == "bob"

    # Bob watches his session while alice's resumes (her ticket approved): he sees his only.
    watch = f"{his}/stream"
    async with bob.stream("GET", watch, params={"until_answer": True}) as streamed:
        assert streamed.status_code == 200
        approved = await approver.post(f"/tickets/{alices_ticket}/approve", json={})
        assert approved.status_code == 202, approved.text
        alices = session_key(REIMBURSE, ALICE, session_id)
        assert await served.orch.wait_until_settled(alices, WAIT_S)
        taxi = await bob.post(f"{his}/messages", json={"text": "Reimburse $20 for a taxi."})
        assert taxi.status_code == 200 and "reimbursed" in taxi.json()["answer"], taxi.text
        async with asyncio.timeout(WAIT_S):
            lines = [line async for line in streamed.aiter_lines()]
    seen = sse_data(lines)
    assert [d["text"] for name, d in seen if name == "answer"] == [taxi.json()["answer"]]
    assert all(d["session_id"] == session_id for _, d in seen)
    assert alices_ticket not in "\n".join(lines) and "Approved" not in "\n".join(lines)

    # Alice's session: all hers, untouched by bob, resumed by her approval alone.
    after = (await alice.get(hers)).json()
    assert after["events"][: len(before["events"])] == before["events"]
    assert "taxi" not in json.dumps(after) and bobs_ticket not in json.dumps(after)
    assert "Approved and paid: $250.00" in json.dumps(after["events"][-1])
    bobs = (await bob.get(his)).json()
    assert "team meal" in json.dumps(bobs) and "Approved" not in json.dumps(bobs)


# ADK's routes (under /adk): the user's own sessions for the owners, 404 for everyone else,
# 401 without a key; health, version and the dev UI's files and settings are public, the
# apps and what the dev UI reads of them are for any caller with a key.
ADK_PUBLIC = {
    ("GET", "/adk/health"),
    ("GET", "/adk/version"),
    ("GET", "/adk/dev-ui"),
    ("GET", "/adk/dev-ui/config"),
    ("GET", "/adk/config/telemetry"),
    ("GET", "/adk/dev-ui/assets/config/runtime-config.json"),
}
ADK_ANY_CALLER = {
    ("GET", "/adk/list-apps"),
    ("GET", "/adk/apps/{app_name}/app-info"),
    ("GET", "/adk/dev/apps/{app_name}/build_graph"),
    ("GET", "/adk/dev/apps/{app_name}/build_graph_image"),
    ("GET", "/adk/dev/apps/{app_name}/builder"),
    ("GET", "/adk/dev/apps/{app_name}/eval_sets"),
    ("GET", "/adk/dev/apps/{app_name}/eval_results"),
    ("GET", "/adk/dev/apps/{app_name}/debug/trace/session/{session_id}"),
}


def adk_routes(served: RunningHttp) -> set[tuple[str, str]]:
    """(method, path) of every ADK route the server has (the dev UI's only with google-adk)."""
    app: Any = served.server.config.app
    return {
        (method, route.path)
        for route in app.routes
        if getattr(route, "path", "").startswith("/adk") and hasattr(route, "methods")
        for method in route.methods - {"HEAD"}
    }


async def test_adk_routes_reach_only_the_callers_own_sessions(
    clients: Clients, served: RunningHttp, settings: Settings
) -> None:
    alice = clients[ALICE]
    base = f"/adk/apps/{REIMBURSE}/users/{ALICE}/sessions"
    created = await alice.post(base, json={"state": {"tier": "gold"}})
    assert created.status_code == 200, created.text
    adk_session = created.json()["id"]
    waiting_session, ticket = await pending_approval(alice)
    ArtifactStore(
        redis.Redis.from_url(settings.require_redis_url()), Keys(settings.key_prefix)
    ).save(REIMBURSE, ALICE, adk_session, "note.txt", genai_types.Part(text="hers"))
    one = f"{base}/{adk_session}"
    art = f"{one}/artifacts/note.txt"
    message = {"role": "user", "parts": [{"text": "Reimburse $5 for coffee."}]}
    run = {"appName": REIMBURSE, "userId": ALICE, "sessionId": adk_session, "newMessage": message}
    answer = {"id": ticket, "name": "ask_for_approval", "response": {"status": "approved"}}
    completing = {
        "appName": REIMBURSE, "userId": ALICE, "sessionId": waiting_session,
        "newMessage": {"role": "user", "parts": [{"functionResponse": answer}]},
    }  # fmt: skip
    sessions_route = "/adk/apps/{app_name}/users/{user_id}/sessions"
    memory_route = "/adk/apps/{app_name}/users/{user_id}/memory"
    memory = f"/adk/apps/{REIMBURSE}/users/{ALICE}/memory"
    one_route = sessions_route + "/{session_id}"
    art_route = one_route + "/artifacts/{artifact_name:path}"

    def owned(who: str) -> list[tuple[str, str, str, Any]]:
        """(method, route, url, body) of every ADK route on alice's resources; the ones that
        end something only for who may: the ticket's result for the admin (a service's to
        post), the artifact and the session for `who` == ALICE."""
        probes: list[tuple[str, str, str, Any]] = [
            ("GET", sessions_route, base, None),
            ("GET", one_route, one, None),
            ("GET", one_route + "/artifacts", f"{one}/artifacts", None),
            ("GET", art_route, art, None),
            ("GET", art_route + "/versions", f"{art}/versions", None),
            ("GET", art_route + "/versions/{version_id}", f"{art}/versions/0", None),
            ("GET", art_route + "/versions/metadata", f"{art}/versions/metadata", None),
            ("GET", art_route + "/versions/{version_id}/metadata", f"{art}/versions/0/metadata", None),  # noqa: E501
            ("PATCH", one_route, one, {"stateDelta": {"tier": "x"}}),
            ("POST", "/adk/run", "/adk/run", run),
            ("POST", "/adk/run_sse", "/adk/run_sse", run),
            ("POST", sessions_route, base, {"sessionId": f"new-{who}"}),
            ("POST", one_route, f"{base}/newer-{who}", None),
            ("PATCH", memory_route, memory, {"sessionId": adk_session}),
        ]  # fmt: skip
        if who == "admin":
            probes.append(("POST", "/adk/run", "/adk/run", completing))
        if who == ALICE:
            probes += [("DELETE", art_route, art, None), ("DELETE", one_route, one, None)]
        return probes

    probed: set[tuple[str, str]] = set()
    async with httpx.AsyncClient(base_url=clients.url, timeout=WAIT_S) as anonymous:
        for method, route, url, body in owned(ALICE):
            probed.add((method, route))
            assert (await anonymous.request(method, url, json=body)).status_code == 401, url
            for name in EVERYONE - OWNER:
                denied = await clients[name].request(method, url, json=body)
                assert denied.status_code == 404, (name, method, url, denied.text)
        # Nothing a denied caller sent changed alice's session, artifact or ticket.
        session = (await alice.get(one)).json()
        assert session["state"]["tier"] == "gold"
        listed = (await alice.get(base)).json()
        ids = {s["id"] for s in listed}
        assert {adk_session, waiting_session} <= ids
        assert not {f"new-{ALICE}", f"newer-{ALICE}"} & ids  # none made by another
        assert (await alice.get(art)).json() == {"text": "hers"}
        assert ticket in {t["call_id"] for t in (await clients["admin"].get("/tickets")).json()}
        for name in ("admin", ALICE):  # admin acting as alice, then alice, who ends them
            for method, _, url, body in owned(name):
                allowed = await clients[name].request(method, url, json=body)
                assert allowed.status_code == 200, (name, method, url, allowed.text)
        decided = session_key(REIMBURSE, ALICE, waiting_session)
        assert await served.orch.wait_until_settled(decided, WAIT_S)
        assert (await alice.get(one)).status_code == 404  # deleted by its owner
        present = adk_routes(served)
        for method, route in ADK_PUBLIC & present:
            probed.add((method, route))
            public = await anonymous.request(method, route)
            assert public.status_code in (200, 307, 404), route  # 404: the dev UI is not installed
            assert public.status_code != 404 or "adk-web" in public.text, route
        for method, route in ADK_ANY_CALLER & present:
            probed.add((method, route))
            url = route.format(app_name=REIMBURSE, session_id=adk_session)
            assert (await anonymous.request(method, url)).status_code == 401, url
            for name in EVERYONE:
                assert (await clients[name].request(method, url)).status_code == 200, (name, url)
    # Every ADK route the server has was probed.
    assert present <= probed, present - probed


async def test_adk_routes_let_a_user_answer_and_write_only_what_is_theirs(
    clients: Clients, served: RunningHttp
) -> None:
    alice, admin = clients[ALICE], clients["admin"]
    base = f"/adk/apps/{REIMBURSE}/users/{ALICE}/sessions"
    waiting_session, ticket = await pending_approval(alice)
    one = f"{base}/{waiting_session}"

    def run(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        message = {"role": "user", "parts": parts}
        return {
            "appName": REIMBURSE, "userId": ALICE, "sessionId": waiting_session,
            "newMessage": message, **extra,
        }  # fmt: skip

    approve = {"id": ticket, "name": "ask_for_approval", "response": {"status": "approved"}}
    completing = run([{"functionResponse": approve}])
    # An approval's result is a service's (or an admin's) to post, through ADK's route too.
    refused = await alice.post("/adk/run", json=completing)
    assert refused.status_code == 403 and "service:<app>" in refused.text, refused.text
    assert ticket in {t["call_id"] for t in (await admin.get("/tickets")).json()}
    # App-wide state, which every user of the app reads, is an admin's to write.
    shared = {"app:notice": "refunds need no approval"}
    said = run([{"text": "hello"}], stateDelta=shared)
    for method, url, body in [
        ("PATCH", one, {"stateDelta": shared}),
        ("POST", base, {"sessionId": f"s-{uuid.uuid4().hex[:6]}", "state": shared}),
        ("POST", "/adk/run", said),
        ("POST", "/adk/run_sse", said),
    ]:
        denied = await alice.request(method, url, json=body)
        assert denied.status_code == 403 and "app:notice" in denied.text, (url, denied.text)
    assert (await alice.patch(one, json={"stateDelta": {"user:tier": "gold"}})).status_code == 200
    state = (await alice.get(one)).json()["state"]
    assert state["user:tier"] == "gold" and "app:notice" not in state
    assert (await admin.patch(one, json={"stateDelta": shared})).status_code == 200
    # Not even an admin supplies a user's credential, through ADK's route either.
    credential_ticket = await pending_credential(alice)
    token = {
        "credentialKey": "bank_api",
        "exchangedAuthCredential": {"http": {"credentials": {"token": "not-hers"}}},
    }
    supplied = {
        "id": f"adk-credential-{credential_ticket}", "name": "adk_request_credential",
        "response": token,
    }  # fmt: skip
    bank_session = next(
        t["session_id"]
        for t in (await admin.get("/tickets")).json()
        if t["call_id"] == credential_ticket
    )
    by_admin = {**run([{"functionResponse": supplied}]), "appName": BANK, "sessionId": bank_session}
    answered = await admin.post("/adk/run", json=by_admin)
    assert answered.status_code == 403 and "only its user" in answered.text, answered.text
    assert (await alice.get(f"/tickets/{credential_ticket}")).json()["kind"] == "credential"
    # The admin posts the approval's result: the agent resumes.
    assert (await admin.post("/adk/run", json=completing)).status_code == 200
    decided = session_key(REIMBURSE, ALICE, waiting_session)
    assert await served.orch.wait_until_settled(decided, WAIT_S)
