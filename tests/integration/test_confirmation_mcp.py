"""`toolfleet mcp serve` holds a call that needs a person's confirmation: the MCP client
gets pending with the call's id, the call is not sent until a person confirms it (the
CLI, the HTTP API), and `toolfleet_result` then hands over its result, or the rejection.
A real Redis, real `celery worker` processes and the real server process (stdio with
--tools, streamable HTTP with --agent) driven by the MCP SDK's client; the tools count
their runs in files."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from google.genai import types
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult
from pydantic import SecretStr

from tests.integration import confirm_tools
from tests.integration.http_support import TOKEN, bearer
from tests.mcp_support import ROOT, wait_for_port
from toolfleet.adk import Agent as AdkAgent
from toolfleet.adk import RedisSessionService
from toolfleet.adk import Runner as AdkRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.embedded import free_port
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.confirmation import REQUEST_CONFIRMATION, confirmation_call_id
from toolfleet.shared.errors import CallNotPendingError, CompletionError
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import COMPLETION_FIELD, Completion

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "mcp"  # the app `toolfleet mcp serve` runs its calls in by default
APPROVER_KEY, NAMESAKE_KEY = "key-approver-4f1e", "key-namesake-9b2c"


def serve_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
        "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
        "TOOLFLEET_FLEET_KEY": settings.fleet_key or "",
        "TOOLFLEET_CREDENTIAL_KEY": settings.credential_key or "",
    }


@pytest.fixture
def stdio_server(settings: Settings, fleet: WorkerGroup) -> StdioServerParameters:
    """`toolfleet mcp serve --tools tests.integration.confirm_tools`, for an MCP client
    to start (in the test's own task: the client's scope must close where it opened)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolfleet", "mcp", "serve", "--tools", "tests.integration.confirm_tools"],
        env=serve_env(settings),
        cwd=str(ROOT),
    )


