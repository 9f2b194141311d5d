"""ADK's names with ADK's signatures, for programs moving over from `google.adk`.

An ADK program's import lines move over by replacing `google.adk` with `toolfleet.adk`:
`from toolfleet.adk.agents import Agent`, `from toolfleet.adk.tools.tool_context import
ToolContext` and the rest of ADK's modules give ADK's names there (the table in
toolfleet.orchestrator.adk.module_paths); or in one line::

    from toolfleet.adk import Agent, FunctionTool, ToolContext

Why a module of its own as well as the facade: the names here that toolfleet has
already (Agent, FunctionTool, LongRunningFunctionTool, AgentTool, BaseToolset,
ToolContext, ReadonlyContext) are the very objects `toolfleet` exports, so the facade
exports the new ones too (LlmAgent, BaseTool) and both spellings work. But ADK's
client side - `Runner(agent=, app_name=, session_service=)`, its session services and
its events - has signatures that differ from toolfleet's own `Runner`; those belong
here only, where they cannot change what `from toolfleet import Runner` means:
`toolfleet.adk.Runner` is ADK's, built on toolfleet's.

The names load on first use, as the facade's do: a worker importing a tool module
that uses them loads neither the HTTP stack nor the loop.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

import toolfleet
from toolfleet.orchestrator.adk.module_paths import ALIASES, adk_module_names

if TYPE_CHECKING:
    from toolfleet.orchestrator.adk.app import App, EventsCompactionConfig, ResumabilityConfig
    from toolfleet.orchestrator.adk.base_agent import (
        AfterAgentCallback,
        BaseAgent,
        BeforeAgentCallback,
    )
    from toolfleet.orchestrator.adk.events import EventActions
    from toolfleet.orchestrator.adk.run_config import (
        LlmCallsLimitExceededError,
        RunConfig,
        StreamingMode,
    )
    from toolfleet.orchestrator.adk.runner import InMemoryRunner, Runner
    from toolfleet.orchestrator.adk.services import (
        BaseArtifactService,
        BaseMemoryService,
        InMemoryArtifactService,
        InMemoryMemoryService,
        RedisArtifactService,
        RedisMemoryService,
    )
    from toolfleet.orchestrator.adk.sessions import (
        BaseSessionService,
        InMemorySessionService,
        RedisSessionService,
    )
    from toolfleet.orchestrator.adk.unsupported import (
        DatabaseSessionService,
        LiveRequestQueue,
        NotPortedError,
        RemoteA2aAgent,
        SseConnectionParams,
        SseServerParams,
        VertexAiMemoryBankService,
        VertexAiRagMemoryService,
        VertexAiRagRetrieval,
        VertexAiSearchTool,
        VertexAiSessionService,
        to_a2a,
    )
    from toolfleet.orchestrator.agent_tool import AgentTool
    from toolfleet.orchestrator.agents.agent import Agent, LlmAgent
    from toolfleet.orchestrator.agents.builtin_tools import (
        BuiltInCodeExecutor,
        GoogleSearchTool,
        UrlContextTool,
        google_search,
        url_context,
    )
    from toolfleet.orchestrator.agents.planners import (
        BasePlanner,
        BuiltInPlanner,
        PlanReActPlanner,
    )
    from toolfleet.orchestrator.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
    from toolfleet.orchestrator.models.base_llm import BaseLlm
    from toolfleet.orchestrator.models.lite_llm import LiteLlm
    from toolfleet.orchestrator.plugins import (
        BasePlugin,
        CallbackContext,
        LlmRequest,
        LlmResponse,
        ReflectAndRetryToolPlugin,
    )
    from toolfleet.orchestrator.sessions.events import Event
    from toolfleet.orchestrator.sessions.session import Session
    from toolfleet.shared.base_tool import BaseTool
    from toolfleet.shared.confirmation import ToolConfirmation
    from toolfleet.shared.context import ToolContext
    from toolfleet.shared.examples import BaseExampleProvider, Example, ExampleTool
    from toolfleet.shared.exit_loop import exit_loop
    from toolfleet.shared.load_artifacts import load_artifacts
    from toolfleet.shared.mcp_tools import (
        McpToolset,
        StdioConnectionParams,
        StreamableHTTPConnectionParams,
    )
    from toolfleet.shared.mcp_tools import (
        McpToolset as MCPToolset,
    )
    from toolfleet.shared.memory_tools import load_memory, preload_memory
    from toolfleet.shared.openapi import OpenAPIToolset
    from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool
    from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext
    from toolfleet.shared.user_choice import get_user_choice

# ADK's names that toolfleet's own facade exports as well: looked up there, so that
# both spellings are the very same objects.
_FROM_FACADE = frozenset(
    {
        # Callbacks around model and tool calls (ADK's plugins).
        "BasePlugin", "CallbackContext", "LlmRequest", "LlmResponse",
        "ReflectAndRetryToolPlugin",
        # Models other than Gemini: a BaseLlm of one's own, or LiteLlm (litellm extra).
        "BaseLlm", "LiteLlm",
        "Agent", "LlmAgent",
        # Workflow agents: they run their sub-agents in sequence, in parallel, in a loop.
        "SequentialAgent", "ParallelAgent", "LoopAgent", "exit_loop",
        # ADK's built-in tools: run on the fleet (load_memory, get_user_choice) or change
        # the model request before each call (load_artifacts, preload_memory, ExampleTool).
        "load_artifacts", "load_memory", "preload_memory", "get_user_choice",
        "ExampleTool", "Example", "BaseExampleProvider",
        # google.adk.planners, code_executors, and Gemini's built-in tools.
        "BasePlanner", "BuiltInPlanner", "PlanReActPlanner", "BuiltInCodeExecutor",
        "GoogleSearchTool", "UrlContextTool", "google_search", "url_context",
        "AgentTool", "FunctionTool", "LongRunningFunctionTool", "BaseTool",
        # MCP servers' and OpenAPI specs' tools, called on the workers.
        "McpToolset", "StdioConnectionParams", "StreamableHTTPConnectionParams",
        "OpenAPIToolset", "BaseToolset", "ReadonlyContext",
        "ToolContext", "ToolConfirmation", "Session", "Event",
    }
)  # fmt: skip

# ADK's names that are ADK's own here (its client side), and the module of each.
_MODULES: dict[str, str] = {
    "Runner": "toolfleet.orchestrator.adk.runner",
    "InMemoryRunner": "toolfleet.orchestrator.adk.runner",
    "App": "toolfleet.orchestrator.adk.app",
    "ResumabilityConfig": "toolfleet.orchestrator.adk.app",
    "EventsCompactionConfig": "toolfleet.orchestrator.adk.app",
    # isinstance(agent, BaseAgent) holds for every agent; subclassing it is refused.
    "BaseAgent": "toolfleet.orchestrator.adk.base_agent",
    "BeforeAgentCallback": "toolfleet.orchestrator.adk.base_agent",
    "AfterAgentCallback": "toolfleet.orchestrator.adk.base_agent",
    "RunConfig": "toolfleet.orchestrator.adk.run_config",
    "StreamingMode": "toolfleet.orchestrator.adk.run_config",
    "LlmCallsLimitExceededError": "toolfleet.orchestrator.adk.run_config",
    "EventActions": "toolfleet.orchestrator.adk.events",
    "BaseSessionService": "toolfleet.orchestrator.adk.sessions",
    "InMemorySessionService": "toolfleet.orchestrator.adk.sessions",
    "RedisSessionService": "toolfleet.orchestrator.adk.sessions",
    "BaseArtifactService": "toolfleet.orchestrator.adk.services",
    "BaseMemoryService": "toolfleet.orchestrator.adk.services",
    "InMemoryArtifactService": "toolfleet.orchestrator.adk.services",
    "InMemoryMemoryService": "toolfleet.orchestrator.adk.services",
    "RedisArtifactService": "toolfleet.orchestrator.adk.services",
    "RedisMemoryService": "toolfleet.orchestrator.adk.services",
    # What does not port (live streaming, A2A, Vertex AI's services): importable, so that
    # a program fails where it uses one, with NotPortedError saying what to use instead.
    "NotPortedError": "toolfleet.orchestrator.adk.unsupported",
    "LiveRequestQueue": "toolfleet.orchestrator.adk.unsupported",
    "RemoteA2aAgent": "toolfleet.orchestrator.adk.unsupported",
    "to_a2a": "toolfleet.orchestrator.adk.unsupported",
    "VertexAiSessionService": "toolfleet.orchestrator.adk.unsupported",
    "DatabaseSessionService": "toolfleet.orchestrator.adk.unsupported",
    "VertexAiRagMemoryService": "toolfleet.orchestrator.adk.unsupported",
    "VertexAiMemoryBankService": "toolfleet.orchestrator.adk.unsupported",
    "VertexAiSearchTool": "toolfleet.orchestrator.adk.unsupported",
    "VertexAiRagRetrieval": "toolfleet.orchestrator.adk.unsupported",
    "SseConnectionParams": "toolfleet.orchestrator.adk.unsupported",
    "SseServerParams": "toolfleet.orchestrator.adk.unsupported",
    # The MCP SDK's parameters of a server run over stdio, as ADK's MCP modules re-export
    # them (the SDK's own class: not in __all__, which lists toolfleet's documented names).
    "StdioServerParameters": "toolfleet.shared.mcp_tools",
    # google.adk.cli.utils.logs, which ADK's sample programs call first.
    "log_to_tmp_folder": "toolfleet.orchestrator.adk.logs",
    "setup_adk_logger": "toolfleet.orchestrator.adk.logs",
}

__all__ = [
    "AfterAgentCallback",
    "Agent",
    "AgentTool",
    "App",
    "BaseAgent",
    "BaseArtifactService",
    "BaseExampleProvider",
    "BaseLlm",
    "BaseMemoryService",
    "BasePlanner",
    "BasePlugin",
    "BaseSessionService",
    "BaseTool",
    "BaseToolset",
    "BeforeAgentCallback",
    "BuiltInCodeExecutor",
    "BuiltInPlanner",
    "CallbackContext",
    "DatabaseSessionService",
    "Event",
    "EventActions",
    "EventsCompactionConfig",
    "Example",
    "ExampleTool",
    "FunctionTool",
    "GoogleSearchTool",
    "InMemoryArtifactService",
    "InMemoryMemoryService",
    "InMemoryRunner",
    "InMemorySessionService",
    "LiteLlm",
    "LiveRequestQueue",
    "LlmAgent",
    "LlmCallsLimitExceededError",
    "LlmRequest",
    "LlmResponse",
    "LongRunningFunctionTool",
    "LoopAgent",
    "MCPToolset",
    "McpToolset",
    "NotPortedError",
    "OpenAPIToolset",
    "ParallelAgent",
    "PlanReActPlanner",
    "ReadonlyContext",
    "RedisArtifactService",
    "RedisMemoryService",
    "RedisSessionService",
    "ReflectAndRetryToolPlugin",
    "RemoteA2aAgent",
    "ResumabilityConfig",
    "RunConfig",
    "Runner",
    "SequentialAgent",
    "Session",
    "SseConnectionParams",
    "SseServerParams",
    "StdioConnectionParams",
    "StreamableHTTPConnectionParams",
    "StreamingMode",
    "ToolConfirmation",
    "ToolContext",
    "UrlContextTool",
    "VertexAiMemoryBankService",
    "VertexAiRagMemoryService",
    "VertexAiRagRetrieval",
    "VertexAiSearchTool",
    "VertexAiSessionService",
    "exit_loop",
    "get_user_choice",
    "google_search",
    "load_artifacts",
    "load_memory",
    "preload_memory",
    "to_a2a",
    "url_context",
]


# ADK's modules that programs import as modules (`from google.adk.agents import
# sequential_agent`, then `sequential_agent.SequentialAgent`): with the import line
# changed, each is a view of this module's names (see _AdkModule).
_ADK_MODULES = frozenset(
    {
        "agents", "tools", "models", "runners", "sessions", "events", "artifacts", "memory",
        "plugins", "planners", "apps", "code_executors", "examples",
        "llm_agent", "sequential_agent", "parallel_agent", "loop_agent", "base_agent",
        "callback_context", "readonly_context", "invocation_context", "run_config",
        "tool_context", "function_tool", "agent_tool", "long_running_tool", "base_tool",
        "base_toolset", "exit_loop_tool", "load_artifacts_tool", "load_memory_tool",
        "preload_memory_tool", "google_search_tool", "url_context_tool",
        "get_user_choice_tool", "example_tool", "tool_confirmation", "mcp_tool",
        "mcp_toolset", "openapi_tool", "lite_llm", "base_llm", "llm_request",
        "llm_response", "session", "in_memory_session_service", "base_session_service",
        "event", "event_actions", "in_memory_artifact_service", "base_artifact_service",
        "in_memory_memory_service", "base_memory_service", "base_plugin",
        "built_in_planner", "plan_re_act_planner", "base_planner", "app",
        "built_in_code_executor", "example", "base_example_provider",
    }
)  # fmt: skip


class _AdkModule(ModuleType):
    """One of ADK's modules as a program imported it: its names are toolfleet.adk's.

    `names`: those it offers (the ones ADK's module has); None: every name of
    toolfleet.adk (a module named on its own, `from toolfleet.adk import tool_context`)."""

    def __init__(self, name: str, names: frozenset[str] | None = None) -> None:
        super().__init__(name)
        self._names = names
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        self.__path__: list[str] = []  # a package: ADK's modules below it import too
        self.__all__ = sorted(names if names is not None else __all__)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        below = sys.modules.get(f"{self.__name__}.{name}")
        if below is not None:  # `from toolfleet.adk.tools import tool_context`
            return below
        if self._names is None or name in self._names:
            try:
                return __getattr__(ALIASES.get(name, name) if self._names else name)
            except AttributeError:
                pass
        adk_name = self.__name__.removeprefix(f"{__name__}.")
        raise AttributeError(
            f"toolfleet.adk.{adk_name} (ADK's module {adk_name}) has no attribute "
            f"{name!r}: toolfleet.adk has ADK's names that port (dir(toolfleet.adk))"
        )

    def __dir__(self) -> list[str]:
        return list(self.__all__)


def _add_adk_modules() -> None:
    """Make ADK's modules importable below this one (`import toolfleet.adk.agents`): an
    import finds a module already in sys.modules, once its parent was imported."""
    for module, names in adk_module_names().items():
        name = f"{__name__}.{module}"
        sys.modules.setdefault(name, _AdkModule(name, names))


def __getattr__(name: str) -> Any:
    if name in _FROM_FACADE:
        value = getattr(toolfleet, name)
    elif name in _MODULES:
        value = getattr(importlib.import_module(_MODULES[name]), name)
    elif f"{__name__}.{name}" in sys.modules:  # one of ADK's packages: agents, tools...
        value = sys.modules[f"{__name__}.{name}"]
    elif name in _ADK_MODULES:
        value = _AdkModule(f"{__name__}.{name}")
    elif name in ALIASES:  # ADK's other name of the same object (MCPToolset)
        value = __getattr__(ALIASES[name])
    else:
        raise AttributeError(f"module 'toolfleet.adk' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


_add_adk_modules()
