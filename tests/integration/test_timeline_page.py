"""The session timeline page in a real browser (headless Chromium): a turn's fan-out
across worker processes, a ticket and its completion, and who may see it.

Screenshots go to TOOLFLEET_TEST_ARTIFACTS (default: the test's tmp_path).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.integration import fleet_tools
from tests.integration.browser import Page, artifacts_dir, chromium_page
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "fanout_agent"
NAPS = 4
KEYS = {
    name: ApiKey(subject=name, roles=(), key=f"{name}-{uuid.uuid4().hex}")
    for name in ("tl-owner", "tl-other")
}


def key(name: str) -> str:
    secret = KEYS[name].key
    assert secret is not None
    return secret.get_secret_value()


def fanout_agent() -> Agent:
    naps = [Call("nap", {"seconds": 0.6, "label": f"n{i}"}) for i in range(NAPS)]
    model = ScriptedModel(
        [
            call(*naps, Call("open_case", {"name": "review"})),
            say("napped; the review case is open"),
            say("the review is closed"),
        ]
    )
    return Agent(name=APP, tools=[fleet_tools.nap, fleet_tools.open_case_tool], model=model)


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    http = HttpSettings(token=TOKEN, api_keys=list(KEYS.values()))
    async with serve_http([fanout_agent()], settings, http, "127.0.0.1", 0) as running:
        yield running


def bars(selector: str) -> str:
    return f"document.querySelectorAll('{selector}').length"


async def placed(page: Page, selector: str) -> tuple[float, float]:
    """A bar's left and width, in percent of the turn's time axis."""
    left, width = await page.evaluate(
        f"(() => {{ const b = document.querySelector('{selector}');"
        " return [parseFloat(b.style.left), parseFloat(b.style.width)]; })()"
    )
    return float(left), float(width)


async def test_the_timeline_draws_the_fanout_and_the_ticket_for_its_owner_only(
    served: RunningHttp, chromium: str, tmp_path: Path
) -> None:
    user = "tl-owner"
    artifacts = artifacts_dir(tmp_path)
    async with httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client:
        session_id = (await client.post(f"/apps/{APP}/users/{user}/sessions")).json()["id"]
        answered = await client.post(
            f"/apps/{APP}/users/{user}/sessions/{session_id}/messages", json={"text": "go"}
        )
        (ticket,) = answered.json()["pending"]
        timeline_url = f"/apps/{APP}/users/{user}/sessions/{session_id}/timeline"
        timeline = (await client.get(timeline_url)).json()
        (turn,) = timeline["turns"]
        lanes = {c["lane"] for c in turn["calls"] if c["tool"] == "nap"}
        lanes_all = {c["lane"] for c in turn["calls"]}
        assert len(lanes) >= 2  # the fan-out reached several worker processes

        page_url = f"{served.url}/timeline?app={APP}&user={user}&session={session_id}"
        async with chromium_page(chromium, tmp_path / "profile") as page:
            # The owner sees the turn: one bar per call, one lane per process, the ticket open.
            await page.goto(f"{page_url}#token={key('tl-owner')}")
            await page.wait_for(f"{bars('.bar[data-call-id]')} === {NAPS + 1}", WAIT_S)
            assert (
                await page.evaluate(bars(".lane[data-lane]"))
                == len({c["lane"] for c in turn["calls"]}) + 1
            )  # and the ticket's
            opened = f'[data-ticket="{ticket["call_id"]}"]'
            assert await page.evaluate(f"document.querySelector('{opened}').dataset.completed") == (
                "false"
            )
            # The naps overlap in time: each starts before another one ends.
            overlapping = await page.evaluate(
                """(() => {
                  const spans = [...document.querySelectorAll('.bar[data-call-id]')]
                    .filter((b) => b.textContent === 'nap')
                    .map((b) => [parseFloat(b.style.left), parseFloat(b.style.width)])
                    .map(([left, width]) => [left, left + width]);
                  return spans.filter(([s]) => spans.some(([s2, e2]) => s2 < s && s < e2)).length;
                })()"""
            )
            assert overlapping >= 1
            heading = await page.evaluate("document.querySelector('section.turn h2').textContent")
            assert heading.startswith(
                f"Turn 1: {NAPS + 1} calls on {len(lanes_all)} processes, 1 ticket"
            )
            await page.screenshot(artifacts / "timeline-ticket-open.png")

            # Completed elsewhere: the page follows, saying by whom.
            done = await client.post(f"/tickets/{ticket['call_id']}/approve", json={})
            assert done.status_code == 202, done.text
            settled = served.orch.wait_until_settled(session_key(APP, user, session_id), WAIT_S)
            assert await settled
            await page.wait_for(
                f"document.querySelector('{opened}').dataset.completed === 'true'", WAIT_S
            )
            assert "completed after" in await page.evaluate(
                f"document.querySelector('{opened}').textContent"
            )
            # Drawn to scale: the ticket runs from its call's end to its completion, on the
            # calls' time axis.
            done_turn = (await client.get(timeline_url)).json()["turns"][0]
            ((opened, completed),) = [
                (t["opened_at"], t["completed_at"]) for t in done_turn["tickets"]
            ]
            start = min([done_turn["asked_at"], *(c["started_at"] for c in done_turn["calls"])])
            last = max([completed, *(c["finished_at"] for c in done_turn["calls"])])
            left, width = await placed(page, f'[data-ticket="{ticket["call_id"]}"]')
            span = (last - start) * 1.02  # the page leaves 2% of room at the right
            assert abs(left - 100 * (opened - start) / span) < 1.0
            assert abs(left + width - 100 * (completed - start) / span) < 1.0
            case_left, case_width = await placed(page, f'[data-call-id="{ticket["call_id"]}"]')
            assert abs(case_left + case_width - left) < 0.01  # opened as its call answered
            await page.screenshot(artifacts / "timeline.png")

            # Another user gets no timeline: the session is not theirs.
            await page.goto("about:blank")
            await page.goto(f"{page_url}#token={key('tl-other')}")
            await page.wait_for(
                "document.getElementById('status').textContent !== 'loading…'", WAIT_S
            )
            await page.wait_for(
                "document.getElementById('status').classList.contains('problem')", WAIT_S
            )
            assert "unknown session" in await page.evaluate(
                "document.getElementById('status').textContent"
            )
            assert await page.evaluate(bars(".bar[data-call-id]")) == 0

        # The same rule on the API; the operator (admin) sees any session's.
        other = await client.get(
            f"/apps/{APP}/users/{user}/sessions/{session_id}/timeline",
            headers=bearer(key("tl-other")),
        )
        assert other.status_code == 404
    assert (artifacts / "timeline.png").stat().st_size > 1000