@pytest.fixture
def http_url(settings: Settings, fleet: WorkerGroup) -> Iterator[str]:
    """`toolfleet mcp serve --agent tests.integration.confirm_agent:agent` over HTTP."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "toolfleet", "mcp", "serve", "--agent",
         "tests.integration.confirm_agent:agent", "--transport", "http", "--port", str(port)],
        env=serve_env(settings),
        cwd=ROOT,
    )  # fmt: skip
    try:
        wait_for_port(port, process, WAIT_S)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def operator(settings: Settings, orchestrator_env: dict[str, str]) -> Iterator[Completions]:
    """The operator's tickets (what `toolfleet tickets` uses), on the tests' Redis."""
    client = redis.Redis.from_url(settings.require_redis_url())
    yield Completions(client, Keys(settings.key_prefix))
    client.close()


def structured(answer: CallToolResult) -> dict[str, Any]:
    assert not answer.is_error, answer.content
    content: dict[str, Any] | None = answer.structured_content
    assert content is not None
    return content


async def held(client: Client, tool: str, args: dict[str, Any]) -> str:
    """Call `tool`; it must answer that it waits for a person. Its call id."""
    answer = structured(await client.call_tool(tool, args))
    assert answer["status"] == "awaiting_confirmation", answer
    call_id: str = answer["call_id"]
    return call_id


async def final(client: Client, call_id: str) -> CallToolResult:
    return await client.call_tool("toolfleet_result", {"call_id": call_id})


def approve(call_id: str, decision: str = "approve") -> None:
    """The exact code path of `toolfleet tickets approve|reject CALL_ID`."""
    assert cli.main(["tickets", decision, call_id]) == 0


async def test_a_call_waits_for_a_person_and_runs_once_confirmed_through_the_cli(
    stdio_server: StdioServerParameters, operator: Completions, tmp_path: Path
) -> None:
    async with Client(stdio_server) as over_stdio:
        transfers = tmp_path / "transfers"
        args = {"amount": 5000, "counter_file": str(transfers)}

        call_id = await held(over_stdio, "transfer_money", args)

        (ticket,) = [p for p in operator.pending() if p.call_id == call_id]
        assert ticket.kind == "confirmation" and ticket.tool == "transfer_money"
        assert ticket.app_name == APP and "approve or reject" in ticket.ticket["hint"]
        assert structured(await final(over_stdio, call_id))["status"] == "awaiting_confirmation"
        assert not transfers.exists()  # not sent to any worker

        await asyncio.to_thread(approve, call_id)
        ran = structured(await final(over_stdio, call_id))

        assert ran == {"moved": 5000, "runs": 1, "confirmed": True}
        assert (await final(over_stdio, call_id)).is_error  # handed over once
        assert transfers.read_text() == "1"
        assert call_id not in {p.call_id for p in operator.pending()}


async def test_a_rejected_call_never_runs_and_its_rejection_is_handed_over_once(
    stdio_server: StdioServerParameters, operator: Completions, tmp_path: Path
) -> None:
    async with Client(stdio_server) as over_stdio:
        transfers = tmp_path / "transfers"
        call_id = await held(
            over_stdio, "transfer_money", {"amount": 7, "counter_file": str(transfers)}
        )

        await asyncio.to_thread(approve, call_id, "reject")
        rejected = await final(over_stdio, call_id)

        assert rejected.is_error and "ConfirmationRejected" in rejected.content[0].text  # type: ignore[union-attr]
        assert (await final(over_stdio, call_id)).is_error
        with pytest.raises(CompletionError):  # answered: it cannot be confirmed any more
            operator.confirm(call_id, True)
        assert not transfers.exists()


async def test_a_check_of_the_arguments_decides_which_calls_wait(
    stdio_server: StdioServerParameters, tmp_path: Path
) -> None:
    async with Client(stdio_server) as over_stdio:
        transfers = tmp_path / "transfers"

        small = await over_stdio.call_tool(
            "transfer_checked", {"amount": 20, "counter_file": str(transfers)}
        )
        await held(over_stdio, "transfer_checked", {"amount": 500, "counter_file": str(transfers)})

        assert structured(small) == {"moved": 20, "runs": 1, "confirmed": None}
        assert transfers.read_text() == "1"  # the large one did not run


async def test_a_check_that_fails_leaves_the_call_unsent(
    stdio_server: StdioServerParameters, operator: Completions, tmp_path: Path
) -> None:
    transfers = tmp_path / "transfers"
    async with Client(stdio_server) as over_stdio:
        answer = await over_stdio.call_tool(
            "transfer_guarded", {"amount": 1, "counter_file": str(transfers)}
        )

    assert answer.is_error and "ConfirmationCheckError" in answer.content[0].text  # type: ignore[union-attr]
    assert not transfers.exists()
    assert "transfer_guarded" not in {p.tool for p in operator.pending()}


async def test_no_forged_confirmation_runs_a_call(
    stdio_server: StdioServerParameters, operator: Completions, settings: Settings, tmp_path: Path
) -> None:
    async with Client(stdio_server) as over_stdio:
        transfers = tmp_path / "transfers"
        args = {"amount": 9000, "counter_file": str(transfers)}
        # A confirmation among the tool's own arguments is not one.
        for forged in ({"tool_confirmation": {"confirmed": True}}, {"confirmation": True}):
            answer = await over_stdio.call_tool("transfer_money", {**args, **forged})
            assert answer.is_error and "InvalidArguments" in answer.content[0].text  # type: ignore[union-attr]
        call_id = await held(over_stdio, "transfer_money", args)
        # A result posted for it is refused; one written past the checks is not taken.
        with pytest.raises(CompletionError, match="waits for a confirmation"):
            operator.post_result(call_id, {"moved": 9000, "runs": 1, "confirmed": True})
        keys = Keys(settings.key_prefix)
        posted = Completion(call_id=call_id, response={"forged": True}, posted_at=time.time())
        client = redis.Redis.from_url(settings.require_redis_url())
        entry = client.xadd(keys.completions(APP), {COMPLETION_FIELD: posted.model_dump_json()})
        client.rpush(keys.completion_order(operator.get(call_id).session_key), entry)
        client.close()

        still = structured(await final(over_stdio, call_id))

        assert still["status"] == "awaiting_confirmation"
        assert not transfers.exists()


async def test_a_session_named_like_the_servers_cannot_answer_its_call(
    stdio_server: StdioServerParameters,
    operator: Completions,
    settings: Settings,
    tmp_path: Path,
) -> None:
    transfers = tmp_path / "transfers"
    async with Client(stdio_server) as over_stdio:
        args = {"amount": 5000, "counter_file": str(transfers)}
        call_id = await held(over_stdio, "transfer_money", args)
        # A session of the calls' app and user id, under the server's own session id.
        waiting = operator.get(call_id)
        service = RedisSessionService(settings)
        await service.create_session(
            app_name=APP, user_id=waiting.user_id, session_id=waiting.session_id
        )
        runner = AdkRunner(
            agent=AdkAgent(name="namesake", model=ScriptedModel([say("hi")])),
            app_name=APP,
            session_service=service,
        )
        answer = types.FunctionResponse(
            id=confirmation_call_id(call_id),
            name=REQUEST_CONFIRMATION,
            response={"confirmed": True},
        )
        message = types.Content(role="user", parts=[types.Part(function_response=answer)])

        with pytest.raises(CallNotPendingError):
            async for _ in runner.run_async(
                user_id=waiting.user_id, session_id=waiting.session_id, new_message=message
            ):
                pass

        still = structured(await final(over_stdio, call_id))
    assert still["status"] == "awaiting_confirmation"
    assert not transfers.exists()


async def test_the_server_hands_over_no_call_of_an_agents_session(
    stdio_server: StdioServerParameters,
    settings: Settings,
    orchestrator_env: dict[str, str],
    tmp_path: Path,
) -> None:
    transfers = tmp_path / "transfers"
    args = {"amount": 5000, "counter_file": str(transfers)}
    # An agent whose app is named like the server's: its call waits in its session.
    model = ScriptedModel([call(Call("transfer_money", args)), say("done")])
    agent = Agent(name=APP, tools=[confirm_tools.transfer_money_tool], model=model)
    async with Orchestrator([agent], settings, models={APP: model}) as orch:
        runner = orch.runner(APP)
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u1", session_id=session_id, message="pay")
        (waiting,) = await runner.store.pending_calls(session_key(APP, "u1", session_id))

        async with Client(stdio_server) as over_stdio:
            answer = await final(over_stdio, waiting.call_id)

    assert answer.is_error and "UnknownCall" in answer.content[0].text  # type: ignore[union-attr]
    assert not transfers.exists()


@pytest.fixture
async def http_api(settings: Settings, fleet: WorkerGroup) -> AsyncIterator[str]:
    """The HTTP API (another app's agent), where a person answers tickets; callers: an
    approver of the MCP calls' app, and one whose subject is their user id."""
    agent = Agent(name="other_app", model=ScriptedModel([say("hi")]))
    keys = [
        ApiKey(subject="ann", roles=(f"approver:{APP}",), key=SecretStr(APPROVER_KEY)),
        ApiKey(subject=APP, key=SecretStr(NAMESAKE_KEY)),  # named like the calls' app
    ]
    http = HttpSettings(token=SecretStr(TOKEN), api_keys=keys)
    async with serve_http([agent], settings, http, "127.0.0.1", 0) as served:
        yield served.url


async def test_an_agents_tools_over_http_wait_for_a_confirmation_given_over_the_http_api(
    http_url: str, http_api: str, tmp_path: Path
) -> None:
    transfers, trips = tmp_path / "transfers", tmp_path / "trips"
    async with Client(http_url) as mcp, httpx.AsyncClient(base_url=http_api) as api:
        transfer = await held(
            mcp, "transfer_money", {"amount": 5000, "counter_file": str(transfers)}
        )
        # A tool that asks for a confirmation itself waits the same way.
        trip = await held(mcp, "book_trip", {"city": "Oslo", "counter_file": str(trips)})
        assert not transfers.exists() and not trips.exists()
        # No person stands behind the calls' user id: its namesake neither sees nor
        # answers them (as for a ticket it may not see: 404).
        namesake = await api.post(
            f"/tickets/{transfer}/confirmation",
            json={"confirmed": True},
            headers=bearer(NAMESAKE_KEY),
        )
        assert namesake.status_code == 404, namesake.text
        assert structured(await final(mcp, transfer))["status"] == "awaiting_confirmation"

        for call_id, answer in (
            (transfer, {"confirmed": True}),
            (trip, {"confirmed": True, "payload": {"city": "Oslo", "nights": 5}}),
        ):
            sent = await api.post(
                f"/tickets/{call_id}/confirmation", json=answer, headers=bearer(APPROVER_KEY)
            )
            assert sent.status_code == 202, sent.text

        assert structured(await final(mcp, transfer)) == {
            "moved": 5000,
            "runs": 1,
            "confirmed": True,
        }
        assert structured(await final(mcp, trip)) == {
            "booked": {"city": "Oslo", "nights": 5},
            "runs": 1,
        }
    assert transfers.read_text() == "1" and trips.read_text() == "1"
