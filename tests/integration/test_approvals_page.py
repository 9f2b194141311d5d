"""The approvals page in a real browser (headless Chromium): the story of each request
(app, agent, the user's message, the agent's words, the arguments as a form, its age and
its session's timeline), and approve with one click.

Screenshots go to TOOLFLEET_TEST_ARTIFACTS (default: the test's tmp_path).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from examples import reimbursement
from tests.integration import fleet_tools
from tests.integration.browser import Page, artifacts_dir, chromium_page
from tests.integration.http_support import TOKEN, bearer
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi import HttpSettings, RunningHttp, serve_http
from toolfleet.orchestrator.httpapi.settings import ApiKey
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, say
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
    agents = [reimbursement.agent, purchase_agent()]
    async with serve_http(agents, settings, http, "127.0.0.1", 0) as running:
        yield running


PURCHASE = "purchase_agent"
ORDER = {
    "vendor": "Acme <b>Tools</b>",
    "lines": [{"item": "desk", "qty": 2}],
    "shipping": {"city": "Oslo"},
}
SECRET = "sk-live-never-shown"


def purchase_agent() -> Agent:
    """Says why in the same turn as its call, whose arguments are nested, one secret."""
    asks = Step(
        text="That is over the purchasing limit, so I am asking purchasing to approve it.",
        calls=[Call("purchase_approval", {"order": ORDER, "api_key": SECRET})],
    )
    model = ScriptedModel([asks, say("Purchasing has it; I will tell you their answer.")])
    return Agent(name=PURCHASE, tools=[fleet_tools.purchase_approval_tool], model=model)


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


def text_of(call_id: str, selector: str) -> str:
    return f"{row(call_id)}.querySelector('{selector}')?.textContent"


async def form_rows(page: Page, call_id: str) -> list[tuple[str, str, str]]:
    """The arguments form of a ticket's row: (name, value, indent) per row."""
    rows: list[list[str]] = await page.evaluate(
        f"[...{row(call_id)}.querySelectorAll('.args-form .arg')].map((r) => [r.children[0]"
        ".textContent, r.children[1].textContent, r.style.getPropertyValue('--depth')])"
    )
    return [(name, value, depth) for name, value, depth in rows]


async def test_approving_on_the_page_resumes_the_agent_and_the_ticket_disappears(
    served: RunningHttp, chromium: str, tmp_path: Path
) -> None:
    artifacts = artifacts_dir(tmp_path)
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
        # The story: the app and agent, what the user asked, what the agent said.
        assert await page.evaluate(text_of(meals, ".what .tool")) == "ask_for_approval"
        assert await page.evaluate(text_of(meals, ".what .app")) == APP
        app_and_agent = await page.evaluate(f"{row(meals)}.querySelector('.what .app').title")
        assert app_and_agent == f"app {APP}, agent {APP}"
        assert await page.evaluate(text_of(meals, ".asked q")) == "Please reimburse 200$ for meals"
        assert await page.evaluate(text_of(laptop, ".asked q")) == (
            "Please reimburse 900$ for a laptop"
        )
        agent_said = await page.evaluate(text_of(meals, ".said q"))
        assert agent_said.startswith("Your request is above $100, so I asked Sean Zhou")
        # The arguments as a form, one row per value, nothing as raw JSON.
        assert await form_rows(page, meals) == [("purpose", "meals", "0"), ("amount", "200", "0")]
        assert await page.evaluate(f"{row(meals)}.querySelector('pre')") is None
        age = await page.evaluate(f"{row(meals)}.cells[2].textContent")
        assert age.endswith(" s") and 0 <= int(age.removesuffix(" s")) < WAIT_S
        link = await page.evaluate(f"{row(meals)}.querySelector('a.timeline').href")
        assert link == (f"{served.url}/timeline?app={APP}&user={user}&session={meals_session}")
        await page.screenshot(artifacts / "approvals-pending.png")

        # Approve with one click: the row goes once the orchestrator has applied it.
        await page.click(f'tr[data-call-id="{meals}"] button[data-decision="approve"]')
        await page.wait_for(f"!{row(meals)}", WAIT_S)
        assert await page.evaluate(f"Boolean({row(laptop)})")

        # Rejected elsewhere (the API, as the CLI or a webhook would): the page follows.
        rejected = await client.post(f"/tickets/{laptop}/reject", json={"note": "no receipt"})
        assert rejected.status_code == 202
        await page.wait_for(f"!{row(laptop)}", WAIT_S)
        await page.screenshot(artifacts / "approvals-done.png")

        assert await served.orch.wait_until_settled(session_key(APP, user, meals_session), WAIT_S)
        session = (await client.get(f"/apps/{APP}/users/{user}/sessions/{meals_session}")).json()

        # The link: the session's timeline, its millisecond calls named in full.
        await page.goto(link)
        await page.wait_for(
            f"document.querySelector('[data-ticket=\"{meals}\"]')?.dataset.completed === 'true'"
            " && document.querySelectorAll('.bar[data-call-id]').length === 2",
            WAIT_S,
        )
        headings = await page.evaluate(
            "[...document.querySelectorAll('section.turn h2')].map((h) => h.firstChild.textContent)"
        )
        assert headings == [
            "Turn 1: 1 call on 1 process, 1 ticket ",
            "Turn 2: 1 call on 1 process ",
        ]
        shown = await page.evaluate(
            """[...document.querySelectorAll('.bar[data-call-id]')].map((bar) => {
              const label = bar.querySelector('.label');
              const lane = bar.parentElement.getBoundingClientRect();
              const box = label.getBoundingClientRect();
              return {text: label.textContent, bar: bar.offsetWidth,
                      whole: label.scrollWidth <= label.clientWidth + 1,
                      inside: box.left >= lane.left && box.right <= lane.right};
            })"""
        )
        assert [s["text"] for s in shown] == ["ask_for_approval", "reimburse"]
        assert all(s["bar"] >= 6 and s["whole"] and s["inside"] for s in shown), shown
        await page.screenshot(artifacts / "timeline-reimbursement.png")
    assert session["pending"] == []
    assert session["events"][-1]["content"]["parts"][0]["text"] == (
        "Approved and paid: $200.00 for meals."
    )
    assert (artifacts / "approvals-done.png").stat().st_size > 1000


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
        assert await page.evaluate(f"Boolean({row(ticket)}.querySelector('a.timeline'))")

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
        # The approver reads the request's story, not the session: no timeline link.
        assert await page.evaluate(text_of(ticket, ".asked q")) == "Please reimburse 300$"
        assert await page.evaluate(f"{row(ticket)}.querySelector('a.timeline')") is None
        await page.click(f'tr[data-call-id="{ticket}"] button[data-decision="approve"]')
        await page.wait_for(f"!{row(ticket)}", WAIT_S)


