"""Ride out a short Redis outage (a restart, a failover) instead of failing the work.

redis-py 8 clients made with `from_url` do not retry: a command sent while Redis
restarts raises at once, and a tool's result or a session event would be lost. The
clients of workers and orchestrators retry such commands with backoff for about
RIDE_OUT_S. A write whose reply was lost may arrive twice: the orchestrator's session
writes and task sends, and posted ticket results, are applied once all the same (each
records its outcome under its own id: orchestrator.sessions.fencing, shared.completions),
and the rest are tolerated where they land (one result per call id is delivered; a
delivery counted twice is one delivery fewer before WorkerLost).
"""

from __future__ import annotations

import redis
import redis.asyncio.retry as async_retry
import redis.backoff
import redis.retry

from toolfleet.shared.redis_clients import sync_client

# How long a write that records itself is recognised when it arrives again (its reply
# was lost, the client resent it): longer than a client goes on retrying one (RIDE_OUT_S
# and its connection attempts). Session writes keep theirs longer when their lease lives
# longer (orchestrator.sessions.fencing.record_ttl_s).
APPLIED_TTL_S = 60

# 0.05, 0.1, 0.2, 0.4, 0.8 s, then 1 s per retry (with jitter): about 15 s in all.
_RETRIES = 15
_BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 1.0  # the longest wait between two tries
RIDE_OUT_S = 15.0


def _backoff() -> redis.backoff.AbstractBackoff:
    return redis.backoff.ExponentialWithJitterBackoff(base=_BACKOFF_BASE_S, cap=BACKOFF_CAP_S)


def sync_retry() -> redis.retry.Retry:
    """Retry policy of synchronous clients: backoff through about RIDE_OUT_S of outage."""
    return redis.retry.Retry(_backoff(), _RETRIES)


def async_retry_policy() -> async_retry.Retry:
    """The same retry policy for asyncio clients (the orchestrator's connections)."""
    return async_retry.Retry(_backoff(), _RETRIES)


# How long a thread waits for a free connection of a shared client's pool.
POOL_WAIT_S = 20.0


def resilient_client(url: str, max_connections: int | None = None) -> redis.Redis:
    """A synchronous client (workers, the CLI) that retries through an outage.

    With `max_connections`, threads share a pool of that many connections and wait (up to
    POOL_WAIT_S) for a free one: an io worker's hundreds of threads would otherwise pass
    redis-py's default cap of 100 and fail with MaxConnectionsError."""
    return sync_client(
        url, max_connections=max_connections, pool_wait_s=POOL_WAIT_S, retry=sync_retry()
    )
