"""Small pieces several commands share."""

from __future__ import annotations

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.model_choice import describe_choice
from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.config import Settings


async def converse(
    agent: Agent,
    settings: Settings,
    printer: ConsolePrinter,
    *,
    user_id: str,
    session_id: str,
    message: str,
    wait_s: float | None,
    explain_pending: bool = True,
) -> bool:
    """Send one message, print the conversation, then wait (up to `wait_s`; None: not at
    all) for its long-running calls, printing the resumed invocations. True if settled."""

    def show_resumed(session: str, update: Update) -> None:
        if session == session_id:
            printer.show(update)

    async with Orchestrator([agent], settings, on_update=show_resumed) as orch:
        runner = orch.runner(agent.name)
        print(describe_choice(agent, runner.model))
        async for update in runner.run(user_id=user_id, session_id=session_id, message=message):
            printer.show(update)
        pending = await runner.store.pending_calls(session_id)
        if not pending or wait_s is None:
            return not pending
        if explain_pending:
            printer.pending(pending)
        else:
            printer.pending_quietly(pending)
        return await orch.wait_until_settled(agent.name, session_id, wait_s)
