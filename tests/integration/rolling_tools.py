"""Tools of the `rolling` and `rolling_io` pools that every worker of them loads, old and
new; rolling_added_tools.py holds the tools a rolling restart adds to them."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="rolling")
def kept(word: str) -> dict[str, str]:
    """Echoes a word (on the rolling pool, every worker of which has it)."""
    return {"word": word}


@tool(pool="rolling_io", kind="io")
async def kept_io(word: str) -> dict[str, str]:
    """Echoes a word (on the rolling_io pool, every worker of which has it)."""
    return {"word": word}
