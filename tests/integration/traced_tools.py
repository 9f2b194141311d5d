"""Tools of the tracing tests, on a pool of their own (`traced`): only the workers that
export spans to the test's receiver serve it."""

from __future__ import annotations

import time

from toolfleet.shared.tools import tool


@tool(pool="traced")
def fetch_quote(item: str, api_key: str) -> dict[str, object]:
    """Looks up a quote with an API key (a secret: never in a span).

    Args:
        item: What to quote.
        api_key: The key of the quotes API.
    """
    time.sleep(0.3)  # ok: long enough that the turn's calls overlap on several processes
    return {"item": item, "price": len(item) * 10, "key_length": len(api_key)}


@tool(pool="traced", long_running=True)
def open_order(item: str) -> dict[str, str]:
    """Opens an order that someone completes later."""
    return {"status": "pending", "order": item}
