"""ADK's planners on toolfleet's Agent: PlanReActPlanner's rewrite of each answer and its
request, a planner of one's own (offline model, in-process runner, fakeredis store)."""

from __future__ import annotations

from google.genai import types

from tests.unit.test_adk_agent_fields import events, run
from tests.unit.test_loop import add
from toolfleet.adk import BasePlanner, CallbackContext, LlmRequest, PlanReActPlanner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.planners import (
    ACTION_TAG,
    FINAL_ANSWER_TAG,
    PLANNING_TAG,
    REASONING_TAG,
)
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, say
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.toolsets import ReadonlyContext


def _call(name: str) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args={}))


def _processed(parts: list[types.Part]) -> list[tuple[str | None, bool | None, str | None]]:
    got = PlanReActPlanner().process_planning_response(None, parts)  # type: ignore[arg-type]
    assert got is not None
    return [(p.text, p.thought, p.function_call.name if p.function_call else None) for p in got]


def test_plan_re_act_marks_tagged_text_as_thought_and_keeps_the_first_calls_only() -> None:
    parts = [
        types.Part(text=f"{PLANNING_TAG}1. add{REASONING_TAG} then answer"),
        types.Part(text="plain words"),
        _call(""),  # a call without a name is dropped
        _call("add"),
        _call("mul"),
        types.Part(text=f"{ACTION_TAG}after the calls"),
        _call("late"),
    ]
    assert _processed(parts) == [
        ("1. add then answer", True, None),
        ("plain words", None, None),
        (None, None, "add"),
        (None, None, "mul"),
    ]


def test_plan_re_act_splits_the_final_answer_off_its_reasoning() -> None:
    text = f"{REASONING_TAG}It is 3.{FINAL_ANSWER_TAG}x {FINAL_ANSWER_TAG}The sum is 3."
    assert _processed([types.Part(text=text)]) == [
        (f"It is 3.{FINAL_ANSWER_TAG}x ", True, None),  # split at the last tag, as ADK
        ("The sum is 3.", None, None),
    ]
    assert _processed([types.Part(text=f"{FINAL_ANSWER_TAG}3")]) == [("3", None, None)]
    assert PlanReActPlanner().process_planning_response(None, []) is None  # type: ignore[arg-type]


async def test_plan_re_act_sends_earlier_thoughts_unmarked_and_stores_them_marked(
    store: SessionStore,
) -> None:
    model = ScriptedModel(
        [
            Step(text=f"{PLANNING_TAG}1. add", calls=[Call("add", {"a": 1, "b": 2})]),
            say(f"{FINAL_ANSWER_TAG}3"),
        ]
    )
    agent = Agent(name="calc", tools=[add], model=model, planner=PlanReActPlanner())

    updates = await run(store, agent)

    turn = events(updates)[1].content
    assert turn is not None and turn.parts is not None
    assert (turn.parts[0].text, turn.parts[0].thought) == ("1. add", True)  # stored marked
    sent = model.requests[1].contents[1]
    assert sent.parts is not None and sent.parts[0].thought is None  # sent as plain text
    stored = await store.get_or_create("app", "u1", "s1")
    kept = stored.events[1].content
    assert kept is not None and kept.parts is not None and kept.parts[0].thought is True


class Numbered(BasePlanner):
    """A planner of one's own: an instruction, and answers numbered in state."""

    def build_planning_instruction(
        self, readonly_context: ReadonlyContext, llm_request: LlmRequest
    ) -> str:
        return f"Plan for {readonly_context.agent_name}."

    def process_planning_response(
        self, callback_context: CallbackContext, response_parts: list[types.Part]
    ) -> list[types.Part]:
        callback_context.state["answers"] = callback_context.state.get("answers", 0) + 1
        return [types.Part(text=f"#1 {response_parts[0].text}")]


async def test_a_planner_of_ones_own_adds_its_instruction_and_rewrites_the_answer(
    store: SessionStore,
) -> None:
    model = ScriptedModel([say("3")])
    agent = Agent(name="calc", instruction="Add.", model=model, planner=Numbered())

    answer = events(await run(store, agent))[-1]

    assert model.requests[0].instruction.startswith("Add.")
    assert model.requests[0].instruction.endswith("Plan for calc.")
    assert answer.content is not None and answer.content.parts is not None
    assert answer.content.parts[0].text == "#1 3"
    assert answer.state_delta == {"answers": 1}  # stored with the turn, as ADK's
