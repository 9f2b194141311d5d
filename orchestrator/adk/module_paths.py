"""Where ADK's names live: each of google.adk's modules that programs import from, and
the names of `toolfleet.adk` that module offers in google-adk 2.x.

`toolfleet.adk` gives each of these modules under its own name (`toolfleet.adk.agents`,
`toolfleet.adk.tools.tool_context`, ...) with these names, so that an ADK program's
import lines move over by replacing `google.adk` with `toolfleet.adk`. A module lists
every name of toolfleet.adk's that ADK's module has, also those it imports for its own
use (`google.adk.tools.agent_tool` has `ToolContext`): a program may import them there.
The names ADK has that toolfleet does not are not listed; importing one fails as an
import of a missing name does. tests/integration/test_adk_module_paths.py holds this
table to google-adk's own modules.
"""

from __future__ import annotations

# Module (below google.adk) -> the names it offers, space-separated.
ADK_MODULES: dict[str, str] = {
    "agents": (
        "Agent BaseAgent LiveRequestQueue LlmAgent LoopAgent ParallelAgent RunConfig "
        "SequentialAgent"
    ),
    "agents.base_agent": (
        "AfterAgentCallback BaseAgent BeforeAgentCallback CallbackContext Event EventActions"
    ),
    "agents.callback_context": "CallbackContext",
    "agents.context": "ReadonlyContext",
    "agents.invocation_context": (
        "BaseAgent BaseArtifactService BaseMemoryService BaseSessionService BaseTool Event "
        "EventsCompactionConfig LiveRequestQueue LlmCallsLimitExceededError ResumabilityConfig "
        "RunConfig Session"
    ),
    "agents.live_request_queue": "LiveRequestQueue",
    "agents.llm_agent": (
        "Agent BaseAgent BaseLlm BasePlanner BaseTool BaseToolset CallbackContext Event "
        "FunctionTool LlmAgent LlmRequest LlmResponse ReadonlyContext ToolContext"
    ),
    "agents.loop_agent": "BaseAgent Event LoopAgent",
    "agents.parallel_agent": "BaseAgent Event ParallelAgent",
    "agents.readonly_context": "ReadonlyContext",
    "agents.run_config": "RunConfig StreamingMode",
    "agents.sequential_agent": "BaseAgent BaseTool Event LlmAgent ReadonlyContext SequentialAgent",
    "apps": "App ResumabilityConfig",
    "apps.app": "App BasePlugin EventsCompactionConfig ResumabilityConfig",
    "artifacts": "BaseArtifactService InMemoryArtifactService",
    "artifacts.base_artifact_service": "BaseArtifactService",
    "artifacts.in_memory_artifact_service": "BaseArtifactService InMemoryArtifactService",
    "cli": "",
    "cli.utils": "",
    "cli.utils.logs": "log_to_tmp_folder setup_adk_logger",
    "code_executors": "BuiltInCodeExecutor",
    "code_executors.built_in_code_executor": "BuiltInCodeExecutor",
    "events": "Event EventActions",
    "events.event": "Event EventActions LlmResponse",
    "events.event_actions": "EventActions ToolConfirmation",
    "examples": "BaseExampleProvider Example",
    "examples.base_example_provider": "BaseExampleProvider Example",
    "examples.example": "Example",
    "memory": (
        "BaseMemoryService InMemoryMemoryService VertexAiMemoryBankService VertexAiRagMemoryService"
    ),
    "memory.base_memory_service": "BaseMemoryService",
    "memory.in_memory_memory_service": "BaseMemoryService InMemoryMemoryService",
    "memory.vertex_ai_memory_bank_service": "BaseMemoryService VertexAiMemoryBankService",
    "memory.vertex_ai_rag_memory_service": "BaseMemoryService VertexAiRagMemoryService",
    "models": "BaseLlm LlmRequest LlmResponse",
    "models.base_llm": "BaseLlm",
    "models.lite_llm": "LiteLlm",
    "models.llm_request": "BaseTool LlmRequest",
    "models.llm_response": "LlmResponse",
    "planners": "BasePlanner BuiltInPlanner PlanReActPlanner",
    "planners.base_planner": "BasePlanner CallbackContext LlmRequest ReadonlyContext",
    "planners.built_in_planner": (
        "BasePlanner BuiltInPlanner CallbackContext LlmRequest ReadonlyContext"
    ),
    "planners.plan_re_act_planner": (
        "BasePlanner CallbackContext LlmRequest PlanReActPlanner ReadonlyContext"
    ),
    "plugins": "BasePlugin ReflectAndRetryToolPlugin",
    "plugins.base_plugin": (
        "BaseAgent BasePlugin BaseTool CallbackContext Event LlmRequest LlmResponse"
    ),
    "plugins.reflect_retry_tool_plugin": (
        "BasePlugin BaseTool ReflectAndRetryToolPlugin ToolContext"
    ),
    "runners": (
        "BaseAgent BaseArtifactService BaseMemoryService BasePlugin BaseSessionService BaseToolset "
        "Event EventActions InMemoryRunner LiveRequestQueue RunConfig Runner Session"
    ),
    "sessions": (
        "BaseSessionService DatabaseSessionService InMemorySessionService Session "
        "VertexAiSessionService"
    ),
    "sessions.base_session_service": "BaseSessionService Event Session",
    "sessions.database_session_service": "DatabaseSessionService",
    "sessions.in_memory_session_service": "BaseSessionService Event InMemorySessionService Session",
    "sessions.session": "Event Session",
    "sessions.vertex_ai_session_service": (
        "BaseSessionService Event EventActions Session VertexAiSessionService"
    ),
    "tools": (
        "AgentTool BaseTool ExampleTool FunctionTool LongRunningFunctionTool MCPToolset McpToolset "
        "ToolContext VertexAiSearchTool exit_loop get_user_choice google_search load_artifacts "
        "load_memory preload_memory url_context"
    ),
    "tools.agent_tool": "AgentTool BaseTool InMemoryMemoryService StreamingMode ToolContext",
    "tools.base_tool": "BaseTool ToolContext",
    "tools.base_toolset": "BaseTool BaseToolset ReadonlyContext",
    "tools.example_tool": "BaseExampleProvider BaseTool Example ExampleTool ToolContext",
    "tools.exit_loop_tool": "ToolContext exit_loop",
    "tools.function_tool": "BaseTool FunctionTool ToolContext",
    "tools.get_user_choice_tool": (
        "LongRunningFunctionTool ToolContext get_user_choice get_user_choice_tool"
    ),
    "tools.google_search_tool": "BaseTool GoogleSearchTool ToolContext google_search",
    "tools.load_artifacts_tool": "BaseTool load_artifacts_tool",
    "tools.load_memory_tool": "FunctionTool ToolContext load_memory load_memory_tool",
    "tools.long_running_tool": "FunctionTool LongRunningFunctionTool",
    "tools.mcp_tool": (
        "MCPToolset McpToolset SseConnectionParams StdioConnectionParams "
        "StreamableHTTPConnectionParams"
    ),
    "tools.mcp_tool.mcp_session_manager": (
        "SseConnectionParams SseServerParams StdioConnectionParams StdioServerParameters "
        "StreamableHTTPConnectionParams"
    ),
    "tools.mcp_tool.mcp_toolset": (
        "BaseTool BaseToolset MCPToolset McpToolset ReadonlyContext SseConnectionParams "
        "StdioConnectionParams StdioServerParameters StreamableHTTPConnectionParams"
    ),
    "tools.openapi_tool": "OpenAPIToolset",
    "tools.openapi_tool.openapi_spec_parser": "OpenAPIToolset",
    "tools.openapi_tool.openapi_spec_parser.openapi_toolset": (
        "BaseTool BaseToolset OpenAPIToolset ReadonlyContext"
    ),
    "tools.preload_memory_tool": "BaseTool ToolContext preload_memory_tool",
    "tools.retrieval": "VertexAiRagRetrieval",
    "tools.retrieval.vertex_ai_rag_retrieval": "LlmRequest ToolContext VertexAiRagRetrieval",
    "tools.tool_confirmation": "ToolConfirmation",
    "tools.tool_context": "CallbackContext ToolContext",
    "tools.url_context_tool": "BaseTool ToolContext UrlContextTool url_context",
    "tools.vertex_ai_search_tool": "BaseTool ReadonlyContext ToolContext VertexAiSearchTool",
}

