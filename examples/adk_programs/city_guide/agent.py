"""A city guide that answers several questions with several calls in one turn.

Exercises function calls made together in one model turn, a tool's own error dict
given to the model like any result, an instruction provider reading the session
state, and a before_model_callback that trims the history the model is sent to the
latest question.
"""

from typing import Any

from toolfleet.adk import Agent, CallbackContext, LlmRequest, ReadonlyContext

WEATHER = {"Oslo": "light snow, -3 C", "Lisbon": "sunny, 18 C"}
POPULATION = {"Oslo": 717_000, "Lisbon": 545_000}


def weather_in(city: str) -> dict[str, Any]:
    """Today's weather in a city.

    Args:
        city: The city's name.
    """
    if city not in WEATHER:
        return {"status": "error", "error_message": f"No weather station in {city}."}
    return {"status": "success", "report": WEATHER[city]}


def population_of(city: str) -> dict[str, Any]:
    """How many people live in a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "population": POPULATION.get(city)}


def guide_instruction(context: ReadonlyContext) -> str:
    """The instruction, naming the user's home city when the state has one."""
    home = context.state.get("home_city", "an unknown city")
    return f"You are a city guide for a traveller from {home}. Use your tools for facts."


def latest_question_only(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Send the model the conversation from the user's latest message on."""
    for index in range(len(llm_request.contents) - 1, -1, -1):
        content = llm_request.contents[index]
        if content.role == "user" and any(part.text for part in content.parts or ()):
            llm_request.contents = llm_request.contents[index:]
            return


root_agent = Agent(
    name="city_guide",
    model="gemini-2.0-flash",
    description="Answers questions about cities.",
    instruction=guide_instruction,
    tools=[weather_in, population_of],
    before_model_callback=latest_question_only,
)
