"""BaseTool: ADK's base class for a custom tool, run on the fleet like any other.

Subclass it as ADK's custom-tools guide does: a name and description, a
`_get_declaration()` giving the FunctionDeclaration, and `async run_async(*, args,
tool_context)`. A worker finds the tool through a module-level name (the tool itself,
or the agent or toolset holding it) and calls `run_async` on its own instance: an
instance's attributes are what the module sets up at import, never what another
process changed later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from google.genai import types

from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.schema import ArgumentProblem
from toolfleet.shared.tools import FunctionTool

if TYPE_CHECKING:
    from toolfleet.shared.request_hooks import LlmRequest, RequestContext

_CONVERTED = "_toolfleet_function_tool"  # where an instance keeps its FunctionTool


class BaseTool:
    """Subclass, implement `_get_declaration` and `run_async`; add it to an agent's tools.

    `run_async` returns the response: a dict, or any JSON value (wrapped as
    {"result": value}). With `is_long_running`, it starts the work and returns at once
    (the final result is posted later, as for LongRunningFunctionTool).

    Args:
        name: The tool's name for the model.
        description: What the tool does, for the model.
        is_long_running: `run_async` starts the work and returns at once; the final
            result is posted later.
        custom_metadata: Any data the tool's author keeps with it; toolfleet does not
            read it.
    """

    # Class-level defaults, in case a subclass does not call super().__init__().
    name: str = ""
    description: str = ""
    is_long_running: bool = False
    custom_metadata: dict[str, Any] | None = None

    def __init__(
        self,
        *,
        name: str,
        description: str,
        is_long_running: bool = False,
        custom_metadata: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.is_long_running = is_long_running
        self.custom_metadata = custom_metadata

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        """The declaration the model sees; a tool without one cannot be offered."""
        return None

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Run the tool with the model's arguments; subclasses implement it."""
        raise NotImplementedError(f"{type(self).__qualname__} must implement run_async()")

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        """ADK's hook: change the model request before each model call of an agent that
        holds this tool (run on the orchestrator). The tool is offered through its
        declaration already; this adds nothing by default."""

    def as_function_tool(self) -> FunctionTool:
        """The FunctionTool that offers and runs this tool (one per instance)."""
        made = vars(self).get(_CONVERTED)
        if made is None:
            made = _convert(self)
            setattr(self, _CONVERTED, made)
        return made

    def all_tools(self) -> list[FunctionTool]:
        """What a worker registers for this tool (a ToolSource, as agents and toolsets)."""
        return [] if changes_requests_only(self) else [self.as_function_tool()]


def changes_requests_only(tool: object) -> bool:
    """Whether `tool` is a BaseTool that only changes model requests (ADK's
    preload_memory, ExampleTool): no declaration, a process_llm_request of its own. It is
    never offered to the model nor run on the fleet."""
    if not isinstance(tool, BaseTool):
        return False
    if type(tool).process_llm_request is BaseTool.process_llm_request:
        return False
    try:
        return tool._get_declaration() is None
    except Exception:  # reported, with the tool's name, when it is converted
        return False


@dataclass(frozen=True, eq=False)
class CustomTool(FunctionTool):
    """A BaseTool as the fleet runs it: its declaration, its arguments checked for the
    required ones (the rest is the tool's to judge), its `run_async` on a worker."""

    custom: BaseTool | None = field(default=None, kw_only=True)
    declared: dict[str, Any] = field(default_factory=dict, kw_only=True)
    text: str = field(default="", kw_only=True)
    # Its function is made per instance; workers find it through the instance.
    checks_importable: ClassVar[bool] = False

    @property
    def description(self) -> str:
        """The declaration's description (or the tool's)."""
        return self.text

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        """The declaration's parameters as JSON Schema."""
        return self.declared

    def validate(self, args: object) -> tuple[dict[str, Any], list[ArgumentProblem]]:
        """An object holding every required argument; the tool checks the rest."""
        if not isinstance(args, dict):
            kind = type(args).__name__
            return {}, [ArgumentProblem("(arguments)", f"expected an object, got {kind}")]
        required = self.declared.get("required", [])
        missing = [n for n in required if n not in args]
        return dict(args), [ArgumentProblem(n, "required argument is missing") for n in missing]


def _convert(custom: BaseTool) -> CustomTool:
    where = f"{type(custom).__module__}.{type(custom).__qualname__}"
    try:
        declaration = custom._get_declaration()
    except Exception as exc:
        raise ToolDefinitionError(
            [f"custom tool {where}: _get_declaration() failed: {type(exc).__name__}: {exc}"]
        ) from exc
    if declaration is None:
        raise ToolDefinitionError(
            [
                f"custom tool {where} has no declaration: implement _get_declaration() "
                "returning a types.FunctionDeclaration, or use FunctionTool(func=...)"
            ]
        )
    return CustomTool(
        _runner(custom),
        declaration.name or custom.name,
        is_long_running=custom.is_long_running,
        custom=custom,
        declared=_schema(declaration),
        text=declaration.description or custom.description,
    )


def _schema(declaration: types.FunctionDeclaration) -> dict[str, Any]:
    """The declaration's parameters as JSON Schema, whichever way it gives them."""
    if isinstance(declaration.parameters_json_schema, dict):
        return declaration.parameters_json_schema
    if declaration.parameters is not None:
        schema: dict[str, Any] = declaration.parameters.json_schema.model_dump(
            mode="json", exclude_none=True
        )
        return schema
    return {"type": "object", "properties": {}}


def _runner(custom: BaseTool) -> Callable[..., Any]:
    async def run_custom_tool(tool_context: ToolContext, **args: Any) -> Any:
        return await custom.run_async(args=args, tool_context=tool_context)

    run_custom_tool.__doc__ = custom.description or "A custom tool."
    return run_custom_tool
