"""Weather + sentiment agent (ADK "FunctionTool" seed), with parallel lookups.

Run: toolfleet run --agent examples.weather:agent "Weather in London and Paris?"
"""

from __future__ import annotations

import re

from toolfleet import Agent, Call, ScriptView, Step, say

REPORTS = {
    "london": "The current weather in London is cloudy with a temperature of 18 degrees Celsius "
    "and a chance of rain.",
    "paris": "The weather in Paris is sunny with a temperature of 25 degrees Celsius.",
    "tokyo": "The weather in Tokyo is clear with a temperature of 21 degrees Celsius.",
    "new york": "The weather in New York is windy with a temperature of 12 degrees Celsius.",
}


def get_weather_report(city: str) -> dict[str, str]:
    """Retrieves the current weather report for a specified city.

    Args:
        city: The city name, e.g. "London".

    Returns:
        dict: A dictionary containing the weather information with a 'status' key ('success' or 'error') and a 'report' key with the weather details if successful, or an 'error_message' if an error occurred.
    """
    report = REPORTS.get(city.lower())
    if report:
        return {"status": "success", "report": report}
    return {
        "status": "error",
        "error_message": f"Weather information for '{city}' is not available.",
    }


def analyze_sentiment(text: str) -> dict[str, object]:
    """Analyzes the sentiment of the given text.

    Args:
        text: The user's feedback to analyze.

    Returns:
        dict: A dictionary with 'sentiment' ('positive', 'negative', or 'neutral') and a 'confidence' score.
    """
    lowered = text.lower()
    if "good" in lowered or "sunny" in lowered:
        return {"sentiment": "positive", "confidence": 0.8}
    if "rain" in lowered or "bad" in lowered:
        return {"sentiment": "negative", "confidence": 0.7}
    return {"sentiment": "neutral", "confidence": 0.6}


# Offline script: a rule, not understanding - it calls the tool once for every known
# city named in the message (all in one turn, so they run in parallel), then reads
# the reports back.
_CITIES = re.compile("|".join(REPORTS), re.IGNORECASE)


def _lookups(view: ScriptView) -> Step:
    cities = [m.group(0).title() for m in _CITIES.finditer(view.user_text)] or ["London"]
    return Step(calls=[Call("get_weather_report", {"city": c}) for c in dict.fromkeys(cities)])


def _reports(view: ScriptView) -> str:
    lines = [r.get("report") or r.get("error_message", "") for _, r in view.responses]
    return "\n".join(str(line) for line in lines)


agent = Agent(
    name="weather_sentiment_agent",
    instruction=(
        "You are a helpful assistant that provides weather information and analyzes the "
        "sentiment of user feedback. If the user asks about the weather in one or more "
        "cities, call 'get_weather_report' once per city (in parallel). If it returns an "
        "'error' status, say the weather for that city is not available. If the user gives "
        "feedback on the weather, use 'analyze_sentiment' and briefly acknowledge it."
    ),
    description="Weather reports for cities and sentiment of feedback.",
    tools=[get_weather_report, analyze_sentiment],
    offline_script=[_lookups, say(_reports)],
)
