"""kombu's Redis transport layout: the lists of a queue and the unacknowledged set.

Written out here rather than read from kombu's `Channel` so that the orchestrator need
not import kombu's transport; the contract tests pin each value to kombu's.
"""

from __future__ import annotations

# A queue's messages of priority N > 0 are on a list of their own, `<queue><sep>N`,
# N rounded down to one of the steps; priority 0 (every call toolfleet sends) is on
# `<queue>` itself. kombu's consumer takes the lists in this order.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)

# A message taken and not yet acknowledged: in the hash under its delivery tag as the
# JSON array [message, exchange, routing key], and in the sorted set under the same tag,
# scored by when it was taken. The broker's sweep puts back what is older than the
# visibility timeout.
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"


def priority_lists(queue: str) -> list[str]:
    """The Redis lists of `queue`, first taken first: `queue` itself (priority 0), then
    `queue<sep>N` for each other priority step."""
    return [f"{queue}{PRIORITY_SEPARATOR}{step}" if step else queue for step in PRIORITY_STEPS]
