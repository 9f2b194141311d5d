"""ADK's planners (`google.adk.planners`): an agent's `planner=`.

BuiltInPlanner sets Gemini's thinking config on every model call. PlanReActPlanner asks
the model, in its system instruction, to plan, act and reason under tags, and turns the
tagged text of each answer into thought parts and a final answer, as ADK does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from google.genai import types

if TYPE_CHECKING:
    from toolfleet.orchestrator.models.protocol import ModelRequest
    from toolfleet.orchestrator.plugins.context import CallbackContext
    from toolfleet.shared.toolsets import ReadonlyContext

PLANNING_TAG = "/*PLANNING*/"
REPLANNING_TAG = "/*REPLANNING*/"
REASONING_TAG = "/*REASONING*/"
ACTION_TAG = "/*ACTION*/"
FINAL_ANSWER_TAG = "/*FINAL_ANSWER*/"
_PLANNING_TAGS = (PLANNING_TAG, REASONING_TAG, ACTION_TAG, REPLANNING_TAG)


class BasePlanner(ABC):
    """ADK's planner interface: an instruction for each request, a rewrite of each answer."""

    @abstractmethod
    def build_planning_instruction(
        self, readonly_context: ReadonlyContext, llm_request: ModelRequest
    ) -> str | None:
        """Text appended to the system instruction of each model call (None: nothing)."""

    @abstractmethod
    def process_planning_response(
        self, callback_context: CallbackContext, response_parts: list[types.Part]
    ) -> list[types.Part] | None:
        """The answer's parts as the agent keeps them (None or empty: unchanged)."""


class BuiltInPlanner(BasePlanner):
    """The model's own thinking: `thinking_config` goes with every model call.

    Args:
        thinking_config: Gemini's thinking config (or a dict of its fields); it replaces
            the one in the agent's generate_content_config.
    """

    def __init__(self, *, thinking_config: types.ThinkingConfig) -> None:
        if isinstance(thinking_config, dict):
            thinking_config = types.ThinkingConfig.model_validate(thinking_config)
        self.thinking_config = thinking_config

    def apply_thinking_config(self, llm_request: ModelRequest) -> None:
        """Set the request's thinking config; it replaces generate_content_config's, as ADK."""
        if self.thinking_config:
            llm_request.config = llm_request.config or types.GenerateContentConfig()
            llm_request.config.thinking_config = self.thinking_config.model_copy(deep=True)

    def build_planning_instruction(
        self, readonly_context: ReadonlyContext, llm_request: ModelRequest
    ) -> str | None:
        """None: the thinking config is the plan (apply_thinking_config)."""
        return None

    def process_planning_response(
        self, callback_context: CallbackContext, response_parts: list[types.Part]
    ) -> list[types.Part] | None:
        """None: Gemini marks its own thoughts."""
        return None


class PlanReActPlanner(BasePlanner):
    """Plan, then act and reason under tags; the tagged text becomes thought parts."""

    def build_planning_instruction(
        self, readonly_context: ReadonlyContext, llm_request: ModelRequest
    ) -> str:
        """ADK's instruction: plan, act, reason and answer under the tags."""
        return PLAN_RE_ACT_INSTRUCTION

    def process_planning_response(
        self, callback_context: CallbackContext, response_parts: list[types.Part]
    ) -> list[types.Part] | None:
        """ADK's rewrite: text parts up to the first group of function calls (the rest
        is dropped), planning text marked as thought, the final answer split off."""
        if not response_parts:
            return None
        kept: list[types.Part] = []
        for i, part in enumerate(response_parts):
            if part.function_call is not None:
                if not part.function_call.name:
                    continue  # a call without a name is dropped
                kept.append(part)
                for later in response_parts[i + 1 :]:
                    if not later.function_call:
                        break
                    kept.append(later)
                return kept
            _split_text(part, kept)
        return kept


