"""A payments assistant whose larger payments and card orders need the user's consent.

Exercises tool confirmation: a FunctionTool whose require_confirmation decides from
the call's arguments, and a tool that asks through tool_context.request_confirmation
with a payload the user fills in; the user answers ADK's adk_request_confirmation call
with a FunctionResponse.
"""

from typing import Any

from toolfleet.adk import Agent, FunctionTool, ToolContext

CONSENT_ABOVE_EUR = 100


def send_payment(amount: int, payee: str) -> dict[str, Any]:
    """Send money to a payee.

    Args:
        amount: Euros to send.
        payee: Who receives it.
    """
    return {"sent": amount, "to": payee}


def needs_consent(amount: int, payee: str) -> bool:
    """Whether a payment is large enough to need the user's consent."""
    return amount > CONSENT_ABOVE_EUR


def order_cards(count: int, tool_context: ToolContext) -> dict[str, Any]:
    """Order prepaid cards; the user confirms how many.

    Args:
        count: How many cards were asked for.
    """
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Confirm how many of the {count} cards to order.",
            payload={"cards": 0},
        )
        return {"status": "Waiting for the user to confirm."}
    if not confirmation.confirmed:
        return {"status": "The user declined."}
    approved = int((confirmation.payload or {}).get("cards", 0))
    return {"status": "ordered", "cards": approved}


root_agent = Agent(
    name="payments",
    model="gemini-2.0-flash",
    description="Sends payments and orders prepaid cards.",
    instruction="Send money with send_payment and order prepaid cards with order_cards.",
    tools=[FunctionTool(send_payment, require_confirmation=needs_consent), order_cards],
)
