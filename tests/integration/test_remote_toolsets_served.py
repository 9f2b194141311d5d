"""An agent with every kind of toolset (OpenAPI, MCP over stdio and HTTP, a plain toolset)
and a plain tool, served by `toolfleet serve --http` as a real process, its calls on real
`celery worker` processes; and what those workers log when they call a REST API."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from types import ModuleType

import httpx
import pytest
import redis

from tests.integration.http_support import sse
from tests.integration.test_remote_toolsets import (  # noqa: F401 (the fixtures)
    WAIT_S,
    mcp_http,
    pets,
    remote_env,
    remote_fleet,
    remote_settings,
    remote_tools,
    serve_env,
    starts,
)
from tests.mcp_support import ROOT
from tests.pets_api import PetsApi
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

pytestmark = pytest.mark.integration

AGENT = "remote_agent"


@pytest.fixture
def http_served(
    remote_settings: Settings,  # noqa: F811
    remote_fleet: WorkerGroup,  # noqa: F811
    remote_env: dict[str, str],  # noqa: F811
) -> Iterator[str]:
    """`toolfleet serve --http` for the remote agent; its base URL."""
    env = serve_env(remote_settings, remote_env)
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "TOOLFLEET_HTTP_TOKEN"):
        env.pop(name, None)  # the agent's offline script plays the model
    command = [sys.executable, "-m", "toolfleet", "serve", "--http", "127.0.0.1:0",
               "--agent", "tests.integration.remote_tools:agent"]  # fmt: skip
    serve = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert serve.stdout is not None
        url = ""
        for raw in serve.stdout:  # blocks until the line is printed (or the process ends)
            if raw.startswith(b"http: "):
                url = raw.decode().split()[1]
                break
        assert url, f"serve --http ended with {serve.wait()}: {serve.stderr.read().decode()}"
        yield url
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=WAIT_S)
        assert serve.returncode == 0, err.decode()


async def test_serve_http_serves_every_kind_of_toolset(http_served: str) -> None:
    async with httpx.AsyncClient(base_url=http_served, timeout=WAIT_S) as client:
        # The tools of every toolset are listed, and their pool is watched
        apps = (await client.get("/apps")).json()
        (app,) = apps
        listed = {t["name"]: t["pool"] for t in app["tools"]}
        assert {"pets_get_pet", "mcp_add", "mcph_whoami", "words_reverse", "echo_upper"} <= set(
            listed
        )
        assert set(listed.values()) == {"remote"}
        health = (await client.get("/health")).json()
        assert health["pools"]["remote"] == {"workers": 1, "needed": True}
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200 and "toolfleet" in metrics.text

        # A message runs a tool of each kind on the workers, and the answer comes back
        created = await client.post(f"/apps/{AGENT}/users/u/sessions", json={})
        session = created.json()["id"]
        url = f"/apps/{AGENT}/users/u/sessions/{session}/messages/stream"
        async with asyncio.timeout(WAIT_S), client.stream("POST", url, json={"text": "go"}) as r:
            assert r.status_code == 200, await r.aread()
            seen = [item async for item in sse(r)]

    results = {d["tool"]: d for name, d in seen if name == "result"}
    assert seen[-1] == ("answer", seen[-1][1]) and seen[-1][1]["text"] == "done"
    assert results["pets_get_pet"]["response"]["body"]["name"] == "Rex"
    assert results["mcp_add"]["response"] == {"result": 5}
    assert results["echo_upper"]["response"] == {"result": "HI"}
    assert results["words_reverse"]["response"] == {"result": "cba"}
    big = results["pets_get_big"]["response"]
    assert big["truncated"] is True and big["body"].startswith('{"data": "xxx')
    assert len(json.dumps(big).encode()) <= Settings.model_construct().max_payload_bytes
    assert all(r["status"] == "success" for r in results.values())
    (calls,) = [d["calls"] for name, d in seen if name == "calls"]
    assert {c["pool"] for c in calls} == {"remote"}


async def test_no_credential_or_secret_argument_reaches_a_workers_log(
    remote_settings: Settings,  # noqa: F811
    remote_fleet: WorkerGroup,  # noqa: F811
    remote_tools: ModuleType,  # noqa: F811
    pets: PetsApi,  # noqa: F811
    orchestrator_env: dict[str, str],
) -> None:
    # Given the user's API key, which the spec puts in the query, and a secret-named
    # query argument from the model
    key, token = f"key-{uuid.uuid4().hex}", f"token-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(remote_settings.require_redis_url())
    store = CredentialStore(
        client, Keys(remote_settings.key_prefix), remote_settings.credential_key
    )
    agent = remote_tools.agent
    store.put(agent.name, "u", remote_tools.PETS_AUTH, key)
    client.close()
    model = ScriptedModel(
        [call(Call("petsq_get_pet", {"pet_id": "p1", "token": token})), say("done")]
    )

    # When the model calls the operation on a worker
    async with Orchestrator([agent], remote_settings, models={agent.name: model}) as orch:
        answer = await orch.runner(agent.name).ask(
            user_id="u", session_id=uuid.uuid4().hex, message="go"
        )

    # Then the API got both in its query, and the worker's log has neither; httpx's line
    # for the request is there, masked
    assert answer == "done"
    (sent,) = [s for s in pets.seen if key in s["query"]]
    assert token in sent["query"]
    (worker,) = remote_fleet.workers
    log = worker.log_path.read_text()
    assert "HTTP Request: GET" in log
    assert key not in log and token not in log
