"""The Celery app of the tool workers: `celery -A workers.app worker -Q tools.default`."""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery

from shared.artifacts import ArtifactStore
from shared.auth import CredentialStore
from shared.celery_config import celery_config
from shared.completions import Completions
from shared.config import Settings
from shared.context import ToolServices
from shared.discovery import load_definitions
from shared.keys import Keys
from shared.memory import MemoryStore
from shared.outages import resilient_client
from shared.redis_check import check_redis
from shared.reporting import ResultReporter
from workers.heartbeat import install_heartbeat
from workers.tasks import (
    DeliveryGuard,
    ToolTaskDeps,
    make_scheduler,
    register_job_tasks,
    register_tool_tasks,
)

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or Settings()
    check_redis(settings.require_redis_url())  # Celery would retry a wrong URL forever
    found = load_definitions(settings.tool_modules)
    app = Celery("toolfleet", set_as_current=False)
    app.conf.update(celery_config(settings, list(found.tools.values())))
    client = resilient_client(settings.require_redis_url())  # results survive a Redis restart
    keys = Keys(settings.key_prefix)
    reporter = ResultReporter(client, settings.results_maxlen)
    completions = Completions(client, keys)
    services = ToolServices(
        scheduler=make_scheduler(app),
        artifacts=ArtifactStore(client, keys),
        memory=MemoryStore(client, keys),
        credentials=CredentialStore(client, keys, settings.credential_key),
    )
    guard = DeliveryGuard(client, keys, settings.max_deliveries)
    deps = ToolTaskDeps(settings, reporter, completions, services, guard)
    register_tool_tasks(app, found.tools, deps)
    register_job_tasks(app, found.jobs, completions)
    install_heartbeat(app, client, settings)
    log.info(
        "toolfleet worker: tools %s; jobs %s",
        ", ".join(sorted(found.tools)),
        ", ".join(sorted(found.jobs)) or "none",
    )
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
