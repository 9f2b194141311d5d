"""Tools of the `sparse` and `sparse_io` pools whose module their workers do not load."""

from __future__ import annotations

from toolfleet.shared.tools import tool


@tool(pool="sparse")
def absent(word: str) -> dict[str, str]:
    """Echoes a word (no worker of the sparse pool has it)."""
    return {"word": word}


@tool(pool="sparse_io", kind="io")
async def absent_io(word: str) -> dict[str, str]:
    """Echoes a word (no worker of the sparse_io pool has it)."""
    return {"word": word}
