"""Small pieces several commands share."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.model_choice import describe_choice
from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.cli.progress import LiveProgress
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import SessionKey, session_key


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
    plugins: Sequence[BasePlugin] = (),
    progress_every_s: float | None = None,
) -> bool:
    """Send one message, print the conversation with live progress during long turns, then
    wait (up to `wait_s`; None: not at all) for its long-running calls, printing the resumed
    invocations (`progress_every_s`: the progress period; None: LiveProgress's own). True
    if settled."""
    progress: LiveProgress | None = None

    def show(update: Update) -> None:
        if progress is not None:
            progress.follow(update)
        printer.show(update)

    key = session_key(agent.name, user_id, session_id)  # the app is named after its agent

    def show_resumed(session: SessionKey, update: Update) -> None:
        if session == key:
            show(update)

    async with Orchestrator([agent], settings, on_update=show_resumed, plugins=plugins) as orch:
        runner = orch.runner(agent.name)
        print(describe_choice(agent, runner.model))
        replica = orch.replica
        progress = LiveProgress(
            printer.out, replica.redis, replica.keys, key, every_s=progress_every_s
        )
        with cancel_on_ctrl_c(runner, user_id, session_id) as cancelling:
            async with progress.running():
                async for update in runner.run(
                    user_id=user_id, session_id=session_id, message=message
                ):
                    show(update)
        if cancelling:
            await asyncio.gather(*cancelling)
            raise KeyboardInterrupt  # the session is consistent: now the command ends
        pending = await runner.store.pending_calls(key)
        if not pending or wait_s is None:
            return not pending
        if explain_pending:
            printer.pending(pending)
        else:
            printer.pending_quietly(pending)
        async with progress.running():
            return await orch.wait_until_settled(key, wait_s)


@contextmanager
def cancel_on_ctrl_c(
    runner: Runner, user_id: str, session_id: str
) -> Iterator[list[asyncio.Task[list[str]]]]:
    """While the invocation runs, Ctrl-C cancels the session (its calls in flight are
    stopped and answered, its tickets closed) and the invocation ends by itself; a second
    Ctrl-C interrupts at once. The list holds the cancellation's task, once there is one."""
    loop = asyncio.get_running_loop()
    cancelling: list[asyncio.Task[list[str]]] = []

    def interrupted() -> None:
        loop.remove_signal_handler(signal.SIGINT)  # the next Ctrl-C interrupts as usual
        print("cancelling the session (Ctrl-C again to quit at once)...", file=sys.stderr)
        cancelling.append(
            asyncio.ensure_future(runner.cancel(user_id=user_id, session_id=session_id))
        )

    try:
        loop.add_signal_handler(signal.SIGINT, interrupted)
    except (NotImplementedError, RuntimeError):  # no signals here (Windows, a thread)
        yield cancelling
        return
    try:
        yield cancelling
    finally:
        if not cancelling:
            loop.remove_signal_handler(signal.SIGINT)
