"""The connections of one orchestrator replica, built once from Settings.

Every runner of the replica, its completions listener and its HTTP API share them:
one command client (and pool), one result reader, one session store, one fleet.
"""

from __future__ import annotations

import uuid

import redis
import redis.asyncio as aioredis

from toolfleet.orchestrator.connections import blocking_client, command_client, reader_client
from toolfleet.orchestrator.fleet.celery_fleet import CeleryFleet
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.outbox import OutboxRelay, outbox_key
from toolfleet.orchestrator.fleet.pools import LivePools
from toolfleet.orchestrator.fleet.protocol import ToolRunner
from toolfleet.orchestrator.fleet.read_batching import ReadBatching
from toolfleet.orchestrator.fleet.refusals import RefusalAnswers
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.orchestrator.fleet.stopping import CallStopper
from toolfleet.orchestrator.sessions.cancels import CancelBoard
from toolfleet.orchestrator.sessions.compaction import SessionLimits
from toolfleet.orchestrator.sessions.leases import Leases
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.call_signing import CallSigner
from toolfleet.shared.cancellation import CancelRequest
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys
from toolfleet.shared.liveness import outage_grace_s
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.replication import attach
from toolfleet.shared.sealing import Sealer, warn_without_fleet_key
from toolfleet.shared.signing import ResultSigner


class Replica:
    """`async with Replica(settings) as replica:` - start its result reader, close its
    clients at the end. `tool_runner` replaces the Celery fleet (tests, benchmarks)."""

    def __init__(
        self,
        settings: Settings,
        *,
        replica_id: str | None = None,
        tool_runner: ToolRunner | None = None,
    ) -> None:
        self.settings = settings
        self.id = replica_id or f"orch-{uuid.uuid4().hex[:12]}"
        self.keys = Keys(settings.key_prefix)
        self._url = settings.require_redis_url()
        self.redis = command_client(self._url, autopipeline=settings.redis_autopipeline)
        attach(self.redis, settings)  # session writes are stored once replicas have them
        self._blocking: list[aioredis.Redis] = [
            reader_client(self._url, autopipeline=settings.redis_autopipeline)
        ]
        self._sync: redis.Redis | None = None
        self.leases = Leases(self.redis, self.keys, self.id, settings.lease_ttl_s)
        limits = SessionLimits(settings.session_max_events, settings.session_ttl_s)
        self.store = SessionStore(
            self.redis, self.keys, settings.secret_arg_names, limits, Sealer.of(settings)
        )
        signer = ResultSigner.of(settings.fleet_key)
        # The sessions this replica runs an invocation of: a cancellation reaches them.
        self.cancels = CancelBoard()
        self.waiter = ResultWaiter(
            self._blocking[0],
            self.redis,
            self.keys,
            self.id,
            signer=signer,
            on_cancel=self.cancel,
            batching=ReadBatching.of(settings),
        )
        self._stopper = CallStopper(settings)
        # Tool queues on RabbitMQ: calls go through the outbox, and this replica relays it.
        self.relay: OutboxRelay | None = None
        if settings.broker_is_amqp and tool_runner is None:
            self.relay = OutboxRelay(
                self.redis,
                self.keys,
                settings.require_broker_url(),
                heartbeat_s=settings.amqp_heartbeat_s,
                answers=RefusalAnswers.of(self.sync_client(), settings),
            )
        self.fleet: ToolRunner = tool_runner or CeleryFleet(
            CeleryPublisher(
                self.redis,
                settings.secret_arg_names,
                Sealer.of(settings),
                outbox=outbox_key(self.keys) if self.relay is not None else None,
                on_outbox=self.relay.wake if self.relay is not None else None,
                signer=CallSigner.of(settings.fleet_key),
            ),
            self.waiter,
            settings,
            self.keys,
            # Workers' heartbeats lapse while Redis is away: the reader sees when it was.
            LivePools(
                self.redis,
                self.keys,
                outage_grace_s=outage_grace_s(settings.worker_heartbeat_s),
                outage_at=lambda: self.waiter.last_outage_at,
            ),
            self._stopper,
            self.cancels,
        )

    def cancel(self, request: CancelRequest) -> None:
        """A session was cancelled: stop its invocation here, if this replica runs one."""
        if self.cancels.cancel(request):
            self.fleet.cancel(request.session_key)

    def blocking_client(self) -> aioredis.Redis:
        """A dedicated client for one task that blocks in XREAD(GROUP); closed with the
        replica."""
        client = blocking_client(self._url)
        self._blocking.append(client)
        return client

    def sync_client(self) -> redis.Redis:
        """The replica's synchronous client (for the ticket commands the CLI shares),
        made on first use."""
        if self._sync is None:
            self._sync = resilient_client(self._url)
        return self._sync

    async def __aenter__(self) -> Replica:
        await self.waiter.start()
        if self.relay is not None:
            self.relay.start()
        if isinstance(self.fleet, CeleryFleet):
            warn_without_fleet_key(self.settings)  # secrets would travel in clear
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.waiter.stop()
        if self.relay is not None:
            await self.relay.stop()
        self._stopper.close()
        for client in self._blocking:
            await client.aclose()
        await self.redis.aclose()
        if self._sync is not None:
            self._sync.close()
