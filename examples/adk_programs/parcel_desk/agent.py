"""A parcel desk whose tools take pydantic models as arguments.

Exercises tool parameters typed as pydantic models: the model sends JSON objects and
the tools get instances, an optional one absent when not sent, and a union of two
models resolved to the one the object fits.
"""

from typing import Any

from pydantic import BaseModel

from toolfleet.adk import Agent


class Parcel(BaseModel):
    """A parcel's size."""

    weight_kg: float
    fragile: bool = False


class Address(BaseModel):
    """Where a parcel goes."""

    city: str
    country: str = "NL"


class Locker(BaseModel):
    """A parcel locker to collect from."""

    locker_id: str


def quote_shipping(parcel: Parcel, destination: Address | None = None) -> dict[str, Any]:
    """Quote the price of sending a parcel.

    Args:
        parcel: The parcel to send.
        destination: Where it goes; the home country when left out.
    """
    price = 5.0 + 2.0 * parcel.weight_kg + (3.0 if parcel.fragile else 0.0)
    where = destination.city if destination is not None else "anywhere at home"
    return {
        "price_eur": round(price, 2),
        "to": where,
        "types": [type(parcel).__name__, type(destination).__name__],
    }


def deliver_to(target: Address | Locker) -> dict[str, Any]:
    """Choose where a parcel is delivered.

    Args:
        target: A street address or a parcel locker.
    """
    if isinstance(target, Locker):
        return {"kind": "locker", "at": target.locker_id}
    return {"kind": "address", "at": f"{target.city}, {target.country}"}


root_agent = Agent(
    name="parcel_desk",
    model="gemini-2.0-flash",
    description="Quotes and routes parcels.",
    instruction="Quote prices with quote_shipping and set delivery with deliver_to.",
    tools=[quote_shipping, deliver_to],
)
