"""A worker's node name is its own: claimed in Redis at start, kept by its heartbeat.

Two workers with one name would overwrite each other's heartbeat record, so one of them
(and maybe its pools) would look dead. The claim is a key set only if absent (SET NX) with
the heartbeat's TTL: a second worker with a live holder's name is refused before it takes
any call, and the name of a worker that died is free once its last claim expires.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass, field

import click
import redis

from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys

# Renew the claim, and write the heartbeat record when there is one, only while the claim
# is this worker's (or lapsed and free again): a worker that lost its name to another
# never overwrites the new holder's record. Returns 1 if written, 0 if the name is taken.
# The registry's score (when the record lapses) is on Redis's clock, which the
# orchestrator reads it by: a host's clock does not matter.
RENEW = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '' then
  local t = redis.call('TIME')
  local lapses_at = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[2]) / 1000
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  redis.call('ZADD', KEYS[3], lapses_at, ARGV[4])
end
return 1
"""

# Remove the claim and the heartbeat record only if the claim is this worker's.
RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
"""

# What a default node name may hold besides the pools' own letters: Celery splits a node
# name at its first "@", and "%" starts one of its placeholders.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class WorkerNameTakenError(ToolfleetError, click.ClickException):
    """Another live worker holds this worker's node name. `toolfleet worker` reports it as
    a ToolfleetError; Celery's own command line as a ClickException, without a traceback."""


def default_worker_name(pools: list[str], pid: int | None = None, host: str = "") -> str:
    """A node name no other live worker has: the pools, this process's pid and the host,
    e.g. `default-io.12345@host` (Celery's own default, celery@host, is one per host)."""
    label = _UNSAFE.sub("_", "-".join(pools)) or "worker"
    return f"{label}.{os.getpid() if pid is None else pid}@{host or socket.gethostname()}"


@dataclass
class NameClaim:
    """This process's hold on the node name `hostname`, under `keys`, for `ttl_ms` at a
    time: `take` at start, `renew` on every beat, `release` on a clean stop."""

    client: redis.Redis
    keys: Keys
    hostname: str
    ttl_ms: int
    # Who holds it, as the refusal tells another worker; unique to this claim.
    holder: str = field(
        default_factory=lambda: json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "since": time.time(),
                "claim": unique_hex(16),
            }
        )
    )

    def __post_init__(self) -> None:
        self._renew = self.client.register_script(RENEW)
        self._release = self.client.register_script(RELEASE)

    def take(self) -> None:
        """Hold the name, or raise WorkerNameTakenError saying who holds it and what to
        change; a Redis error propagates (the worker cannot start without Redis)."""
        key = self.keys.worker_name(self.hostname)
        if self.client.set(key, self.holder, nx=True, px=self.ttl_ms):
            return
        raise WorkerNameTakenError(self.refusal(self.holder_now()))

    def holder_now(self) -> str:
        """Who holds the name now ("pid P on host"), as its claim says."""
        held_by = self.client.get(self.keys.worker_name(self.hostname))
        try:
            holder = json.loads(held_by or "{}")
        except ValueError:  # not a claim of ours: say so rather than fail
            holder = {}
        return f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"

    def refusal(self, who: str) -> str:
        """What a worker refused the name is told: the holder, and what to change."""
        label, _, _ = self.hostname.partition("@")
        return (
            f"worker name {self.hostname} is held by a live worker ({who}): start this one "
            f"with another --name (-n for celery worker), e.g. --name {label}-2@%h; "
            "toolfleet worker without --name takes one of its own (<pools>.<pid>@host). "
            f"A dead worker's name is free {self.ttl_ms / 1000:g} s after its last heartbeat"
        )

    def renew(self, record: str = "") -> bool:
        """Extend the claim and, given `record` (the heartbeat's JSON), write the heartbeat
        in the same step; False, writing nothing, if another worker holds the name now."""
        keys = [
            self.keys.worker_name(self.hostname),
            self.keys.worker(self.hostname),
            self.keys.workers(),
        ]
        args: list[str | int] = [self.holder, self.ttl_ms, record, self.hostname]
        return bool(self._renew(keys=keys, args=args))

    def release(self) -> bool:
        """Free the name and remove the heartbeat record, if the claim is still this
        worker's; False if it is not (another holder's record stays)."""
        keys = [
            self.keys.worker_name(self.hostname),
            self.keys.worker(self.hostname),
            self.keys.workers(),
        ]
        return bool(self._release(keys=keys, args=[self.holder, self.hostname]))
