"""Where cancellation starts: HTTP (a session, one ticket), `toolfleet cancel`,
`toolfleet tickets cancel`, and Ctrl-C in `toolfleet run`; on real workers."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration import cancel_tools, fleet_tools
from tests.integration.http_support import TOKEN, bearer
from tests.integration.test_cancel import left, started
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "canceller"


def by_message(view: ScriptView) -> Any:
    """A slow call for a message naming a marker; a ticket for 'ticket'."""
    if view.user_text == "ticket":
        return call(Call("open_case", {"name": "printer"}))
    return call(Call("fetch_slowly", {"marker": view.user_text, "seconds": 10}))


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    tools = [cancel_tools.fetch_slowly, fleet_tools.open_case_tool]
    agent = Agent(name=APP, tools=tools, model=ScriptedModel([by_message, say("answered")]))
    async with serve_http([agent], settings, HttpSettings(token=TOKEN), "127.0.0.1", 0) as running:
        yield running


async def new_session(client: httpx.AsyncClient, user: str) -> str:
    created = await client.post(f"/apps/{APP}/users/{user}/sessions")
    session_id: str = created.json()["id"]
    return session_id


def responses(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part["function_response"]["response"]
        for event in session["events"]
        for part in (event.get("content") or {}).get("parts", [])
        if "function_response" in part
    ]


async def test_http_cancels_a_session_in_flight_and_closes_one_ticket(
    served: RunningHttp, tmp_path: Path
) -> None:
    marker = str(tmp_path / "slow")
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client:
        user = f"u-{uuid.uuid4().hex[:6]}"
        base = f"/apps/{APP}/users/{user}/sessions"
        session_id = await new_session(client, user)
        sending = asyncio.create_task(
            client.post(f"{base}/{session_id}/messages", json={"text": marker})
        )
        await started(Path(marker))
        cancelled = await client.post(f"{base}/{session_id}/cancel", json={})
        assert cancelled.status_code == 202, cancelled.text
        answered = await asyncio.wait_for(sending, WAIT_S)
        assert answered.status_code == 200, answered.text
        session = (await client.get(f"{base}/{session_id}")).json()
        assert [r["error_type"] for r in responses(session)] == ["Cancelled"]
        assert not left(Path(marker), "finished")

        # One ticket: closed with a Cancelled response, and the agent answers it.
        ticketed = await new_session(client, user)
        sent = await client.post(f"{base}/{ticketed}/messages", json={"text": "ticket"})
        (ticket,) = sent.json()["pending"]
        closed = await client.post(f"/tickets/{ticket['call_id']}/cancel")
        assert closed.status_code == 202, closed.text
        assert await served.orch.wait_until_settled(session_key(APP, user, ticketed), WAIT_S)
        again = await client.post(f"/tickets/{ticket['call_id']}/cancel")
        assert again.status_code == 404, again.text
        session = (await client.get(f"{base}/{ticketed}")).json()
        assert responses(session)[-1]["error_type"] == "Cancelled"


async def test_the_cli_cancels_a_session_and_a_ticket(
    served: RunningHttp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = str(tmp_path / "slow")
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client:
        user = f"u-{uuid.uuid4().hex[:6]}"
        base = f"/apps/{APP}/users/{user}/sessions"
        session_id = await new_session(client, user)
        sending = asyncio.create_task(
            client.post(f"{base}/{session_id}/messages", json={"text": marker})
        )
        # Another user's session of the same id, waiting on a ticket: not cancelled.
        other = f"v-{uuid.uuid4().hex[:6]}"
        others = f"/apps/{APP}/users/{other}/sessions"
        made = await client.post(others, json={"session_id": session_id})
        assert made.status_code == 201, made.text
        asked = await client.post(f"{others}/{session_id}/messages", json={"text": "ticket"})
        (others_ticket,) = asked.json()["pending"]
        await started(Path(marker))
        # The exact code path of `toolfleet cancel SESSION --app APP --user USER`.
        cancel = ["cancel", session_id, "--app", APP, "--user", user]
        assert await asyncio.to_thread(cli.main, cancel) == 0
        await asyncio.wait_for(sending, WAIT_S)
        session = (await client.get(f"{base}/{session_id}")).json()
        assert [r["error_type"] for r in responses(session)] == ["Cancelled"]
        still = await client.get(f"/tickets/{others_ticket['call_id']}")
        assert still.status_code == 200 and still.json()["user_id"] == other, still.text
        untouched = (await client.get(f"{others}/{session_id}")).json()
        assert [r.get("error_type") for r in responses(untouched)] == [None]  # its ticket

        ticketed = await new_session(client, user)
        sent = await client.post(f"{base}/{ticketed}/messages", json={"text": "ticket"})
        (ticket,) = sent.json()["pending"]
        assert await asyncio.to_thread(cli.main, ["tickets", "cancel", ticket["call_id"]]) == 0
        assert await served.orch.wait_until_settled(session_key(APP, user, ticketed), WAIT_S)
    out = capsys.readouterr().out
    assert f"cancelled session {session_id} of user {user} in app {APP}" in out
    assert f"cancelled ticket {ticket['call_id']}" in out


async def test_ctrl_c_in_toolfleet_run_cancels_the_call_and_the_run_ends(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    marker = str(tmp_path / "slow")
    command = [
        sys.executable, "-m", "toolfleet", "run", "--no-wait",
        "--agent", "tests.integration.cancel_tools:slow_agent", marker,
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=orchestrator_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        await started(Path(marker))
        process.send_signal(signal.SIGINT)
        out, err = await asyncio.to_thread(process.communicate, timeout=WAIT_S)
    finally:
        process.kill()
    assert process.returncode == 130, (out, err)
    assert "cancelling the session" in err
    assert "Cancelled" in out and "it finished" not in out, out
    assert not left(Path(marker), "finished")


async def test_toolfleet_run_takes_plugins(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], tmp_path: Path
) -> None:
    marker = str(tmp_path / "slow")
    command = [
        sys.executable, "-m", "toolfleet", "run", "--no-wait",
        "--agent", "tests.integration.cancel_tools:slow_agent",
        "--plugin", "tests.integration.cancel_tools:blocker", marker,
    ]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, command, env=orchestrator_env, capture_output=True, text=True,
        timeout=WAIT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "blocked_by_plugin" in done.stdout and "it finished" in done.stdout
    assert not left(Path(marker), "started")  # the plugin answered: no worker ran it
