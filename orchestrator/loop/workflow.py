"""Workflow agents in an invocation: Sequential, Parallel and Loop orchestrate the one
LLM-agent step loop (`run_agent`), each sub-agent on an Invocation of its own that
shares the session, the lease (every write fenced by it), the fleet and the cancellation.

A sub-agent's answer does not end the call: it is stored without releasing the lease
or clearing the session's owed mark (`Invocation.answers_call`); the call ends when the
workflow does, and its runner then clears the mark. A ParallelAgent's branches run as
concurrent coroutines: their calls are out on the fleet at the same time.

A workflow's invocation that died (its replica with it) is resumed from its events
(`Progress`): the sub-agents that answered are not run again, the turn it left open is
finished by its sub-agent, and the workflow goes on from there - a LoopAgent counting
the rounds that ran.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from google.genai import types

from toolfleet.orchestrator.agents.workflow import (
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
    WorkflowAgent,
)
from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.agent_callbacks import enter_agent, leave_agents
from toolfleet.orchestrator.loop.callbacks import listed
from toolfleet.orchestrator.loop.closing import closing_event
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation, InvocationEnded, Update
from toolfleet.orchestrator.models.protocol import function_calls
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.sessions.events import Event

# Runs an LLM agent's invocation; with a turn, that open turn of it first.
AgentRun = Callable[[Invocation, Event | None], AsyncIterator[Update]]

# A sub-agent that ended so finished its part; any other ending (a pause for a person
# or a credential, a cancellation, max_steps) ends the whole call there.
_GOES_ON = (EndReason.ANSWERED, EndReason.SKIPPED_SUMMARY, EndReason.ESCALATED)


async def close_stray_turns(inv: Invocation) -> AsyncIterator[Event]:
    """Answer the calls of a ParallelAgent's branch turns left open when their invocation
    died, other than the session's open turn (resumed as any is): only the last turn
    counts as open, and a branch's calls without responses would stay so for good.
    Each gets an error response (it may or may not have run), in a write that closes it."""
    if not any(isinstance(a, ParallelAgent) for a in inv.agent.root.walk()):
        return  # only branches leave turns open side by side: no need to read it all
    last = inv.session.open_turn()
    answered: set[str] = set()
    parked: set[tuple[str, str | None]] = set()  # waiting for a person: not open
    stray: list[tuple[Event, list[types.FunctionCall]]] = []
    for event in reversed(inv.session.events):
        if event.credential_requests or event.confirmation_requests:
            parked.add((event.invocation_id, event.branch))
        parts = event.content.parts or () if event.content is not None else ()
        answered |= {p.function_response.id or "" for p in parts if p.function_response}
        if event.branch is None or event is last or event.content is None:
            continue
        if (event.invocation_id, event.branch) in parked:
            continue
        calls = [c for c in function_calls(event.content) if c.id not in answered]
        if calls:
            stray.append((event, calls))
    for turn, calls in reversed(stray):
        closing = closing_event(turn, calls, INTERRUPTED, _INTERRUPTED_WHY)
        closing.branch = turn.branch
        await held.append(inv, closing, closed=[c.id or "" for c in calls])
        yield closing


INTERRUPTED = "Interrupted"
_INTERRUPTED_WHY = (
    "the orchestrator stopped while this call ran in a parallel branch; it may or may "
    "not have run: check its effect before calling it again"
)


@dataclass(frozen=True)
class _Finished:
    """A sub-agent's run that ended in its answer, and whether it escalated."""

    agent: str
    escalated: bool


