"""Workers advertise the pools they serve, so the orchestrator can fail fast."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery, bootsteps
from celery.signals import worker_ready, worker_shutdown

from toolfleet.shared.celery_wire.worker import active_calls, pool_name
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import QUEUE_PREFIX, TASK_PREFIX, Keys
from toolfleet.shared.liveness import heartbeat_ttl_s
from toolfleet.shared.pool_kinds import CELERY_POOL
from toolfleet.workers.call_loop import running_call_loop
from toolfleet.workers.names import NameClaim

log = logging.getLogger(__name__)

# How long a stop waits for a beat in flight (Redis may be slow to answer it).
STOP_JOIN_S = 5.0

# The consumer attribute naming the queues an io worker's intake took from Celery's consumer.
INTAKE_QUEUES = "toolfleet_intake_queues"


class Heartbeat:
    """Holds this worker's node name (a NameClaim) from its start, and from when it is
    ready keeps its record (hostname, pools, tools, pid, start time) in Redis, from a thread.

    The orchestrator reads the records to know which pools have live workers; a record and
    its claim expire HEARTBEAT_TTL_BEATS periods after the last beat."""

    def __init__(self, client: redis.Redis, keys: Keys, period_s: float) -> None:
        self._client = client
        self._keys = keys
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._claim: NameClaim | None = None
        self._record: dict[str, Any] = {}
        self._busy: Callable[[], int] | None = None
        self._lost = False

    def claim(self, hostname: str) -> None:
        """Take the node name `hostname` and keep it from a daemon thread, beating every
        `period_s`. Raises WorkerNameTakenError if a live worker holds it, or a Redis error."""
        ttl_ms = int(heartbeat_ttl_s(self._period_s) * 1000)
        claim = NameClaim(self._client, self._keys, hostname, ttl_ms)
        claim.take()  # HEARTBEAT_TTL_BEATS missed beats: the name, like the worker, is gone
        self._claim = claim
        self._thread = threading.Thread(target=self._run, name="toolfleet-heartbeat", daemon=True)
        self._thread.start()

    def start(
        self,
        hostname: str,
        pools: list[str],
        runs: str = "",
        concurrency: int = 0,
        tools: list[str] | None = None,
        modules: list[str] | None = None,
        busy: Callable[[], int] | None = None,
        tool_pools: dict[str, str] | None = None,
    ) -> None:
        """Write the record now (raising if Redis fails), then with every beat. `runs` names
        the Celery pool implementation (threads, prefork), `concurrency` how many calls it
        runs at once, `tools` the tools it registered (None: not said, taken as any) from
        the tool `modules` (its TOOLFLEET_TOOL_MODULES) and the pool of each (`tool_pools`),
        `busy` counts the calls it runs at each beat. Claims `hostname` first if `claim` has not."""
        if self._claim is None:
            self.claim(hostname)
        self._record = {
            "hostname": hostname,
            "pools": pools,
            "pid": os.getpid(),
            "started_at": time.time(),
            "runs": runs,
            "concurrency": concurrency,
            **({} if tools is None else {"tools": sorted(tools)}),
            **({} if modules is None else {"modules": list(modules)}),
            **({} if tool_pools is None else {"tool_pools": tool_pools}),
        }
        self._busy = busy
        self._beat()

    def _beat(self) -> None:
        assert self._claim is not None
        record = self._record
        if not record:
            # Claimed while the worker is still being built: keep the name, but publish no
            # record before `start` says what the worker serves (an empty one would count
            # as a live worker of no pool).
            self._lost = not self._claim.renew()
            return
        if self._busy is not None:
            try:
                record = {**record, "busy": self._busy()}
            except Exception:  # a count gone wrong must not stop the worker counting as live
                log.exception("counting the calls this worker runs failed")
        held = self._claim.renew(json.dumps(record))
        if not held and not self._lost:
            # Another worker took the name while this one missed its beats: its record is
            # theirs now, so this worker stays unseen rather than overwrite it.
            log.error(
                "worker name %s was taken by another worker (%s) while this one missed its "
                "heartbeats: this worker no longer counts as live; stop it, or restart it "
                "with another --name",
                self._claim.hostname,
                self._claim.holder_now(),
            )
        self._lost = not held

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                self._beat()
            except redis.RedisError as exc:
                log.warning("heartbeat to Redis failed: %s", exc)

    def stop(self) -> None:
        """Stop beating, free the name and delete the record now, so the worker stops
        counting as live before it would expire; a Redis error is logged, not raised."""
        self._stop.set()
        if self._thread is not None:
            # A beat in flight would write the claim and record again after the release.
            self._thread.join(STOP_JOIN_S)
        if self._claim is not None:
            try:
                self._claim.release()
            except redis.RedisError as exc:
                log.warning("could not remove heartbeat key: %s", exc)


def celery_pool_name(consumer: Any) -> str:
    """The name of a worker's Celery pool implementation, as `-P` takes it."""
    return pool_name(getattr(consumer, "pool", None))


