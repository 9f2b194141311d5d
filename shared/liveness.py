"""How long a worker's heartbeat record says it is alive, on both sides of the fleet.

A worker writes its record at every beat for HEARTBEAT_TTL_BEATS periods; an orchestrator
takes a pool with no current record as unserved, except for a while after a Redis outage:
the records of workers that lived through it lapsed meanwhile, as nothing could be
written, and come back with their next beats.
"""

from __future__ import annotations

from toolfleet.shared.outages import BACKOFF_CAP_S

# A record lives this many beats: a worker that missed fewer still counts as live.
HEARTBEAT_TTL_BEATS = 3


def heartbeat_ttl_s(period_s: float) -> float:
    """How long a worker's record (and its name's claim) lives after a beat."""
    return HEARTBEAT_TTL_BEATS * period_s


def outage_grace_s(period_s: float) -> float:
    """How long after a Redis outage a pool served before it still counts as served with
    no record of its workers back. A worker that lived through the outage writes its
    record again at its next try: within its client's longest retry wait while its beat
    rides the outage out, within its period once it gave that beat up. The orchestrator
    learns of the outage's end up to one read's pause late; a record's lifetime covers
    that and the period."""
    return heartbeat_ttl_s(period_s) + BACKOFF_CAP_S
