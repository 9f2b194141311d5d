"""One delivery of an agent-tool call of `researcher`, run as a worker runs it, in a
process of its own (a test kills it mid-run): `python -m tests.faults.agent_tool_delivery
CALL_ID`, settings from the environment."""

from __future__ import annotations

import asyncio
import sys
import time

from tests.faults.exactly_once_tools import researcher
from toolfleet.orchestrator.agent_tool import run_agent_as_tool
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext, ToolServices
from toolfleet.shared.messages import ToolCall

REQUEST = "look"


def delivered(call_id: str, settings: Settings) -> ToolContext:
    """The context a worker gives the call `call_id` of user u's session "parent"."""
    call = ToolCall(
        call_id=call_id, tool=researcher.name, args={"request": REQUEST}, session_id="parent",
        app_name="delegating", user_id="u", invocation_id="inv", agent="delegating",
        reply_to="unused", dispatched_at=time.time(),
    )  # fmt: skip
    return ToolContext(call, ToolServices(settings=settings))


async def deliver(call_id: str, settings: Settings) -> object:
    return await run_agent_as_tool(researcher, REQUEST, delivered(call_id, settings))


if __name__ == "__main__":
    asyncio.run(deliver(sys.argv[1], Settings()))
