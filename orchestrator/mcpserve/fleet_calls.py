"""One MCP tools/call run on the fleet: validated here, executed by a worker, answered
through the results stream like any call of an agent's turn."""

from __future__ import annotations

import time
import uuid
from typing import Any

from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import mentions_sealed
from toolfleet.shared.tools import FunctionTool


class FleetCalls:
    """Runs single calls through a replica's fleet. All of them answer on one results
    stream (one pseudo-session per replica): the replica's reader watches it once, where a
    stream per call would interrupt its blocking read for every call. `close` removes it."""

    def __init__(self, replica: Replica, app_name: str, user_id: str) -> None:
        self._replica = replica
        self._app = app_name
        self._user = user_id
        self._session_id = f"mcp-{replica.id}"
        self._pending = PendingCalls(replica.keys)

    async def run(self, tool: FunctionTool, args: dict[str, Any]) -> ToolResult:
        """Validate `args`, run the tool on its pool's workers and wait for its result
        (within the tool's time limit); every failure is an error result."""
        call_id = uuid.uuid4().hex
        session_id = self._session_id
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
        results: list[ToolResult] = []
        try:
            results = [r async for r in fleet.run([PlannedCall(envelope, tool)])]
        finally:
            batch = WriteBatch()
            # Trims what was read (other calls' later results stay) and drops the
            # sent-calls record, which only a resumed turn would read.
            fleet.stage_settle(session_id, batch)
            if not results or results[0].status is not CallStatus.PENDING:
                # Answered (a timeout included): a worker that gets it late must not run it.
                self._pending.stage_close(batch, session_id, [call_id])
            await batch.run(self._replica.redis)
        return results[0]

    async def close(self) -> None:
        """Remove the results stream (call when no call is in flight any more)."""
        await self._replica.redis.delete(self._replica.keys.results(self._session_id))