# Names ADK's modules have under another name of toolfleet.adk's: the same object in ADK
# (`google.adk.tools.load_memory_tool.load_memory_tool is google.adk.tools.load_memory`).
ALIASES: dict[str, str] = {
    "load_memory_tool": "load_memory",
    "preload_memory_tool": "preload_memory",
    "load_artifacts_tool": "load_artifacts",
    "get_user_choice_tool": "get_user_choice",
    "MCPToolset": "McpToolset",
}
# Names of the table above that ADK's module has only with an extra of google-adk.
NEED_ADK_EXTRAS = frozenset(
    {
        ("models.lite_llm", "LiteLlm"),  # litellm
        ("sessions", "DatabaseSessionService"),  # [db]
        ("sessions.database_session_service", "DatabaseSessionService"),
    }
)


# Names a module has only from a later google-adk 2.x release on, with that release: an
# earlier release's module lacks them (toolfleet.adk offers them either way).
ADDED_IN: dict[tuple[str, str], tuple[int, int]] = {
    ("tools.openapi_tool.openapi_spec_parser.openapi_toolset", "BaseTool"): (2, 15),
}


def adk_module_names() -> dict[str, frozenset[str]]:
    """`ADK_MODULES` with each module's names as a set."""
    return {module: frozenset(names.split()) for module, names in ADK_MODULES.items()}
