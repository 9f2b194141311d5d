"""Publish tool calls as Celery task messages straight onto the Redis queues.

Celery's `send_task` is synchronous (1.1-1.5 ms each here) and would stall the event
loop; this writes the same message (shared.celery_wire.build) with one pipelined LPUSH
per turn.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pydantic_core import to_json

from toolfleet.orchestrator.connections import decoded
from toolfleet.orchestrator.fleet.protocol import WithFirstSend
from toolfleet.orchestrator.sessions.fencing import Fence, write
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.call_signing import CallSigner, call_kwargs
from toolfleet.shared.celery_wire.build import TaskMessageBuilder
from toolfleet.shared.keys import task_name
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.redaction import redact_deep, secret_name_set
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.state_snapshots import StateSnapshot
from toolfleet.shared.tracing import TRACEPARENT

# Forgotten when the turn is answered (settle); this only bounds what a crash leaves.
DISPATCHED_TTL_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Dispatch:
    """A call ready to publish, its arguments walked once: the queue it goes on (that of
    its tool's pool), its arguments as shown (secret-named values masked: Flower's args,
    the call's span) and its task's keyword arguments (the call as sent, secret-named
    values in its arguments and state sealed for the workers, as JSON text; and its
    signature). `CeleryPublisher.dispatch` makes one."""

    call: ToolCall
    queue: str
    shown_args: dict[str, Any]
    kwargs: dict[str, str]
    traceparent: str | None = None  # the call's span, the parent of the worker's (tracing on)
    snapshot: StateSnapshot | None = None  # the call's state, stored apart (large)

    def traced(self, traceparent: str | None) -> Dispatch:
        """The same dispatch, its message carrying `traceparent`."""
        return dataclasses.replace(self, traceparent=traceparent)


class CeleryPublisher:
    """Pushes tool calls onto the Celery queues as task messages, bypassing `send_task`.

    The args Flower shows have secret-named values masked; in the call itself they are
    sealed for the workers, and the call is signed (with a fleet key; in clear and
    unsigned without one).
    """

    def __init__(
        self,
        client: aioredis.Redis,
        secret_arg_names: Sequence[str] = (),
        sealer: Sealer | None = None,
        outbox: str | None = None,
        on_outbox: Callable[[], None] | None = None,
        signer: CallSigner | None = None,
    ) -> None:
        """`outbox`: the list the messages go on instead of their queues (the tool queues
        are on RabbitMQ: a relay moves them there); `on_outbox` is told after each write.
        `signer` signs each call (workers with a fleet key run no other)."""
        self._redis = client
        self._outbox = outbox
        self._on_outbox = on_outbox
        self._secret_names = secret_name_set(secret_arg_names)
        self._sealer = sealer
        self._signer = signer
        self._messages = TaskMessageBuilder(f"orchestrator@{socket.gethostname()}")

    def sealed_state(self, state: dict[str, Any]) -> bytes:
        """`state` as JSON, its secret-named values sealed for the workers."""
        text = to_json(state)
        if self._sealer is None or not self._sealer.may_seal(text):
            return text
        return to_json(self._sealer.seal(state))

    def dispatch(
        self, call: ToolCall, queue: str, snapshot: StateSnapshot | None = None
    ) -> Dispatch:
        """`call` ready to publish on `queue`: its arguments masked, sealed and signed,
        once. With `snapshot` (its state, stored apart), the message names the snapshot
        instead of carrying the state."""
        shown_args = redact_deep(call.args, self._secret_names)
        if snapshot is not None:
            call = call.model_copy(update={"state": {}, "state_ref": snapshot.digest})
        envelope = call.__pydantic_serializer__.to_json(call)
        if self._sealer is not None and self._sealer.may_seal(envelope):
            body = call.model_dump(mode="json")
            body["args"] = self._sealer.seal(body["args"])
            body["state"] = self._sealer.seal(body["state"])
            envelope = to_json(body)
        kwargs = call_kwargs(envelope, self._signer)
        return Dispatch(call, queue, shown_args, kwargs, snapshot=snapshot)

    def encode(self, dispatch: Dispatch) -> str:
        """The kombu Redis-transport message (JSON) of task `tool.<name>` for the call."""
        call = dispatch.call
        traceparent = dispatch.traceparent
        return self._messages.redis_message(
            task_name(call.tool),
            dispatch.kwargs,
            queue=dispatch.queue,
            # What Flower shows as args: the tool's arguments, never the state snapshot.
            argsrepr=repr(dispatch.shown_args),
            kwargsrepr=f"{{'call_id': {call.call_id!r}, 'session_id': {call.session_id!r}}}",
            # W3C trace context, as Celery carries headers.
            headers=None if traceparent is None else {TRACEPARENT: traceparent},
        )

    async def publish(
        self,
        dispatches: Sequence[Dispatch],
        *,
        record_in: str,
        fence: Fence | None = None,
        also: WithFirstSend | None = None,
    ) -> None:
        """Push the messages and add their call ids to the set `record_in`, atomically:
        a replica that takes over the turn knows exactly what was sent. With `fence`,
        only while that lease is held: a replica that lost the session sends nothing.
        `also` adds writes of the caller's to the same step (the model turn)."""
        if not dispatches:
            return
        batch = WriteBatch()
        # The caller's first: they may forget the previous turn's record `record_in`
        # (the responses held back for this write, loop/held.py) that this adds to.
        written = also(batch) if also is not None else None
        # The state snapshots these calls name, in the same step (again in each write:
        # a call sent later, once others of its turn ended, finds it as fresh).
        snapshots = {d.snapshot.key: d.snapshot for d in dispatches if d.snapshot is not None}
        for snapshot in snapshots.values():
            batch.set(snapshot.key, snapshot.text, ex=snapshot.ttl_s)
        for dispatch in dispatches:
            batch.lpush(self._outbox or dispatch.queue, self.encode(dispatch))
        batch.sadd(record_in, *(d.call.call_id for d in dispatches))
        batch.expire(record_in, DISPATCHED_TTL_S)
        # Sent once, lease or not: a message pushed twice would run its call twice.
        replies = await write(self._redis, batch, fence, unfenced_once=f"{record_in}:applied")
        if self._on_outbox is not None:
            self._on_outbox()
        if written is not None:
            await written(replies)

    async def recorded(self, record_in: str) -> set[str]:
        """The call ids `publish` added to `record_in` (and not forgotten since)."""
        return {decoded(m) for m in await self._redis.smembers(record_in)}
