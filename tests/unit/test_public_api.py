"""The public API's contract: the facade's exported names change only on purpose, a type
checker sees every one of them, it knows what `@tool` makes of a function, and every
public name documents what it takes and gives."""

from __future__ import annotations

import ast
import enum
import inspect
from pathlib import Path
from typing import Any

import docstring_parser
import pytest
from mypy import api as mypy_api
from pydantic import BaseModel

import toolfleet
import toolfleet.adk

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


# Return annotations that say the callable gives nothing back (annotations are strings
# under `from __future__ import annotations`).
_GIVES_NOTHING = {None, "None", "NoReturn", inspect.Signature.empty}


def _parameters(signature: inspect.Signature) -> list[str]:
    """The parameters a docstring must describe: not self/cls, private ones (a settings
    class's `_env_file`) or a bare `*args, **kwargs` that takes anything."""
    return [
        name
        for name, p in signature.parameters.items()
        if name not in ("self", "cls")
        and not name.startswith("_")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _documented(docstrings: list[str]) -> set[str]:
    """The names the Google-style `Args:` and `Attributes:` sections describe."""
    names: set[str] = set()
    for doc in docstrings:
        parsed = docstring_parser.parse(doc, docstring_parser.Style.GOOGLE)
        names |= {p.arg_name.lstrip("*") for p in parsed.params}
    return names


def _all_fields_described(cls: type) -> bool:
    """A pydantic model (Settings) whose every field carries its own description."""
    return issubclass(cls, BaseModel) and all(
        field.description for field in cls.model_fields.values()
    )


def _contract_problems(name: str, obj: Any) -> list[str]:
    """What the docstring of one public name lacks; empty when it has it all."""
    if inspect.isclass(obj):
        # mkdocstrings merges __init__'s docstring into the class's (merge_init_into_class).
        init = obj.__dict__.get("__init__")
        docstrings = [obj.__dict__.get("__doc__") or "", getattr(init, "__doc__", None) or ""]
        if not "".join(docstrings).strip():
            return [f"{name}: no docstring"]
        if issubclass(obj, enum.Enum):
            return []
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            return []
        if _all_fields_described(obj) and "Attributes:" not in "".join(docstrings):
            return []
        missing = [p for p in _parameters(signature) if p not in _documented(docstrings)]
        if missing:
            return [f"{name}: Args:/Attributes: lacks {', '.join(missing)}"]
        return []
    if inspect.isfunction(obj):
        doc = obj.__doc__ or ""
        problems = []
        if not doc.strip():
            return [f"{name}: no docstring"]
        signature = inspect.signature(obj)
        missing = [p for p in _parameters(signature) if p not in _documented([doc])]
        if missing:
            problems.append(f"{name}: Args: lacks {', '.join(missing)}")
        if signature.return_annotation not in _GIVES_NOTHING and "Returns:" not in doc:
            problems.append(f"{name}: no Returns:")
        return problems
    return []  # an instance (google_search, a FunctionTool) or a type alias (Update)


@pytest.mark.parametrize("module", [toolfleet, toolfleet.adk], ids=lambda m: m.__name__)
def test_every_public_name_documents_what_it_takes_and_gives(module: Any) -> None:
    """Each class documents its constructor's parameters (Args:, or Attributes: for a
    dataclass or pydantic model; a settings model may describe each field instead), each
    function its parameters (Args:) and, unless it returns None, its result (Returns:)."""
    checked = [n for n in module.__all__ if not n.startswith("__")]
    problems = [p for n in checked for p in _contract_problems(n, getattr(module, n))]
    assert not problems, "\n".join(problems)


def test_the_contract_check_catches_a_missing_section() -> None:
    def undocumented(city: str) -> str:
        """Say the city."""
        return city

    def documented(city: str) -> str:
        """Say the city.

        Args:
            city: The city.

        Returns:
            The city.
        """
        return city

    assert _contract_problems("undocumented", undocumented) == [
        "undocumented: Args: lacks city",
        "undocumented: no Returns:",
    ]
    assert _contract_problems("documented", documented) == []

    class Half:
        """A thing.

        Args:
            a: The first.
        """

        def __init__(self, a: int, b: int) -> None:
            self.total = a + b

    assert _contract_problems("Half", Half) == ["Half: Args:/Attributes: lacks b"]
