"""The raw Celery reference: plain tasks on toolfleet's broker settings, with a result
backend so that `apply_async().get()` works.

Same broker, serializer, acks_late, prefetch and visibility settings as toolfleet's
workers (toolfleet.shared.celery_config); only the result travels through Celery's Redis
backend instead of toolfleet's results stream. Workers:

    TOOLFLEET_REDIS_URL=redis://... celery -A bench.raw_celery worker -Q bench.raw
"""

from __future__ import annotations

from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from bench import workload
from toolfleet.shared.celery_config import celery_config
from toolfleet.shared.config import Settings

QUEUE = "bench.raw"
READY_KEY = "bench:raw-worker:{hostname}"  # set while a worker is ready (like a heartbeat)


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or Settings()
    app = Celery("bench-raw", set_as_current=False)
    config = celery_config(settings, [])
    config.update(
        result_backend=settings.require_redis_url(),
        task_ignore_result=False,
        task_default_queue=QUEUE,
        result_expires=3600,
    )
    app.conf.update(config)

    @app.task(name="bench.noop", shared=False)
    def noop() -> dict[str, bool]:
        return workload.noop()

    @app.task(name="bench.sleep_ms", shared=False)
    def sleep_ms(ms: int) -> dict[str, int]:
        return workload.sleep_ms(ms)

    _announce_readiness(app, settings.require_redis_url())
    return app


def _announce_readiness(app: Celery, url: str) -> None:
    @worker_ready.connect(weak=False)
    def _ready(sender: Any = None, **_: Any) -> None:
        if sender is not None and sender.app is app:
            with redis.Redis.from_url(url) as client:
                client.set(READY_KEY.format(hostname=sender.hostname), "1", ex=3600)

    @worker_shutdown.connect(weak=False)
    def _gone(sender: Any = None, **_: Any) -> None:
        if sender is not None and getattr(sender, "app", None) is app:
            with redis.Redis.from_url(url) as client:
                client.delete(READY_KEY.format(hostname=sender.hostname))


_app: Celery | None = None


def __getattr__(name: str) -> Any:
    # `celery -A bench.raw_celery` looks up `app`; build it on first use, not at import.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(name)
