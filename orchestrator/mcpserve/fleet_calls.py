"""One MCP tools/call run on the fleet: validated here, executed by a worker, answered
through the results stream like any call of an agent's turn.

A call whose tool requires a person's confirmation is not sent: as in the agent loop
(loop.confirmation decides), it is recorded as a ticket waiting for a confirmation and
answers pending with its call id. Once a person confirmed it, `run_confirmed` sends it
with their answer; a tool that asks for a confirmation itself waits the same way.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.loop.confirmation import AWAITING, ask_confirmation
from toolfleet.orchestrator.loop.deep_args import deep_args_problem, large_args_problem
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.confirmation import SERVED_AGENT, SERVED_SESSION_PREFIX, ToolConfirmation
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import CallStatus, PendingCall, ToolCall, ToolResult, answered_result
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import mask_values, mentions_sealed, redact_deep, secret_values
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.tools import FunctionTool

# The session id of the calls a replica serves starts with this (then the replica's id).
SESSION_PREFIX = SERVED_SESSION_PREFIX


class FleetCalls:
    """Runs single calls through a replica's fleet. All of them answer on one results
    stream (one pseudo-session per replica): the replica's reader watches it once, where a
    stream per call would interrupt its blocking read for every call. `close` removes it."""

    def __init__(self, replica: Replica, app_name: str, user_id: str) -> None:
        self._replica = replica
        self._app = app_name
        self._user = user_id
        self._session_id = f"{SESSION_PREFIX}{replica.id}"
        self._session = session_key(app_name, user_id, self._session_id)
        self._secrets = replica.settings.secret_arg_names
        self._pending = PendingCalls(replica.keys, self._secrets)
        self._sealer = Sealer.of(replica.settings)

    async def run(self, tool: FunctionTool, args: dict[str, Any]) -> ToolResult:
        """Validate `args`, run the tool on its pool's workers and wait for its result
        (within the tool's time limit); every failure is an error result. A call that
        needs a confirmation is not sent: it answers pending, waiting for a person."""
        # Measured first: the checks below, and the envelope's journey, recurse.
        too_deep = deep_args_problem(tool.name, args, self._replica.settings.max_json_depth)
        envelope = self._envelope(uuid.uuid4().hex, tool.name, {} if too_deep else args)
        if too_deep:
            return failed(envelope, "InvalidArguments", too_deep)
        if mentions_sealed(args):  # only the orchestrator seals values: not a caller
            return failed(envelope, "InvalidArguments", "the key '$sealed' is reserved")
        too_large = large_args_problem(args, self._replica.settings.max_payload_bytes)
        if too_large:
            return failed(envelope, "InvalidArguments", too_large)
        checked, problems = tool.validate(args)
        if problems:  # a problem quotes the value it found: a secret argument's is masked
            detail = "; ".join(str(p) for p in problems)
            shown = mask_values(detail, secret_values(args, self._secrets))
            return failed(envelope, "InvalidArguments", shown)
        asked = await ask_confirmation(tool, envelope, checked)
        if asked is not None:  # waits for a person, or its check failed: not sent
            return await self._held(asked, envelope)
        return await self._send(tool, envelope)

    async def run_confirmed(
        self, tool: FunctionTool | None, waiting: PendingCall, answer: ToolConfirmation
    ) -> ToolResult:
        """Send a call a person confirmed (this server claimed their answer: nobody else
        sends it); its tool finds the answer in `tool_context.tool_confirmation`."""
        envelope = self._envelope(waiting.call_id, waiting.tool, waiting.args)
        envelope.confirmation = answer.model_dump(mode="json")
        if tool is None:
            gone = failed(envelope, "UnknownTool", f"tool {waiting.tool!r} is no longer served")
            return await self._closed(gone)
        if redact_deep(waiting.args, self._secrets, keep_sealed=True) is not waiting.args:
            masked = failed(
                envelope,
                "Interrupted",
                "this call's secret arguments were not kept while it waited (no "
                "TOOLFLEET_FLEET_KEY): call the tool again",
            )
            return await self._closed(masked)
        return await self._send(tool, envelope)

    def _envelope(self, call_id: str, tool: str, args: dict[str, Any]) -> ToolCall:
        return ToolCall(
            call_id=call_id,
            tool=tool,
            args=args,
            session_id=self._session_id,
            app_name=self._app,
            user_id=self._user,
            invocation_id=f"mcp-{call_id}",
            agent=SERVED_AGENT,
            state={},
            reply_to=self._replica.keys.results(self._session),
            dispatched_at=time.time(),
        )

    async def _send(self, tool: FunctionTool, envelope: ToolCall) -> ToolResult:
        session, call_id = self._session, envelope.call_id
        fleet = self._replica.fleet
        results: list[ToolResult] = []
        try:
            results = [r async for r in fleet.run([PlannedCall(envelope, tool)])]
        finally:
            batch = WriteBatch()
            # Trims what was read (other calls' later results stay) and drops the
            # sent-calls record, which only a resumed turn would read.
            fleet.stage_settle(session, batch)
            if not results or not _stays_open(results[0]):
                # Answered (a timeout included): a worker that gets it late must not run it.
                self._pending.stage_close(batch, session, [call_id])
            await batch.run(self._replica.redis)
        result = results[0]
        if result.actions.requested_confirmation is not None:  # the tool asked a person
            return await self._held(result, envelope)
        return result

    async def _held(self, asked: ToolResult, envelope: ToolCall) -> ToolResult:
        """Record a call that waits for a person as a confirmation ticket (its secret
        arguments sealed, as a parked turn keeps them); its pending answer. An answer that
        asks nothing (the tool's check failed) closes the call."""
        request = asked.actions.requested_confirmation
        if request is None:
            return await self._closed(asked)
        args = envelope.args if self._sealer is None else self._sealer.seal(envelope.args)
        waiting = PendingCall(
            call_id=asked.call_id,
            tool=asked.tool,
            session_id=self._session_id,
            app_name=self._app,
            user_id=self._user,
            agent=SERVED_AGENT,
            invocation_id=asked.invocation_id,
            args=args,
            ticket=request,
            created_at=time.time(),
            kind="confirmation",
        )
        batch = WriteBatch()
        self._pending.stage_put(batch, [waiting])
        await batch.run(self._replica.redis)
        response = {**AWAITING, "hint": request.get("hint", ""), "payload": request.get("payload")}
        return answered_result(envelope, CallStatus.PENDING, response, worker="orchestrator")

    async def _closed(self, result: ToolResult) -> ToolResult:
        batch = WriteBatch()
        self._pending.stage_close(batch, self._session, [result.call_id])
        await batch.run(self._replica.redis)
        return result

    async def close(self) -> None:
        """Remove the results stream (call when no call is in flight any more)."""
        await self._replica.redis.delete(self._replica.keys.results(self._session))


def _stays_open(result: ToolResult) -> bool:
    """Whether the call is not answered yet: a long-running call's ticket, or a call that
    waits for a person (it is sent again once they confirm it)."""
    return result.status is CallStatus.PENDING or result.actions.requested_confirmation is not None
