"""The approvals page in a real browser (headless Chromium): approve with one click.

Screenshots go to TOOLFLEET_TEST_ARTIFACTS (default build/test-artifacts/).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from examples import reimbursement
from tests.integration.browser import ARTIFACTS, chromium_page
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
APP = "reimbursement_agent"


# The page as three people see it: the employee, an approver of this app, one of another.
PAGE_KEYS = {
    name: ApiKey(subject=name, roles=roles, key=f"{name}-{uuid.uuid4().hex}")
    for name, roles in (
        ("emp-page", ()),
        ("manager", (f"approver:{APP}",)),
        ("banker", ("approver:bank_agent",)),
    )
}


def page_token(name: str) -> str:
    key = PAGE_KEYS[name].key
    assert key is not None
    return key.get_secret_value()


@pytest.fixture
async def served(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[RunningHttp]:
    http = HttpSettings(token=TOKEN, api_keys=list(PAGE_KEYS.values()))
    async with serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running:
        yield running


async def ask_for_reimbursement(client: httpx.AsyncClient, user: str, text: str) -> tuple[str, str]:
    """A session waiting for approval: (session id, pending call id)."""
    created = await client.post(f"/apps/{APP}/users/{user}/sessions")
    session_id = created.json()["id"]
    answered = await client.post(
        f"/apps/{APP}/users/{user}/sessions/{session_id}/messages", json={"text": text}
    )
    (ticket,) = answered.json()["pending"]
    return session_id, ticket["call_id"]


def row(call_id: str) -> str:
    return f"document.querySelector('tr[data-call-id=\"{call_id}\"]')"


async def test_approving_on_the_page_resumes_the_agent_and_the_ticket_disappears(
    served: RunningHttp, chromium: str, tmp_path: Path
) -> None:
    async with (
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client,
        chromium_page(chromium, tmp_path / "profile") as page,
    ):
        user = f"emp-{uuid.uuid4().hex[:6]}"
        meals_session, meals = await ask_for_reimbursement(
            client, user, "Please reimburse 200$ for meals"
        )
        _, laptop = await ask_for_reimbursement(client, user, "Please reimburse 900$ for a laptop")

        # Without the token the page asks for it.
        await page.goto(f"{served.url}/approvals")
        await page.wait_for("!document.getElementById('login').hidden", WAIT_S)

        # A link with #token= (never sent to the server): kept, and both approvals listed.
        await page.goto("about:blank")
        await page.goto(f"{served.url}/approvals#token={TOKEN}")
        await page.wait_for(f"{row(meals)} && {row(laptop)}", WAIT_S)
        assert "token" not in await page.evaluate("location.href")
        args = json.loads(await page.evaluate(f"{row(meals)}.querySelector('pre').textContent"))
        assert args == {"purpose": "meals", "amount": 200.0}
        assert (await page.evaluate(f"{row(meals)}.cells[2].textContent")).endswith(" s")
        await page.screenshot(ARTIFACTS / "approvals-pending.png")

        # Approve with one click: the row goes once the orchestrator has applied it.
        await page.click(f'tr[data-call-id="{meals}"] button[data-decision="approve"]')
        await page.wait_for(f"!{row(meals)}", WAIT_S)
        assert await page.evaluate(f"Boolean({row(laptop)})")

        # Rejected elsewhere (the API, as the CLI or a webhook would): the page follows.
        rejected = await client.post(f"/tickets/{laptop}/reject", json={"note": "no receipt"})
        assert rejected.status_code == 202
        await page.wait_for(f"!{row(laptop)}", WAIT_S)
        await page.screenshot(ARTIFACTS / "approvals-done.png")

        assert await served.orch.wait_until_settled(session_key(APP, user, meals_session), WAIT_S)
        session = (await client.get(f"/apps/{APP}/users/{user}/sessions/{meals_session}")).json()
    assert session["pending"] == []
    assert session["events"][-1]["content"]["parts"][0]["text"] == (
        "Approved and paid: $200.00 for meals."
    )
    assert (ARTIFACTS / "approvals-done.png").stat().st_size > 1000


async def test_the_page_shows_each_token_what_its_roles_allow(
    served: RunningHttp, chromium: str, tmp_path: Path
) -> None:
    async with (
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client,
        chromium_page(chromium, tmp_path / "profile") as page,
    ):
        _, ticket = await ask_for_reimbursement(client, "emp-page", "Please reimburse 300$")
        decide = f'{row(ticket)}.querySelector("button[data-decision=approve]")'

        # The employee sees their own request, without the buttons.
        await page.goto(f"{served.url}/approvals#token={page_token('emp-page')}")
        await page.wait_for(row(ticket), WAIT_S)
        assert await page.evaluate(f"{decide} === null")
        assert "not decide" in await page.evaluate(f"{row(ticket)}.cells[4].textContent")
        assert "emp-page" in await page.evaluate("document.getElementById('caller').textContent")

        # Another app's approver sees nothing of it.
        await page.goto("about:blank")
        await page.goto(f"{served.url}/approvals#token={page_token('banker')}")
        await page.wait_for("document.getElementById('caller').textContent !== ''", WAIT_S)
        await page.wait_for(
            "document.getElementById('status').textContent.startsWith('updated')", WAIT_S
        )
        assert await page.evaluate(f"!{row(ticket)}")

        # This app's approver decides it.
        await page.goto("about:blank")
        await page.goto(f"{served.url}/approvals#token={page_token('manager')}")
        await page.wait_for(decide, WAIT_S)
        await page.click(f'tr[data-call-id="{ticket}"] button[data-decision="approve"]')
        await page.wait_for(f"!{row(ticket)}", WAIT_S)