@dataclass
class Progress:
    """How far a workflow's invocation got before it died, read from its events: per
    branch, the runs of LLM sub-agents that finished, in order, the run that began and
    did not finish, and the turn it left open. A resumed run skips each run that
    finished, finishes the open turn first, and runs no before_agent_callback of a run
    that began (ADK runs it once per run)."""

    finished: dict[str | None, deque[_Finished]] = field(default_factory=dict)
    open_turn: Event | None = None
    # A sub-agent got a response after it answered (a long-running call's result): the
    # invocation had ended; this is a new one, not the rest of it.
    ended: bool = False
    # Per branch: the agent whose run wrote an event and had not answered.
    begun: dict[str | None, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        workflow: WorkflowAgent,
        events: Sequence[Event],
        invocation_id: str,
        open_turn: Event | None,
        plugins: Sequence[BasePlugin] = (),
    ) -> Progress:
        """The progress of `workflow`'s invocation `invocation_id` in `events`. A run
        finished with its answer (an event ADK calls a final response). An agent with an
        after_agent_callback (its own or a plugin's) may write one event right after its
        answer: that one is the callback's, not a run; any other answer is a run of its
        own, though the same agent answered just before (a LoopAgent's rounds)."""
        llm_agents = {a.name for a in workflow.walk() if not isinstance(a, WorkflowAgent)}
        base = BasePlugin.after_agent_callback
        if any(type(p).after_agent_callback is not base for p in plugins):
            called_after = llm_agents
        else:
            called_after = {a.name for a in workflow.walk() if listed(a.after_agent_callback)}
        finished: dict[str | None, deque[_Finished]] = defaultdict(deque)
        escalated: set[tuple[str | None, str]] = set()
        answered_last: dict[str | None, str] = {}  # per branch: who answered, no event since
        ran: set[tuple[str | None, str]] = set()  # runs that finished, and none since
        begun: dict[str | None, str] = {}
        ended = False
        for event in events:
            if event.invocation_id != invocation_id or event.author not in llm_agents:
                continue
            run = (event.branch, event.author)
            answerer = answered_last.pop(event.branch, None)
            if answerer == event.author and answerer in called_after:
                # The after_agent_callback's event of the run that answered.
                if event.actions.escalate:
                    runs = finished[event.branch]
                    runs[-1] = _Finished(event.author, escalated=True)
                continue
            if event.actions.escalate:
                escalated.add(run)
            if event.content is None:  # its before_agent_callback's writes: its run began
                begun[event.branch] = event.author
                continue
            if not _answers(event):
                # A new run starts with the model's turn; responses first are a result
                # that came after its run answered.
                ended = ended or (run in ran and not event.get_function_calls())
                ran.discard(run)
                begun[event.branch] = event.author
            else:
                finished[event.branch].append(_Finished(event.author, run in escalated))
                escalated.discard(run)
                answered_last[event.branch] = event.author
                ran.add(run)
                begun.pop(event.branch, None)
        return cls(dict(finished), open_turn, ended, begun)

    def take_finished(self, branch: str | None, agent: str) -> _Finished | None:
        """The run of `agent` in `branch` that finished next, if it is the next there."""
        runs = self.finished.get(branch)
        if runs and runs[0].agent == agent:
            return runs.popleft()
        return None

    def take_begun(self, branch: str | None, agent: str) -> bool:
        """Whether the run of `agent` in `branch` that is next there began before the
        invocation died (every run there before it finished and was taken)."""
        if self.finished.get(branch) or self.begun.get(branch) != agent:
            return False
        del self.begun[branch]
        return True

    def holds_run_below(self, workflow: WorkflowAgent, branch: str | None) -> bool:
        """Whether a run of an agent below `workflow` (in `branch` or one under it) is
        still to be taken: `workflow`'s run began before the invocation died."""
        names = {a.name for a in workflow.walk()}

        def below(other: str | None) -> bool:
            return branch is None or other == branch or (other or "").startswith(f"{branch}.")

        turn = self.open_turn
        return (
            (turn is not None and below(turn.branch) and turn.author in names)
            or any(below(b) and a in names for b, a in self.begun.items())
            or any(below(b) and any(r.agent in names for r in runs)
                   for b, runs in self.finished.items())
        )  # fmt: skip

    def take_open_turn(self, branch: str | None, agent: str) -> Event | None:
        """The open turn, if it is `agent`'s in `branch`."""
        turn = self.open_turn
        if turn is None or turn.branch != branch or turn.author != agent:
            return None
        self.open_turn = None
        return turn


def _answers(event: Event) -> bool:
    """Whether the event ends its agent's run with an answer (ADK's final response)."""
    waits = event.credential_requests or event.confirmation_requests
    return event.author != "user" and not waits and event.is_final_response()


@dataclass
class _Flow:
    run_agent: AgentRun
    stop: InvocationEnded | None = None  # the ending that stops every sub-agent after it
    replay: Progress | None = None  # a resumed invocation's: what ran before it died
    replayed_escalation: bool = False  # the run `_run` just skipped escalated


async def run_workflow(
    inv: Invocation, run_agent: AgentRun, replay: Progress | None = None
) -> AsyncIterator[Update]:
    """Run `inv.agent`, a workflow agent, to its end; InvocationEnded last. `replay`: the
    progress of the invocation `inv` resumes (None: a new one)."""
    flow = _Flow(run_agent, replay=replay)
    async for update in _run(flow, inv):
        yield update
    yield flow.stop or InvocationEnded(inv.id, EndReason.ANSWERED)


