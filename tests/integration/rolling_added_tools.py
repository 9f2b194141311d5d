"""Tools of the `rolling` and `rolling_io` pools that only their new workers load: the
module a rolling restart adds to their TOOLFLEET_TOOL_MODULES."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="rolling")
def added(word: str) -> dict[str, str]:
    """Echoes a word (on the rolling pool, whose new workers have it)."""
    return {"word": word}


@tool(pool="rolling_io", kind="io")
async def added_io(word: str) -> dict[str, str]:
    """Echoes a word (on the rolling_io pool, whose new workers have it)."""
    return {"word": word}
