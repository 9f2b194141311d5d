"""ADK's dev UI (the Angular app shipped in google-adk) driven in headless Chromium: load
it on the desk app, send messages as a person would, and record what it asked its server
(the DevTools Network events) and what it showed.

The UI loads fonts from the internet: those requests are blocked, so that a machine
without internet neither waits for them nor counts them.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.integration.adk_web_servers import Served
from tests.integration.browser import Page

WAIT_S = 20  # below the browser helper's 30 s per command: the page says what it waited for
BLOCKED = ["*://fonts.googleapis.com/*", "*://fonts.gstatic.com/*"]
# The UI is busy while a run streams: its input disabled, a loading bar shown.
IDLE = (
    "document.querySelector('textarea') && !document.querySelector('textarea').disabled"
    " && !document.querySelector('.agent-loading-indicator')"
)
CONSENT = (
    "[...document.querySelectorAll('button')].find((b) => b.textContent.includes('No Thanks'))"
)
LONG_RUNNING = "app-long-running-response"
# The UI answers a long-running call with {"result": <what was typed>}.
APPROVED = 'request_refund answered {"result": "approved"}'
# A session id in a path: after /sessions/ (ADK's routes) or /trace/session/ (its traces).
SESSION_IN_PATH = re.compile(r"(/sessions?/)[^/?]+")


@dataclass(frozen=True)
class UiRequest:
    """One request the UI made to its server, as the browser saw it.

    Attributes:
        method: GET, POST...
        route: Its path relative to the server's base URL, session ids as {session}, no query.
        status: The response's status; 0 when the request failed without one, None while
            it had neither (still waiting when recorded).
    """

    method: str
    route: str
    status: int | None


@dataclass
class UiRun:
    """What the UI asked and showed on one server.

    Attributes:
        requests: Its requests to the server, in order.
        said: The model's sentences it showed, in order.
        calls: The labels of its function call chips.
        responses: The labels of its function response chips.
        screenshots: The screenshots saved.
    """

    requests: list[UiRequest] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)

    def failed(self) -> set[tuple[str, str, int]]:
        """(method, route, status) of the requests answered 4xx/5xx, or failed unanswered."""
        return {
            (r.method, r.route, r.status)
            for r in self.requests
            if r.status is not None and not 200 <= r.status < 400
        }


def text_shown(text: str) -> str:
    return f"document.body.innerText.includes({json.dumps(text)})"


def chip(container: str, label: str) -> str:
    """A chip (button) in `container` whose label has `label`."""
    return (
        f"[...document.querySelectorAll('{container} button')]"
        f".some((b) => b.textContent.includes({json.dumps(label)}))"
    )


def call_chip(label: str) -> str:
    return chip(".function-calls-buttons", label)


def response_chip(label: str) -> str:
    return chip(".function-response-chip-container", label)


async def type_into(page: Page, selector: str, text: str) -> None:
    """Type `text` over what the field holds, as keyboard input (Angular sees the input
    events); the UI does not always empty its chat input after a message."""
    field = f"document.querySelector({json.dumps(selector)})"
    await page.evaluate(f"{field}.focus(), {field}.select()")
    await page.send("Input.insertText", text=text)
    await page.wait_for(f"{field}.value === {json.dumps(text)}", WAIT_S)


async def say(page: Page, text: str) -> None:
    """Send `text` from the chat input, once the UI is idle, with the Enter key."""
    await page.wait_for(IDLE, WAIT_S)
    await type_into(page, "textarea", text)
    for kind in ("keyDown", "keyUp"):
        typed = {"text": "\r"} if kind == "keyDown" else {}
        await page.send(
            "Input.dispatchKeyEvent",
            type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13, **typed,
        )  # fmt: skip


async def wants_consent(served: Served) -> bool:
    """Whether the UI will ask for telemetry consent first: the server has no answer yet."""
    async with httpx.AsyncClient(timeout=WAIT_S) as client:
        answer = await client.get(f"{served.base_url}/config/telemetry")
    return bool(answer.status_code == 200 and answer.json().get("telemetry") is None)


async def run_desk_in_dev_ui(page: Page, served: Served, shots: Path) -> UiRun:
    """Open the dev UI on the desk app; "stock pens", then "refund 40", then approve the
    refund in the long-running call's answer field; each step waited for on the page.
    A step that fails leaves a screenshot of the page as it was."""
    try:
        return await _run_desk(page, served, shots)
    except BaseException:
        with contextlib.suppress(Exception):
            await page.screenshot(shots / f"adk-dev-ui-{served.kind}-failed.png")
            text = await page.evaluate("document.body.innerText")
            (shots / f"adk-dev-ui-{served.kind}-failed.txt").write_text(text)
        raise


async def _run_desk(page: Page, served: Served, shots: Path) -> UiRun:
    run = UiRun()
    await page.send("Network.enable")
    await page.send("Network.setBlockedURLs", urls=BLOCKED)
    sent = page.record("Network.requestWillBeSent")
    answered = page.record("Network.responseReceived")
    failed = page.record("Network.loadingFailed")
    consent = await wants_consent(served)

    await page.goto(f"{served.dev_ui}?app=desk")
    await page.wait_for(IDLE, WAIT_S)
    if consent:  # ADK's first start: decline, as a person would
        await page.wait_for(CONSENT, WAIT_S)
        await page.evaluate(f"{CONSENT}.click()")

    await say(page, "stock pens")
    await page.wait_for(
        f"{text_shown('check_stock answered')} && {call_chip('check_stock(')}"
        f" && {response_chip('check_stock')} && {IDLE}",
        WAIT_S,
    )
    run.screenshots.append(await page.screenshot(shots / f"adk-dev-ui-{served.kind}-stock.png"))

    await say(page, "refund 40")
    await page.wait_for(
        f"{call_chip('request_refund(40)')} && document.querySelector('{LONG_RUNNING} input')"
        f" && {text_shown('request_refund answered')} && {IDLE}",
        WAIT_S,
    )
    run.screenshots.append(await page.screenshot(shots / f"adk-dev-ui-{served.kind}-refund.png"))

    await type_into(page, f"{LONG_RUNNING} input", "approved")
    send = f"document.querySelector('{LONG_RUNNING} button.send-button')"
    await page.wait_for(f"!{send}.disabled", WAIT_S)
    await page.evaluate(f"{send}.click()")
    await page.wait_for(f"{text_shown(APPROVED)} && {IDLE}", WAIT_S)
    run.screenshots.append(await page.screenshot(shots / f"adk-dev-ui-{served.kind}-approved.png"))

    run.said = await page.evaluate(
        "[...document.querySelectorAll('app-markdown')].map((m) => m.innerText.trim())"
    )
    run.calls = await labels(page, ".function-calls-buttons button")
    run.responses = await labels(page, ".function-response-chip-container button")
    run.requests = requests_to(served, sent, answered, failed)
    return run


async def labels(page: Page, selector: str) -> list[str]:
    found: list[str] = await page.evaluate(
        f"[...document.querySelectorAll({json.dumps(selector)})]"
        ".map((b) => (b.querySelector('.mdc-button__label') ?? b).textContent.trim())"
    )
    return found


def requests_to(
    served: Served,
    sent: list[dict[str, Any]],
    answered: list[dict[str, Any]],
    failed: list[dict[str, Any]],
) -> list[UiRequest]:
    """The requests to the server (its base URL or its dev UI's files), with their status."""
    status: dict[str, int] = {a["requestId"]: int(a["response"]["status"]) for a in answered}
    status.update({f["requestId"]: 0 for f in failed if f["requestId"] not in status})
    origin = urlsplit(served.base_url)
    base_path = origin.path.rstrip("/")
    out = []
    for request in sent:
        url = urlsplit(request["request"]["url"])
        if url.netloc != origin.netloc:
            continue
        path = url.path.removeprefix(base_path) if url.path.startswith(base_path) else url.path
        route = SESSION_IN_PATH.sub(r"\1{session}", path)
        out.append(UiRequest(request["request"]["method"], route, status.get(request["requestId"])))
    return out
