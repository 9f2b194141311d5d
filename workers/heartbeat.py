"""Workers advertise the pools they serve, so the orchestrator can fail fast."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from toolfleet.shared.config import Settings
from toolfleet.shared.keys import QUEUE_PREFIX, Keys
from toolfleet.shared.pool_kinds import CELERY_POOL

log = logging.getLogger(__name__)

# The consumer attribute naming the queues an io worker's intake took from Celery's consumer.
INTAKE_QUEUES = "toolfleet_intake_queues"


class Heartbeat:
    """Keeps this worker's key (hostname, pools, pid, start time) in Redis, from a thread.

    The orchestrator reads these keys to know which pools have live workers; a key expires
    three periods after its last beat."""

    def __init__(self, client: redis.Redis, keys: Keys, period_s: float) -> None:
        self._client = client
        self._keys = keys
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hostname = ""
        self._value = ""

    def start(self, hostname: str, pools: list[str], runs: str = "", concurrency: int = 0) -> None:
        """Beat once now (raising if Redis fails), then every `period_s` from a daemon thread,
        which logs failed beats and goes on. `runs` names the Celery pool implementation
        (threads, prefork), `concurrency` how many calls it runs at once."""
        self._hostname = hostname
        self._value = json.dumps(
            {
                "hostname": hostname,
                "pools": pools,
                "pid": os.getpid(),
                "started_at": time.time(),
                "runs": runs,
                "concurrency": concurrency,
            }
        )
        self._beat()
        self._thread = threading.Thread(target=self._run, name="toolfleet-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        # Three missed beats and the worker counts as gone.
        ttl_ms = int(self._period_s * 3000)
        pipe = self._client.pipeline(transaction=False)
        pipe.set(self._keys.worker(self._hostname), self._value, px=ttl_ms)
        pipe.zadd(self._keys.workers(), {self._hostname: time.time() + ttl_ms / 1000})
        pipe.execute()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                self._beat()
            except redis.RedisError as exc:
                log.warning("heartbeat to Redis failed: %s", exc)

    def stop(self) -> None:
        """Stop beating and delete the key now, so the worker stops counting as live before the
        key would expire; a Redis error is logged, not raised."""
        self._stop.set()
        if self._hostname:
            try:
                pipe = self._client.pipeline(transaction=False)
                pipe.delete(self._keys.worker(self._hostname))
                pipe.zrem(self._keys.workers(), self._hostname)
                pipe.execute()
            except redis.RedisError as exc:
                log.warning("could not remove heartbeat key: %s", exc)


def celery_pool_name(consumer: Any) -> str:
    """The name of a worker's Celery pool implementation, as `-P` takes it."""
    module = type(getattr(consumer, "pool", None)).__module__
    return {"celery.concurrency.thread": "threads", "celery.concurrency.prefork": "prefork"}.get(
        module, module.rpartition(".")[2]
    )


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
    """Beat for `app`'s worker from when it is ready until it shuts down; its pools are the
    `tools.*` queues it consumes.

    Celery's signals are global: receivers ignore workers of other apps in this process."""
    heartbeat = Heartbeat(client, Keys(settings.key_prefix), settings.worker_heartbeat_s)

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
        heartbeat.start(sender.hostname, pools, runs, concurrency)
        log.info("worker %s serves pools %s (%s)", sender.hostname, ", ".join(pools), runs)
        warn_of_pool_mismatch(pools, runs, settings)

    @worker_shutdown.connect(weak=False)
    def _on_shutdown(sender: Any = None, **_: Any) -> None:
        heartbeat.stop()
