"""One MCP tools/call run on the fleet: validated here, executed by a worker, answered
through the results stream like any call of an agent's turn."""

from __future__ import annotations

import time
import uuid
from typing import Any

from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.messages import ToolCall, ToolResult
from toolfleet.shared.redaction import mentions_sealed
from toolfleet.shared.tools import FunctionTool


class FleetCalls:
    """Runs single calls through a replica's fleet; each call is a session of its own, so
    its results stream and sent-calls record go away once it is answered."""

    def __init__(self, replica: Replica, app_name: str, user_id: str) -> None:
        self._replica = replica
        self._app = app_name
        self._user = user_id

    async def run(self, tool: FunctionTool, args: dict[str, Any]) -> ToolResult:
        """Validate `args`, run the tool on its pool's workers and wait for its result
        (within the tool's time limit); every failure is an error result."""
        call_id = uuid.uuid4().hex
        session_id = f"mcp-{call_id}"
        keys = self._replica.keys
        envelope = ToolCall(
            call_id=call_id,
            tool=tool.name,
            args=args,
            session_id=session_id,
            app_name=self._app,
            user_id=self._user,
            invocation_id=f"mcp-{call_id}",
            agent="mcp",
            state={},
            reply_to=keys.results(session_id),
            dispatched_at=time.time(),
        )
        if mentions_sealed(args):  # only the orchestrator seals values: not a caller
            return failed(envelope, "InvalidArguments", "the key '$sealed' is reserved")
        _, problems = tool.validate(args)
        if problems:
            detail = "; ".join(str(p) for p in problems)
            return failed(envelope, "InvalidArguments", detail)
        fleet = self._replica.fleet
        try:
            results = [r async for r in fleet.run([PlannedCall(envelope, tool)])]
        finally:
            await fleet.settle(session_id)
            await self._replica.redis.delete(keys.results(session_id))
        return results[0]
