"""Tools of the metrics test, on a pool of their own (`metered`): only the worker that
serves its metrics to the test runs them."""

from __future__ import annotations

import time

from toolfleet.shared.tools import tool


@tool(pool="metered")
def weigh(item: str, broken: bool = False) -> dict[str, object]:
    """Weighs an item; raises ValueError when the scale is `broken`.

    Args:
        item: What to weigh.
        broken: Whether the scale fails.
    """
    time.sleep(0.3)  # ok: the turn's calls overlap on both processes of the worker
    if broken:
        raise ValueError("the scale is broken")
    return {"item": item, "grams": 10 * len(item)}


@tool(pool="metered", long_running=True)
def order_scale(model: str) -> dict[str, str]:
    """Orders a new scale; someone confirms the delivery later."""
    return {"status": "pending", "model": model}
