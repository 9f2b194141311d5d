"""The public API's contract: the facade's exported names change only on purpose, a type
checker sees every one of them, and it knows what `@tool` makes of a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mypy import api as mypy_api

import toolfleet

FACADE = Path(toolfleet.__file__)

# Adding a name is a feature and removing one breaks users: change this list on purpose.
EXPORTED = {
    "Agent", "AgentTool", "AlreadyCompletedError", "AuthConfig", "AwaitingConfirmationError",
    "AwaitingCredentialError", "BaseExampleProvider", "BaseLlm", "BasePlanner", "BasePlugin",
    "BaseTool", "BaseToolset", "BuiltInCodeExecutor", "BuiltInPlanner", "Call", "CallFinished",
    "CallNotPendingError", "CallStatus", "CallbackContext", "CallsDispatched", "CompletionError",
    "Completions", "ConfigError", "EndReason", "Event", "Example", "ExampleTool",
    "ForeignSessionError", "FunctionTool", "GeminiModel", "GoogleSearchTool",
    "InvalidCompletionError", "InvocationEnded", "Job", "JobContext", "Keys", "LeaseLostError",
    "LiteLlm", "LlmAgent", "LlmRequest", "LlmResponse", "LongRunningFunctionTool", "LoopAgent",
    "McpToolset", "Model", "ModelError", "ModelRequest", "OpenAPIToolset", "Orchestrator",
    "ParallelAgent", "PendingCall", "PlanReActPlanner", "ReadonlyContext",
    "ReflectAndRetryToolPlugin", "Runner", "Script", "ScriptView", "ScriptedModel",
    "SequentialAgent", "Session", "SessionBusyError", "SessionError", "SessionExistsError",
    "SessionNotFoundError", "Settings", "State", "StdioConnectionParams", "Step",
    "StreamableHTTPConnectionParams", "ToolActions", "ToolCall", "ToolCallError",
    "ToolConfirmation", "ToolContext", "ToolDefinitionError", "ToolError", "ToolOptions",
    "ToolResult", "ToolfleetError", "Update", "UrlContextTool", "__version__", "as_tool", "call",
    "exit_loop", "get_user_choice", "google_search", "job", "load_artifacts", "load_memory",
    "post_result", "preload_memory", "redis_client", "say", "tool", "url_context",
}  # fmt: skip


def test_the_facade_exports_exactly_the_public_names() -> None:
    assert set(toolfleet.__all__) == EXPORTED
    assert len(toolfleet.__all__) == len(EXPORTED)  # no name twice


def test_a_type_checker_sees_every_exported_name() -> None:
    """The names load lazily at run time; type checkers read them from the TYPE_CHECKING
    imports, so each exported name must be imported there too."""
    tree = ast.parse(FACADE.read_text())
    seen: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in ast.walk(node):
                if isinstance(statement, ast.ImportFrom):
                    seen |= {alias.asname or alias.name for alias in statement.names}
    assert EXPORTED - {"__version__"} <= seen, sorted(EXPORTED - {"__version__"} - seen)


def test_the_wheel_marks_the_package_typed() -> None:
    assert (FACADE.parent / "py.typed").exists()


@pytest.mark.timeout(300)
def test_a_type_checker_knows_what_tool_makes(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(
        "from toolfleet import FunctionTool, tool\n"
        "@tool\n"
        "def bare(city: str) -> str:\n"
        "    return city\n"
        "@tool(pool='heavy', max_concurrency=2)\n"
        "def with_options(city: str) -> str:\n"
        "    return city\n"
        "reveal_type(bare)\n"
        "reveal_type(with_options)\n"
        "reveal_type(tool(pool='io'))\n"
        "wrong: int = bare\n"
    )
    out, _, status = mypy_api.run(
        [str(program), "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--follow-imports", "silent", "--no-error-summary"]
    )  # fmt: skip
    revealed = [
        line.split("Revealed type is ")[1] for line in out.splitlines() if "Revealed" in line
    ]
    assert revealed[:2] == ['"toolfleet.shared.tools.FunctionTool"'] * 2, out
    assert "def (def (*Any, **Any) -> Any) -> toolfleet.shared.tools.FunctionTool" in revealed[2], (
        out
    )
    assert 'Incompatible types in assignment (expression has type "FunctionTool"' in out, out
    assert status == 1
