"""McpToolset and OpenAPIToolset on real workers, and `toolfleet mcp serve` driven by the
MCP SDK's own client: a real Redis, real `celery worker` processes, a stdio MCP server the
workers start, an HTTP app serving an OpenAPI spec."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from mcp import Client, StdioServerParameters

from tests.integration.test_auth import every_value
from tests.mcp_support import ROOT, serve_mcp_http, starts_in, wait_for_port
from tests.pets_api import PetsApi, serve_pets_api
from toolfleet.orchestrator.cli.embedded import free_port
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.mcp_tools import StreamableHTTPConnectionParams

pytestmark = pytest.mark.integration

WAIT_S = 30


@pytest.fixture(scope="module")
def pets() -> Iterator[PetsApi]:
    with serve_pets_api() as api:
        yield api


@pytest.fixture(scope="module")
def starts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "starts"


@pytest.fixture(scope="module")
def mcp_http(starts: Path) -> Iterator[StreamableHTTPConnectionParams]:
    with serve_mcp_http(starts) as params:
        yield params


@pytest.fixture(scope="module")
def remote_env(
    pets: PetsApi, starts: Path, mcp_http: StreamableHTTPConnectionParams
) -> Iterator[dict[str, str]]:
    """What the tool module reads, in this process (the orchestrator) and the workers."""
    env = {
        "TOOLFLEET_TEST_MCP_STARTS": str(starts),
        "TOOLFLEET_TEST_PETS_URL": pets.url,
        "TOOLFLEET_TEST_MCP_URL": mcp_http.url,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def remote_tools(remote_env: dict[str, str]) -> ModuleType:
    import tests.integration.remote_tools as module

    return importlib.reload(module)  # with this run's server and app


@pytest.fixture(scope="module")
def remote_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "tool_modules": ["tests.integration.remote_tools"],
            "io_pools": [*settings.io_pools, "remote"],
        }
    )


@pytest.fixture(scope="module")
def remote_fleet(
    remote_settings: Settings, remote_env: dict[str, str], remote_tools: ModuleType
) -> Iterator[WorkerGroup]:
    with WorkerGroup(remote_settings, extra_env=remote_env) as group:
        group.start_all([WorkerSpec(["remote"], 8, "remote1")])
        yield group


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(") ", 1)[1].split()[1])


def responses(session: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event in session.events:
        for part in (event.content.parts or []) if event.content else []:
            if part.function_response:
                found.setdefault(part.function_response.name, []).append(
                    dict(part.function_response.response or {})
                )
    return found


async def test_an_agent_calls_mcp_and_rest_tools_on_the_workers(
    remote_settings: Settings,
    remote_fleet: WorkerGroup,
    remote_tools: ModuleType,
    starts: Path,
    orchestrator_env: dict[str, str],
) -> None:
    # Given a model that calls an MCP tool, a REST operation and a plain tool, twice
    turn = call(
        Call("mcp_add", {"a": 2, "b": 3}),
        Call("mcp_whoami"),
        Call("pets_get_pet", {"pet_id": "p1"}),
        Call("echo_upper", {"text": "hi"}),
    )
    model = ScriptedModel(
        [turn, call(Call("mcp_whoami"), Call("mcp_refuse", {"reason": "x"})), say("done")]
    )
    agent = remote_tools.agent

    async with Orchestrator([agent], remote_settings, models={agent.name: model}) as orch:
        runner = orch.runner(agent.name)
        session_id = uuid.uuid4().hex
        answer = await runner.ask(user_id="u", session_id=session_id, message="go")
        session = await runner.store.get(session_key(agent.name, "u", session_id))

    # Then each ran on the worker, the MCP calls through one server process it started
    got = responses(session)
    assert answer == "done"
    assert got["mcp_add"] == [{"result": 5}]
    assert got["pets_get_pet"][0]["body"]["name"] == "Rex"
    assert got["echo_upper"] == [{"result": "HI"}]
    first, second = (r["pid"] for r in got["mcp_whoami"])
    assert first == second
    (worker,) = remote_fleet.workers
    assert parent_of(first) == worker.process.pid
    assert starts_in(starts).count(first) == 1
    assert got["mcp_refuse"][0]["status"] == "error"
    assert got["mcp_refuse"][0]["error_message"].endswith("refused: x")


async def test_the_users_token_reaches_the_mcp_server_and_nothing_else(
    remote_settings: Settings,
    remote_fleet: WorkerGroup,
    remote_tools: ModuleType,
    orchestrator_env: dict[str, str],
) -> None:
    # Given the user's token for the HTTP MCP server, stored as the credential flow does
    canary = f"canary-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(remote_settings.require_redis_url())
    store = CredentialStore(
        client, Keys(remote_settings.key_prefix), remote_settings.credential_key
    )
    agent = remote_tools.agent
    store.put(agent.name, "u", remote_tools.MCP_AUTH, canary)
    model = ScriptedModel([call(Call("mcph_whoami")), say("done")])

    # When the model calls a tool of that server (which echoes the header it got)
    async with Orchestrator([agent], remote_settings, models={agent.name: model}) as orch:
        runner = orch.runner(agent.name)
        session_id = uuid.uuid4().hex
        await runner.ask(user_id="u", session_id=session_id, message="who")
        session = await runner.store.get(session_key(agent.name, "u", session_id))

    # Then the server got it, and it is nowhere else: not in the result, Redis, the log
    (answer,) = responses(session)["mcph_whoami"]
    assert answer["digest"] == hashlib.sha256(f"Bearer {canary}".encode()).hexdigest()
    assert answer["authorization"] == "***" and answer["echo"] == "you sent ***"
    assert canary.encode() not in every_value(client)
    (worker,) = remote_fleet.workers
    assert canary not in worker.log_path.read_text()
    client.close()


def serve_env(settings: Settings, remote_env: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        **remote_env,
        "PYTHONPATH": str(ROOT),
        "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
        "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
        "TOOLFLEET_IO_POOLS": ",".join(settings.io_pools),
        "TOOLFLEET_FLEET_KEY": settings.fleet_key or "",
        "TOOLFLEET_CREDENTIAL_KEY": settings.credential_key or "",
    }


async def final_result(client: Client, call_id: str) -> dict[str, Any]:
    """Ask `toolfleet_result` until the final result is in (bounded by WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = await client.call_tool("toolfleet_result", {"call_id": call_id})
        assert answer.structured_content is not None
        if answer.structured_content.get("status") != "pending":
            return answer.structured_content
        await asyncio.sleep(0.05)  # ok: polling MCP, bounded by WAIT_S (no event to wait on)
    raise TimeoutError(f"no final result for {call_id} within {WAIT_S} s")


async def exercise(client: Client) -> None:
    """What every transport must do: list, call through the fleet, errors, long-running."""
    listed = {t.name for t in (await client.list_tools()).tools}
    assert {"mcp_add", "pets_get_pet", "words_reverse", "echo_upper", "toolfleet_result"} <= listed

    upper = await client.call_tool("echo_upper", {"text": "fleet"})
    pet = await client.call_tool("pets_get_pet", {"pet_id": "p1"})
    reversed_ = await client.call_tool("words_reverse", {"text": "abc"})
    added = await client.call_tool("mcp_add", {"a": 20, "b": 22})
    refused = await client.call_tool("mcp_refuse", {"reason": "nope"})
    invalid = await client.call_tool("mcp_add", {"a": 1})
    unknown = await client.call_tool("no_such_tool", {})

    assert upper.structured_content == {"result": "FLEET"}
    assert added.structured_content == {"result": 42}
    assert pet.structured_content is not None
    assert pet.structured_content["body"]["name"] == "Rex"
    assert reversed_.structured_content == {"result": "cba"}
    assert refused.is_error and "refused: nope" in refused.content[0].text  # type: ignore[union-attr]
    assert invalid.is_error and "InvalidArguments" in invalid.content[0].text  # type: ignore[union-attr]
    assert unknown.is_error and "UnknownTool" in unknown.content[0].text  # type: ignore[union-attr]

    # A long-running tool answers pending with its call_id; the final result follows
    started = await client.call_tool("mcp_count_up", {"steps": 2})
    assert started.structured_content is not None
    assert started.structured_content["status"] == "pending"
    final = await final_result(client, started.structured_content["call_id"])
    assert final == {"result": "counted 2"}
    gone = await client.call_tool(
        "toolfleet_result", {"call_id": started.structured_content["call_id"]}
    )
    assert gone.is_error  # handed over once


async def test_mcp_serve_over_stdio(
    remote_settings: Settings, remote_fleet: WorkerGroup, remote_env: dict[str, str]
) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolfleet", "mcp", "serve", "--tools", "tests.integration.remote_tools"],
        env=serve_env(remote_settings, remote_env),
        cwd=str(ROOT),
    )
    async with Client(server) as client:
        await exercise(client)


@pytest.fixture
def http_serve(
    remote_settings: Settings, remote_fleet: WorkerGroup, remote_env: dict[str, str]
) -> Iterator[str]:
    port = free_port()
    agent = "tests.integration.remote_tools:agent"
    process = subprocess.Popen(
        [sys.executable, "-m", "toolfleet", "mcp", "serve", "--agent", agent,
         "--transport", "http", "--port", str(port)],
        env=serve_env(remote_settings, remote_env),
        cwd=ROOT,
    )  # fmt: skip
    try:
        wait_for_port(port, process, WAIT_S)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_mcp_serve_over_streamable_http(http_serve: str) -> None:
    async with Client(http_serve) as client:
        await exercise(client)
