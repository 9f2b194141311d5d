"""A real Redis server and real `celery worker` processes for the integration tests.

The server is TOOLFLEET_TEST_REDIS_URL when set (use a database of its own: the keys
the tests create are removed at the end), otherwise a private one on a free port. Under
pytest-xdist each worker process takes the database numbered after it (the URL's + the
worker's index, tests.parallel): the tool queues are not prefixed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from examples import reimbursement, support_tickets
from tests.integration.bank_api import BankApi, serve_bank_api
from tests.integration.browser import find_chromium
from tests.parallel import database_url, worker_index
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.config import Settings
from toolfleet.shared.signing import new_fleet_key

# One fleet key for the whole run, as one fleet has: queues are shared across tests
# (their names are not prefixed), so a worker of one test may serve another's call.
FLEET_KEY = new_fleet_key()

TOOL_MODULES = [
    "tests.integration.fleet_tools",
    "tests.integration.heavy_tools",
    "examples.reimbursement",
    "examples.support_tickets",
    "examples.customer_support",
    "examples.calculator",
    "examples.summarizer",
    "examples.documents",
    "examples.preferences",
    "examples.bank_account",
    "tests.integration.adk_tools",
    "tests.integration.confirm_tools",
    "tests.integration.confirm_agent",
    "tests.integration.cancel_tools",
]
TICKET_RESOLVE_AFTER_S = "0.5"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("TOOLFLEET_TEST_REDIS_URL")
    if url:
        yield database_url(url, worker_index())
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture(scope="session")
def settings(redis_url: str) -> Iterator[Settings]:
    prefix = f"tftest-{uuid.uuid4().hex[:8]}"
    yield Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        tool_modules=TOOL_MODULES,
        default_timeout_s=10,
        result_grace_s=1.0,
        worker_heartbeat_s=0.5,
        credential_key=new_credential_key(),
        fleet_key=FLEET_KEY,
    )
    client = redis.Redis.from_url(redis_url)
    # Ours (and the prefixes of our own that modules derive from it, `{prefix}-sparse`),
    # the tool queues, and kombu's bookkeeping (the database is the tests' own).
    for pattern in (f"{prefix}*", "tools.*", "_kombu.*", "unacked*"):
        for key in client.scan_iter(pattern):
            client.delete(key)
    client.close()


@pytest.fixture(scope="session")
def fleet(settings: Settings, bank_api: BankApi) -> Iterator[WorkerGroup]:
    """Two processes of 2 slots on the default pool, one each on `other`, `tickets`, `agents`,
    and an io worker (threads) for the async tools."""
    env = {
        "TOOLFLEET_TICKET_RESOLVE_AFTER_S": TICKET_RESOLVE_AFTER_S,
        "TOOLFLEET_EXAMPLE_API_URL": bank_api.url,
    }
    with WorkerGroup(settings, extra_env=env) as group:
        group.start_all(
            [
                WorkerSpec(["default"], 2, "w1"),
                WorkerSpec(["default"], 2, "w2"),
                WorkerSpec(["other"], 1, "w3"),
                WorkerSpec(["tickets"], 1, "w4"),
                WorkerSpec(["agents"], 1, "w5"),
                WorkerSpec(["io"], 20, "w6"),
            ]
        )
        yield group


@pytest.fixture
def orchestrator_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment for toolfleet commands (in-process CLI calls and subprocesses)."""
    env = {
        "TOOLFLEET_REDIS_URL": settings.require_redis_url(),
        "TOOLFLEET_KEY_PREFIX": settings.key_prefix,
        "TOOLFLEET_TOOL_MODULES": ",".join(settings.tool_modules),
        "TOOLFLEET_LEASE_TTL_S": "3",
        # The fleet's: its workers run only the calls an orchestrator signed with it.
        "TOOLFLEET_FLEET_KEY": settings.fleet_key or "",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return {**os.environ, **env}


@pytest.fixture
async def orchestrator(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[Orchestrator]:
    """An orchestrator of the long-running examples (reimbursement approvals, support
    tickets) on the fleet (a module may define its own `orchestrator`)."""
    async with Orchestrator([reimbursement.agent, support_tickets.agent], settings) as orch:
        yield orch


@pytest.fixture(scope="session")
def bank_api() -> Iterator[BankApi]:
    """A local API that wants a bearer token (examples.bank_account calls it)."""
    with serve_bank_api() as api:
        yield api


@pytest.fixture
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        reason = "no chromium on PATH (apt-get install -y chromium, or TOOLFLEET_TEST_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test: {reason}")
        pytest.skip(reason)
    return binary
