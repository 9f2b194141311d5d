"""The remote-control command with which the orchestrator stops calls it answered
already (their session was cancelled).

It runs in the worker's main process. A call on a prefork child is terminated with its
child (SIGKILL; the pool starts another, and the broker's redelivery of the call finds
it closed, so it never runs again). A coroutine call on an io worker is cancelled on the
process's call loop; a sync tool on an io worker's thread cannot be interrupted: it
finishes, and its result is dropped (the call has its answer).
"""

from __future__ import annotations

import logging
import signal
from typing import Any

from celery.worker import state as worker_state
from celery.worker.control import control_command

from toolfleet.shared.cancellation import STOP_COMMAND
from toolfleet.workers.call_loop import running_call_loop

log = logging.getLogger(__name__)


def stop_calls(state: Any, calls: list[dict[str, str]]) -> dict[str, str]:
    """Stop those of `calls` (each {call_id, session_id}) this worker is running."""
    wanted = {(c.get("session_id"), c.get("call_id")) for c in calls}
    pool = state.consumer.pool
    prefork = type(pool).__module__.endswith("prefork")
    stopped: list[str] = []
    for request in list(worker_state.active_requests):
        call = (request.kwargs or {}).get("call") or {}
        call_id = str(call.get("call_id", ""))
        if (call.get("session_id"), call_id) not in wanted:
            continue
        if prefork:
            request.terminate(pool, signal=signal.SIGKILL)
            stopped.append(call_id)
            continue
        loop = running_call_loop()
        if loop is not None and loop.stop(call_id):
            stopped.append(call_id)
        else:
            log.warning(
                "call %s (%s) runs a sync tool on a thread: it cannot be interrupted; its "
                "result will be dropped",
                call_id,
                request.name,
            )
    if stopped:
        log.info("stopped cancelled call(s) %s", ", ".join(stopped))
    return {"ok": f"stopped {len(stopped)} call(s)"}


def install_stop_command() -> None:
    """Register STOP_COMMAND with Celery's remote control (once per process)."""
    control_command(name=STOP_COMMAND, args=[("calls", list)], signature="<calls>")(stop_calls)
