"""Calls whose task message RabbitMQ refused: answered with an error result by the outbox
relay, so that the caller gets its one final response now, not a TimeoutError at its
deadline, and the messages behind it are published.

A refusal is RabbitMQ's answer to that message (a nack, a message over its
max_message_size, a queue declared with other arguments): published again, it would be
refused again. The call is closed with its answer: a copy of its message that did reach
a worker (one published before the refusal) does not run it after the model was told
it failed.
"""

from __future__ import annotations

import logging

import redis
from pydantic import ValidationError

from toolfleet.shared.call_signing import (
    CALL_FIELD,
    SIGNATURE_FIELD,
    CallSigner,
    RefusedCall,
    read_call,
)
from toolfleet.shared.celery_wire.parse import MalformedMessage, decode
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import QUEUE_PREFIX, Keys
from toolfleet.shared.messages import ToolCall, error_result
from toolfleet.shared.replication import Replication
from toolfleet.shared.reporting import Feed, ResultReporter
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import ResultSigner

log = logging.getLogger(__name__)

# The error type a refused call is answered with.
REFUSED = "BrokerRefusedError"


class RefusalAnswers:
    """Answers the calls of refused messages on their results streams, through
    `reporter` (signed as a worker's results are), closing each. `signer`: the fleet's
    call signer; with one, only a call it signed is answered."""

    def __init__(self, reporter: ResultReporter, keys: Keys, signer: CallSigner | None) -> None:
        self._reporter = reporter
        self._keys = keys
        self._signer = signer

    @classmethod
    def of(cls, client: redis.Redis, settings: Settings) -> RefusalAnswers:
        """The answers of `settings`' fleet, posted through `client` as a worker posts a
        result: signed and sealed with the fleet key, on the results feed."""
        keys = Keys(settings.key_prefix)
        reporter = ResultReporter(
            client,
            settings.results_maxlen,
            ResultSigner.of(settings.fleet_key),
            Sealer.of(settings),
            feed=Feed.of(keys),
            replication=Replication.of(settings),
        )
        return cls(reporter, keys, CallSigner.of(settings.fleet_key))

    def answer(self, raw: bytes | str, reason: str) -> None:
        """Post the error result of the call in the refused message `raw`, saying
        `reason`, and close the call. A message with no call of the fleet's in it is
        logged only. Raises on a Redis error (the relay tries the message again)."""
        envelope, pool = self._call_of(raw, reason)
        if envelope is None:
            return
        message = (
            f"the call of tool {envelope.tool!r} could not be sent to pool {pool}: "
            f"RabbitMQ refused its task message ({reason})"
        )
        result = error_result(envelope, REFUSED, message, worker="orchestrator")
        closes = self._keys.closed(envelope.session_key, envelope.call_id)
        self._reporter.post(envelope.reply_to, result, closes=closes)
        log.error("outbox relay: answered call %s with an error: %s", envelope.call_id, message)

    def _call_of(self, raw: bytes | str, reason: str) -> tuple[ToolCall | None, str]:
        """The call of `raw` and the pool it was sent to; None where there is none."""
        try:
            message = decode(raw)
            kwargs = message.kwargs
            call = kwargs.get(CALL_FIELD)
            envelope = read_call(message.task, call, kwargs.get(SIGNATURE_FIELD), self._signer)
        except (MalformedMessage, RefusedCall, ValidationError) as exc:
            log.error(
                "outbox relay: dropped a message RabbitMQ refused (%s), with no call to "
                "answer: %s (starts %r)",
                reason, exc, raw[:200],
            )  # fmt: skip
            return None, ""
        queue = str(message.delivery_info.get("routing_key") or "")
        return envelope, queue.removeprefix(QUEUE_PREFIX) or "?"
