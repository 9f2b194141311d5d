"""The agents the cost benchmark serves (`toolfleet serve --agent bench.cost_agents:chat`).

`chat`: every turn calls the no-op tool once and answers, so a turn stores four events
(the user's message, the model's call, the tool's response, the model's answer).
`tickets`: a message "open N ..." makes N long-running calls in one turn, each of which
stays pending until its result is posted; every resume is answered with text.
"""

from __future__ import annotations

from bench import tools as bench_tools
from bench.harness import BenchModel
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, Step, call, say

# More steps than any invocation takes: a session whose N results arrive one by one is
# resumed N times, each resume one more model turn after the user's message.
MAX_STEPS = 1024


def _open(view: ScriptView) -> Step:
    count = int(view.user_text.split()[1])
    return call(*(Call("open_ticket", {"name": f"ticket {i}"}) for i in range(count)))


chat = Agent(
    name="cost_chat",
    tools=[bench_tools.noop],
    model=BenchModel([call(Call("noop")), say("done")]),
)

tickets = Agent(
    name="cost_tickets",
    tools=[bench_tools.open_ticket_tool],
    model=BenchModel([_open, *[say("noted")] * MAX_STEPS]),
)
