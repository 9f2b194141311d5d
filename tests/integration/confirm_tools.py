"""Tools that need a person's confirmation, run on real workers by the integration
tests; each counts its runs in a file, so a test sees how often it really ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import FunctionTool


def counted(counter_file: str) -> int:
    """Add one run to the file's count; the count after this run."""
    path = Path(counter_file)
    runs = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(runs))
    return runs


def transfer_money(amount: int, counter_file: str, tool_context: ToolContext) -> dict[str, Any]:
    """Moves money; a person confirms each call first.

    Args:
        amount: Euros to move.
        counter_file: Where runs are counted.
    """
    confirmation = tool_context.tool_confirmation
    return {
        "moved": amount,
        "runs": counted(counter_file),
        "confirmed": confirmation.confirmed if confirmation else None,
    }


def over_100(amount: int, counter_file: str) -> bool:
    """Only large transfers need a person."""
    return amount > 100


async def transfer_later(amount: int, counter_file: str) -> dict[str, Any]:
    """Moves money from the io pool (a coroutine tool); large transfers need a person.

    Args:
        amount: Euros to move.
        counter_file: Where runs are counted.
    """
    return {"moved": amount, "runs": counted(counter_file)}


def limits_unknown(amount: int, counter_file: str) -> bool:
    """A check that cannot decide: its limits service is down."""
    raise RuntimeError("the limits service is down")


transfer_money_tool = FunctionTool(transfer_money, require_confirmation=True)
transfer_checked_tool = FunctionTool(
    transfer_money, name="transfer_checked", require_confirmation=over_100
)
transfer_later_tool = FunctionTool(transfer_later, require_confirmation=over_100)
transfer_guarded_tool = FunctionTool(
    transfer_money, name="transfer_guarded", require_confirmation=limits_unknown
)


PAYROLL = AuthConfig(key="payroll_test", scheme="bearer", description="A payroll token.")


def pay_salary(amount: int, counter_file: str, tool_context: ToolContext) -> dict[str, Any]:
    """Pays a salary with the user's payroll token; a person confirms each payment first.

    Args:
        amount: Euros to pay.
        counter_file: Where runs with a token are counted.
    """
    if tool_context.get_auth_response(PAYROLL) is None:
        tool_context.request_credential(PAYROLL)
        return {"status": "needs a payroll token"}
    confirmation = tool_context.tool_confirmation
    return {
        "paid": amount,
        "runs": counted(counter_file),
        "confirmed": confirmation.confirmed if confirmation else None,
    }


pay_salary_tool = FunctionTool(pay_salary, require_confirmation=True)


def book_trip(city: str, counter_file: str, tool_context: ToolContext) -> dict[str, Any]:
    """Books a trip; asks a person to confirm the booking it proposes.

    Args:
        city: Where to.
        counter_file: Where confirmed runs are counted.
    """
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Book a trip to {city}?", payload={"city": city, "nights": 2}
        )
        return {"status": "awaiting approval"}
    return {"booked": confirmation.payload, "runs": counted(counter_file)}


book_trip_tool = FunctionTool(book_trip)


def book_long_stay(city: str, counter_file: str, tool_context: ToolContext) -> dict[str, Any]:
    """Books a trip; asks a person to confirm it, and again for a stay over three nights.

    Args:
        city: Where to.
        counter_file: Where the runs that booked are counted.
    """
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Book a trip to {city}?", payload={"city": city, "nights": 2}
        )
        return {"status": "awaiting approval"}
    nights = int((confirmation.payload or {}).get("nights", 0))
    if nights > 3 and not (confirmation.payload or {}).get("long_stay_ok"):
        tool_context.request_confirmation(
            hint=f"{nights} nights: over the three-night policy. Book anyway?",
            payload={"city": city, "nights": nights, "long_stay_ok": True},
        )
        return {"status": "awaiting a second approval"}
    return {"booked": confirmation.payload, "runs": counted(counter_file)}


book_long_stay_tool = FunctionTool(book_long_stay)


# What the bank adds to an invoice, found only once a person approved the amount.
WIRE_FEE = 30


def pay_invoice(amount: int, counter_file: str, tool_context: ToolContext) -> dict[str, Any]:
    """Pays an invoice; asks a person to confirm its amount, and again for the total
    once the bank's fee is added.

    Args:
        amount: Euros the invoice asks for.
        counter_file: Where the runs that paid are counted.
    """
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(hint=f"Pay {amount}?", payload={"amount": amount})
        return {"status": "awaiting approval"}
    total = amount + WIRE_FEE
    if (confirmation.payload or {}).get("amount") != total:
        tool_context.request_confirmation(
            hint=f"With the bank's fee the invoice costs {total}. Pay it?",
            payload={"amount": total},
        )
        return {"status": "awaiting approval of the total"}
    return {"paid": total, "runs": counted(counter_file)}


pay_invoice_tool = FunctionTool(pay_invoice)
