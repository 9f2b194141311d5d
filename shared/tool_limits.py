"""Fleet-wide per-tool limits: at most `max_concurrency` calls of a tool running at once and
at most `rate_limit` started per period, counted across every worker on every host.

A running call holds a slot: a member of the tool's sorted set, scored by when its lease
ends. The holder renews it while the call runs; a worker that dies stops renewing, and
the next acquire drops its expired slot - never a plain counter that a crash leaves up.
Both scripts read the time from Redis (TIME), so hosts' clocks do not matter, and refuse
a call that is closed already (answered: it must not take a slot or a start).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass

import redis

from toolfleet.shared.ids import unique_hex
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# What an acquire answers for a closed call.
CLOSED = -1

_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: slots, the call's closed key. ARGV: holder, limit, lease ms.
# 1: held; 0: all slots taken; -1: the call is closed.
ACQUIRE = LuaScript(
    "if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end"
    + _NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if held or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"""
)

# KEYS: slots. ARGV: holder, lease ms. 1: renewed; 0: the slot was lost (expired, taken).
RENEW = LuaScript(
    _NOW_MS
    + """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"""
)

# KEYS: the starts (sorted set, scored by start time), the call's closed key.
# ARGV: count, period ms, member. 0: started; -1: closed; else milliseconds to wait.
START = LuaScript(
    "if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end"
    + _NOW_MS
    + """
local period = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], period)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(tonumber(oldest[2]) + period - now, 1)
"""
)

_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([smh])\s*$")


@dataclass(frozen=True)
class Rate:
    """At most `count` starts in any `period_s` seconds."""

    count: int
    period_s: float


def parse_rate(text: str) -> Rate:
    """ "100/m" (per second, minute or hour; "5/10s": five per ten seconds) as a Rate;
    ValueError saying the form when it is not one."""
    match = _RATE.match(text)
    count, many, unit = match.groups() if match else ("0", None, "s")
    period = (float(many) if many is not None else 1.0) * _PERIODS[unit]
    if match is None or int(count) < 1 or period <= 0:
        raise ValueError(
            f"rate_limit {text!r} is not COUNT/PERIOD: write '100/m', '5/s' or '5/10s' "
            "(a count of at least 1 per a period longer than 0 of s, m or h)"
        )
    return Rate(int(count), period)


def new_holder(call_id: str) -> str:
    """A slot holder's name: the call, and this execution of it (a redelivered call is
    another execution and takes a slot of its own)."""
    return f"{call_id}:{unique_hex(8)}"


class Leases:
    """The slots this process holds, renewed by one daemon thread every `renew_s`."""

    def __init__(self, client: redis.Redis, lease_s: float) -> None:
        self._client = client
        self.lease_ms = max(int(lease_s * 1000), 1)
        self._renew_s = lease_s / 5
        self._held: dict[tuple[str, str], None] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def hold(self, key: str, holder: str) -> None:
        """Renew `holder`'s slot in `key` until `drop`."""
        with self._lock:
            self._held[(key, holder)] = None
            if self._thread is None or self._pid != os.getpid():  # a forked pool child
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._renew_forever, name="toolfleet-slot-leases", daemon=True
                )
                self._thread.start()

    def drop(self, key: str, holder: str) -> None:
        """Stop renewing and give the slot back."""
        with self._lock:
            self._held.pop((key, holder), None)
        self._client.zrem(key, holder)

    def renew_all(self) -> None:
        """Renew every held slot once, in one round trip."""
        with self._lock:
            held = list(self._held)
        if not held:
            return
        runs = [(1, key, holder, self.lease_ms) for key, holder in held]
        for (key, holder), reply in zip(held, RENEW.run_all(self._client, runs), strict=True):
            if reply == 0 or isinstance(reply, Exception):
                log.warning("slot %s of %s was lost while its call ran: %s", holder, key, reply)

    def _renew_forever(self) -> None:
        while not self._wake.wait(self._renew_s):
            try:
                self.renew_all()
            except redis.RedisError as exc:  # the next round tries again, within the lease
                log.warning("renewing tool slots failed: %s", exc)
