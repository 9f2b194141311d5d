"""The `toolfleet demo` agent: a trip planner whose lookups fan out across the fleet,
and whose booking is confirmed in the background by a job on the `tickets` pool.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, say
from toolfleet.shared.context import ToolContext
from toolfleet.shared.jobs import JobContext, job
from toolfleet.shared.tools import LongRunningFunctionTool

# Seconds until the background job confirms a booking.
CONFIRM_AFTER_S = float(os.environ.get("TOOLFLEET_DEMO_CONFIRM_AFTER_S", "2"))


def get_weather_report(city: str) -> dict[str, Any]:
    """Retrieves the weather forecast for a city (about 0.4 s).

    Args:
        city: The city name, e.g. "Paris".
    """
    time.sleep(0.4)  # stands in for a weather service
    return {"city": city, "forecast": "sunny", "temperature_c": 25}


def search_hotels(city: str, nights: int) -> dict[str, Any]:
    """Finds hotels with rooms free for the stay (a slow partner API: about 0.9 s).

    Args:
        city: Where to stay.
        nights: Number of nights.
    """
    time.sleep(0.9)  # stands in for a slow partner API
    return {"city": city, "hotels": [{"name": "Hotel Lumière", "per_night_eur": 180}]}


def search_restaurants(city: str, cuisine: str) -> dict[str, Any]:
    """Finds well-reviewed restaurants (about 0.6 s).

    Args:
        city: Where to eat.
        cuisine: Kind of food, e.g. "bistro".
    """
    time.sleep(0.6)  # stands in for a search service
    return {"city": city, "restaurants": ["Chez Janou", "Le Comptoir"]}


def check_trains(origin: str, destination: str) -> dict[str, Any]:
    """Looks up train connections (about 0.8 s).

    Args:
        origin: Departure city.
        destination: Arrival city.
    """
    time.sleep(0.8)  # stands in for a timetable query
    return {"route": f"{origin} → {destination}", "departures": ["08:13", "10:13"], "hours": 2.3}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Converts an amount at today's rate (about 0.3 s).

    Args:
        amount: The amount to convert.
        from_currency: ISO code, e.g. "EUR".
        to_currency: ISO code, e.g. "USD".
    """
    time.sleep(0.3)  # stands in for a rates service
    return {"amount": round(amount * 1.08, 2), "currency": to_currency}


@job(pool="tickets")
def confirm_booking(call_id: str, booking_id: str, hotel: str, job_context: JobContext) -> None:
    """The hotel confirms (here: at once) and the result is posted to the agent."""
    job_context.post_result(
        call_id, {"status": "confirmed", "booking_id": booking_id, "hotel": hotel}
    )


def book_hotel(hotel: str, nights: int, tool_context: ToolContext) -> dict[str, Any]:
    """Requests a booking; the hotel confirms later.

    Args:
        hotel: The hotel's name.
        nights: Number of nights.

    Returns:
        {'status': 'pending', 'booking_id': ...} at once; the final
        {'status': 'confirmed', ...} arrives when the hotel answers.
    """
    booking_id = f"BK-{uuid.uuid4().hex[:6].upper()}"
    tool_context.schedule_job(
        confirm_booking,
        delay_s=CONFIRM_AFTER_S,
        call_id=tool_context.function_call_id,
        booking_id=booking_id,
        hotel=hotel,
    )
    return {"status": "pending", "booking_id": booking_id}


book_hotel_tool = LongRunningFunctionTool(book_hotel)

MESSAGE = "Plan a weekend in Paris from London for two nights, and book the hotel."


def _look_everything_up(view: ScriptView) -> Step:
    return Step(
        calls=[
            Call("get_weather_report", {"city": "Paris"}),
            Call("search_hotels", {"city": "Paris", "nights": 2}),
            Call("search_restaurants", {"city": "Paris", "cuisine": "bistro"}),
            Call("check_trains", {"origin": "London", "destination": "Paris"}),
            Call("convert_currency", {"amount": 360, "from_currency": "EUR", "to_currency": "USD"}),
        ]
    )


def _book(view: ScriptView) -> Step:
    hotel = view.response("search_hotels")["hotels"][0]["name"]
    return Step(calls=[Call("book_hotel", {"hotel": hotel, "nights": 2})])


def _booking_requested(view: ScriptView) -> str:
    booking = view.response("book_hotel")
    return (
        f"I requested the booking ({booking['booking_id']}); I'll confirm when the hotel answers."
    )


def _final(view: ScriptView) -> str:
    booking = view.response("book_hotel")
    return (
        f"Your weekend is set: {booking['hotel']} is {booking['status']} "
        f"(booking {booking['booking_id']}); trains leave London at 08:13 and 10:13, and "
        "Chez Janou has tables. Sunny, 25 °C."
    )


agent = Agent(
    name="trip_planner",
    instruction=(
        "You plan short trips. Look up weather, hotels, restaurants, trains and currency "
        "in parallel, then book the best hotel with book_hotel and tell the user when the "
        "booking is confirmed."
    ),
    description="Plans trips with parallel lookups and a background booking.",
    tools=[
        get_weather_report,
        search_hotels,
        search_restaurants,
        check_trains,
        convert_currency,
        book_hotel_tool,
    ],
    offline_script=[_look_everything_up, _book, say(_booking_requested), say(_final)],
)
