"""A tool of the `unserved` pool, which no test worker serves: its calls wait in the queue."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="unserved")
def queued(item: str) -> dict[str, str]:
    """Echoes an item (never runs: no worker serves the unserved pool)."""
    return {"item": item}
