"""The Celery app of the tool workers: `celery -A toolfleet.workers.app worker -Q tools.default`."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery

from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.celery_config import celery_config
from toolfleet.shared.celery_wire.consumer import consumer_class
from toolfleet.shared.celery_wire.transport import broker_transport
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.event_loop import loop_factory
from toolfleet.shared.job_signing import JobSigner
from toolfleet.shared.keys import Keys
from toolfleet.shared.memory import MemoryStore
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.redis_check import check_redis
from toolfleet.shared.replication import Replication
from toolfleet.shared.reporting import Feed, ResultReporter
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import ResultSigner
from toolfleet.shared.state_snapshots import SnapshotLoader
from toolfleet.workers.call_loop import use_loop_factory
from toolfleet.workers.deliveries import DeliveryGuard, claim_lease_s, uses_claims
from toolfleet.workers.eta_guard import install_eta_guard
from toolfleet.workers.handoff import HandOff, kombu_publisher
from toolfleet.workers.heartbeat import install_heartbeat
from toolfleet.workers.held_messages import install_keeping
from toolfleet.workers.intake.step import intake_step
from toolfleet.workers.limits import Gate
from toolfleet.workers.observability import install_metrics, install_tracing
from toolfleet.workers.shutdown_wake import install_shutdown_wake
from toolfleet.workers.stopping import install_stop_command
from toolfleet.workers.tasks import (
    make_scheduler,
    register_job_tasks,
    register_tool_tasks,
    result_poster,
)
from toolfleet.workers.tool_output import TOOL_OUTPUT_FDS, install_tool_output
from toolfleet.workers.tool_runs import ToolTaskDeps
from toolfleet.workers.unregistered import install_unregistered_answer

log = logging.getLogger(__name__)

# Connections a worker process's calls share (delivery guard, results, tickets, services).
# Each holds one for a round trip, so 64 serve hundreds of threads; more would only load
# Redis with idle connections from every io worker.
WORKER_CONNECTIONS = 64
# A slot's lease, in worker heartbeats: renewed every fifth of it while its call runs.
SLOT_LEASE_BEATS = 5


def create_app(settings: Settings) -> Celery:
    """The worker's Celery app: its tool and job tasks, heartbeat and services."""
    check_redis(settings.require_redis_url())  # Celery would retry a wrong URL forever
    install_tracing()
    install_metrics(settings)
    found = load_definitions(settings.tool_modules)
    use_loop_factory(loop_factory(settings))  # the loop coroutine tools run on
    app = Celery("toolfleet", set_as_current=False)
    app.conf.update(celery_config(settings, list(found.tools.values())))
    app.conf.broker_transport = broker_transport(settings.require_broker_url())
    app.conf.worker_consumer = consumer_class()  # task events in batches
    # Results survive a Redis restart; an io worker's threads share WORKER_CONNECTIONS.
    client = resilient_client(settings.require_redis_url(), WORKER_CONNECTIONS)
    keys = Keys(settings.key_prefix)
    signer = ResultSigner.of(settings.fleet_key)
    sealer = Sealer.of(settings)
    reporter = ResultReporter(
        client,
        settings.results_maxlen,
        signer,
        sealer,
        feed=Feed.of(keys),
        replication=Replication.of(settings),
    )
    completions = Completions.of(client, keys, settings)
    jobs = JobSigner.of(settings.fleet_key)  # with a fleet key, jobs go and run signed alone
    services = ToolServices(
        settings=settings,
        scheduler=make_scheduler(app, jobs, sealer, settings.secret_arg_names),
        artifacts=ArtifactStore(client, keys),
        memory=MemoryStore(client, keys),
        credentials=CredentialStore(client, keys, settings.credential_key),
        post_result=result_poster(completions, "worker"),
    )
    # A call's message may come twice (the outbox relay's double publish, a copy written
    # again): a delivery claims it, for a lease that lapses a few heartbeats after its
    # worker died.
    lease_s = claim_lease_s(settings)
    claims = uses_claims(settings)
    guard = DeliveryGuard(client, keys, settings.max_deliveries, claims=claims, lease_s=lease_s)
    # A dead worker's slots come back within a few of its heartbeats.
    gate = Gate(client, keys, SLOT_LEASE_BEATS * settings.worker_heartbeat_s)
    calls = CallSigner.of(settings.fleet_key)  # with a fleet key, signed calls alone run
    snapshots = SnapshotLoader(client, keys)  # the large states of wide turns, stored apart
    deps = ToolTaskDeps(
        settings, reporter, completions, services, guard, sealer, gate, calls, snapshots
    )
    register_tool_tasks(app, found.tools, deps)
    register_job_tasks(app, found.jobs, completions, jobs, sealer, settings.secret_arg_names)
    app.steps["consumer"].add(intake_step(settings))
    install_keeping(app)  # what Celery's consumer holds due later is not swept back
    install_heartbeat(app, client, settings)
    if os.environ.get(TOOL_OUTPUT_FDS):  # a local worker: the program shows what tools print
        install_tool_output(os.environ[TOOL_OUTPUT_FDS])
    # A call of a tool this worker lacks goes to a live worker of its pool that has it.
    hand_off = HandOff(client, keys, kombu_publisher(app))
    install_unregistered_answer(app, reporter, keys, calls, hand_off)
    install_eta_guard(app)  # a forged message due in a year is refused now, not kept
    install_stop_command()
    install_shutdown_wake(app)
    log.info(
        "toolfleet worker: tools %s; jobs %s",
        ", ".join(sorted(found.tools)),
        ", ".join(sorted(found.jobs)) or "none",
    )
    return app


_app: Celery | None = None


def __getattr__(name: str) -> Any:
    # `celery -A toolfleet.workers.app` looks up `app`; build it on first use, not at import.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app(Settings())  # an entry point: the settings of the environment
        return _app
    raise AttributeError(name)
