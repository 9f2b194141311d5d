"""A pantry clerk: counts what is on a shelf and restocks, keeping a log in state.

Exercises a tool-calling agent with a planner and tools that write session state
through `tool_context.state`.
"""

from google.genai import types

from toolfleet.adk import Agent, BuiltInPlanner, ToolContext

SHELVES: dict[str, dict[str, int]] = {
    "top": {"rice": 1, "lentils": 4},
    "bottom": {"flour": 0, "sugar": 2},
}


def count_items(shelf: str) -> dict[str, object]:
    """Count each item on a pantry shelf.

    Args:
        shelf: Which shelf to count: "top" or "bottom".
    """
    items = SHELVES.get(shelf)
    if items is None:
        return {"error": f"There is no {shelf!r} shelf."}
    low = sorted(name for name, count in items.items() if count < 2)
    return {"shelf": shelf, "items": items, "low": low}


def restock(item: str, quantity: int, tool_context: ToolContext) -> dict[str, object]:
    """Order more of an item and note it in the restock log.

    Args:
        item: The item to order.
        quantity: How many to order.
    """
    log = list(tool_context.state.get("restock_log", []))
    log.append(f"{quantity} x {item}")
    tool_context.state["restock_log"] = log
    tool_context.state["orders_placed"] = len(log)
    return {"ordered": item, "quantity": quantity, "orders_so_far": len(log)}


root_agent = Agent(
    name="pantry_clerk",
    model="gemini-2.0-flash",
    description="Keeps the pantry stocked.",
    instruction=(
        "You look after a pantry. Count a shelf with count_items before ordering, and "
        "order two of every item the count reports as low with restock."
    ),
    tools=[count_items, restock],
    planner=BuiltInPlanner(thinking_config=types.ThinkingConfig(include_thoughts=True)),
)
