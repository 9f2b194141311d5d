"""Tools of the tracing tests, on pools of their own (`traced`, `traced_io`): only the workers that
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


@tool(pool="traced_io")
async def fetch_quote_async(item: str, api_key: str) -> dict[str, object]:
    """Looks up a quote from an io worker (its intake takes the message).

    Args:
        item: What to quote.
        api_key: The key of the quotes API.
    """
    return {"item": item, "key_length": len(api_key)}
