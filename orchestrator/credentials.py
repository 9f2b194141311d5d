"""Turns that wait for a credential (tool authentication, ADK request_credential).

A tool that lacks a credential calls `tool_context.request_credential(auth_config)`.
The turn is parked: its other results wait in Redis, each such call is recorded as a
pending credential request, and the model sees nothing yet. When the user supplies
the credential, the call runs again (it now finds the credential) and, once every
call of the turn has its result, the model gets all responses in call order.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from google.genai import types

from orchestrator.fleet import PlannedCall, failed
from orchestrator.sessions import Event, Session
from orchestrator.turn import make_envelope, pending_call
from shared.messages import PendingCall, ToolResult

if TYPE_CHECKING:
    from orchestrator.loop import Invocation
    from orchestrator.runner import Runner

ORDER_FIELD = "__order__"
PARKED_TTL_S = 7 * 24 * 3600


async def park_turn(
    inv: Invocation, turn_id: str, calls: list[types.FunctionCall], ordered: list[ToolResult]
) -> Event:
    """Keep the turn's results, record its credential requests, tell the client."""
    needing = [r for r in ordered if r.actions.requested_auth]
    args = {c.id: dict(c.args or {}) for c in calls}
    requests = [
        pending_call(
            inv,
            r,
            args[r.call_id],
            ticket=r.actions.requested_auth or {},
            created_at=time.time(),
            kind="credential",
            turn_id=turn_id,
        )
        for r in needing
    ]
    fields = {r.call_id: r.model_dump_json() for r in ordered if not r.actions.requested_auth}
    fields[ORDER_FIELD] = json.dumps([r.call_id for r in ordered])
    key = inv.keys.parked(turn_id)
    await inv.store.redis.hset(key, mapping=fields)  # type: ignore[arg-type]
    await inv.store.redis.expire(key, PARKED_TTL_S)
    event = Event(
        invocation_id=inv.id,
        author=inv.agent.name,
        credential_requests=[
            {"call_id": p.call_id, "tool": p.tool, "auth_config": p.ticket} for p in requests
        ],
    )
    await inv.store.append(inv.session, event, pending=requests)
    return event


async def rerun_with_credential(
    runner: Runner, session: Session, pending: PendingCall
) -> ToolResult:
    """Dispatch the call again, as it was; the tool now finds the supplied credential."""
    invocation = runner.new_invocation(session, pending.agent, pending.invocation_id)
    tools = await invocation.agent.tools_for(invocation.readonly_context())
    tool = tools.get(pending.tool)
    envelope = make_envelope(invocation, pending.call_id, pending.tool, pending.args)
    if tool is None:
        return failed(envelope, "UnknownTool", f"tool {pending.tool!r} is no longer available")
    results = [r async for r in runner.tool_runner.run([PlannedCall(envelope, tool)])]
    await runner.tool_runner.settle(session.id)
    return results[0]


async def complete_parked_turn(
    runner: Runner, pending: PendingCall, result: ToolResult
) -> list[ToolResult] | None:
    """Add the result to its parked turn; all results in call order once none is missing."""
    key = runner.keys.parked(pending.turn_id or "")
    await runner.store.redis.hset(key, pending.call_id, result.model_dump_json())
    raw = await runner.store.redis.hgetall(key)
    fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
    order: list[str] = json.loads(fields[ORDER_FIELD])
    if any(call_id not in fields for call_id in order):
        await runner.store.redis.hdel(runner.keys.pending(), pending.call_id)
        return None
    await runner.store.redis.delete(key)
    return [ToolResult.model_validate_json(fields[call_id]) for call_id in order]
