"""A tool of the `census` pool that only some of its test workers load."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="census")
def tally(count: int) -> dict[str, int]:
    """Echoes a count (census3 does not load this module)."""
    return {"count": count}
