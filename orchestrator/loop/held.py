"""A turn's responses held back, to be stored by the invocation's next write.

Storing a model turn's responses was a fenced write of its own, one round trip before
the model's next call: a tenth of a one-call turn's CPU. When every
response is a worker's final result, nothing needs that write to come first:

- each call was closed by the worker's post of its result (no redelivery runs it again);
- each result stays on the session's results stream until the write that stores the
  responses trims it, and the sent-calls record until that write forgets it.

So the responses go to the model from memory and are stored with the invocation's next
write: the model's answer (with the lease's release), its next turn (with that turn's
calls), or whatever else the invocation writes next. A crash in between leaves the
turn open in Redis, as a crash while the calls ran does: whoever takes the session over
reads the results from the stream again and answers the turn before anything else, so
the history still gets exactly one response per call.

Answers the orchestrator makes itself (a timeout, a cancellation, no live worker, a
callback's answer), pending tickets, requests for a credential or a confirmation and
actions are stored at once, as before: they close calls or end the invocation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import HeldAppend
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.shared.tools import FunctionTool

ORCHESTRATOR = "orchestrator"  # the `worker` of the results the orchestrator makes itself


def holdable(
    ordered: list[ToolResult], sent: Collection[str], tools: Mapping[str, FunctionTool]
) -> bool:
    """Whether a turn's responses may wait for the invocation's next write: each is the
    final result a worker posted for a call this turn sent, which closed the call."""
    for result in ordered:
        tool = tools.get(result.tool)
        if (
            result.call_id not in sent
            or result.worker == ORCHESTRATOR
            or result.status is CallStatus.PENDING
            or tool is None
            or tool.is_long_running  # its final result comes as a completion, not a post
            or result.actions.waits()
            or result.actions.transfer_to_agent
            or result.actions.escalate
            or result.actions.skip_summarization
        ):
            return False
    return bool(ordered)


def take(inv: Invocation) -> HeldAppend | None:
    """The held responses, for the write about to be staged to carry: from here on they
    are that write's. Until it returns (`carried`) they are in doubt: if it fails, it may
    have landed, and they are never written again by this invocation (whoever resumes
    the session reads what Redis has)."""
    held, inv.held = inv.held, None
    if held is not None:
        inv.held_in_doubt = True
    return held


def carried(inv: Invocation) -> None:
    """The write that carried the held responses returned: they are stored."""
    inv.held_in_doubt = False


async def append(inv: Invocation, event: Event, **options: Any) -> None:
    """`SessionStore.append` of `event` to the invocation's session under its fence,
    carrying the held responses if any (`options`: append's)."""
    stamp(inv, event)
    held = take(inv)
    await inv.store.append(inv.session, event, fence=inv.fence, held=held, **options)
    if held is not None:
        carried(inv)


async def store_held(inv: Invocation) -> None:
    """Store the held responses by a write of their own, if no write carried them yet
    (the invocation ends, or failed, with nothing else to write)."""
    held = take(inv)
    if held is not None:
        await inv.store.store_held(inv.session, held, fence=inv.fence)
        carried(inv)


def stamp(inv: Invocation, event: Event) -> Event:
    """Set the invocation's branch on an event it is about to store."""
    if inv.branch is not None and event.branch is None:
        event.branch = inv.branch
    return event


def unsettled(inv: Invocation) -> bool:
    """Whether Redis may lack responses the session holds in memory: held, or carried by
    a write that failed. Then the session must stay owed (its stored turn may be open)."""
    return inv.held is not None or inv.held_in_doubt