async def test_nested_arguments_are_indented_rows_secrets_masked_and_nothing_is_html(
    served: RunningHttp, chromium: str, tmp_path: Path
) -> None:
    artifacts = artifacts_dir(tmp_path)
    async with (
        httpx.AsyncClient(base_url=served.url, headers=bearer(), timeout=WAIT_S) as client,
        chromium_page(chromium, tmp_path / "profile") as page,
    ):
        user = f"buyer-{uuid.uuid4().hex[:6]}"
        session_id = (await client.post(f"/apps/{PURCHASE}/users/{user}/sessions")).json()["id"]
        answered = await client.post(
            f"/apps/{PURCHASE}/users/{user}/sessions/{session_id}/messages",
            json={"text": "Order two desks from Acme"},
        )
        (ticket,) = answered.json()["pending"]
        call_id = ticket["call_id"]

        await page.goto(f"{served.url}/approvals#token={TOKEN}")
        await page.wait_for(row(call_id), WAIT_S)
        assert await form_rows(page, call_id) == [
            ("order", "", "0"),
            ("vendor", "Acme <b>Tools</b>", "1"),
            ("lines", "1 item", "1"),
            ("#1", "", "2"),
            ("item", "desk", "3"),
            ("qty", "2", "3"),
            ("shipping", "", "1"),
            ("city", "Oslo", "2"),
            ("api_key", "***", "0"),
        ]
        # Indented: each level further right than the one above it.
        lefts = await page.evaluate(
            f"[...{row(call_id)}.querySelectorAll('.args-form .key')]"
            ".map((k) => k.getBoundingClientRect().left + parseFloat(getComputedStyle(k)"
            ".paddingLeft))"
        )
        assert lefts[0] < lefts[1] < lefts[3] < lefts[4]
        assert await page.evaluate(f"{row(call_id)}.querySelector('b')") is None
        assert SECRET not in await page.evaluate("document.documentElement.outerHTML")
        # The agent's words from the turn that made the call, not the answer after it.
        assert await page.evaluate(text_of(call_id, ".said q")) == (
            "That is over the purchasing limit, so I am asking purchasing to approve it."
        )
        assert await page.evaluate(text_of(call_id, ".asked q")) == "Order two desks from Acme"
        await page.screenshot(artifacts / "approvals-nested.png")
        rejected = await client.post(f"/tickets/{call_id}/reject", json={})
        assert rejected.status_code == 202
        await page.wait_for(f"!{row(call_id)}", WAIT_S)
