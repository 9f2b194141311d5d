"""Tools and agents of the orchestrator fault tests (kills, restarts, replicas)."""

from __future__ import annotations

import time

from tests.faults.probe import record_execution
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, call, say
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import tool


@tool
def step(n: int, seconds: float, tool_context: ToolContext) -> dict[str, object]:
    """Counts its execution, then works for `seconds`.

    Args:
        n: Which step this is (echoed back).
        seconds: How long the step works.
    """
    record_execution(tool_context.function_call_id)
    time.sleep(seconds)  # ok: the tool under test works on purpose
    return {"step": n, "done": True}


def _summary(view: ScriptView) -> str:
    steps = sorted(int(response["step"]) for name, response in view.responses if name == "step")
    return f"finished steps {steps}"


# Two quick calls and a slow one in one turn: a replica killed while the slow one runs
# leaves two results on the stream and one call in flight.
three_steps = Agent(
    name="three_steps",
    instruction="Run the steps.",
    tools=[step],
    offline_script=[
        call(
            Call("step", {"n": 1, "seconds": 0.05}),
            Call("step", {"n": 2, "seconds": 0.05}),
            Call("step", {"n": 3, "seconds": 2.0}),
        ),
        say(_summary),
    ],
)
