"""The outbox relay's publisher, one message at a time: a message RabbitMQ refuses (a
nack, an error of its channel) is told apart from a broker that is away."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from amqp.exceptions import PreconditionFailed, RecoverableConnectionError

from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher, Refused


def publisher_failing(
    monkeypatch: pytest.MonkeyPatch, errors: dict[bytes, Exception]
) -> AmqpPublisher:
    """A publisher whose publish of each raw in `errors` raises that error (as its channel
    would); any other raw is confirmed."""
    publisher = AmqpPublisher("amqp://guest:guest@127.0.0.1:1//")  # never connects

    def publish(raws: Sequence[bytes | str]) -> None:
        (raw,) = raws
        if isinstance(raw, bytes) and raw in errors:
            raise errors[raw]

    monkeypatch.setattr(publisher, "_publish", publish)
    return publisher


def test_each_refused_message_says_why_and_the_others_are_confirmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    too_large = PreconditionFailed("message size 200000 is larger than configured max size")
    errors: dict[bytes, Exception] = {
        b"nacked": Refused("RabbitMQ refused messages [1]"),
        b"too large": too_large,
        b"not json": ValueError("Expecting value"),
    }
    publisher = publisher_failing(monkeypatch, errors)
    refusals = publisher.publish_each([b"ok", b"nacked", b"too large", b"ok", b"not json"])
    assert refusals[0] is None and refusals[3] is None
    assert refusals[1] == "Refused: RabbitMQ refused messages [1]"
    assert refusals[2] is not None and "larger than configured max size" in refusals[2]
    assert refusals[4] == "ValueError: Expecting value"


@pytest.mark.parametrize(
    "error",
    [
        RecoverableConnectionError("connection already closed"),
        ConnectionRefusedError(111),
        TimeoutError(),
    ],
)
def test_a_broker_that_is_away_is_raised_not_taken_for_a_refusal(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    publisher = publisher_failing(monkeypatch, {b"second": error})
    with pytest.raises(type(error)):
        publisher.publish_each([b"first", b"second", b"third"])
