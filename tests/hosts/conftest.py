"""Hosts for the tests across machines: Redis on `r`, orchestrators on `o` and `o2`,
workers on `w1` and `w2`, each a network namespace on one bridge (netns.Network).

Without root or `ip` the tests skip, saying why; with CI=true they fail instead.
Timings are the fault rig's (tests/faults/conftest.py): tool limit 3 s, redelivery margin
1 s, restore sweep every 1 s, session lease 2 s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.faults.conftest import fault_settings
from tests.hosts.fleet import HostFleet, start_redis
from tests.hosts.netns import Network, sweep_leftovers, unavailable_reason
from toolfleet.shared.config import Settings

HOSTS = ["r", "o", "o2", "w1", "w2"]


@pytest.fixture(scope="session")
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the tests across hosts: {reason}")
        pytest.skip(f"tests across hosts need network namespaces: {reason}")
    sweep_leftovers()  # of an earlier run that died before its teardown
    with Network() as net:
        for label in HOSTS:
            net.add_host(label)
        yield net


@pytest.fixture(scope="session")
def redis_url(network: Network, tmp_path_factory: pytest.TempPathFactory) -> str:
    """redis-server on host `r`, bound to its address (killed with the network)."""
    return start_redis(network.hosts["r"], tmp_path_factory.mktemp("redis") / "redis.log")


@pytest.fixture
def settings(redis_url: str) -> Settings:
    """The fault rig's timings; a fresh key prefix per test."""
    return fault_settings(redis_url, tool_modules=["tests.hosts.host_tools"])


@pytest.fixture
def fleet(network: Network, settings: Settings, tmp_path: Path) -> Iterator[HostFleet]:
    """An empty fleet on a flushed Redis: each test starts the processes it needs; at the
    end every host but `r` is healed and has its processes killed."""
    client = redis.Redis.from_url(settings.require_redis_url())
    client.flushall()  # the tool queues are shared: no message of an earlier test is left
    client.close()
    fleet = HostFleet(network, settings, tmp_path)
    try:
        yield fleet
    finally:
        for label, host in network.hosts.items():
            if label != "r":
                host.heal()
                host.kill_all()
                host.processes.clear()
