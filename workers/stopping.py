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
from typing import Any

from celery.worker.control import control_command

from toolfleet.shared.cancellation import STOP_COMMAND
from toolfleet.shared.celery_wire.worker import active_calls, pool_name
from toolfleet.workers.call_loop import running_call_loop

log = logging.getLogger(__name__)

_Wanted = tuple[Any, ...]  # (app name, user id, session id, call id)


def stop_calls(state: Any, calls: list[dict[str, str]]) -> dict[str, str]:
    """Stop those of `calls` (each {call_id, app_name, user_id, session_id}) this worker is
    running: a call of that session only (a session id alone is not unique)."""
    wanted = {_call_of(c) for c in calls}
    pool = state.consumer.pool
    if pool_name(pool) == "prefork":
        stopped = _terminate_children(pool, wanted)
    else:
        stopped = _cancel_coroutines(wanted)
    if stopped:
        log.info("stopped cancelled call(s) %s", ", ".join(stopped))
    return {"ok": f"stopped {len(stopped)} call(s)"}


def _call_of(call: dict[str, Any]) -> _Wanted:
    """(app, user, session, call id) of a call's envelope (or a stop request's target)."""
    return tuple(call.get(k) for k in ("app_name", "user_id", "session_id", "call_id"))


def _terminate_children(pool: Any, wanted: set[_Wanted]) -> list[str]:
    """Kill the prefork children running `wanted` calls."""
    stopped: list[str] = []
    for active in active_calls():
        if _call_of(active.call) in wanted:
            active.terminate(pool)
            stopped.append(str(active.call.get("call_id")))
    return stopped


def _cancel_coroutines(wanted: set[_Wanted]) -> list[str]:
    """Cancel the `wanted` calls running as coroutines on this process's call loop (an io
    worker's calls run there, whether its intake or Celery's consumer took them)."""
    loop = running_call_loop()
    stopped = [
        str(call_id)
        for *_, call_id in wanted
        if call_id and loop is not None and loop.stop(str(call_id))
    ]
    for active in active_calls():  # taken by Celery's consumer
        call_id = str(active.call.get("call_id", ""))
        if _call_of(active.call) in wanted and call_id not in stopped:
            log.warning(
                "call %s (%s) runs a sync tool on a thread: it cannot be interrupted; its "
                "result will be dropped",
                call_id,
                active.task,
            )
    return stopped


def install_stop_command() -> None:
    """Register STOP_COMMAND with Celery's remote control (once per process)."""
    control_command(name=STOP_COMMAND, args=[("calls", list)], signature="<calls>")(stop_calls)
