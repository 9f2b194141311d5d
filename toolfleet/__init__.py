"""toolfleet: run LLM agents whose tool calls execute on a fleet of Celery workers.

Everything a user needs is importable from here::

    from toolfleet import Agent, Runner, Settings, tool, ToolContext

The names load lazily, on first use (as `google.adk.tools` does): a worker that
imports a module of tools loads the tool definitions it uses, never the HTTP stack
or the orchestrator's loop.

ADK's names with ADK's signatures are also in `toolfleet.adk` (see there for why a
module of its own).

The source tree keeps `orchestrator/`, `workers/` and `shared/` at the repository's
top level; this folder holds the facade and three relative symlinks to them, so the
tree imports as `toolfleet.*` without an import hook (mypy and pytest read it as is)
and a wheel installs the one import name `toolfleet`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from toolfleet.orchestrator.loop.invocation import (
        CallFinished,
        CallsDispatched,
        EndReason,
        InvocationEnded,
        Update,
    )
    from toolfleet.orchestrator.loop.runner import Runner
    from toolfleet.orchestrator.models.base_llm import BaseLlm
    from toolfleet.orchestrator.models.gemini import GeminiModel
    from toolfleet.orchestrator.models.lite_llm import LiteLlm
    from toolfleet.orchestrator.models.offline import (
        Call,
        Script,
        ScriptedModel,
        ScriptView,
        Step,
        call,
        say,
    )
    from toolfleet.orchestrator.models.protocol import Model, ModelRequest
    from toolfleet.orchestrator.plugins import (
        BasePlugin,
        CallbackContext,
        LlmRequest,
        LlmResponse,
        ReflectAndRetryToolPlugin,
        ToolCallError,
    )
    from toolfleet.orchestrator.service.orchestrator import Orchestrator
    from toolfleet.orchestrator.sessions.events import Event
    from toolfleet.orchestrator.sessions.session import Session
    from toolfleet.shared.auth import AuthConfig
    from toolfleet.shared.base_tool import BaseTool
    from toolfleet.shared.completions import Completions, post_result
    from toolfleet.shared.config import Settings
    from toolfleet.shared.confirmation import ToolConfirmation
    from toolfleet.shared.context import ToolContext
    from toolfleet.shared.errors import (
        AlreadyCompletedError,
        AwaitingConfirmationError,
        AwaitingCredentialError,
        CallNotPendingError,
        CompletionError,
        ConfigError,
        ForeignSessionError,
        InvalidCompletionError,
        LeaseLostError,
        ModelError,
        SessionBusyError,
        SessionError,
        SessionExistsError,
        SessionNotFoundError,
        ToolDefinitionError,
        ToolError,
        ToolfleetError,
    )
    from toolfleet.shared.examples import BaseExampleProvider, Example, ExampleTool
    from toolfleet.shared.exit_loop import exit_loop
    from toolfleet.shared.jobs import Job, JobContext, job
    from toolfleet.shared.keys import Keys
    from toolfleet.shared.load_artifacts import load_artifacts
    from toolfleet.shared.mcp_tools import (
        McpToolset,
        StdioConnectionParams,
        StreamableHTTPConnectionParams,
    )
    from toolfleet.shared.memory_tools import load_memory, preload_memory
    from toolfleet.shared.messages import CallStatus, PendingCall, ToolActions, ToolCall, ToolResult
    from toolfleet.shared.openapi import OpenAPIToolset
    from toolfleet.shared.redis_clients import redis_client
    from toolfleet.shared.state import State
    from toolfleet.shared.tools import (
        FunctionTool,
        LongRunningFunctionTool,
        ToolOptions,
        as_tool,
        tool,
    )
    from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext
    from toolfleet.shared.user_choice import get_user_choice

# Each public name and the module that defines it.
_MODULES: dict[str, str] = {
    # Callbacks around model and tool calls (ADK's plugins).
    "BasePlugin": "toolfleet.orchestrator.plugins",
    "CallbackContext": "toolfleet.orchestrator.plugins",
    "LlmRequest": "toolfleet.orchestrator.plugins",
    "LlmResponse": "toolfleet.orchestrator.plugins",
    "ReflectAndRetryToolPlugin": "toolfleet.orchestrator.plugins",
    "ToolCallError": "toolfleet.orchestrator.plugins",
    # Tools: defining them, and what they receive.
    "tool": "toolfleet.shared.tools",
    "as_tool": "toolfleet.shared.tools",
    "FunctionTool": "toolfleet.shared.tools",
    "LongRunningFunctionTool": "toolfleet.shared.tools",
    "ToolOptions": "toolfleet.shared.tools",
    "ToolContext": "toolfleet.shared.context",
    "State": "toolfleet.shared.state",
    "BaseTool": "toolfleet.shared.base_tool",
    "BaseToolset": "toolfleet.shared.toolsets",
    "ReadonlyContext": "toolfleet.shared.toolsets",
    "job": "toolfleet.shared.jobs",
    "Job": "toolfleet.shared.jobs",
    "JobContext": "toolfleet.shared.jobs",
    "AuthConfig": "toolfleet.shared.auth",
    # Toolsets of remote tools: an OpenAPI spec's operations, an MCP server's tools.
    "OpenAPIToolset": "toolfleet.shared.openapi",
    "McpToolset": "toolfleet.shared.mcp_tools",
    "StdioConnectionParams": "toolfleet.shared.mcp_tools",
    "StreamableHTTPConnectionParams": "toolfleet.shared.mcp_tools",
    # Agents, and running them.
    "Agent": "toolfleet.orchestrator.agents.agent",
    "LlmAgent": "toolfleet.orchestrator.agents.agent",
    # ADK's planners, BuiltInCodeExecutor, and Gemini's built-in tools (Gemini runs them).
    "BasePlanner": "toolfleet.orchestrator.agents.planners",
    "BuiltInPlanner": "toolfleet.orchestrator.agents.planners",
    "PlanReActPlanner": "toolfleet.orchestrator.agents.planners",
    "BuiltInCodeExecutor": "toolfleet.orchestrator.agents.builtin_tools",
    "GoogleSearchTool": "toolfleet.orchestrator.agents.builtin_tools",
    "UrlContextTool": "toolfleet.orchestrator.agents.builtin_tools",
    "google_search": "toolfleet.orchestrator.agents.builtin_tools",
    "url_context": "toolfleet.orchestrator.agents.builtin_tools",
    # Workflow agents: they run their sub-agents in sequence, in parallel, in a loop.
    "SequentialAgent": "toolfleet.orchestrator.agents.workflow",
    "ParallelAgent": "toolfleet.orchestrator.agents.workflow",
    "LoopAgent": "toolfleet.orchestrator.agents.workflow",
    "exit_loop": "toolfleet.shared.exit_loop",
    # ADK's built-in tools: run on the fleet (load_memory, get_user_choice) or change
    # the model request before each call (load_artifacts, preload_memory, ExampleTool).
    "load_artifacts": "toolfleet.shared.load_artifacts",
    "load_memory": "toolfleet.shared.memory_tools",
    "preload_memory": "toolfleet.shared.memory_tools",
    "get_user_choice": "toolfleet.shared.user_choice",
    "ExampleTool": "toolfleet.shared.examples",
    "Example": "toolfleet.shared.examples",
    "BaseExampleProvider": "toolfleet.shared.examples",
    "AgentTool": "toolfleet.orchestrator.agent_tool",
    "Runner": "toolfleet.orchestrator.loop.runner",
    "Orchestrator": "toolfleet.orchestrator.service.orchestrator",
    "Settings": "toolfleet.shared.config",
    "Keys": "toolfleet.shared.keys",
    "redis_client": "toolfleet.shared.redis_clients",
    # What a run yields.
    "Event": "toolfleet.orchestrator.sessions.events",
    "Session": "toolfleet.orchestrator.sessions.session",
    "Update": "toolfleet.orchestrator.loop.invocation",
    "CallsDispatched": "toolfleet.orchestrator.loop.invocation",
    "CallFinished": "toolfleet.orchestrator.loop.invocation",
    "InvocationEnded": "toolfleet.orchestrator.loop.invocation",
    "EndReason": "toolfleet.orchestrator.loop.invocation",
    # Models.
    "Model": "toolfleet.orchestrator.models.protocol",
    "ModelRequest": "toolfleet.orchestrator.models.protocol",
    "GeminiModel": "toolfleet.orchestrator.models.gemini",
    "BaseLlm": "toolfleet.orchestrator.models.base_llm",
    "LiteLlm": "toolfleet.orchestrator.models.lite_llm",
    "ScriptedModel": "toolfleet.orchestrator.models.offline",
    "Script": "toolfleet.orchestrator.models.offline",
    "ScriptView": "toolfleet.orchestrator.models.offline",
    "Step": "toolfleet.orchestrator.models.offline",
    "Call": "toolfleet.orchestrator.models.offline",
    "call": "toolfleet.orchestrator.models.offline",
    "say": "toolfleet.orchestrator.models.offline",
    # Long-running calls: posting their results.
    "post_result": "toolfleet.shared.completions",
    "Completions": "toolfleet.shared.completions",
    # Wire messages.
    "ToolCall": "toolfleet.shared.messages",
    "ToolResult": "toolfleet.shared.messages",
    "ToolActions": "toolfleet.shared.messages",
    "CallStatus": "toolfleet.shared.messages",
    "PendingCall": "toolfleet.shared.messages",
    # Errors.
    "ToolError": "toolfleet.shared.errors",
    "ToolfleetError": "toolfleet.shared.errors",
    "ConfigError": "toolfleet.shared.errors",
    "ToolDefinitionError": "toolfleet.shared.errors",
    "ModelError": "toolfleet.shared.errors",
    "SessionError": "toolfleet.shared.errors",
    "SessionNotFoundError": "toolfleet.shared.errors",
    "ForeignSessionError": "toolfleet.shared.errors",
    "SessionExistsError": "toolfleet.shared.errors",
    "SessionBusyError": "toolfleet.shared.errors",
    "LeaseLostError": "toolfleet.shared.errors",
    "CompletionError": "toolfleet.shared.errors",
    "CallNotPendingError": "toolfleet.shared.errors",
    "AlreadyCompletedError": "toolfleet.shared.errors",
    "InvalidCompletionError": "toolfleet.shared.errors",
    "AwaitingCredentialError": "toolfleet.shared.errors",
    "AwaitingConfirmationError": "toolfleet.shared.errors",
    "ToolConfirmation": "toolfleet.shared.confirmation",
}

__all__ = [
    "Agent",
    "AgentTool",
    "AlreadyCompletedError",
    "AuthConfig",
    "AwaitingConfirmationError",
    "AwaitingCredentialError",
    "BaseExampleProvider",
    "BaseLlm",
    "BasePlanner",
    "BasePlugin",
    "BaseTool",
    "BaseToolset",
    "BuiltInCodeExecutor",
    "BuiltInPlanner",
    "Call",
    "CallFinished",
    "CallNotPendingError",
    "CallStatus",
    "CallbackContext",
    "CallsDispatched",
    "CompletionError",
    "Completions",
    "ConfigError",
    "EndReason",
    "Event",
    "Example",
    "ExampleTool",
    "ForeignSessionError",
    "FunctionTool",
    "GeminiModel",
    "GoogleSearchTool",
    "InvalidCompletionError",
    "InvocationEnded",
    "Job",
    "JobContext",
    "Keys",
    "LeaseLostError",
    "LiteLlm",
    "LlmAgent",
    "LlmRequest",
    "LlmResponse",
    "LongRunningFunctionTool",
    "LoopAgent",
    "McpToolset",
    "Model",
    "ModelError",
    "ModelRequest",
    "OpenAPIToolset",
    "Orchestrator",
    "ParallelAgent",
    "PendingCall",
    "PlanReActPlanner",
    "ReadonlyContext",
    "ReflectAndRetryToolPlugin",
    "Runner",
    "Script",
    "ScriptView",
    "ScriptedModel",
    "SequentialAgent",
    "Session",
    "SessionBusyError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "Settings",
    "State",
    "StdioConnectionParams",
    "Step",
    "StreamableHTTPConnectionParams",
    "ToolActions",
    "ToolCall",
    "ToolCallError",
    "ToolConfirmation",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolOptions",
    "ToolResult",
    "ToolfleetError",
    "Update",
    "UrlContextTool",
    "__version__",
    "as_tool",
    "call",
    "exit_loop",
    "get_user_choice",
    "google_search",
    "job",
    "load_artifacts",
    "load_memory",
    "post_result",
    "preload_memory",
    "redis_client",
    "say",
    "tool",
    "url_context",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from toolfleet.shared.version import version

        value: Any = version()
    elif name in _MODULES:
        value = getattr(importlib.import_module(_MODULES[name]), name)
    else:
        raise AttributeError(f"module 'toolfleet' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