async def _run(flow: _Flow, inv: Invocation) -> AsyncIterator[Update]:
    """Run `inv.agent` (any kind) as part of a workflow; no InvocationEnded."""
    agent = inv.agent
    if not isinstance(agent, WorkflowAgent):
        turn = None
        if flow.replay is not None:
            done = flow.replay.take_finished(inv.branch, agent.name)
            if done is not None:  # it answered before the invocation died
                flow.replayed_escalation = done.escalated
                return
            turn = flow.replay.take_open_turn(inv.branch, agent.name)
            if flow.replay.take_begun(inv.branch, agent.name):
                inv.entered.append(agent)  # its before_agent_callback ran then
            flow.replay.finished.pop(inv.branch, None)  # this branch goes on anew
        async for update in flow.run_agent(inv, turn):
            if not isinstance(update, InvocationEnded):
                yield update
            elif update.reason not in _GOES_ON:
                flow.stop = update
        return
    if flow.replay is not None and flow.replay.holds_run_below(agent, inv.branch):
        inv.entered.append(agent)  # its run began before: its before_agent_callback ran
    entered = await enter_agent(inv)  # its before_agent_callback; stored
    if entered is not None:
        yield entered
        if inv.answered:  # it answered in the workflow's place
            return
    if isinstance(agent, ParallelAgent):
        runs = _parallel(flow, inv, agent)
    elif isinstance(agent, LoopAgent):
        runs = _loop(flow, inv, agent)
    elif isinstance(agent, SequentialAgent):
        runs = _sequence(flow, inv, agent)
    else:
        raise TypeError(
            f"agent {agent.name!r}: {type(agent).__name__} is no workflow toolfleet runs"
        )
    async for update in runs:
        yield update
    if flow.stop is None:
        async for event in leave_agents(inv, EndReason.ANSWERED):  # after_agent_callback
            yield event


def _halted(inv: Invocation) -> bool:
    return inv.halted is not None and inv.halted()


def _sub(
    inv: Invocation,
    agent: WorkflowAgent,
    index: int,
    branch: str | None,
    halted: Callable[[], bool] | None = None,
) -> Invocation:
    """The invocation of `agent`'s sub-agent `index`: the same call, its own working set."""
    outer, own = inv.halted, halted
    if own is not None and outer is not None:
        halted = lambda: outer() or own()  # noqa: E731  (a ParallelAgent inside a branch)
    return dataclasses.replace(
        inv,
        agent=agent.sub_agents[index],
        answered=False,
        release_on_answer=False,
        held=None,
        held_in_doubt=False,
        entered=[],
        answered_by_callback=False,
        branch=branch,
        answers_call=False,
        halted=halted or outer,
    )


async def _sequence(flow: _Flow, inv: Invocation, agent: SequentialAgent) -> AsyncIterator[Update]:
    for index in range(len(agent.sub_agents)):
        if _halted(inv):
            return
        async for update in _run(flow, _sub(inv, agent, index, inv.branch)):
            yield update
        if flow.stop is not None:
            return


async def _loop(flow: _Flow, inv: Invocation, agent: LoopAgent) -> AsyncIterator[Update]:
    """ADK's: stops after a sub-agent whose events escalated (exit_loop), or after
    max_iterations rounds; an escalation seen here goes on up to any loop around it."""
    rounds = 0
    while agent.sub_agents and (agent.max_iterations is None or rounds < agent.max_iterations):
        for index in range(len(agent.sub_agents)):
            if _halted(inv):
                return
            escalated = flow.replayed_escalation = False
            async for update in _run(flow, _sub(inv, agent, index, inv.branch)):
                escalated = escalated or (isinstance(update, Event) and update.actions.escalate)
                yield update
            if escalated or flow.replayed_escalation or flow.stop is not None:
                return
        rounds += 1


async def _parallel(flow: _Flow, inv: Invocation, agent: ParallelAgent) -> AsyncIterator[Update]:
    """Every sub-agent at once, each on its branch; their updates as they come. If one
    fails, the others are cancelled and the failure is raised. When a sub-agent
    escalates, ADK's ends the others: here they finish the turn they are in (their calls
    are answered) and start no other."""
    queue: asyncio.Queue[Update | _Done] = asyncio.Queue()
    names = {sub.name for sub in agent.sub_agents}
    exiting = asyncio.Event()

    async def pump(sub: Invocation) -> None:
        try:
            async for update in _run(flow, sub):
                if isinstance(update, Event) and update.actions.escalate and update.author in names:
                    exiting.set()  # before its own agent goes on: the others see it first
                await queue.put(update)
        except BaseException as exc:
            await queue.put(_Done(exc))
            raise
        await queue.put(_Done())

    prefix = f"{inv.branch}." if inv.branch else ""
    subs = [
        _sub(inv, agent, i, f"{prefix}{agent.name}.{sub.name}", exiting.is_set)
        for i, sub in enumerate(agent.sub_agents)
    ]
    tasks = [asyncio.create_task(pump(sub)) for sub in subs]
    try:
        running = len(tasks)
        while running:
            update = await queue.get()
            if not isinstance(update, _Done):
                yield update
            elif update.error is not None:
                raise update.error  # `finally` stops the other branches
            else:
                running -= 1
        if inv.branch is None:  # the outermost: every branch has stored its responses
            await inv.runner.settle(inv.session.key)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True)
class _Done:
    """A branch ended: normally, or with `error`."""

    error: BaseException | None = None
