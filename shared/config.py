"""Settings shared by the orchestrator and the workers, read from TOOLFLEET_* variables."""

from __future__ import annotations

import json
import os
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from toolfleet.shared.errors import ConfigError
from toolfleet.shared.json_depth import DEFAULT_MAX_JSON_DEPTH, HIGHEST_MAX_JSON_DEPTH

# How a pool's workers run calls: `cpu` one per prefork process, `io` many per process.
PoolKind = Literal["io", "cpu"]


# The URL schemes of a RabbitMQ broker.
AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp"})
# The largest arguments or result a call may have, in JSON bytes, unless set otherwise.
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024


class Settings(BaseSettings):
    """One object, read once per entry point and passed down.

    Each field is read from the variable TOOLFLEET_<FIELD> (its name in upper case), or
    given as a keyword argument, which wins; the field's description says what it sets
    and what unset means. `Settings.model_fields[name].description` holds it.

    Raises:
        pydantic.ValidationError: A value is out of range or of the wrong type, naming
            the field.
    """

    model_config = SettingsConfigDict(env_prefix="TOOLFLEET_", extra="ignore")

    redis_url: str | None = Field(
        default=None,
        description="Broker, results and sessions. Unset: `toolfleet run/demo` start an "
        "embedded server on a free loopback port.",
    )
    redis_wait_replicas: int | None = Field(
        default=None,
        ge=0,
        description="Replicas that must hold a write before toolfleet acknowledges it (a "
        "posted completion, a stored session write, a worker's tool result): Redis "
        "replicates asynchronously, and a failover loses what the replicas lacked. Unset: 1 "
        "for a `redis+sentinel://` URL, 0 (no wait) for a single Redis.",
    )
    redis_wait_timeout_s: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="How long a write waits for those replicas; past it, it is acknowledged "
        "all the same and a warning logged (no replica connected, or one far behind).",
    )
    broker_url: str | None = Field(
        default=None,
        description="Where the tool queues live. Unset: on Redis, at `redis_url`. An "
        "`amqp://user:password@host:5672/vhost` URL puts them on RabbitMQ (quorum queues, "
        "publisher confirms); sessions, results and completions stay in Redis.",
    )
    amqp_heartbeat_s: int = Field(
        default=10,
        ge=0,
        le=65_535,
        description="With the tool queues on RabbitMQ: the AMQP heartbeat timeout the "
        "workers' connections and the outbox relay's propose (the lower of it and "
        "RabbitMQ's own `heartbeat`, 60 s by default, holds). RabbitMQ closes a connection "
        "it heard nothing on for 2 to 3 times this - a worker frozen, its host or network "
        "lost - and delivers the calls it held to another worker: within 3 times this (30 s "
        "by default, before a call's default deadline). Under 5 s a busy network may drop "
        "live connections; 0 turns heartbeats off (a lost worker's calls then wait for TCP "
        "to notice, many minutes).",
    )
    key_prefix: str = Field(default="toolfleet", description="Prefix of every Redis key.")
    tool_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Modules a worker imports to find its tools (agents, tools and toolsets "
        "defined at module level), e.g. `examples.weather,examples.stocks`.",
    )
    default_pool: str = Field(
        default="default", description="Pool of sync tools that name no pool and no kind."
    )
    io_pools: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["io"],
        description="Pools whose kind is `io`: a worker runs many calls per process (coroutine "
        "tools on one event loop, sync tools on threads). Every other pool is `cpu` (prefork: "
        "one call per process). The default io pool is always io.",
    )
    default_io_pool: str = Field(
        default="io",
        description="Pool of async tools and of tools declaring kind='io' that name no pool.",
    )
    io_concurrency: int = Field(
        default=10_000,
        ge=1,
        description="Calls one io worker process runs at once: coroutine calls share its event "
        "loop and hold no thread, so one process covers a wide turn; sync tools' calls run on "
        "at most io_threads of them. `toolfleet worker --concurrency` overrides it.",
    )
    io_threads: int = Field(
        default=200,
        ge=1,
        description="Threads of one io worker process for sync tools' calls; its calls beyond "
        "wait in the process for a thread. Coroutine calls need none.",
    )
    io_intake: bool = Field(
        default=True,
        description="io workers take their queues' messages in batches (up to 64 per round "
        "trip, acks and task events batched too) instead of Celery's one at a time; off, "
        "Celery's consumer takes about 500 messages/s per worker process.",
    )
    task_events: bool = Field(
        default=True,
        description="Workers send Flower's task events (received, started, succeeded) from "
        "the start (on Redis, an io worker makes them only while a client is subscribed "
        "to them). False: as Celery's default, only once a monitor asks for them (Flower "
        "does every 5 s; `celery -A toolfleet.workers.app control enable_events`). "
        "`control disable_events` turns them off again either way.",
    )
    redis_autopipeline: bool = Field(
        default=True,
        description="an orchestrator sends the Redis commands its sessions issue in one "
        "event-loop iteration in one write on one shared connection; off, each command or "
        "pipeline takes a pooled connection and a round trip of its own.",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="The event loop of the orchestrator (`toolfleet serve`, `run`, `demo`) "
        "and of a worker's coroutine tools: uvloop, a C loop, where it is installed (the "
        "default install on Linux and macOS), else asyncio's; `uvloop` requires it, "
        "`asyncio` never uses it.",
    )
    default_timeout_s: float = Field(default=60.0, gt=0, description="Tool time limit.")
    result_grace_s: float = Field(
        default=15.0,
        ge=0,
        description="Extra wait for a result after a tool's time limit. Above 1 + "
        "redelivery margin + restore interval, a call whose worker died is run again "
        "before the model is told it timed out.",
    )
    result_batch_ms: float = Field(
        default=10.0,
        ge=0,
        le=1000,
        description="While an orchestrator awaits at least result_batch_min_calls calls, its "
        "result reader pauses this long after each read that answered the last call a "
        "session awaited, so that it takes the next ones together and their sessions' "
        "writes share round trips (a "
        "quarter less orchestrator CPU per call at 200 sessions). A result waits at most "
        "this much longer, only under that load. 0 reads each result at once.",
    )
    result_batch_min_calls: int = Field(
        default=64,
        ge=1,
        description="Calls awaited on one orchestrator from which its result reader batches "
        "(result_batch_ms); with fewer, every result is read as soon as it is posted.",
    )
    max_parallel_calls: int = Field(
        default=10_000,
        ge=1,
        description="Calls of one turn in flight at once; the rest are sent as these end. The "
        "default sends every call a turn may make at once: the workers' slots pace them.",
    )
    max_steps: int = Field(default=16, ge=1, description="Model calls per invocation.")
    max_payload_bytes: int = Field(
        default=DEFAULT_MAX_PAYLOAD_BYTES,
        ge=1024,
        description="Largest arguments or result in JSON bytes.",
    )
    max_json_depth: int = Field(
        default=DEFAULT_MAX_JSON_DEPTH,
        ge=1,
        le=HIGHEST_MAX_JSON_DEPTH,
        description="Deepest nesting of objects and arrays in JSON from outside (a model's "
        "arguments, a posted result, an HTTP body, MCP arguments, a tool's result and "
        "state writes); deeper is refused, saying so, before anything parses or walks it. "
        f"At most {HIGHEST_MAX_JSON_DEPTH}: stored documents add levels around a value.",
    )
    results_maxlen: int = Field(
        default=20_000,
        ge=100,
        description="Approximate cap on each session's results stream, where a turn's "
        "results wait until the orchestrator has stored them: at least "
        "TOOLFLEET_MAX_CALLS_PER_TURN (twice leaves room for late results of a turn before).",
    )
    lease_ttl_s: float = Field(default=30.0, gt=0, description="Session lease lifetime.")
    max_calls_per_turn: int = Field(
        default=10_000,
        ge=1,
        description="Function calls of one model turn that run, a guard against a runaway "
        "model: the model gets an error response for each call beyond (not dispatched), "
        "saying the limit. 10,000 is what one io worker process runs at once by default "
        "(io_concurrency); every turn up to it runs.",
    )
    dedupe_tool_calls: bool = Field(
        default=False,
        description="Run identical calls of one model turn (same tool, same arguments) "
        "once; each repeat gets the first call's response (ADK's dedupe_tool_calls). "
        "Long-running calls always run.",
    )
    completions_maxlen: int = Field(
        default=10_000,
        ge=1,
        description="Most results an app's completions stream holds unapplied; a post beyond "
        "is refused (HTTP 503) until the orchestrators catch up. Applied entries are trimmed.",
    )
    session_max_events: int = Field(
        default=1_000,
        ge=10,
        description="Events kept per session: older turns are dropped whole (from the oldest "
        "user message on), never a function call apart from its responses.",
    )
    session_ttl_s: int = Field(
        default=30 * 24 * 3600,
        ge=0,
        description="A session idle this long (no event written) expires with its events and "
        "state; every write restarts the clock. 0 keeps sessions forever.",
    )
    completion_claim_idle_s: float = Field(
        default=30.0,
        gt=0,
        description="A completion a replica read but did not acknowledge for this long "
        "(it died) is taken over by another.",
    )
    redelivery_margin_s: float = Field(
        default=10.0,
        gt=0,
        description="Broker visibility timeout beyond the longest tool time limit: a call "
        "taken by a worker that died is redelivered this long after its hard limit.",
    )
    restore_interval_s: float = Field(
        default=2.0,
        gt=0,
        description="How often workers look for calls of dead workers to redeliver "
        "(recovery bound = longest time limit + 1 + redelivery margin + this).",
    )
    max_deliveries: int = Field(
        default=3,
        ge=1,
        description="Deliveries of one call before it is answered with an error instead "
        "of run again (a tool that kills its worker must not loop forever).",
    )
    model: str = Field(default="gemini-2.5-flash", description="Gemini model name.")
    offline_models: str | None = Field(
        default=None,
        description="`module:attribute` naming a mapping of agent name to Model (e.g. "
        "ScriptedModel): those agents run on it, ahead of an API key and their own "
        "offline_script, on the orchestrator and on workers running agent tools. Runs an "
        "ADK program offline without editing it.",
    )
    model_timeout_s: float = Field(
        default=120.0,
        gt=0,
        allow_inf_nan=False,
        description="Time limit of one model HTTP request; a hung call otherwise holds its "
        "session until the process restarts. 120 s leaves room for long thinking turns on "
        "large contexts (they take tens of seconds). Timed-out requests are retried like "
        "5xx, so one model call waits at most about 4 times this plus backoff.",
    )
    worker_heartbeat_s: float = Field(default=2.0, gt=0, description="Worker heartbeat period.")
    worker_metrics_bind: str = Field(
        default="",
        description="HOST:PORT where a worker serves Prometheus `/metrics` (its prefork "
        "children's too, in multiprocess mode), e.g. `0.0.0.0:9100`; empty: not served.",
    )

    fleet_key: str | None = Field(
        default=None,
        description="Signs tool calls and results (HMAC; workers then run only signed calls) "
        "and seals secret-named values in task messages and results (Fernet, HKDF-derived "
        "key): the same on workers and orchestrators. Unset: calls and results unsigned, "
        "secrets in clear in transit.",
    )
    credential_key: str | None = Field(
        default=None,
        description="Fernet key encrypting credentials supplied for tools (same on all hosts).",
    )
    progress_to_model: bool = Field(
        default=False,
        description="Also send intermediate long-running results to the model (always shown).",
    )
    secret_arg_names: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["api_key", "password", "secret", "token", "authorization"],
        description="Keys (any depth) whose values are masked wherever shown or stored, in "
        "arguments and results, and sealed in transit; matched in any case, Unicode "
        "compatibility form and spelling of their words (api_key: apiKey, API-KEY).",
    )

    @field_validator("tool_modules", "secret_arg_names", "io_pools", mode="before")
    @classmethod
    def _split_modules(cls, value: object) -> object:
        # A comma-separated list in the environment, or a JSON list.
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _turns_fit_their_results_stream(self) -> Settings:
        if self.results_maxlen < self.max_calls_per_turn:
            raise ValueError(
                f"TOOLFLEET_RESULTS_MAXLEN ({self.results_maxlen}) is below "
                f"TOOLFLEET_MAX_CALLS_PER_TURN ({self.max_calls_per_turn}): a turn's results "
                "wait on their session's stream until the orchestrator has stored them, and "
                "those past the cap would be trimmed unread; set TOOLFLEET_RESULTS_MAXLEN to "
                f"{2 * self.max_calls_per_turn} or lower TOOLFLEET_MAX_CALLS_PER_TURN"
            )
        return self

    def pool_kind(self, pool: str) -> PoolKind:
        """`io` for the io pools (and the default io pool), `cpu` for every other pool."""
        return "io" if pool in self.io_pools or pool == self.default_io_pool else "cpu"

    @property
    def broker_is_amqp(self) -> bool:
        """Whether the tool queues are on RabbitMQ (`broker_url` is an amqp:// URL)."""
        url = self.broker_url
        return url is not None and url.split("://", 1)[0] in AMQP_SCHEMES

    def require_broker_url(self) -> str:
        """The URL of the tool queues: `broker_url`, else the Redis URL."""
        if self.broker_url and not self.broker_is_amqp:
            raise ConfigError(
                f"TOOLFLEET_BROKER_URL must be an amqp:// or amqps:// URL (RabbitMQ), not "
                f"{self.broker_url.split('://', 1)[0]!r}: unset it to keep the queues on Redis."
            )
        return self.broker_url or self.require_redis_url()

    def require_redis_url(self) -> str:
        """The Redis URL; raises ConfigError saying how to provide one when it is unset."""
        if not self.redis_url:
            raise ConfigError(
                "TOOLFLEET_REDIS_URL is not set: point it at your Redis "
                "(redis://host:6379/0) or use `toolfleet run`/`toolfleet demo`, which start "
                "an embedded server."
            )
        return self.redis_url


def gemini_api_key() -> str | None:
    """The Gemini key under its standard names; None selects the offline model."""
    return os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY") or None
