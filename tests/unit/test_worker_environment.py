"""A local worker's environment carries its group's settings: a worker started by
WorkerGroup reads back every setting the group has, whatever this process's
environment says."""

from __future__ import annotations

import os
from typing import Literal, get_origin

import pytest

from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.config import Settings
from toolfleet.shared.signing import new_fleet_key

# A value other than the default for each setting: one a worker reads back only from its
# environment.
CHANGED: dict[str, object] = {
    "redis_url": "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/toolfleet/2",
    "redis_wait_replicas": 2,
    "redis_wait_timeout_s": 0.25,
    "broker_url": "amqp://u:p@rabbit:5672/fleet",
    "key_prefix": "envtest",
    "tool_modules": ["examples.weather", "examples.stocks"],
    "default_pool": "slow",
    "io_pools": ["io", "scrape"],
    "default_io_pool": "fetch",
    "io_concurrency": 500,
    "io_threads": 20,
    "io_intake": False,
    "redis_autopipeline": False,
    "event_loop": "asyncio",
    "default_timeout_s": 7.5,
    "result_grace_s": 2.5,
    "result_batch_ms": 5.0,
    "result_batch_min_calls": 8,
    "max_parallel_calls": 99,
    "max_steps": 5,
    "max_payload_bytes": 4096,
    "max_json_depth": 12,
    "results_maxlen": 770,
    "lease_ttl_s": 4.5,
    "max_calls_per_turn": 33,
    "dedupe_tool_calls": True,
    "completions_maxlen": 88,
    "session_max_events": 55,
    "session_ttl_s": 1234,
    "completion_claim_idle_s": 3.5,
    "redelivery_margin_s": 2.5,
    "restore_interval_s": 0.75,
    "max_deliveries": 5,
    "model": "gemini-other",
    "offline_models": "tests.models:MODELS",
    "model_timeout_s": 9.5,
    "worker_heartbeat_s": 0.25,
    "fleet_key": new_fleet_key(),
    "credential_key": new_credential_key(),
    "progress_to_model": True,
    "secret_arg_names": ["pin", "x,y"],  # a name with a comma in it
}
# Not the group's: each worker process binds an address of its own.
OWN = {"worker_metrics_bind"}


def worker_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a worker started with `env` reads."""
    for name in [n for n in os.environ if n.startswith("TOOLFLEET_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("TOOLFLEET_"):
            monkeypatch.setenv(name, value)
    return Settings()


def test_the_changed_values_differ_from_the_defaults() -> None:
    defaults = Settings()
    assert [n for n, value in CHANGED.items() if getattr(defaults, n) == value] == []


def test_every_setting_is_of_a_kind_its_variable_carries() -> None:
    """A setting added since CHANGED was written still reaches the workers (from its
    default in the test below) if its type is one `setting_text` writes."""
    carried = {int, float, str, bool, list[str], int | None, float | None, str | None}
    odd = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if field.annotation not in carried and get_origin(field.annotation) is not Literal
    }
    assert odd == {}


def test_a_local_worker_reads_every_setting_of_its_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given settings that differ from the defaults in every field (the Redis wait's
    too), a worker started with the group's environment reads each of them back."""
    group = Settings(**CHANGED)  # type: ignore[arg-type]
    seen = worker_settings(WorkerGroup(group).environment(), monkeypatch)
    taken = set(Settings.model_fields) - OWN
    assert {n: getattr(seen, n) for n in taken} == {n: getattr(group, n) for n in taken}


def test_a_setting_the_group_leaves_unset_is_unset_for_its_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given this process's environment asking for a replica wait and a broker the
    group's settings do not have, its workers do not get them either."""
    monkeypatch.setenv("TOOLFLEET_REDIS_WAIT_REPLICAS", "3")
    monkeypatch.setenv("TOOLFLEET_BROKER_URL", "amqp://elsewhere/")
    group = Settings(
        redis_url="redis://127.0.0.1:6379/0", redis_wait_replicas=None, broker_url=None
    )
    seen = worker_settings(WorkerGroup(group).environment(), monkeypatch)
    assert seen.redis_wait_replicas is None
    assert seen.broker_url is None


def test_extra_env_wins_over_the_settings() -> None:
    group = Settings(redis_url="redis://127.0.0.1:6379/0", max_deliveries=4)
    env = WorkerGroup(group, extra_env={"TOOLFLEET_MAX_DELIVERIES": "9"}).environment()
    assert env["TOOLFLEET_MAX_DELIVERIES"] == "9"