def calls_running() -> int:
    """How many calls this worker runs now: those Celery's consumer handed to its pool,
    and the coroutine calls its intake started on the call loop (a call may be both)."""
    ids = {str(active.call.get("call_id", id(active))) for active in active_calls()}
    loop = running_call_loop()
    return len(ids | loop.running_ids()) if loop is not None else len(ids)


def warn_of_pool_mismatch(pools: list[str], runs: str, settings: Settings) -> None:
    """Log what to change when the Celery pool does not fit the pools' kind: an io pool on
    prefork runs one call per process (`celery worker` without `-P threads`), a cpu pool on
    threads lets CPU-bound calls share one interpreter."""
    kinds = {settings.pool_kind(p) for p in pools}
    if "io" in kinds and runs != CELERY_POOL["io"]:
        log.warning(
            "io pools %s run on the %s pool, one call per process: start them with "
            "`toolfleet worker --pool io` or `celery ... worker -P threads -c %d`",
            ", ".join(p for p in pools if settings.pool_kind(p) == "io"),
            runs,
            settings.io_concurrency,
        )
    if "cpu" in kinds and runs == CELERY_POOL["io"]:
        log.warning(
            "cpu pools %s run on the threads pool: CPU-bound calls share one interpreter; "
            "start them with `-P prefork` (the default) or list them in TOOLFLEET_IO_POOLS",
            ", ".join(p for p in pools if settings.pool_kind(p) == "cpu"),
        )


def install_heartbeat(app: Celery, client: redis.Redis, settings: Settings) -> None:
    """Hold `app`'s worker's node name from when it is built, and beat for it from when it
    is ready until it shuts down; its pools are the `tools.*` queues it consumes.

    Celery's signals are global: receivers ignore workers of other apps in this process."""
    heartbeat = Heartbeat(client, Keys(settings.key_prefix), settings.worker_heartbeat_s)

    class ClaimName(bootsteps.Step):
        """Takes the worker's node name as the worker is built, before its pool starts or it
        takes a message: a worker whose name a live one holds stops there, with the error."""

        name = "toolfleet.ClaimName"

        # `parent` is Celery's WorkController, whose stubs do not declare its hostname.
        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            heartbeat.claim(parent.hostname)

    app.steps["worker"].add(ClaimName)

    @worker_ready.connect(weak=False)
    def _on_ready(sender: Any = None, **_: Any) -> None:
        if sender is None or sender.app is not app:
            return
        # With an intake, Celery's own consumer no longer lists the queues it took.
        taken = getattr(sender, INTAKE_QUEUES, [])
        queues = [q.name for q in sender.task_consumer.queues] + list(taken)
        pools = sorted(q.removeprefix(QUEUE_PREFIX) for q in queues if q.startswith(QUEUE_PREFIX))
        runs = celery_pool_name(sender)
        concurrency = int(getattr(sender.controller, "concurrency", 0) or 0)
        # The orchestrator answers a call of a tool no worker of its pool has at once.
        tools = [t.removeprefix(TASK_PREFIX) for t in app.tasks if t.startswith(TASK_PREFIX)]
        routes = {t: getattr(app.tasks[t], "queue", None) for t in app.tasks}
        tool_pools = {
            t.removeprefix(TASK_PREFIX): q.removeprefix(QUEUE_PREFIX)
            for t, q in routes.items()
            if t.startswith(TASK_PREFIX) and isinstance(q, str)
        }
        heartbeat.start(
            sender.hostname, pools, runs, concurrency, tools, settings.tool_modules,
            calls_running, tool_pools,
        )  # fmt: skip
        log.info("worker %s serves pools %s (%s)", sender.hostname, ", ".join(pools), runs)
        warn_of_pool_mismatch(pools, runs, settings)

    @worker_shutdown.connect(weak=False)
    def _on_shutdown(sender: Any = None, **_: Any) -> None:
        heartbeat.stop()
