"""What the model is asked for the agent's next turn, built as ADK builds an LlmRequest:
instructions (global, static, the agent's own), the contents it sees, its config."""

from __future__ import annotations

from collections.abc import Sequence

from google.genai import types

from toolfleet.orchestrator.agents.adk_fields import static_text
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.builtin_tools import (
    GoogleSearchTool,
    not_for_model,
    search_without_functions,
)
from toolfleet.orchestrator.agents.planners import BuiltInPlanner, without_thought_marks
from toolfleet.orchestrator.agents.structured import (
    SET_MODEL_RESPONSE,
    STRUCTURED_INSTRUCTION,
    SetModelResponseTool,
)
from toolfleet.orchestrator.agents.transfer import (
    TRANSFER_TO_AGENT,
    TransferTool,
    transfer_instruction,
    transfer_targets,
)
from toolfleet.orchestrator.loop.foreign import as_context
from toolfleet.orchestrator.loop.instructions import identity_instruction, resolved
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.models.base_llm import BaseLlm
from toolfleet.orchestrator.models.protocol import INSTRUCTION_AUTHOR, ModelRequest
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.tools import ToolRegistry
from toolfleet.shared.toolsets import ReadonlyContext

# ADK's markers around an instruction sent as a user turn (static_instruction set).
_BEGIN, _END = "<<<BEGIN_SYSTEM_INSTRUCTION>>>", "<<<END_SYSTEM_INSTRUCTION>>>"
_ELIDED = "<<<ELIDED_MARKER>>>"
_PREAMBLE = (
    f"The text between {_BEGIN} and {_END} below is your own system instruction for this "
    "turn and carries the current session state. It is addressed to you. Nothing between "
    "those two markers was said by the user, so do not answer it or continue it as though "
    "it were their turn. Anything the user actually said appears outside the markers, and "
    "a real user turn may follow immediately after the end marker."
)


async def model_request(inv: Invocation, tools: ToolRegistry) -> ModelRequest:
    """The request for the agent answering now."""
    agent = inv.agent
    authors, contents = inv.session.authored_contents()
    if inv.branch is not None:  # a ParallelAgent's branch: not the other branches' events
        authors, contents = _of_branch(inv.session.events, inv.branch)
    if agent.include_contents == "none":
        authors, contents = current_turn(agent, authors, contents)
    # As in ADK, other agents' turns are context (a workflow's earlier steps, the
    # parent's handover after transfer_to_agent), never the model's own turns.
    authors, contents = as_context(agent.name, authors, contents)
    context = inv.readonly_context()
    root = agent.root
    system = [await resolved(root, root.global_instruction, context)]
    own = await resolved(agent, agent.instruction, context)
    static = static_text(agent.name, agent.static_instruction)
    if static:  # ADK: the static part is the system instruction, the rest a user turn
        system.append(static)
        if own:
            authors.append(INSTRUCTION_AUTHOR)
            contents.append(types.Content(role="user", parts=[types.Part(text=_labelled(own))]))
    else:
        system.append(own)
    system.append(identity_instruction(agent))
    config = agent.generate_content_config
    # A copy: a before_model callback may change it for this call only.
    config = config.model_copy(deep=True) if config is not None else None
    if agent.output_schema is not None and not tools:
        # ADK's: the schema goes to the model unless tools are offered (Gemini's API
        # takes both on Vertex AI only); the final text is then JSON of it.
        config = config or types.GenerateContentConfig()
        config.response_schema = agent.output_schema
        config.response_mime_type = "application/json"
    request = ModelRequest(
        agent_name=agent.name,
        instruction="",
        contents=contents,
        tools=list(tools.values()),
        authors=authors,
        config=config,
    )
    # ADK's order: the planner's instruction after the identity, before the transfer's.
    system += [planned(agent, request, context), _offered_transfers(inv, request)]
    if isinstance(tools.get(SET_MODEL_RESPONSE), SetModelResponseTool):
        system.append(STRUCTURED_INSTRUCTION)
    request.instruction = "\n\n".join(p for p in system if p)
    builtins = [t.gemini_tool() for t in agent.builtin_tools]
    if agent.code_executor is not None:
        builtins.append(agent.code_executor.gemini_tool())
    if builtins:  # Gemini runs these itself (orchestrator.agents.builtin_tools)
        model = inv.models(agent)
        if isinstance(model, BaseLlm) and (
            wrong := not_for_model(agent.name, builtins, model.model)
        ):
            raise ConfigError(wrong)
        request.config = request.config or types.GenerateContentConfig()
        request.config.tools = [*(request.config.tools or ()), *builtins]
    return request


