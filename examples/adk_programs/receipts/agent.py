"""A receipt clerk that files receipts as artifacts and reads them back.

Exercises artifacts: a tool saves one with tool_context.save_artifact (a new version
each time), another lists and loads them with list_artifacts and load_artifact.
"""

from typing import Any

from google.genai import types

from toolfleet.adk import Agent, ToolContext


async def file_receipt(store: str, amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """File a receipt.

    Args:
        store: Where the purchase was made.
        amount: What was paid, in euros.
    """
    line = f"{store}: EUR {amount:.2f}"
    name = f"receipt-{store.lower()}.txt"
    version = await tool_context.save_artifact(name, types.Part.from_text(text=line))
    return {"filed": name, "version": version}


async def read_receipts(tool_context: ToolContext) -> dict[str, Any]:
    """Read back every filed receipt."""
    names = await tool_context.list_artifacts()
    lines = []
    for name in sorted(names):
        part = await tool_context.load_artifact(name)
        lines.append(part.text if part is not None else None)
    return {"receipts": lines}


root_agent = Agent(
    name="receipt_clerk",
    model="gemini-2.0-flash",
    description="Files and reads receipts.",
    instruction="File receipts with file_receipt and read them with read_receipts.",
    tools=[file_receipt, read_receipts],
)
