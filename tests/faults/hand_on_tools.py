"""The tool of pool `handon` that its old worker lacks: a worker that has it runs the calls
the old one held to hand on (tests/faults/test_hand_on_kill.py)."""

from __future__ import annotations

from toolfleet.shared.tools import tool

POOL = "handon"


@tool(pool=POOL)
def handed(word: str) -> dict[str, str]:
    """Echoes a word."""
    return {"word": word}
