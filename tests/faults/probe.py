"""What fault-test tools record in Redis, so a test can count executions and side effects.

Tools run in worker processes: they reach Redis through the same TOOLFLEET_* variables
the worker was started with, under the test's key prefix.
"""

from __future__ import annotations

import functools
import uuid

import redis

from toolfleet.shared.config import Settings
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.redis_clients import sync_client


@functools.cache
def _client() -> tuple[redis.Redis, str]:
    settings = Settings()
    return sync_client(settings.require_redis_url()), settings.key_prefix


@functools.cache
def _lasting_client() -> tuple[redis.Redis, str]:
    """A client that retries through a Redis restart (as the workers' own do): a tool's
    record must not fail the call when the fault test restarts Redis as it runs."""
    settings = Settings()
    return resilient_client(settings.require_redis_url()), settings.key_prefix


def _key(prefix: str, kind: str, name: str) -> str:
    return f"{prefix}:probe:{kind}:{name}"


def record_execution(call_id: str) -> int:
    """Count one execution of a call (every delivery that reaches the tool's body): a mark
    of its own in a set, so that the record sent again after a lost reply counts once."""
    client, prefix = _lasting_client()
    key = _key(prefix, "executions", call_id)
    client.sadd(key, uuid.uuid4().hex)
    return int(client.scard(key))


def apply_side_effect_once(call_id: str, effect: str) -> bool:
    """The idempotency pattern tools should follow: the call id guards the side effect."""
    client, prefix = _client()
    if not client.set(_key(prefix, "effect-guard", call_id), 1, nx=True):
        return False  # a redelivery: the effect happened already
    client.rpush(_key(prefix, "effects", effect), call_id)
    return True


def executions(client: redis.Redis, prefix: str, call_id: str) -> int:
    return int(client.scard(_key(prefix, "executions", call_id)))


def effects(client: redis.Redis, prefix: str, effect: str) -> list[str]:
    return [v.decode() for v in client.lrange(_key(prefix, "effects", effect), 0, -1)]
