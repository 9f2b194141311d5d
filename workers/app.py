"""The Celery app of the tool workers: `celery -A workers.app worker -Q tools.default`."""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Celery

from shared.celery_config import celery_config
from shared.config import Settings
from shared.discovery import load_tools
from shared.reporting import ResultReporter
from workers.heartbeat import install_heartbeat
from workers.tasks import register_tool_tasks

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or Settings()
    registry = load_tools(settings.tool_modules)
    app = Celery("toolfleet", set_as_current=False)
    app.conf.update(celery_config(settings, list(registry.values())))
    client = redis.Redis.from_url(settings.require_redis_url())
    register_tool_tasks(app, registry, settings, ResultReporter(client, settings.results_maxlen))
    install_heartbeat(app, client, settings)
    log.info("toolfleet worker app with %d tools: %s", len(registry), ", ".join(sorted(registry)))
    return app


_app: Celery | None = None


def __getattr__(name: str) -> Any:
    # `celery -A workers.app` looks up `app`; build it on first use, not at import.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(name)
