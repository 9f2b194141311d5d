"""Prometheus metrics of toolfleet: what the orchestrator and the workers record.

Labels are bounded: tool, pool, model, status and outcome names, never a session, call or
user id. prometheus-client is imported on first use, not at import: a worker must choose
multiprocess mode (PROMETHEUS_MULTIPROC_DIR) before any metric exists.
"""

from __future__ import annotations

import logging
import math
import os
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

log = logging.getLogger(__name__)

# Seconds: a no-op call takes milliseconds, a slow tool minutes.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
# Pending tickets are counted by age, in these bands (label value: the band's name).
AGE_BANDS = ((60.0, "<1m"), (3600.0, "1m-1h"), (86400.0, "1h-1d"), (float("inf"), ">1d"))


class Metrics:
    """Every metric of toolfleet, in one registry (the process's own, not the global one)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        r = self.registry
        tool_labels = ["tool", "pool", "status"]
        # The worker's side: how long the tool ran, in its process.
        self.tool_run_seconds: Histogram = Histogram(
            "toolfleet_tool_run_seconds", "Time a tool ran on a worker, by outcome.",
            tool_labels, buckets=CALL_BUCKETS, registry=r,
        )  # fmt: skip
        # The orchestrator's side: from dispatch to result (queueing and transport included).
        self.tool_call_seconds: Histogram = Histogram(
            "toolfleet_tool_call_seconds", "Time from a call's dispatch to its result.",
            tool_labels, buckets=CALL_BUCKETS, registry=r,
        )  # fmt: skip
        self.limit_wait_seconds: Histogram = Histogram(
            "toolfleet_tool_limit_wait_seconds", "Time a call waited on a worker for its "
            "tool's fleet-wide limit (max_concurrency, rate_limit), by tool.",
            ["tool"], buckets=CALL_BUCKETS, registry=r,
        )  # fmt: skip
        self.calls_in_flight: Gauge = Gauge(
            "toolfleet_tool_calls_in_flight", "Calls dispatched and not answered yet, by pool.",
            ["pool"], registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.completions: Counter = Counter(
            "toolfleet_completions", "Completions of long-running calls, by outcome "
            "(applied, refused, ...).", ["outcome"], registry=r,
        )  # fmt: skip
        self.model_seconds: Histogram = Histogram(
            "toolfleet_model_call_seconds", "Time of a model call, by model and outcome.",
            ["model", "status"], buckets=MODEL_BUCKETS, registry=r,
        )  # fmt: skip
        self.model_tokens: Counter = Counter(
            "toolfleet_model_tokens", "Tokens the model reported, by model and type.",
            ["model", "type"], registry=r,
        )  # fmt: skip
        # The fleet's state, read from Redis when /metrics is scraped (the orchestrator).
        self.queue_depth: Gauge = Gauge(
            "toolfleet_queue_depth", "Calls waiting in a pool's queue.", ["pool"], registry=r,
            multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.queue_oldest_age: Gauge = Gauge(
            "toolfleet_queue_oldest_age_seconds", "Age of the oldest call waiting in a pool's "
            "queue (0 when none waits).", ["pool"], registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.slots: Gauge = Gauge(
            "toolfleet_worker_slots", "Calls the live workers of a pool can run at once.",
            ["pool"], registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.slots_busy: Gauge = Gauge(
            "toolfleet_worker_slots_busy", "Calls the live workers of a pool ran at their last "
            "heartbeat.", ["pool"], registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.live_workers: Gauge = Gauge(
            "toolfleet_live_workers", "Workers with a current heartbeat, by pool.", ["pool"],
            registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.pending_tickets: Gauge = Gauge(
            "toolfleet_pending_tickets", "Long-running calls waiting for their result, by age.",
            ["age"], registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self.dead_letters: Gauge = Gauge(
            "toolfleet_dead_letters", "Entries in the dead-letter stream (refused completions).",
            registry=r, multiprocess_mode="mostrecent",
        )  # fmt: skip
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def labelled(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: prometheus-client validates the values
        and takes a lock on every call (five per one-call turn on the orchestrator).
        Label values are bounded (tool, pool, model and status names), and so is this."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child


_metrics: Metrics | None = None


def metrics() -> Metrics:
    """This process's metrics, made on first use."""
    global _metrics
    if _metrics is None:
        _metrics = Metrics()
    return _metrics


class _Guard:
    """`guarded`'s context manager: one for every use (a generator-based one per use was
    a few microseconds, and a turn records half a dozen metrics)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if isinstance(exc, Exception):
            log.warning("recording a metric failed", exc_info=exc)
            return True
        return False


_GUARD = _Guard()


def guarded() -> _Guard:
    """Record metrics inside: a failure (say, multiprocess files on a full disk) is logged,
    never raised into the call being measured."""
    return _GUARD


def age_band(age_s: float) -> str:
    """The AGE_BANDS name of a pending ticket `age_s` seconds old."""
    return next(name for limit, name in AGE_BANDS if age_s < limit)


def created_spans(now: float) -> list[tuple[float, float]]:
    """Per AGE_BANDS band, when its tickets were created, as `(after, until)` epoch
    seconds (`after` excluded): the spans `age_band` gives each band at `now`. The
    youngest band takes tickets stamped after `now` too (another host's clock ahead)."""
    spans: list[tuple[float, float]] = []
    younger = 0.0
    for limit, _ in AGE_BANDS:
        spans.append((now - limit, now - younger if spans else math.inf))
        younger = limit
    return spans


def use_multiprocess(directory: str) -> None:
    """Record into `directory` from every process forked after this (prometheus-client's
    multiprocess mode: a prefork worker's children), for one server to add them up.

    Call before any metric is recorded in this process."""
    if _metrics is not None:
        raise RuntimeError("metrics were recorded before multiprocess mode was chosen")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import values

    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]  # chosen at import