def _split_text(part: types.Part, kept: list[types.Part]) -> None:
    text = part.text or ""
    if FINAL_ANSWER_TAG in text:
        at = text.rfind(FINAL_ANSWER_TAG)
        reasoning = _untagged(text[:at])
        answer = text[at + len(FINAL_ANSWER_TAG) :]
        if reasoning:
            kept.append(types.Part(text=reasoning, thought=True))
        if answer:
            kept.append(types.Part(text=answer))
        return
    if text.startswith(_PLANNING_TAGS):
        part.text = _untagged(text)
        part.thought = True
    kept.append(part)


def _untagged(text: str) -> str:
    for tag in _PLANNING_TAGS:
        text = text.replace(tag, "")
    return text


def process_planning(
    planner: BasePlanner, callback_context: CallbackContext, content: types.Content | None
) -> None:
    """ADK's response step: the planner's parts replace the answer's, if it gives any."""
    if content is None or not content.parts:
        return
    parts = planner.process_planning_response(callback_context, list(content.parts))
    if parts:
        content.parts = parts


def without_thought_marks(contents: list[types.Content]) -> list[types.Content]:
    """ADK's, for a planner other than BuiltInPlanner: the model sees its earlier planning
    as plain text. Copies: the session's contents are not changed."""
    unmarked = []
    for content in contents:
        if any(p.thought is not None for p in content.parts or ()):
            content = content.model_copy(deep=True)
            for part in content.parts or ():
                part.thought = None
        unmarked.append(content)
    return unmarked


PLAN_RE_ACT_INSTRUCTION = "\n\n".join(
    [
        f"""
When answering the question, try to leverage the available tools to gather the information instead of your memorized knowledge.

Follow this process when answering the question: (1) first come up with a plan in natural language text format; (2) Then use tools to execute the plan and provide reasoning between tool code snippets to make a summary of current state and next step. Tool code snippets and reasoning should be interleaved with each other. (3) In the end, return one final answer.

Follow this format when answering the question: (1) The planning part should be under {PLANNING_TAG}. (2) The tool code snippets should be under {ACTION_TAG}, and the reasoning parts should be under {REASONING_TAG}. (3) The final answer part should be under {FINAL_ANSWER_TAG}.
""",  # noqa: E501
        f"""
Below are the requirements for the planning:
The plan is made to answer the user query if following the plan. The plan is coherent and covers all aspects of information from user query, and only involves the tools that are accessible by the agent. The plan contains the decomposed steps as a numbered list where each step should use one or multiple available tools. By reading the plan, you can intuitively know which tools to trigger or what actions to take.
If the initial plan cannot be successfully executed, you should learn from previous execution results and revise your plan. The revised plan should be under {REPLANNING_TAG}. Then use tools to follow the new plan.
""",  # noqa: E501
        """
Below are the requirements for the reasoning:
The reasoning makes a summary of the current trajectory based on the user query and tool outputs. Based on the tool outputs and plan, the reasoning also comes up with instructions to the next steps, making the trajectory closer to the final answer.
""",  # noqa: E501
        """
Below are the requirements for the final answer:
The final answer should be precise and follow query formatting requirements. Some queries may not be answerable with the available tools and information. In those cases, inform the user why you cannot process their query and ask for more information.
""",  # noqa: E501
        """
Below are the requirements for the tool code:

**Custom Tools:** The available tools are described in the context and can be directly used.
- Code must be valid self-contained Python snippets with no imports and no references to tools or Python libraries that are not in the context.
- You cannot use any parameters or fields that are not explicitly defined in the APIs in the context.
- The code snippets should be readable, efficient, and directly relevant to the user query and reasoning steps.
- When using the tools, you should use the library name together with the function name, e.g., vertex_search.search().
- If Python libraries are not provided in the context, NEVER write your own code other than the function calls using the provided tools.
""",  # noqa: E501
        """
VERY IMPORTANT instruction that you MUST follow in addition to the above instructions:

You should ask for clarification if you need more information to answer the question.
You should prefer using the information available in the context instead of repeated tool use.
""",
    ]
)
