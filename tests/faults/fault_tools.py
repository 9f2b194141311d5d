"""Tools and agents of the orchestrator fault tests (kills, restarts, replicas)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.faults.probe import record_execution
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, call, say
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
    """The steps that ran, and the errors of those that did not (a test's assertion on
    the answer then says which)."""
    responses = [response for name, response in view.responses if name == "step"]
    steps = sorted(int(r["step"]) for r in responses if "step" in r)
    failed = [f"{r.get('error')}: {r.get('message')}" for r in responses if "step" not in r]
    return f"finished steps {steps}" + (f", failed {failed}" if failed else "")


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


# Where `answers_slowly`'s model marks its first answer: set by the test that kills the
# orchestrator while that answer is being made.
ANSWERING_MARK_ENV = "TOOLFLEET_TEST_ANSWERING_MARK"


def _answer_slowly_once(view: ScriptView) -> Step:
    """The model's answer to the turn's results: the first time, it marks the file the
    test waits for and then takes a minute (the test kills the orchestrator meanwhile);
    after that, at once."""
    mark = Path(os.environ[ANSWERING_MARK_ENV])
    if not mark.exists():
        mark.write_text(str(os.getpid()))
        time.sleep(60)  # ok: a model that is slow on purpose (killed before it answers)
    return say(_summary(view))


# Two quick calls; the model then answers slowly: an orchestrator killed meanwhile had
# given the model the calls' results and not stored them yet (loop/held.py).
answers_slowly = Agent(
    name="answers_slowly",
    instruction="Run the steps.",
    tools=[step],
    offline_script=[
        call(Call("step", {"n": 1, "seconds": 0.05}), Call("step", {"n": 2, "seconds": 0.05})),
        _answer_slowly_once,
    ],
)


# A slow call and one behind it: on a worker of one process, the second waits in the
# queue while the first runs.
two_in_line = Agent(
    name="two_in_line",
    instruction="Run the steps.",
    tools=[step],
    offline_script=[
        call(Call("step", {"n": 1, "seconds": 2.0}), Call("step", {"n": 2, "seconds": 0.05})),
        say(_summary),
    ],
)
