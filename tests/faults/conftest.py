"""Fault tests: a private redis-server (append-only) and worker processes a test may kill.

Timings are short so faults resolve in seconds: tool limit 3 s, redelivery margin 1 s,
restore sweep every 1 s - a dead worker's call runs elsewhere within
`recovery_bound_s(settings, tools)` (about 6 s here; 96 s with the defaults).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.rabbit import rabbit_vhost
from tests.faults.replicas import stop_started
from tests.faults.servers import RedisServer
from tests.parallel import FIGURE
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.config import Settings
from toolfleet.shared.signing import new_fleet_key

# One fleet key for the whole run, as one fleet has: queues are shared across tests
# (their names are not prefixed), so a worker of one test may serve another's call.
FLEET_KEY = new_fleet_key()

FAULT_TOOL_MODULES = [
    "tests.faults.fault_tools",
    "tests.faults.worker_fault_tools",
    "tests.faults.input_tools",
    "tests.faults.async_fault_tools",
    "tests.faults.exactly_once_tools",
    "tests.faults.io_pool_tools",
]


@pytest.fixture(autouse=True)
def _no_replica_left() -> Iterator[None]:
    """The replicas a test started (`toolfleet run`, `toolfleet serve`) end with it."""
    yield
    stop_started()


def fault_settings(url: str, **overrides: object) -> Settings:
    values: dict[str, object] = dict(
        redis_url=url,
        key_prefix=f"tffault-{uuid.uuid4().hex[:8]}",
        tool_modules=FAULT_TOOL_MODULES,
        default_timeout_s=3,
        result_grace_s=1.0,
        redelivery_margin_s=1,
        restore_interval_s=1,
        max_deliveries=3,
        worker_heartbeat_s=0.5,
        lease_ttl_s=2,
        credential_key=new_credential_key(),
        fleet_key=FLEET_KEY,
    )
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """One server per test module: modules that restart or reconfigure it stay apart."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def rabbit() -> Iterator[str]:
    """A vhost of the module's own on the local RabbitMQ (its tests on the amqp broker)."""
    with rabbit_vhost() as url:
        yield url


@pytest.fixture
def settings(request: pytest.FixtureRequest, redis_server: RedisServer) -> Settings:
    """Fresh key prefix per test (keys are left for the module's server to drop); the
    tool queues on Redis, or on the module's RabbitMQ vhost for a test marked to run on
    the amqp broker (tests.faults.brokers)."""
    broker = getattr(request, "param", "redis")
    url = None if broker == "redis" else str(request.getfixturevalue("rabbit"))
    return fault_settings(redis_server.url(), broker_url=url)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test (or module) marked `brokers(...)` runs once per broker named."""
    marker = metafunc.definition.get_closest_marker("brokers")
    if marker is not None and "settings" in metafunc.fixturenames:
        metafunc.parametrize("settings", marker.args, indirect=True)


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    """A client of the rig's Redis (a module may read it otherwise: its own fixture)."""
    client = redis.Redis.from_url(settings.require_redis_url())
    yield client
    client.close()


@pytest.fixture
async def aclient(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """`client` for the event loop."""
    client = aioredis.Redis.from_url(settings.require_redis_url())
    yield client
    await client.aclose()


@pytest.fixture
def workers(settings: Settings) -> Iterator[WorkerGroup]:
    """An empty group: each test starts (and may kill) the workers it needs."""
    with WorkerGroup(settings) as group:
        yield group


@pytest.fixture
def report_figure(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """`report_figure("kill -> response", "1.23 s")`: listed at the end of the run
    (tests/conftest.py), carried there on the test's report."""

    def report(name: str, value: object) -> None:
        request.node.user_properties.append((FIGURE, (f"{request.node.name}: {name}", str(value))))

    return report
