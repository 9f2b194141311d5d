"""A tool on the `heavy` pool, whose worker the tests start and stop themselves."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="heavy")
def render_report(pages: int) -> dict[str, int]:
    """Renders a report (runs on the heavy pool)."""
    return {"pages": pages}
