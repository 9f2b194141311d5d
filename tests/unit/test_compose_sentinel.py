"""compose.yaml's `sentinel` profile agrees with itself and with the URL .env.example gives."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolfleet.shared.redis_clients import sentinel_target

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "sentinel"


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    found: dict[str, dict[str, Any]] = loaded["services"]
    return found


def in_profile(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items() if PROFILE in s.get("profiles", [])}


def sentinel_conf(service: dict[str, Any]) -> list[str]:
    """The lines the service's command writes to its sentinel.conf."""
    command = service["command"]
    assert command[:2] == ["sh", "-c"]
    words = shlex.split(command[2])
    assert words[words.index("printf") + 1] == "%s\\n"
    lines = words[words.index("printf") + 2 : words.index(">")]
    assert "--sentinel" in words
    return lines


def example_sentinel_url() -> str:
    (url,) = re.findall(
        r"^#?\s*FLEET_REDIS_URL=(redis\+sentinel://\S+)$",
        (ROOT / ".env.example").read_text(),
        re.MULTILINE,
    )
    return url


def test_the_profile_adds_a_replica_of_redis_and_three_sentinels(
    services: dict[str, dict[str, Any]],
) -> None:
    profile = in_profile(services)
    assert sorted(profile) == ["redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"]
    replica = " ".join(profile["redis-replica"]["command"].split())
    assert "--replicaof redis 6379" in replica
    assert "--appendonly yes" in replica and "--maxmemory-policy noeviction" in replica
    # Without a profile nothing changes: the services of the plain setup are not in it.
    assert "profiles" not in services["redis"] and "profiles" not in services["worker"]


def test_every_sentinel_watches_the_redis_service_with_a_majority_quorum(
    services: dict[str, dict[str, Any]],
) -> None:
    sentinels = {n: s for n, s in in_profile(services).items() if n.startswith("sentinel")}
    confs = [sentinel_conf(s) for s in sentinels.values()]
    assert all(conf == confs[0] for conf in confs)
    conf = confs[0]
    monitor = next(line.split() for line in conf if line.startswith("sentinel monitor"))
    _, _, name, host, port, quorum = monitor
    assert (host, port) == ("redis", "6379")
    assert len(sentinels) // 2 < int(quorum) <= len(sentinels)
    # Hostnames must be resolved before the monitor line names one.
    assert conf.index("sentinel resolve-hostnames yes") < conf.index(" ".join(monitor))
    assert f"sentinel down-after-milliseconds {name} 5000" in conf
    # Each sentinel keeps what it learned (who is master now) in a volume of its own.
    volumes = [s["volumes"][0].split(":")[0] for s in sentinels.values()]
    assert len(set(volumes)) == len(sentinels)
    assert all("[ -f /data/sentinel.conf ] ||" in s["command"][2] for s in sentinels.values())


def test_env_examples_sentinel_url_names_the_profiles_sentinels_and_master(
    services: dict[str, dict[str, Any]],
) -> None:
    target = sentinel_target(example_sentinel_url())
    sentinels = sorted(n for n in in_profile(services) if n.startswith("sentinel"))
    assert sorted(host for host, _ in target.sentinels) == sentinels
    assert {port for _, port in target.sentinels} == {26379}
    conf = sentinel_conf(services[sentinels[0]])
    assert f"port {target.sentinels[0][1]}" in conf
    assert any(line.startswith(f"sentinel monitor {target.service} ") for line in conf)
