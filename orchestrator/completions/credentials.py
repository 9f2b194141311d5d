"""A user supplied a credential, or a person confirmed a call: run the waiting call
(again), and once every call of its parked turn has a result, answer the model with
all of them (loop.parking). A rejected call gets an error instead, and never runs.

The call runs again through its agent's tool callbacks, as ADK runs a confirmed or
authorized call through them again: before_tool may answer it (it is then not sent) or
change its arguments in place (they are what runs), and after_tool and on_tool_error
see its final response.
"""

from __future__ import annotations

from pydantic_core import from_json, to_json

from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.loop.callbacks import Hooks
from toolfleet.orchestrator.loop.planning import checked_args, make_envelope
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.loop.tool_callbacks import ToolCallbacks
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.completions import cancelled_ticket
from toolfleet.shared.confirmation import ToolConfirmation, rejection_message
from toolfleet.shared.messages import (
    CallStatus,
    PendingCall,
    ToolCall,
    ToolResult,
    answered_result,
)
from toolfleet.shared.redaction import redact_deep
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.tools import FunctionTool


def waiting_envelope(runner: Runner, session: Session, pending: PendingCall) -> ToolCall:
    """The call as it is sent once its wait is over (its session's state as it is now)."""
    invocation = runner.new_invocation(session, pending.agent, pending.invocation_id)
    return make_envelope(invocation, pending.call_id, pending.tool, pending.args)


def confirmed_envelope(
    runner: Runner, session: Session, pending: PendingCall, answer: ToolConfirmation | None
) -> ToolCall | None:
    """What a call that now waits for a credential keeps of its person's yes (given now,
    or before): it is sent with it again, as a worker runs such a call only with one.
    None when it had none. (Its arguments stay in the record alone.)"""
    confirmation = pending.envelope.confirmation if pending.envelope else None
    if answer is not None and answer.confirmed:
        confirmation = answer.model_dump(mode="json")
    if not confirmation:
        return None
    envelope = waiting_envelope(runner, session, pending)
    return envelope.model_copy(update={"args": {}, "state": {}, "confirmation": confirmation})


def rejected(runner: Runner, session: Session, pending: PendingCall) -> ToolResult:
    """The answer to a call a person rejected: an error, and it never runs."""
    envelope = waiting_envelope(runner, session, pending)
    return failed(envelope, "ConfirmationRejected", rejection_message(pending.tool))


def cancelled(runner: Runner, session: Session, pending: PendingCall) -> ToolResult:
    """The answer to a waiting call closed by a cancellation: an error; it never runs."""
    envelope = waiting_envelope(runner, session, pending)
    return answered_result(
        envelope, CallStatus.ERROR, cancelled_ticket(pending.tool), worker="orchestrator"
    )


async def rerun_with_credential(
    runner: Runner,
    session: Session,
    pending: PendingCall,
    hold: LeaseHold,
    confirmation: ToolConfirmation | None = None,
) -> ToolResult:
    """Dispatch the call again, as it was; the tool now finds the supplied credential,
    or (`confirmation`) the person's answer in `tool_context.tool_confirmation`.

    Its secret arguments come from the record, sealed; masked ones (no fleet key when it
    was parked) cannot be sent again, and the model is told so."""
    invocation = runner.new_invocation(session, pending.agent, pending.invocation_id)
    tools = await invocation.agent.tools_for(invocation.readonly_context)
    tool = tools.get(pending.tool)
    envelope = waiting_envelope(runner, session, pending)
    if confirmation is not None:
        envelope.confirmation = confirmation.model_dump(mode="json")
    elif pending.envelope is not None:  # confirmed before it waited for a credential
        envelope.confirmation = pending.envelope.confirmation
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
    callbacks = ToolCallbacks(Hooks(invocation.agent, invocation.plugins))
    answer = await _before_tool(callbacks, tool, envelope, runner)
    if answer is not None:
        return await callbacks.finish(answer)
    planned = [PlannedCall(envelope, tool)]
    # As a resumed turn: a run sent before (by a replica that failed before storing its
    # result) is not sent again; its result is read from the results stream, which the
    # caller trims in the step that stores it (ToolRunner.stage_settle).
    results = [r async for r in runner.tool_runner.run(planned, resume=True, fence=hold.fence)]
    return await callbacks.finish(results[0])


async def _before_tool(
    callbacks: ToolCallbacks, tool: FunctionTool, envelope: ToolCall, runner: Runner
) -> ToolResult | None:
    """The before_tool callbacks on the call about to be sent again: their answer, or the
    one refusing the arguments they left; None to send it. They get its arguments opened
    (the record keeps secret ones sealed); arguments they change in place are checked as
    the model's were and sent, sealed again."""
    if not callbacks.active:
        return None
    sealer = Sealer.of(runner.settings)
    opened = envelope.model_copy(
        update={"args": envelope.args if sealer is None else sealer.unseal(envelope.args)}
    )
    args, refused = checked_args(tool, opened, runner.settings)
    if refused is not None:
        return refused
    given = to_json(args, fallback=str)
    answer = await callbacks.before(tool, envelope, args)
    edited = to_json(args, fallback=str)
    if answer is not None or edited == given:
        return answer
    opened.args = from_json(edited)
    _, refused = checked_args(tool, opened, runner.settings)
    if refused is not None:
        return refused
    envelope.args = opened.args if sealer is None else sealer.seal(opened.args)
    return None
