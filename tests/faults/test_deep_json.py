"""Deeply nested JSON on real processes: `toolfleet serve --http`, the `toolfleet tickets`
CLI and a worker, on a real redis-server. Each entry refuses it with an error that names
TOOLFLEET_MAX_JSON_DEPTH (never a RecursionError nor "not JSON"), the refused
completions are dead-lettered, and the ticket still takes a good result afterwards.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.faults import input_tools, probe
from tests.faults.exactly_once_tools import ticketing
from tests.faults.test_exactly_once import ticket_turn
from tests.faults.test_orchestrator_faults import toolfleet_env
from tests.integration.http_support import TOKEN, bearer
from tests.support import until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import free_port
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import COMPLETION_FIELD, CallStatus

SETTING = "TOOLFLEET_MAX_JSON_DEPTH"
AGENT = "tests.faults.exactly_once_tools:ticketing"
SOURCE = re.compile(r'"source":\s*"([^"]*)"')
ABYSS = 3_000  # past Python's recursion limit: json.loads raises RecursionError on it
WAIT_S = 30.0


def nested_text(levels: int) -> str:
    """A JSON object `levels` deep, written out (json.dumps would recurse that deep)."""
    return '{"k": ' * (levels - 1) + "{}" + "}" * (levels - 1)


@pytest.fixture
def served(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """`toolfleet serve --http` in its own process; its base URL once it answers."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**toolfleet_env(settings), "TOOLFLEET_HTTP_TOKEN": TOKEN}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolfleet", "serve", "--agent", AGENT, "--http",
             f"127.0.0.1:{port}"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        yield url
    finally:
        process.terminate()
        process.wait(15)


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code in (200, 503)
    except httpx.TransportError:
        return False


def dead_letters(client: redis.Redis, keys: Keys) -> list[tuple[str, str]]:
    """(reason, source) of each dead letter; read without parsing the completion, which
    is kept as it was posted (the forged one 3,000 levels deep)."""
    letters = []
    entries: Any = client.xrange(keys.dead_letters())
    for _, fields in entries:
        source = SOURCE.search(fields[b"completion"].decode())
        letters.append((fields[b"reason"].decode(), source.group(1) if source else ""))
    return letters


async def test_deep_json_is_refused_naming_the_limit_on_every_completion_path(
    settings: Settings, workers: WorkerGroup, client: redis.Redis, served: str
) -> None:
    keys = Keys(settings.key_prefix)
    workers.start(["default"], concurrency=1)
    call_id = await ticket_turn(settings, "deep")
    await until(lambda: answers(served), "the server to answer", WAIT_S)
    ticket_url = f"{served}/tickets/{call_id}/result"
    json_type = {"content-type": "application/json"}

    def body_of(response: str) -> str:
        return f'{{"response": {response}, "final": true}}'

    async with httpx.AsyncClient(headers=bearer(), timeout=WAIT_S) as http:
        # An HTTP body past the limit: refused before it is parsed, whatever the route, in
        # any encoding json.loads reads (in UTF-16, U+2200's bytes look like a quote).
        hidden = body_of(f'["\u2200", {nested_text(ABYSS)}, "\u2200"]').encode("utf-16-le")
        messages_url = f"{served}/apps/ticketing/users/u/sessions/deep/messages"
        for url, body in (
            (ticket_url, body_of(nested_text(ABYSS)).encode()),
            (messages_url, body_of(nested_text(ABYSS)).encode()),
            (ticket_url, hidden),
        ):
            deep = await http.post(url, content=body, headers=json_type)
            assert deep.status_code == 422, deep.text
            assert "the request body nests" in deep.json()["detail"]
            assert f"the limit is 64 ({SETTING})" in deep.json()["detail"]
        # A body within its own levels whose result is one level too deep: the poster
        # refuses it, and dead-letters it.
        over = await http.post(
            ticket_url,
            content=body_of(nested_text(65)),
            headers=json_type,
        )
        assert over.status_code == 422, over.text
        assert (
            "the result nests JSON objects and arrays more than 64 levels deep"
            in (over.json()["detail"])
        )

    # The CLI measures --json before parsing it.
    cli = subprocess.run(
        [sys.executable, "-m", "toolfleet", "tickets", "complete", call_id, "--json",
         nested_text(ABYSS)],
        env=toolfleet_env(settings), capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert cli.returncode != 0
    assert "--json nests JSON objects and arrays more than 64 levels deep" in cli.stderr
    assert "RecursionError" not in cli.stderr

    # Straight onto the stream, past every poster: the serving replica refuses it.
    stream = keys.completions(ticketing.name)
    forged = f'{{"call_id": "{call_id}", "posted_at": 1, "response": {nested_text(ABYSS)}}}'
    client.xadd(stream, {COMPLETION_FIELD: forged})
    await until(lambda: len(dead_letters(client, keys)) >= 3, "three dead letters", WAIT_S)
    (http_refusal, cli_refusal, stream_refusal) = dead_letters(client, keys)
    assert http_refusal[1] == "http" and cli_refusal[1] == "cli"
    assert "more than 66 levels deep: the limit is 64" in stream_refusal[0]
    for reason, _ in (http_refusal, cli_refusal, stream_refusal):
        assert SETTING in reason

    # Nothing was lost: the ticket takes a result at the limit, applied once.
    async with httpx.AsyncClient(headers=bearer(), timeout=WAIT_S) as http:
        good = await http.post(
            ticket_url,
            content=body_of(nested_text(64)),
            headers=json_type,
        )
        assert good.status_code == 202, good.text
    await until(lambda: client.exists(keys.applied(call_id)), "the result applied", WAIT_S)
    assert client.hget(keys.pending(), call_id) is None
    assert len(dead_letters(client, keys)) == 3


async def test_a_tools_result_or_state_write_nested_too_deep_comes_back_rejected(
    settings: Settings, workers: WorkerGroup, client: redis.Redis
) -> None:
    workers.start(["default"], concurrency=1)
    model = ScriptedModel(
        [
            call(
                Call("deep_result", {"levels": ABYSS, "into_state": False}),
                Call("deep_result", {"levels": ABYSS, "into_state": True}),
                Call("deep_result", {"levels": 64, "into_state": False}),
            ),
            say("done"),
        ]
    )
    agent = Agent(name="deep_tools", tools=[input_tools.deep_result], model=model)
    async with Runner(agent, settings) as runner:
        updates = [u async for u in runner.run(user_id="u", session_id="deep", message="go")]
    results = [u.result for u in updates if isinstance(u, CallFinished)]
    by_id = {r.call_id: r for r in results}
    calls = [c for u in updates if isinstance(u, CallsDispatched) for c in u.calls]
    returned, written, fine = (by_id[c.call_id] for c in calls)
    for rejected, what in ((returned, "the tool's result"), (written, "the state write 'plan'")):
        assert rejected.response["error_type"] == "ResultRejected"
        assert (
            f"{what} nests JSON objects and arrays more than 64 levels deep"
            in (rejected.response["error_message"])
        )
        assert SETTING in rejected.response["error_message"] and rejected.state_delta == {}
        assert probe.executions(client, settings.key_prefix, rejected.call_id) == 1  # not retried
    assert fine.status is CallStatus.SUCCESS
