"""The tool signatures of ADK's tool documentation, verbatim in signature and docstring."""

from __future__ import annotations

from typing import Any, Dict, Optional  # noqa: UP035 - kept as the seeds write them

from toolfleet.shared.context import ToolContext


def get_weather(city: str, unit: str):  # type: ignore[no-untyped-def]
    """
    Retrieves the weather for a city in the specified unit.

    Args:
        city (str): The city name.
        unit (str): The temperature unit, either 'Celsius' or 'Fahrenheit'.
    """
    return {"status": "success", "report": f"Weather for {city} is sunny."}


def search_flights(destination: str, departure_date: str, flexible_days: int = 0):  # type: ignore[no-untyped-def]
    """
    Searches for flights.

    Args:
        destination (str): The destination city.
        departure_date (str): The desired departure date.
        flexible_days (int, optional): Number of flexible days for the search. Defaults to 0.
    """
    if flexible_days > 0:
        return {"status": "success", "report": f"Found flexible flights to {destination}."}
    return {"status": "success", "report": f"Found flights to {destination} on {departure_date}."}


def create_user_profile(username: str, bio: Optional[str] = None):  # type: ignore[no-untyped-def]  # noqa: UP045
    """
    Creates a new user profile.

    Args:
        username (str): The user's unique username.
        bio (str, optional): A short biography for the user. Defaults to None.
    """
    if bio:
        return {"status": "success", "message": f"Profile for {username} created with a bio."}
    return {"status": "success", "message": f"Profile for {username} created."}


def add_numbers(a: int, b: int, tool_context: ToolContext) -> Dict[str, Any]:  # noqa: UP006
    """Adds two integer numbers.
    Args:
        a: The first number.
        b: The second number.
    Returns:
        A dictionary with the sum, e.g., {'status': 'success', 'result': 5}
    """
    tool_context.state["last_math_operation"] = "addition"
    return {"status": "success", "result": a + b}


def subtract_numbers(a: int, b: int) -> Dict[str, Any]:  # noqa: UP006
    """Subtracts the second number from the first.
    Args:
        a: The first number.
        b: The second number.
    Returns:
        A dictionary with the difference, e.g., {'status': 'success', 'result': 1}
    """
    return {"status": "success", "result": a - b}
