"""A librarian run with an audit plugin that sees every agent, model and tool call.

Exercises plugins (BasePlugin): the program hands `plugins` to its runner; the plugin
counts model calls, reports tool results, and answers in place of a tool it blocks.
"""

from typing import Any

from toolfleet.adk import (
    Agent,
    BasePlugin,
    CallbackContext,
    LlmRequest,
    ToolContext,
)

LOANS: dict[str, str] = {"Dune": "on the shelf", "Emma": "lent out"}


def lend_book(title: str) -> dict[str, Any]:
    """Lend a book to the reader.

    Args:
        title: The book's title.
    """
    status = LOANS.get(title, "not held")
    return {"title": title, "lent": status == "on the shelf", "was": status}


def clear_shelf(shelf: str) -> dict[str, Any]:
    """Remove every book from a shelf.

    Args:
        shelf: The shelf's label.
    """
    return {"cleared": shelf}


class AuditPlugin(BasePlugin):
    """Prints what the runner does and blocks destructive tools.

    The agent and tool parameters are typed Any: ADK types them BaseAgent and BaseTool,
    toolfleet's BasePlugin the agent Any and the tool FunctionTool.
    """

    def __init__(self) -> None:
        super().__init__(name="audit")
        self.model_calls = 0

    async def before_agent_callback(self, *, agent: Any, callback_context: CallbackContext) -> None:
        """Note each agent run."""
        print(f"[audit] {agent.name} runs")

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        """Count the model calls."""
        self.model_calls += 1
        print(f"[audit] model call {self.model_calls}")

    async def before_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Answer for tools that destroy records instead of running them."""
        if tool.name == "clear_shelf":
            print(f"[audit] blocked {tool.name}")
            return {"error": "Clearing shelves is not allowed here."}
        return None

    async def after_tool_callback(
        self,
        *,
        tool: Any,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> None:
        """Report each tool's result keys."""
        print(f"[audit] {tool.name} answered {sorted(result)}")


root_agent = Agent(
    name="librarian",
    model="gemini-2.0-flash",
    description="Lends books.",
    instruction="Lend books with lend_book. Shelves are cleared with clear_shelf.",
    tools=[lend_book, clear_shelf],
)

plugins = [AuditPlugin()]
