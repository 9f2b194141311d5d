"""A call of a tool this worker did not register is answered with an error result, not
left to time out in the orchestrator.

The orchestrator sends a call only to a pool one of whose live workers registered its
tool (their heartbeats say which), but a worker can take a message of a tool it lacks:
it restarted with fewer TOOLFLEET_TOOL_MODULES since the orchestrator read them, or the
message was sent before. The worker's Celery consumer sends Celery's `task_unknown`
signal for such a message, and an io worker's intake the same signal, with the call and
the message, before either drops it. With a HandOff, a call that another live worker of
the pool has the tool for is handed on to it instead (workers/handoff.py: a rolling
restart adding a tool module).

The intake and the worker's Celery consumer (shared/celery_wire/consumer.py) pass the
signal `end`, what acknowledges the message: a receiver that returns True has taken it
on, and calls `end` once the message's copy is published (or its call answered);
otherwise the sender ends the message at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from celery import Celery
from celery.signals import task_unknown, worker_shutdown
from pydantic import ValidationError
from redis.exceptions import RedisError

from toolfleet.shared.call_signing import (
    CALL_FIELD,
    SIGNATURE_FIELD,
    CallSigner,
    RefusedCall,
    read_call,
)
from toolfleet.shared.celery_wire.parse import TaskMessage, received_kwargs
from toolfleet.shared.keys import QUEUE_PREFIX, TASK_PREFIX, Keys
from toolfleet.shared.messages import ToolCall, error_result
from toolfleet.shared.reporting import ResultReporter
from toolfleet.workers.handoff import (
    HandOff,
    Outcome,
    Resend,
    resend_of_received,
    resend_of_taken,
)

log = logging.getLogger(__name__)


def install_unregistered_answer(
    app: Celery,
    reporter: ResultReporter,
    keys: Keys,
    signer: CallSigner | None = None,
    hand_off: HandOff | None = None,
) -> None:
    """Answer each call of an unregistered tool that `app`'s worker receives, if `signer`
    finds it signed, or hand it on with `hand_off` (whose held messages are given back
    to the broker when the worker stops). Celery's signals are global: receivers ignore
    workers of other apps in this process."""

    @task_unknown.connect(weak=False)
    def _on_unknown(
        sender: Any = None,
        message: Any = None,
        name: str = "",
        call: Any = None,
        sig: Any = None,
        queue: str = "",
        task_message: TaskMessage | None = None,
        end: Callable[[], None] | None = None,
        **_: Any,
    ) -> bool:
        if getattr(sender, "app", None) is not app:
            return False
        resend: Resend | None = None
        if message is not None:  # Celery's consumer: the message it received
            kwargs, queue = received_kwargs(message)
            sent = kwargs if isinstance(kwargs, Mapping) else {}
            call, sig = sent.get(CALL_FIELD), sent.get(SIGNATURE_FIELD)
            resend = resend_of_received(message, queue)
        elif task_message is not None:  # an io worker's intake: the message it took
            resend = resend_of_taken(task_message, queue)
        hostname = str(getattr(sender, "hostname", "") or "unknown")
        handing = None if hand_off is None or resend is None else (hand_off, resend)
        return answer_unregistered(
            reporter, keys, signer, name, (call, sig), queue, hostname, handing, end
        )

    @worker_shutdown.connect(weak=False)
    def _on_shutdown(sender: Any = None, **_: Any) -> None:
        if hand_off is not None and getattr(sender, "app", None) is app:
            hand_off.give_back()


def answer_unregistered(
    reporter: ResultReporter,
    keys: Keys,
    signer: CallSigner | None,
    task: str,
    sent: tuple[Any, Any],
    queue: str,
    worker: str,
    handing: tuple[HandOff, Resend] | None = None,
    end: Callable[[], None] | None = None,
) -> bool:
    """Post an error result naming the tool, the pool and what to change, and close the
    call: another copy of its message does not run it after the model was told it did
    not. `sent`: the message's kwargs `call` and `sig`. A message with no valid call has
    nowhere to be answered, and one `signer` refuses is no call of the fleet's: logged
    only, never handed on. `handing`: the HandOff and the message to publish again, when
    another live worker of the pool may have the tool. True when the HandOff holds the
    message: it calls `end` (what ends the original message) once the copy is published,
    or the call answered; False when the caller ends it now."""
    call, signature = sent
    if not task.startswith(TASK_PREFIX) or call is None:
        return False
    try:
        envelope = read_call(task, call, signature, signer)
    except RefusedCall as exc:
        log.error("refused a message of unregistered task %s, not answered: %s", task, exc)
        return False
    except ValidationError as exc:
        log.error("a message of unregistered task %s holds no valid call: %s", task, exc)
        return False
    answer = partial(_answer, reporter, keys, envelope, queue, worker)
    if handing is not None:
        hand_off, resend = handing
        outcome = hand_off.take(envelope, resend, worker, answer, end)
        if outcome is not Outcome.ANSWER:
            return outcome is Outcome.HAND_ON
    answer()
    return False


def _answer(
    reporter: ResultReporter, keys: Keys, envelope: ToolCall, queue: str, worker: str
) -> None:
    """Post the error result and close the call; a Redis error is logged."""
    tool, pool = envelope.tool, queue.removeprefix(QUEUE_PREFIX) or "?"
    message = (
        f"tool {tool!r} is not registered on worker {worker} of pool {pool}: add its module "
        f"to TOOLFLEET_TOOL_MODULES on the workers of pool {pool}"
    )
    result = error_result(envelope, "ToolNotRegisteredError", message, worker=worker)
    try:
        reporter.post(
            envelope.reply_to, result, closes=keys.closed(envelope.session_key, envelope.call_id)
        )
    except RedisError as exc:
        log.error(
            "could not answer call %s of unregistered tool %s: %s", envelope.call_id, tool, exc
        )
        return
    log.error("answered call %s with an error: %s", envelope.call_id, message)