def _offered_transfers(inv: Invocation, request: ModelRequest) -> str:
    """The transfer instruction, as ADK gives it with google_search on a Gemini model
    before 3: refused (ConfigError) if the agent has sub-agents; else transfer_to_agent
    is not offered at all."""
    agent = inv.agent
    targets = transfer_targets(agent)
    if not targets or not any(isinstance(t, GoogleSearchTool) for t in agent.builtin_tools):
        return transfer_instruction(agent)
    problem = search_without_functions(agent.builtin_tools, inv.models(agent).name)
    if problem is None:
        return transfer_instruction(agent)
    if any(t.parent is agent for t in targets):
        raise ConfigError(f"agent {agent.name!r}: {problem}")
    request.tools = [t for t in request.tools if not isinstance(t, TransferTool)]
    return ""


def planned(agent: Agent, request: ModelRequest, context: ReadonlyContext) -> str:
    """Apply the agent's planner to the request as ADK does: BuiltInPlanner sets the
    thinking config; another planner's instruction is returned, and the model's earlier
    thought parts are sent unmarked."""
    planner = agent.planner
    if planner is None:
        return ""
    if isinstance(planner, BuiltInPlanner):
        planner.apply_thinking_config(request)
        return ""
    instruction = planner.build_planning_instruction(context, request)
    request.contents = without_thought_marks(list(request.contents))
    return instruction or ""


def _of_branch(events: Sequence[Event], branch: str) -> tuple[list[str], list[types.Content]]:
    """ADK's rule: an event belongs to `branch` if it has none, or its branch is `branch`
    or one above it (segment by segment)."""
    segments = branch.split(".")
    authors: list[str] = []
    contents: list[types.Content] = []
    for event in events:
        if event.content is None:
            continue
        if event.branch and segments[: len(event.branch.split("."))] != event.branch.split("."):
            continue
        authors.append(event.author)
        contents.append(event.content)
    return authors, contents


def current_turn(
    agent: Agent, authors: Sequence[str], contents: Sequence[types.Content]
) -> tuple[list[str], list[types.Content]]:
    """include_contents="none": only the current turn, as ADK: from the last message of
    the user (or of another agent) on, reaching back to any call a later response answers
    so that no response is sent without its call."""
    start = 0
    for i in range(len(contents) - 1, -1, -1):
        author = authors[i]
        if author == "user" and not _has_responses(contents[i]):
            start = i
            break
        if author not in (
            "user",
            agent.name,
            "completion",
            INSTRUCTION_AUTHOR,
        ) and not _transfers(contents[i]):
            start = i  # another agent's turn starts this one; its handover does not
            break
    answered = {
        p.function_response.id
        for c in contents[start:]
        for p in c.parts or ()
        if p.function_response is not None and p.function_response.id
    }
    for i in range(start - 1, -1, -1):
        calls = {p.function_call.id for p in contents[i].parts or () if p.function_call}
        if calls & answered:
            start = i
    return list(authors[start:]), list(contents[start:])


def _transfers(content: types.Content) -> bool:
    """Whether a content is a transfer_to_agent call or its response (ADK: a handover is
    no turn of its own, so the target still sees the message it was handed)."""
    return any(
        (p.function_call is not None and p.function_call.name == TRANSFER_TO_AGENT)
        or (p.function_response is not None and p.function_response.name == TRANSFER_TO_AGENT)
        for p in content.parts or ()
    )


def _has_responses(content: types.Content) -> bool:
    return any(p.function_response is not None for p in content.parts or ())


def _labelled(instruction: str) -> str:
    """The instruction between ADK's markers; markers inside it are elided, so state
    written into it cannot forge the block's end."""
    fenced = instruction.replace(_BEGIN, _ELIDED).replace(_END, _ELIDED)
    return f"{_PREAMBLE}\n{_BEGIN}\n{fenced}\n{_END}"
