"""Tools and agents of the exactly-once fault tests (tests/faults/test_exactly_once.py)."""

from __future__ import annotations

import datetime
import time

from tests.faults.input_tools import gated, ticket_tool
from tests.faults.probe import record_execution
from toolfleet import Agent, AgentTool, Call, ScriptView, Step, ToolContext, call, say, tool


@tool(timeout_s=0.5, long_running=True)
def open_case(subject: str, tool_context: ToolContext) -> dict[str, object]:
    """Opens a case whose final result is posted later; answers at once (limit 0.5 s).

    Args:
        subject: What the case is about.
    """
    record_execution(tool_context.function_call_id)
    return {"status": "pending", "subject": subject}


@tool(timeout_s=3)
def slow_lookup(seconds: float, tool_context: ToolContext) -> dict[str, object]:
    """Looks something up slowly.

    Args:
        seconds: How long the lookup takes.
    """
    record_execution(tool_context.function_call_id)
    time.sleep(seconds)  # ok: the tool under test works on purpose
    return {"found": True}


def _responses_text(view: ScriptView) -> str:
    return "; ".join(f"{name}: {response}" for name, response in view.responses)


# Holds the only worker process until the test opens its gate.
holder = Agent(
    name="holder",
    tools=[gated],
    offline_script=[call(Call("gated", {"name": "hold"})), say("released")],
)

# A long-running call that waits in the queue behind `holder` past its deadline.
case_opener = Agent(
    name="case_opener",
    tools=[open_case],
    offline_script=[call(Call("open_case", {"subject": "late"})), say(_responses_text)],
)

# A ticket, then the model answers each final result it gets.
ticketing = Agent(
    name="ticketing",
    tools=[ticket_tool],
    offline_script=[
        call(Call("open_ticket", {"subject": "refund"})),
        say("ticket opened"),
        say(_responses_text),
    ],
)

# The child of an agent tool: a lookup longer than its test's 1 s lease TTL. Every
# limit here stays within the suite's 3 s: the longest limit a worker knows sets the
# broker's visibility timeout, and so how long a dead worker's call takes to come back.
researcher = Agent(
    name="researcher",
    description="Researches a question.",
    tools=[slow_lookup],
    offline_script=[call(Call("slow_lookup", {"seconds": 1.5})), say("researched: yes")],
)

delegator = Agent(
    name="delegator",
    tools=[AgentTool(researcher, timeout_s=3)],
    offline_script=[call(Call("researcher", {"request": "look it up"})), say(_responses_text)],
)


# The children of agent tools whose run ends mid-turn, while their lookup (2.5 s) runs:
# the test kills the worker running `lost_researcher`; `hurried_researcher`'s agent tool
# reaches its 1 s time limit. Each child's turn must be closed, not left open.
lost_researcher = Agent(
    name="lost_researcher",
    description="Researches a question; its worker is killed meanwhile.",
    tools=[slow_lookup],
    offline_script=[call(Call("slow_lookup", {"seconds": 2.5})), say("researched")],
)

lost_delegator = Agent(
    name="lost_delegator",
    tools=[AgentTool(lost_researcher, timeout_s=3)],
    offline_script=[call(Call("lost_researcher", {"request": "look"})), say(_responses_text)],
)

hurried_researcher = Agent(
    name="hurried_researcher",
    description="Researches a question for longer than its agent tool may run.",
    tools=[slow_lookup],
    offline_script=[call(Call("slow_lookup", {"seconds": 2.5})), say("researched")],
)

hurried_delegator = Agent(
    name="hurried_delegator",
    tools=[AgentTool(hurried_researcher, timeout_s=1)],
    offline_script=[call(Call("hurried_researcher", {"request": "look"})), say(_responses_text)],
)


def _first_turn_or_note(view: ScriptView) -> Step:
    if view.user_text == "go":
        return Step(
            calls=[
                Call("open_ticket", {"subject": "refund"}),
                Call("slow_lookup", {"seconds": 2.5}),
            ]
        )
    return Step(text=f"noted: {view.user_text}")


