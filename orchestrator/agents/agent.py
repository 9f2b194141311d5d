"""Agent: a name, an instruction, tools, sub-agents, and the model that drives them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.genai import types
from pydantic import BaseModel

from toolfleet.orchestrator.agents.adk_fields import (
    checked_config,
    checked_planning,
    static_text,
    takes_adk_keywords,
)
from toolfleet.orchestrator.agents.builtin_tools import BuiltInCodeExecutor, BuiltInTool
from toolfleet.orchestrator.agents.planners import BasePlanner
from toolfleet.orchestrator.models.offline import Script
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.shared.base_tool import BaseTool, changes_requests_only
from toolfleet.shared.errors import ConfigError, ToolDefinitionError
from toolfleet.shared.tools import FunctionTool, ToolRegistry, as_tool
from toolfleet.shared.toolsets import BaseToolset, ReadonlyContext

ToolLike = FunctionTool | BaseTool | Callable[..., Any] | BaseToolset | BuiltInTool
# One callback or a list of them, as ADK's agents take (orchestrator.loop.callbacks).
Callbacks = Callable[..., Any] | Sequence[Callable[..., Any]] | None
# ADK's InstructionProvider: made from a ReadonlyContext each model call, sync or async.
InstructionProvider = Callable[[ReadonlyContext], str | Awaitable[str]]


@takes_adk_keywords
@dataclass(eq=False)
class Agent:
    """An LLM agent whose tools run on the fleet.

    `model` is a Model, a Gemini model id ("gemini-2.0-flash", as in ADK) or None;
    a model id or None picks Gemini when an API key is set and otherwise the offline
    model playing `offline_script` (see `choose_model`). `tools` takes functions,
    FunctionTools (AgentTool included), BaseTool subclasses and toolsets. The model
    may hand the conversation to a sub-agent, the parent or a peer with the automatic
    `transfer_to_agent` function, as in ADK; a tool may do so with its actions
    (transfer_to_agent, or escalate to the parent). With `output_schema`, the final
    text is JSON of that model.

    The callbacks take ADK's signatures and run on the orchestrator (never on a
    worker): `before_tool_callback(tool, args, tool_context)` returning a dict answers
    the call without dispatching it; `after_tool_callback(tool, args, tool_context,
    tool_response)` and `on_tool_error_callback(tool, args, tool_context, error)` may
    return a dict that replaces the response; `before_model_callback(callback_context,
    llm_request)` may return an LlmResponse that answers in the model's place, and
    `after_model_callback(callback_context, llm_response)` one that replaces its answer;
    `on_model_error_callback(callback_context, llm_request, error)` one that answers when
    the model call fails (ModelError).
    `before_agent_callback(callback_context)` returning a Content answers in the
    agent's place; `after_agent_callback(callback_context)` returning one adds it after
    the agent's answer.

    `planner` (BuiltInPlanner, PlanReActPlanner), `code_executor` (BuiltInCodeExecutor)
    and the built-in tools `google_search`, `url_context` work as in ADK: Gemini gets
    them with each call (orchestrator.agents.planners, orchestrator.agents.builtin_tools).
    `generate_content_config` (temperature, max_output_tokens, safety_settings, ...) goes
    with every model call; `output_key` saves the final text answer to that state key.
    ADK's LlmAgent fields toolfleet does not run are refused with what to use instead
    (orchestrator.agents.adk_fields).

    Attributes:
        name: The agent's name, an identifier; transfers and events name it.
        instruction: The system instruction, or a function of a ReadonlyContext (sync or
            async) that makes it for each model call.
        description: What the agent does; other agents' models read it when choosing
            whom to transfer to.
        tools: Functions, FunctionTools (AgentTool included), BaseTools, toolsets and
            Gemini's built-in tools.
        model: A Model, a Gemini model id, or None (see above).
        offline_script: What the offline model plays when no Gemini model is chosen.
        sub_agents: Agents the model may transfer the conversation to.
        output_schema: A pydantic model; the final text is JSON of it.
        disallow_transfer_to_parent: The model may not transfer back to the parent.
        disallow_transfer_to_peers: The model may not transfer to the parent's other
            sub-agents.
        before_model_callback: One callback or a list; see above for each callback.
        after_model_callback: One callback or a list.
        before_tool_callback: One callback or a list.
        after_tool_callback: One callback or a list.
        on_tool_error_callback: One callback or a list.
        on_model_error_callback: One callback or a list.
        before_agent_callback: One callback or a list.
        after_agent_callback: One callback or a list.
        generate_content_config: Sent with every model call; None: the model's defaults.
        output_key: The state key the final text answer is saved to; None: not saved.
        global_instruction: The root agent's goes before every agent's instruction.
        static_instruction: Set: it is the system instruction (text only), and
            `instruction` is sent as the last user turn.
        include_contents: `"default"`: the model sees the session's history; `"none"`:
            only the current turn.
        planner: BuiltInPlanner (Gemini's thinking config) or PlanReActPlanner.
        code_executor: BuiltInCodeExecutor: Gemini runs the code it writes.

    Raises:
        ValueError: The name is not an identifier, or a sub-agent has another parent.
        TypeError: `model` is neither a model id nor a Model.
        ConfigError: A field has a value toolfleet cannot run, saying what to use.
        ToolDefinitionError: A tool cannot be a tool, or two tools share a name.
    """

    name: str
    instruction: str | InstructionProvider = ""
    description: str = ""
    tools: Sequence[ToolLike] = ()
    model: Model | str | None = None
    offline_script: Script | None = None
    sub_agents: Sequence[Agent] = ()
    output_schema: type[BaseModel] | None = None
    # ADK's: rule out the parent, or the parent's other sub-agents, as targets of the
    # automatic transfer_to_agent function (orchestrator.agents.transfer).
    disallow_transfer_to_parent: bool = False
    disallow_transfer_to_peers: bool = False
    before_model_callback: Callbacks = None
    after_model_callback: Callbacks = None
    before_tool_callback: Callbacks = None
    after_tool_callback: Callbacks = None
    on_tool_error_callback: Callbacks = None
    on_model_error_callback: Callbacks = None
    before_agent_callback: Callbacks = None
    after_agent_callback: Callbacks = None
    generate_content_config: types.GenerateContentConfig | None = None
    output_key: str | None = None
    # The root agent's goes before every agent's instruction (ADK's, deprecated there).
    global_instruction: str | InstructionProvider = ""
    # Set: it is the system instruction, and `instruction` is sent as the last user turn.
    static_instruction: types.ContentUnion | None = None
    include_contents: Literal["default", "none"] = "default"
    # ADK's: BuiltInPlanner (Gemini's thinking config) or PlanReActPlanner (tagged plan).
    planner: BasePlanner | None = None
    # ADK's BuiltInCodeExecutor: Gemini runs the code it writes.
    code_executor: BuiltInCodeExecutor | None = None
    parent: Agent | None = field(default=None, init=False, repr=False)
    function_tools: ToolRegistry = field(init=False, repr=False)
    toolsets: list[BaseToolset] = field(init=False, repr=False)
    # Tools Gemini runs itself (google_search, url_context): never sent to the fleet.
    builtin_tools: list[BuiltInTool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"agent name {self.name!r} must be an identifier")
        if not (
            self.model is None or isinstance(self.model, str) or hasattr(self.model, "generate")
        ):
            # ADK's own classes (google.adk.models.LiteLlm) are not toolfleet's: say which.
            raise TypeError(
                f"agent {self.name!r}: model must be a Gemini model id (e.g. "
                f"'gemini-2.0-flash') or a Model - toolfleet.adk's LiteLlm or a subclass of "
                f"its BaseLlm among them - not {type(self.model).__module__}."
                f"{type(self.model).__qualname__}"
            )
        self.generate_content_config = checked_config(self.name, self.generate_content_config)
        static_text(self.name, self.static_instruction)  # text only: refused now, not later
        if self.include_contents not in ("default", "none"):
            raise ConfigError(
                f"agent {self.name!r}: include_contents must be 'default' or 'none', "
                f"not {self.include_contents!r}"
            )
        checked_planning(self.name, self.planner, self.code_executor)
        self.toolsets = [t for t in self.tools if isinstance(t, BaseToolset)]
        self.builtin_tools = [t for t in self.tools if isinstance(t, BuiltInTool)]
        # preload_memory, ExampleTool: they change the model request, are never offered.
        offered = [t for t in self.tools if not changes_requests_only(t)]
        self.function_tools = ToolRegistry(
            as_tool(t) for t in offered if not isinstance(t, BaseToolset | BuiltInTool)
        )
        for sub in self.sub_agents:
            if sub.parent is not None and sub.parent is not self:
                raise ValueError(
                    f"agent {sub.name!r} is a sub-agent of {sub.parent.name!r} already"
                )
            sub.parent = self

    @property
    def root(self) -> Agent:
        """The top of this agent's tree; a transfer_to_agent may target any agent in it."""
        return self if self.parent is None else self.parent.root

    def walk(self) -> Iterator[Agent]:
        """This agent and every sub-agent below it."""
        yield self
        for sub in self.sub_agents:
            yield from sub.walk()

    def find_agent(self, name: str) -> Agent | None:
        """The agent named `name`: this one or a sub-agent at any depth; None if there is none."""
        return next((a for a in self.walk() if a.name == name), None)

    async def tools_for(self, context: Callable[[], ReadonlyContext]) -> ToolRegistry:
        """The tools offered in one invocation: fixed tools plus what toolsets choose.
        `context` makes what the toolsets see (a copy of the state): only called when
        there are toolsets, since every model step asks."""
        if not self.toolsets:  # read-only: the same registry serves every model step
            return self.function_tools
        chosen = list(self.function_tools.values())
        seen = context()
        for toolset in self.toolsets:
            chosen.extend(await toolset.get_tools_with_prefix(seen))
        return ToolRegistry(chosen)

    def all_tools(self) -> Iterator[FunctionTool]:
        """Every tool a worker must know to serve this agent and its sub-agents (ToolSource).

        A toolset that cannot list its tools does not hide the others: they are all
        yielded first, then ToolDefinitionError names every toolset that failed.
        """
        problems: list[str] = []
        for agent in self.walk():
            for tool in agent.function_tools.values():
                yield tool
                inner = getattr(tool, "agent", None)  # an AgentTool's own agent
                if isinstance(inner, Agent):
                    problems.extend((yield from _listed(inner.all_tools)))
            for toolset in agent.toolsets:
                problems.extend((yield from _listed(toolset.all_tools)))
        if problems:
            raise ToolDefinitionError(problems)


def _listed(
    all_tools: Callable[[], Iterable[FunctionTool]],
) -> Generator[FunctionTool, None, list[str]]:
    """Yield what `all_tools()` lists; return the problems that stopped it (none if it
    finished)."""
    try:
        yield from all_tools()
    except ToolDefinitionError as exc:
        return exc.problems
    return []


# ADK's other name for the same class (`from google.adk.agents import LlmAgent`).
LlmAgent = Agent
