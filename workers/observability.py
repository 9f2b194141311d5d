"""What a worker process reports about itself: traces (flushed as its processes exit) and
Prometheus metrics served on TOOLFLEET_WORKER_METRICS_BIND (its prefork children's too)."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

from celery.signals import worker_init, worker_process_shutdown, worker_shutdown

from toolfleet.shared import tracing
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.metrics import use_multiprocess

log = logging.getLogger(__name__)

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


def install_metrics(settings: Settings) -> bool:
    """Serve `/metrics` on `settings.worker_metrics_bind` once the worker starts (not in
    other processes that load the app, such as Flower); whether it will. Every process of
    the worker records into one directory (PROMETHEUS_MULTIPROC_DIR, or a new temporary
    one), and the server adds them up."""
    bind = settings.worker_metrics_bind
    if not bind:
        return False
    host, _, port = bind.rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"TOOLFLEET_WORKER_METRICS_BIND={bind!r}: expected HOST:PORT")
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(
        prefix="toolfleet-metrics-"
    )
    use_multiprocess(directory)

    def serve(**_: Any) -> None:
        from prometheus_client import CollectorRegistry, multiprocess, start_http_server

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        start_http_server(int(port), addr=host or "0.0.0.0", registry=registry)
        log.info("worker metrics on http://%s:%s/metrics", host or "0.0.0.0", port)

    def process_gone(**_: Any) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), path=directory)  # type: ignore[no-untyped-call]

    worker_init.connect(serve, weak=False)
    worker_process_shutdown.connect(process_gone, weak=False)
    return True
