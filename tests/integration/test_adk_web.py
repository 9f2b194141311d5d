"""ADK's own clients against toolfleet's ADK routes (`serve --http`, under /adk, with real
worker processes) and against ADK's own `adk web`, both serving the desk app: the same
test code for both servers, so what it checks is ADK's behaviour.

ADK's client (google.adk's AdkWebServerClient, run by the ADK virtualenv's Python) plays
the desk's turns, state, artifact and long-running call; the two servers' answers must
be equal. ADK's dev UI, in headless Chromium, runs the desk as a person would; every
route it finds on ADK's server it must find on toolfleet's. Screenshots and the UI's
requests go to TOOLFLEET_TEST_ARTIFACTS (default: a temporary folder).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.adk_venv import BUILD_TIMEOUT_S, REPO_ROOT
from tests.integration.adk_dev_ui_page import UiRun, run_desk_in_dev_ui
from tests.integration.adk_web_servers import Served, adk_server, server_env, toolfleet_server
from tests.integration.browser import artifacts_dir, chromium_page

pytestmark = [
    pytest.mark.integration,
    # The first test to ask for `adk_python` may build the ADK virtualenv.
    pytest.mark.timeout(BUILD_TIMEOUT_S + 180),
]

SERVERS = ["toolfleet", "adk"]
CLIENT_TIMEOUT_S = 120
OUTPUT_TAIL_CHARS = 4000


def sentence(tool: str, response: dict[str, Any]) -> str:
    """What the desk's model says once `tool` answered `response`."""
    return f"{tool} answered {json.dumps(response, sort_keys=True)}"


def event(author: str, kind: str, name: str | None = None, **more: Any) -> dict[str, Any]:
    """An event summary as tests/integration/adk_web_client.py writes it."""
    return {
        "author": author,
        "kinds": [kind],
        "names": [name] if name else [],
        "texts": more.pop("texts", []),
        "stateDelta": more.pop("stateDelta", {}),
        "artifactDelta": more.pop("artifactDelta", {}),
        "longRunning": more.pop("longRunning", False),
    }


def said(text: str) -> dict[str, Any]:
    return event("desk", "text", texts=[text])


def stock_turn(item: str) -> list[dict[str, Any]]:
    return [
        event("desk", "functionCall", "check_stock"),
        event("desk", "functionResponse", "check_stock", stateDelta={"last_item": item}),
        said(sentence("check_stock", {"item": item, "in_stock": len(item)})),
    ]


class Servers:
    """The two servers, each started on first use, stopped when the module's tests end."""

    def __init__(self, python: Path, folder: Path, stack: contextlib.ExitStack) -> None:
        self.python = python
        self.folder = folder
        self._stack = stack
        self._started: dict[str, Served] = {}

    def get(self, kind: str) -> Served:
        if kind not in self._started:
            logs = self.folder / "logs"
            started = (
                toolfleet_server(self.python, logs)
                if kind == "toolfleet"
                else adk_server(self.python, logs, self.folder / "adk-home")
            )
            self._started[kind] = self._stack.enter_context(started)
        return self._started[kind]


