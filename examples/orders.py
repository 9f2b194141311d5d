"""Order status agent (ADK seed: a docstring written as a prompt).

Run: toolfleet run --agent examples.orders:agent "Where is order ORD-1001?"
"""

from __future__ import annotations

import re

from toolfleet import Agent, Call, ScriptView, Step, say

ORDERS = {
    "ORD-1001": {"state": "shipped", "tracking_number": "1Z999AA10123456784"},
    "ORD-1002": {"state": "processing", "tracking_number": None},
}


def lookup_order_status(order_id: str) -> dict[str, object]:
    """Fetches the current status of a customer's order using its ID.

    Use this tool ONLY when a user explicitly asks for the status of
    a specific order and provides the order ID. Do not use it for
    general inquiries.

    Args:
        order_id: The unique identifier of the order to look up.

    Returns:
        A dictionary indicating the outcome.
        On success, status is 'success' and includes an 'order' dictionary.
        On failure, status is 'error' and includes an 'error_message'.
        Example success: {'status': 'success', 'order': {'state': 'shipped', 'tracking_number': '1Z9...'}}
        Example error: {'status': 'error', 'error_message': 'Order ID not found.'}
    """
    order = ORDERS.get(order_id.strip().upper())
    if order:
        return {"status": "success", "order": order}
    return {"status": "error", "error_message": f"Order ID {order_id} not found."}


_ORDER_ID = re.compile(r"ORD-\d+", re.IGNORECASE)


def _lookup(view: ScriptView) -> Step:
    match = _ORDER_ID.search(view.user_text)
    return Step(
        calls=[Call("lookup_order_status", {"order_id": match.group(0) if match else "ORD-1001"})]
    )


def _answer(view: ScriptView) -> str:
    response = view.response("lookup_order_status")
    if response.get("status") == "success":
        order = response["order"]
        return (
            f"Your order is {order['state']} (tracking: {order['tracking_number'] or 'not yet'})."
        )
    return str(response.get("error_message"))


agent = Agent(
    name="order_agent",
    instruction="Answer questions about the status of customer orders.",
    description="Looks up order status by order ID.",
    tools=[lookup_order_status],
    offline_script=[_lookup, say(_answer)],
)
