"""A user supplied a credential: run the waiting call again, and once every call of
its parked turn has a result, answer the model with all of them (loop.parking)."""

from __future__ import annotations

from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.loop.turn import make_envelope
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.messages import PendingCall, ToolResult
from toolfleet.shared.redaction import redact_deep


async def rerun_with_credential(
    runner: Runner, session: Session, pending: PendingCall, hold: LeaseHold
) -> ToolResult:
    """Dispatch the call again, as it was; the tool now finds the supplied credential.

    Its secret arguments come from the record, sealed; masked ones (no fleet key when it
    was parked) cannot be sent again, and the model is told so."""
    invocation = runner.new_invocation(session, pending.agent, pending.invocation_id)
    tools = await invocation.agent.tools_for(invocation.readonly_context())
    tool = tools.get(pending.tool)
    envelope = make_envelope(invocation, pending.call_id, pending.tool, pending.args)
    if tool is None:
        return failed(envelope, "UnknownTool", f"tool {pending.tool!r} is no longer available")
    names = runner.settings.secret_arg_names
    if redact_deep(pending.args, names, keep_sealed=True) is not pending.args:
        return failed(
            envelope,
            "Interrupted",
            "this call's secret arguments were not kept for a second run (no "
            "TOOLFLEET_FLEET_KEY): call the tool again",
        )
    planned = [PlannedCall(envelope, tool)]
    results = [r async for r in runner.tool_runner.run(planned, fence=hold.fence)]
    await runner.tool_runner.settle(session.id)
    return results[0]
