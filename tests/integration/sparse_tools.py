"""Tools of the `sparse` and `sparse_io` pools that their workers load (the module named in
their TOOLFLEET_TOOL_MODULES); unregistered_tools.py holds tools of the same pools that
they do not."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="sparse")
def present(word: str) -> dict[str, str]:
    """Echoes a word (on the sparse pool, whose workers have it)."""
    return {"word": word}


@tool(pool="sparse_io", kind="io")
async def present_io(word: str) -> dict[str, str]:
    """Echoes a word (on the sparse_io pool, whose workers have it)."""
    return {"word": word}