def _after_responses(view: ScriptView) -> Step:
    return Step(text=_responses_text(view))


# A turn with a ticket and a slow lookup: the replica running it is killed while the
# lookup runs, and the ticket's result and the user's next message arrive meanwhile.
interrupted = Agent(
    name="interrupted",
    tools=[ticket_tool, slow_lookup],
    offline_script=[_first_turn_or_note, _after_responses, _after_responses],
)


@tool(timeout_s=3)
def quick(n: int, seconds: float, tool_context: ToolContext) -> dict[str, object]:
    """Does a small piece of work.

    Args:
        n: Which piece (echoed back).
        seconds: How long it takes.
    """
    record_execution(tool_context.function_call_id)
    time.sleep(seconds)  # ok: the tool under test works on purpose
    return {"n": n}


def _chaos_turn(view: ScriptView) -> Step:
    seconds = (len(view.user_text) % 4) / 10  # 0 to 0.3 s, different per session
    return Step(
        calls=[
            Call("quick", {"n": 1, "seconds": seconds}),
            Call("quick", {"n": 2, "seconds": 0.3 - seconds}),
            Call("open_ticket", {"subject": view.user_text}),
            Call("researcher", {"request": view.user_text}),
        ]
    )


# The randomized run's agent: two normal calls, a ticket and an agent tool in one turn.
chaos = Agent(
    name="chaos",
    tools=[quick, ticket_tool, AgentTool(researcher, timeout_s=3)],
    offline_script=[_chaos_turn, say("working on it"), say(_responses_text)] + [say("more")] * 4,
)


@tool
def write_unjson(tool_context: ToolContext) -> str:
    """Writes a value that is not JSON to the session state."""
    tool_context.state["when"] = datetime.datetime.now(datetime.UTC)
    return "written"


@tool
def write_huge(tool_context: ToolContext) -> str:
    """Writes more than the payload limit to the session state."""
    tool_context.state["blob"] = "x" * 2_000_000
    return "written"


# Two calls whose state writes the worker must refuse.
state_writer = Agent(
    name="state_writer",
    tools=[write_unjson, write_huge],
    offline_script=[call(Call("write_unjson", {}), Call("write_huge", {})), say("done")],
)


# More rounds than the fault settings' max_deliveries (3): each is a send of its own.
ASKING_ROUNDS = 4


@tool(timeout_s=3)
def sign_off(tool_context: ToolContext) -> dict[str, object]:
    """Has a document signed off by a person, round after round, then files it."""
    runs = record_execution(tool_context.function_call_id)
    if runs <= ASKING_ROUNDS:
        tool_context.request_confirmation(hint=f"Sign off round {runs}?")
        return {"status": f"waiting for round {runs}"}
    return {"filed": True, "runs": runs}


signing = Agent(
    name="signing",
    tools=[sign_off],
    offline_script=[call(Call("sign_off", {})), *(say("asked") for _ in range(5)), say("filed")],
)


@tool(timeout_s=8)
def marked_work(seconds: float, tool_context: ToolContext) -> dict[str, object]:
    """Works for `seconds`, marking its start and (a side effect) its end.

    Args:
        seconds: How long it works.
    """
    record_execution(tool_context.function_call_id)
    time.sleep(seconds)  # ok: the tool under test works on purpose
    record_execution(f"{tool_context.function_call_id}:ended")
    return {"worked": seconds}


slow_worker = Agent(
    name="slow_worker",
    description="Works slowly.",
    tools=[marked_work],
    offline_script=[call(Call("marked_work", {"seconds": 4})), say("worked")],
)

work_delegator = Agent(
    name="work_delegator",
    tools=[AgentTool(slow_worker, timeout_s=8)],
    offline_script=[call(Call("slow_worker", {"request": "work"})), say(_responses_text)],
)
