"""Slow tools the cancellation tests stop on real workers. Each leaves files behind: one
when it starts (so a test cancels it while it runs), one if it ever finishes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import Call, ScriptView, call, say
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import FunctionTool, tool


@tool(pool="stoppable")
def crunch(marker: str, seconds: float) -> dict[str, object]:
    """Runs for `seconds` on the prefork pool `stoppable`.

    Args:
        marker: Path prefix of the files it leaves: .started, .finished.
        seconds: How long it runs.
    """
    Path(f"{marker}.started").write_text("started")
    time.sleep(seconds)  # ok: the tool under test runs long on purpose
    Path(f"{marker}.finished").write_text("finished")
    return {"crunched": seconds}


@tool
async def fetch_slowly(marker: str, seconds: float) -> dict[str, object]:
    """Waits `seconds` on an io worker's event loop.

    Args:
        marker: Path prefix of the files it leaves: .started, .finished.
        seconds: How long it waits.
    """
    leave(marker, "started")
    await asyncio.sleep(seconds)  # ok: the tool under test waits
    leave(marker, "finished")
    return {"fetched": seconds}


def leave(marker: str, what: str) -> None:
    """Leave the file that says the tool got this far."""
    Path(f"{marker}.{what}").write_text(what)


def _slow_fetch(view: ScriptView) -> dict[str, object]:
    return {"marker": view.user_text, "seconds": 10}


# `toolfleet run --agent tests.integration.cancel_tools:slow_agent MARKER`: one slow call.
slow_agent = Agent(
    name="slow_agent",
    tools=[fetch_slowly],
    offline_script=[call(Call("fetch_slowly", _slow_fetch)), say("it finished")],
)


class Blocker(BasePlugin):
    """Answers every call itself: nothing reaches a worker."""

    async def before_tool_callback(
        self, *, tool: FunctionTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        return {"blocked_by_plugin": tool.name}


# `toolfleet run ... --plugin tests.integration.cancel_tools:blocker`
blocker = Blocker("blocker")
