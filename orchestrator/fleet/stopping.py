"""Having the workers stop calls the orchestrator answered already (a cancellation).

One Celery remote-control broadcast (the workers' pidbox, on the broker): each worker
running one of the calls terminates its prefork child, or cancels its coroutine on an
io worker. The calls are closed before this is sent, so a worker that has not started
one never will (it checks the closed marker before running a call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from celery import Celery

from toolfleet.shared.cancellation import STOP_COMMAND
from toolfleet.shared.celery_config import celery_config
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import SessionKey, session_parts

log = logging.getLogger(__name__)

# Calls named in one broadcast at most: a wide turn's cancellation is a few messages of
# bounded size, not one that names ten thousand calls.
STOP_BATCH = 1000


class CallStopper:
    """Broadcasts STOP_COMMAND to the fleet's workers."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._app: Celery | None = None  # made on first use: most runs never cancel

    def _celery(self) -> Celery:
        if self._app is None:
            app = Celery("toolfleet-orchestrator-control", set_as_current=False)
            app.conf.update(celery_config(self._settings, []))
            self._app = app
        return self._app

    async def stop(self, session: SessionKey, call_ids: Sequence[str]) -> None:
        """Ask every worker to stop these calls (no reply awaited: they are answered)."""
        app_name, user_id, session_id = session_parts(session)
        of_session = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
        targets = [{"call_id": call_id, **of_session} for call_id in call_ids]
        for start in range(0, len(targets), STOP_BATCH):
            part = targets[start : start + STOP_BATCH]
            try:
                await asyncio.to_thread(
                    self._celery().control.broadcast,
                    STOP_COMMAND,
                    arguments={"calls": part},
                    reply=False,
                )
            except Exception:  # the calls are answered; a worker finishes its own in vain
                log.exception("could not tell the workers to stop %d cancelled call(s)", len(part))

    def close(self) -> None:
        """Release the broker connections, if any were made."""
        if self._app is not None:
            self._app.close()
