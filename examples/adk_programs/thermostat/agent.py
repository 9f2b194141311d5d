"""A thermostat assistant whose agent, model and tool callbacks run in chains.

Exercises callbacks as lists (the first to return something answers and the rest are
skipped), a before_model_callback that answers in place of the model, a
before_tool_callback that answers in place of a tool, and an after_tool_callback that
receives a tool's own return value when it is not a dict.
"""

from typing import Any

from google.genai import types

from toolfleet.adk import (
    Agent,
    BaseTool,
    CallbackContext,
    LlmRequest,
    LlmResponse,
    ToolContext,
)

READINGS = {"kitchen": 19, "study": 23}
HIGHEST_TARGET = 28


def read_temperature(room: str) -> int:
    """Read a room's temperature in degrees Celsius.

    Args:
        room: The room to read.
    """
    return READINGS.get(room, 20)


def set_target(room: str, celsius: int, tool_context: ToolContext) -> dict[str, Any]:
    """Set the temperature a room should be kept at.

    Args:
        room: The room to set.
        celsius: The target in degrees Celsius.
    """
    targets = dict(tool_context.state.get("targets", {}))
    targets[room] = celsius
    tool_context.state["targets"] = targets
    return {"room": room, "target": celsius}


def count_visit(callback_context: CallbackContext) -> None:
    """Count the turns the thermostat has taken."""
    visits = int(callback_context.state.get("visits", 0)) + 1
    callback_context.state["visits"] = visits
    print(f"[agent] turn {visits} starts")


def log_turn_end(callback_context: CallbackContext) -> None:
    """Note that the turn ended."""
    print("[agent] turn ends")


def sign_off(callback_context: CallbackContext) -> types.Content:
    """Close every turn with a fixed line."""
    print("[agent] signing off")
    return types.Content(role="model", parts=[types.Part(text="Thermostat signing off.")])


def never_after_sign_off(callback_context: CallbackContext) -> None:
    """Not reached: sign_off answers first."""
    print("[agent] after the sign-off")


def _last_user_text(llm_request: LlmRequest) -> str:
    for content in reversed(llm_request.contents):
        if content.role == "user":
            texts = [part.text for part in content.parts or () if part.text]
            if texts:
                return " ".join(texts)
    return ""


def safety_stop(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
    """Answer an emergency without asking the model."""
    if "emergency" in _last_user_text(llm_request).lower():
        print("[model] emergency: answered without the model")
        text = "Heating is switched off. Leave the building if you smell smoke."
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
    print("[model] asking the model")
    return None


def count_calls(callback_context: CallbackContext, llm_response: LlmResponse) -> None:
    """Report how many tools the model asked for."""
    parts = llm_response.content.parts or () if llm_response.content else ()
    calls = [part.function_call.name for part in parts if part.function_call]
    print(f"[model] answered with {len(calls)} call(s)")


def log_call(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> None:
    """Print each tool call before it runs."""
    print(f"[tool] {tool.name} {sorted(args.items())}")


def cap_target(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
) -> dict[str, Any] | None:
    """Refuse targets above the highest allowed, instead of running the tool."""
    if tool.name == "set_target" and int(args.get("celsius", 0)) > HIGHEST_TARGET:
        print(f"[tool] refused {args['celsius']}")
        return {"error": f"Targets above {HIGHEST_TARGET} C are not allowed."}
    return None


def wrap_reading(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
) -> dict[str, Any] | None:
    """Turn a bare reading into a labelled one."""
    print(f"[tool] {tool.name} returned a {type(tool_response).__name__}")
    if isinstance(tool_response, int):
        return {"room": args["room"], "celsius": tool_response}
    return None


def stamp_result(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
) -> dict[str, Any]:
    """Mark a result as checked (reached only when wrap_reading returned nothing)."""
    print(f"[tool] stamping {tool.name}")
    return {**tool_response, "checked": True}


root_agent = Agent(
    name="thermostat",
    model="gemini-2.0-flash",
    description="Reads and sets room temperatures.",
    instruction="Read rooms with read_temperature and change targets with set_target.",
    tools=[read_temperature, set_target],
    before_agent_callback=count_visit,
    after_agent_callback=[log_turn_end, sign_off, never_after_sign_off],
    before_model_callback=safety_stop,
    after_model_callback=count_calls,
    before_tool_callback=[log_call, cap_target],
    after_tool_callback=[wrap_reading, stamp_result],
)
