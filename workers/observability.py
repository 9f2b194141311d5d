"""What a worker process reports about itself: traces (flushed as its processes exit)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_shutdown, worker_shutdown

from toolfleet.shared import tracing

# How long an exiting worker process waits for its last spans to be exported.
FLUSH_TIMEOUT_S = 5.0


def install_tracing() -> bool:
    """Trace this worker's calls as the OTEL_* variables say (unless tracing is on already,
    as a test installs it); whether it is on. Spans still queued when a process exits
    (a prefork child included) are flushed first, for at most FLUSH_TIMEOUT_S."""
    if not tracing.enabled() and not tracing.configure_from_env("toolfleet-worker"):
        return False
    worker_process_shutdown.connect(_flush, weak=False)
    worker_shutdown.connect(_flush, weak=False)
    return True


def _flush(**_: Any) -> None:
    tracing.flush(FLUSH_TIMEOUT_S)