@pytest.fixture(scope="module")
def servers(adk_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with contextlib.ExitStack() as stack:
        yield Servers(adk_python, tmp_path_factory.mktemp("adk-web"), stack)


@pytest.fixture(scope="module")
def client_runs(servers: Servers) -> dict[str, dict[str, Any]]:
    """The summary of ADK's client's run, by server kind (filled on first use)."""
    return {}


def client_summary(kind: str, servers: Servers, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Run tests/integration/adk_web_client.py against the server (once per module)."""
    if kind not in runs:
        served = servers.get(kind)
        done = subprocess.run(
            [str(servers.python), "-m", "tests.integration.adk_web_client", served.base_url],
            cwd=REPO_ROOT,
            env=server_env({}),
            capture_output=True,
            text=True,
            timeout=CLIENT_TIMEOUT_S,
            check=False,
        )
        output = (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]
        assert done.returncode == 0, f"ADK's client on {kind} exited {done.returncode}:\n{output}"
        runs[kind] = json.loads(done.stdout)
    return runs[kind]


@pytest.mark.parametrize("kind", SERVERS)
def test_adks_client_plays_the_desk_on_each_server(
    kind: str, servers: Servers, client_runs: dict[str, dict[str, Any]]
) -> None:
    run = client_summary(kind, servers, client_runs)

    assert run["version"] == ["language", "language_version", "version"]
    assert run["created"] == {"state": {"tier": "gold"}, "events": 0}
    # A tool's call, its response with the state it wrote, then the model's sentence.
    assert run["stock"] == stock_turn("pens")
    assert run["stateAfterStock"] == {"tier": "gold", "last_item": "pens"}
    # A saved artifact: its delta streamed as an event of its own, as ADK's UI reads it.
    saved = {"saved": "note.txt", "version": 0}
    assert run["note"] == [
        event("desk", "functionCall", "save_note"),
        event("desk", "functionResponse", "save_note"),
        event("desk", "actions", artifactDelta={"note.txt": 0}),
        said(sentence("save_note", saved)),
    ]
    version = {"version": 0, "mimeType": "text/plain", "uriNamesIt": True, "created": True}
    assert run["artifacts"] == {
        "names": ["note.txt"],
        "versions": [0],
        "metadata": [version, version],  # listed, then version 0's own
        "loaded": {"text": "hello"},
        "loadedVersion0": {"text": "hello"},
    }
    # A long-running call: marked so, answered "pending", then the client's answer resumes it.
    pending = {"status": "pending", "amount": 40}
    refund = run["refund"]
    assert refund["asked"] == [
        event("desk", "functionCall", "request_refund", longRunning=True),
        event("desk", "functionResponse", "request_refund"),
        said(sentence("request_refund", pending)),
    ]
    assert refund["callIsLongRunning"] is True
    assert refund["pendingAnswersTheCall"] == [True]
    assert refund["pending"] == [pending]
    assert refund["resumed"] == [said(sentence("request_refund", {"status": "approved"}))]
    assert run["patchedState"] == {"tier": "platinum", "last_item": "pens"}
    # POST /run: the same events as one JSON list, in ADK's camelCase.
    assert run["run"] == {
        "status": 200,
        "contentType": "application/json",
        "isList": True,
        "snakeKeys": [],
        "hasCamelKeys": True,
        "events": stock_turn("cups"),
    }
    assert run["runSse"] == {
        "status": 200,
        "contentType": "text/event-stream",
        "events": stock_turn("mugs"),
    }
    assert run["stateAtEnd"] == {"tier": "platinum", "last_item": "mugs"}
    assert run["afterDelete"] == 404
    assert run["listApps"] == ["desk"]
    assert run["health"] == {"status": 200, "body": {"status": "ok"}}


def test_adks_client_gets_the_same_answers_from_both_servers(
    servers: Servers, client_runs: dict[str, dict[str, Any]]
) -> None:
    ours, adks = (client_summary(kind, servers, client_runs) for kind in SERVERS)
    differing = {step: (ours.get(step), adks[step]) for step in adks}
    assert {step: both for step, both in differing.items() if both[0] != both[1]} == {}
    assert set(ours) == set(adks)


@pytest.fixture(scope="module")
def ui_runs() -> dict[str, UiRun]:
    """What the dev UI asked and showed, by server kind (filled on first use)."""
    return {}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return artifacts_dir(tmp_path_factory.mktemp("adk-dev-ui"))


async def ui_run(
    kind: str, servers: Servers, runs: dict[str, UiRun], chromium: str, shots: Path
) -> UiRun:
    """Run the desk in the dev UI of the server (once per module); its requests are
    written beside the screenshots."""
    if kind not in runs:
        served = servers.get(kind)
        async with chromium_page(chromium, servers.folder / f"profile-{kind}") as page:
            runs[kind] = await run_desk_in_dev_ui(page, served, shots)
        requests = [asdict(r) for r in runs[kind].requests]
        (shots / f"adk-dev-ui-{kind}-requests.json").write_text(json.dumps(requests, indent=1))
    return runs[kind]


@pytest.mark.parametrize("kind", SERVERS)
async def test_adks_dev_ui_runs_the_desk_on_each_server(
    kind: str, servers: Servers, ui_runs: dict[str, UiRun], chromium: str, shots: Path
) -> None:
    run = await ui_run(kind, servers, ui_runs, chromium, shots)

    # The user's messages and the model's sentences, in order.
    assert run.said == [
        "stock pens",
        sentence("check_stock", {"item": "pens", "in_stock": 4}),
        "refund 40",
        sentence("request_refund", {"status": "pending", "amount": 40}),
        sentence("request_refund", {"result": "approved"}),  # the UI's answer, as it sends it
    ]
    assert run.calls == ['check_stock("pens")', "request_refund(40)"]
    assert {"check_stock", "request_refund"} <= set(run.responses)
    # Every route of the server's API it called answered; only its own files may be missing.
    assert {f for f in run.failed() if not f[1].startswith("/dev-ui/")} == set()
    routes = {(r.method, r.route) for r in run.requests}
    assert {("POST", "/apps/desk/users/user/sessions"), ("POST", "/run_sse")} <= routes
    assert all(shot.stat().st_size > 10_000 for shot in run.screenshots), run.screenshots


async def test_the_dev_ui_finds_on_toolfleet_every_route_it_finds_on_adk(
    servers: Servers, ui_runs: dict[str, UiRun], chromium: str, shots: Path
) -> None:
    ours, adks = [await ui_run(kind, servers, ui_runs, chromium, shots) for kind in SERVERS]
    failing = {(method, route) for method, route, _ in ours.failed()}
    failing_on_adk = {(method, route) for method, route, _ in adks.failed()}
    answered_on_adk = {(r.method, r.route) for r in adks.requests if r.status == 200}
    assert failing & answered_on_adk == set(), sorted(ours.failed())
    assert failing <= failing_on_adk, sorted(ours.failed())
    # What it showed is the same on both.
    assert (ours.said, ours.calls, ours.responses) == (adks.said, adks.calls, adks.responses)
