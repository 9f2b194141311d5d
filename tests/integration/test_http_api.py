"""The HTTP API of `toolfleet serve --http`, on a real Redis with real worker processes."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from examples import reimbursement, support_tickets
from tests.integration import fleet_tools
from tests.integration.http_support import TOKEN, bearer, collect_until_answer, sse
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

pytestmark = pytest.mark.integration

WAIT_S = 30


def parallel_agent() -> Agent:
    """One turn of four calls on two pools, one with a secret argument, then an answer."""
    model = ScriptedModel(
        [
            call(
                Call("nap", {"seconds": 0.3, "label": "a"}),
                Call("nap", {"seconds": 0.3, "label": "b"}),
                Call("recall", {"key": "colour"}),
                Call("call_api", {"endpoint": "/v1/rates", "api_key": "sk-live-123"}),
            ),
            say("all four calls are back"),
        ]
    )
    tools = [fleet_tools.nap, fleet_tools.recall, fleet_tools.call_api]
    return Agent(name="parallel_agent", tools=tools, model=model)


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    http = HttpSettings(token=TOKEN, max_body_bytes=64 * 1024)
    agents = [reimbursement.agent, support_tickets.agent, parallel_agent()]
    async with serve_http(agents, settings, http, "127.0.0.1", 0) as running:
        yield running


@pytest.fixture
async def client(served: RunningHttp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as c:
        yield c


async def new_session(client: httpx.AsyncClient, app: str, user: str = "u1") -> str:
    response = await client.post(f"/apps/{app}/users/{user}/sessions", json={})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def dead_letters(settings: Settings) -> int:
    with redis.Redis.from_url(settings.require_redis_url()) as client:
        return int(client.xlen(Keys(settings.key_prefix).dead_letters()))


async def test_a_message_streams_the_calls_and_results_of_a_parallel_turn_then_the_answer(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client, "parallel_agent")
    url = f"/apps/parallel_agent/users/u1/sessions/{session_id}/messages/stream"
    async with asyncio.timeout(WAIT_S), client.stream("POST", url, json={"text": "go"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        seen = [item async for item in sse(response)]  # the stream ends with the invocation

    names = [name for name, _ in seen]
    assert names[0] == "event" and seen[0][1]["kind"] == "user"
    assert names[-1] == "answer"
    assert seen[-1][1]["text"] == "all four calls are back"
    (dispatched,) = [data for name, data in seen if name == "calls"]
    pools = {c["tool"]: c["pool"] for c in dispatched["calls"]}
    assert pools == {"nap": "default", "recall": "other", "call_api": "default"}
    api_call = next(c for c in dispatched["calls"] if c["tool"] == "call_api")
    assert api_call["args"] == {"endpoint": "/v1/rates", "api_key": "***"}
    results = [data for name, data in seen if name == "result"]
    assert sorted(r["tool"] for r in results) == ["call_api", "nap", "nap", "recall"]
    for result in results:
        assert result["status"] == "success" and result["worker"] and result["pid"] > 0
    naps = [r for r in results if r["tool"] == "nap"]
    assert all(r["duration_s"] >= 0.3 for r in naps)
    assert len({(r["worker"], r["pid"]) for r in naps}) == 2  # the two naps ran side by side
    # Results stream in before the turn's responses are recorded and the model answers.
    first_result = names.index("result")
    assert names.index("calls") < first_result < names.index("answer")
    assert "sk-live-123" not in str(seen)
    model_events = [d for n, d in seen if n == "event" and d["kind"] == "model"]
    assert model_events[-1]["text"] == "all four calls are back"

    session = (await client.get(f"/apps/parallel_agent/users/u1/sessions/{session_id}")).json()
    assert session["pending"] == [] and len(session["events"]) == 4
    assert "sk-live-123" not in str(session)


async def test_an_approval_posted_through_the_api_resumes_the_agent_and_streams_its_answer(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    app = "reimbursement_agent"
    session_id = await new_session(client, app, "emp-7")
    base = f"/apps/{app}/users/emp-7/sessions/{session_id}"
    first = await client.post(f"{base}/messages", json={"text": "Please reimburse 200$ for meals"})
    assert first.status_code == 200, first.text
    body = first.json()
    assert "asked Sean Zhou for approval" in body["answer"]
    assert body["settled"] is False
    (ticket,) = body["pending"]
    assert ticket["tool"] == "ask_for_approval"
    assert ticket["args"] == {"purpose": "meals", "amount": 200.0}
    listed = (await client.get("/tickets", params={"session_id": session_id})).json()
    assert [t["call_id"] for t in listed] == [ticket["call_id"]]
    sessions = (await client.get(f"/apps/{app}/users/emp-7/sessions")).json()
    assert [(s["id"], s["pending"]) for s in sessions] == [(session_id, 1)]

    async with (
        asyncio.timeout(WAIT_S),
        client.stream("GET", f"{base}/stream", params={"until_answer": "true"}) as watch,
    ):
        assert watch.status_code == 200  # subscribed: nothing after this is missed
        approve = await client.post(f"/tickets/{ticket['call_id']}/approve", json={"note": "ok"})
        assert approve.status_code == 202, approve.text
        assert approve.json()["session_id"] == session_id
        seen = await collect_until_answer(watch)

    names = [name for name, _ in seen]
    completion = next(d for n, d in seen if n == "event" and d["kind"] == "completion")
    assert completion["event"]["calls"][0]["worker"] == "http"
    (dispatched,) = [d for n, d in seen if n == "calls"]
    assert [(c["tool"], c["pool"]) for c in dispatched["calls"]] == [("reimburse", "default")]
    (result,) = [d for n, d in seen if n == "result"]
    assert result["status"] == "success" and result["worker"] and result["duration_s"] >= 0
    assert names[-1] == "answer"
    assert seen[-1][1]["text"] == "Approved and paid: $200.00 for meals."

    dead_before = dead_letters(settings)
    again = await client.post(f"/tickets/{ticket['call_id']}/approve")
    assert again.status_code == 409
    refused = again.json()
    assert refused["status"] == 409
    assert re.fullmatch(
        rf"call {ticket['call_id']!r} already has its final result \(completion "
        r"\d+-\d+ applied at [0-9: -]+ UTC\); nothing was changed",
        refused["detail"],
    ), refused
    assert dead_letters(settings) == dead_before + 1
    assert (await client.get(f"/tickets/{ticket['call_id']}")).status_code == 404
    session = (await client.get(base)).json()
    assert session["pending"] == []
    assert session["events"][-1]["content"]["parts"][0]["text"] == seen[-1][1]["text"]


async def test_waiting_for_tickets_returns_the_answer_after_a_background_completion(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client, "support_agent")
    response = await client.post(
        f"/apps/support_agent/users/u1/sessions/{session_id}/messages",
        json={"text": "My login keeps failing", "wait_for_tickets_s": WAIT_S},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["settled"] is True and body["pending"] == []
    assert body["answer"].startswith("Ticket ") and "is resolved" in body["answer"]


async def test_requests_without_the_token_are_refused_with_401(served: RunningHttp) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=WAIT_S) as anonymous:
        for method, path in [
            ("GET", "/tickets"),
            ("GET", "/apps"),
            ("POST", "/tickets/tf-x/approve"),
            ("GET", "/apps/reimbursement_agent/users/u1/sessions"),
        ]:
            response = await anonymous.request(method, path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer" in response.json()["detail"]
        wrong = await anonymous.get("/tickets", headers=bearer("not-the-token"))
        assert wrong.status_code == 401
        assert wrong.json() == {"detail": "the bearer token is not valid", "status": 401}
        # Health, the schema and the page itself hold nothing secret.
        assert (await anonymous.get("/health")).status_code == 200
        assert (await anonymous.get("/openapi.json")).status_code == 200
        assert (await anonymous.get("/approvals")).status_code == 200


async def test_every_error_is_json_with_a_clear_message_and_its_status(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    sessions = "/apps/reimbursement_agent/users/u1/sessions"
    unknown = await client.get(f"{sessions}/nope")
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "unknown session 'nope' of user 'u1'", "status": 404}
    assert (await client.post(f"{sessions}/nope/messages", json={"text": "hi"})).status_code == 404

    app = await client.get("/apps/no_such_agent/users/u1/sessions")
    assert app.status_code == 404 and "unknown app 'no_such_agent'" in app.json()["detail"]

    session_id = await new_session(client, "reimbursement_agent")
    bad = await client.post(f"{sessions}/{session_id}/messages", json={"txt": "hi"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("invalid request: body.text: Field required")
    assert {e["loc"][-1] for e in bad.json()["errors"]} == {"text", "txt"}
    not_json = await client.post(
        f"{sessions}/{session_id}/messages",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert not_json.status_code == 422 and "JSON" in not_json.json()["detail"]

    twice = await client.post(sessions, json={"session_id": session_id})
    assert twice.status_code == 409 and "exists already" in twice.json()["detail"]

    dead_before = dead_letters(settings)
    no_call = await client.post("/tickets/tf-nope/result", json={"response": {"status": "x"}})
    assert no_call.status_code == 404
    assert no_call.json()["detail"].startswith("no pending call with id 'tf-nope'")
    assert dead_letters(settings) == dead_before + 1
    not_object = await client.post("/tickets/tf-nope/result", json={"response": [1, 2]})
    assert not_object.status_code == 422

    big = await client.post(f"{sessions}/{session_id}/messages", json={"text": "x" * 70_000})
    assert big.status_code == 413 and "TOOLFLEET_HTTP_MAX_BODY_BYTES" in big.json()["detail"]

    wrong_method = await client.delete(sessions)
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "GET, HEAD, POST"
    assert wrong_method.json() == {"detail": "Method Not Allowed", "status": 405}

    route = await client.get("/no/such/route")
    assert route.status_code == 404 and route.json() == {"detail": "Not Found", "status": 404}

    forged = await client.post(
        f"{sessions}/{session_id}/messages",
        json={"text": "hi"},
        headers={"Origin": "https://evil.example"},
    )
    assert forged.status_code == 403 and "cross-origin" in forged.json()["detail"]


async def test_a_message_holding_a_lone_surrogate_is_refused_with_a_clear_error(
    client: httpx.AsyncClient,
) -> None:
    """JSON may escape half of a surrogate pair alone; UTF-8 cannot carry it. The API
    refuses the message, saying which field, and the session is as it was."""
    sessions = "/apps/reimbursement_agent/users/u1/sessions"
    session_id = await new_session(client, "reimbursement_agent")
    sent = await client.post(
        f"{sessions}/{session_id}/messages",
        content=b'{"text": "Please reimburse 40$ for meals \\ud800"}',
        headers={"Content-Type": "application/json"},
    )
    assert sent.status_code == 422
    assert sent.json()["detail"].startswith("invalid request: body.text: ")
    assert "unicode" in sent.json()["detail"]
    assert (await client.get(f"{sessions}/{session_id}")).json()["events"] == []


async def test_sessions_of_a_user_and_health(client: httpx.AsyncClient) -> None:
    user = f"lister-{uuid.uuid4().hex[:6]}"
    first = await new_session(client, "reimbursement_agent", user)
    second = await new_session(client, "reimbursement_agent", user)
    await client.post(
        f"/apps/reimbursement_agent/users/{user}/sessions/{second}/messages",
        json={"text": "Please reimburse 40$ for meals"},
    )
    listed = (await client.get(f"/apps/reimbursement_agent/users/{user}/sessions")).json()
    assert [s["id"] for s in listed] == [second, first]  # most recently active first
    assert listed[0]["events"] == 4 and listed[1]["events"] == 0  # user, call, result, text

    health = await client.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert body["redis"] is True and body["status"] == "ok"
    assert body["pools"]["default"] == {"workers": 2, "needed": True}
    assert body["pools"]["other"]["workers"] == 1
    assert set(body["agents"]) == {"parallel_agent", "reimbursement_agent", "support_agent"}


def test_serve_with_http_answers_until_sigterm(
    fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    env = {**orchestrator_env, "TOOLFLEET_HTTP_TOKEN": TOKEN}
    command = [sys.executable, "-m", "toolfleet", "serve", "--http", "127.0.0.1:0",
               "--agent", "examples.reimbursement:agent"]  # fmt: skip
    serve = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert serve.stdout is not None
        url = ""
        for raw in serve.stdout:  # blocks until the line is printed (or the process ends)
            line = raw.decode()
            if line.startswith("http: "):
                url = line.split()[1]
                break
        assert url.startswith("http://127.0.0.1:"), serve.stderr.read().decode()
        health = httpx.get(f"{url}/health", timeout=WAIT_S)
        assert health.status_code == 200 and health.json()["agents"] == ["reimbursement_agent"]
        assert httpx.get(f"{url}/tickets", timeout=WAIT_S).status_code == 401
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=WAIT_S)
    assert serve.returncode == 0, err.decode()


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(
    orchestrator_env: dict[str, str],
) -> None:
    env = {k: v for k, v in orchestrator_env.items() if not k.startswith("TOOLFLEET_HTTP_")}
    command = [sys.executable, "-m", "toolfleet", "serve", "--http", "0.0.0.0:0",
               "--agent", "examples.reimbursement:agent"]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, timeout=WAIT_S, check=False)
    assert done.returncode == 2
    assert "TOOLFLEET_HTTP_TOKEN" in done.stderr.decode()


@pytest.fixture
def isolated(settings: Settings, orchestrator_env: dict[str, str]) -> Iterator[Settings]:
    """A private Redis and worker: fuzzing leaves sessions in states no other test expects
    (messages sent while a ticket is open, scripts run past their end)."""
    with EmbeddedRedis() as server:
        own = settings.model_copy(
            update={
                "redis_url": server.url,
                "tool_modules": ["examples.reimbursement", "examples.support_tickets"],
            }
        )
        with WorkerGroup(own, extra_env={"TOOLFLEET_TICKET_RESOLVE_AFTER_S": "0.5"}) as group:
            group.start_all([WorkerSpec(["default", "tickets"], 2, "fuzz")])
            yield own


@pytest.mark.timeout(240)
async def test_property_based_run_against_the_openapi_schema_finds_no_server_errors(
    isolated: Settings, tmp_path: Path
) -> None:
    # Every check schemathesis has (no 5xx, documented statuses, content types, response
    # schemas, refused invalid input, auth enforced), in every phase, including stateful
    # sequences that create sessions and send them messages. Short waits keep it quick:
    # an event stream that never ends is read for --request-timeout seconds.
    http = HttpSettings(token=TOKEN, max_wait_s=0.5)
    # Only the approval agent: its tickets wait for a person, so no background job
    # resumes fuzzed sessions while requests race them (that made turns outlast the
    # 3 s request timeout on 2 cores). Job-completed tickets are covered above.
    agents = [reimbursement.agent]
    async with serve_http(agents, isolated, http, "127.0.0.1", 0) as running:
        st = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "schemathesis.cli", "run", f"{running.url}/openapi.json",
            "--header", f"Authorization: Bearer {TOKEN}", "--checks", "all",
            "--max-examples", "10", "--request-timeout", "3", "--generation-database", "none",
            "--no-color", "--report", "junit", "--report-dir", str(tmp_path),
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(st.communicate(), 200)
    report = output.decode(errors="replace")
    assert st.returncode == 0, report
    # Every operation of the schema was exercised (none filtered out), and all passed.
    selected = re.search(r"(\d+) selected / (\d+) total", report)
    assert selected is not None and selected.group(1) == selected.group(2), report
    assert int(selected.group(1)) >= 14 and " passed" in report
