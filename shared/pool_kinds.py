"""Which Celery pool runs a worker's pools: prefork for `cpu` pools, threads for `io` ones."""

from __future__ import annotations

from collections.abc import Sequence

from toolfleet.shared.config import PoolKind, Settings
from toolfleet.shared.errors import ConfigError

# Celery's pool implementation per kind: one call per child process, or many per process
# (coroutine calls on the process's call loop, each awaited from its Celery thread).
CELERY_POOL: dict[PoolKind, str] = {"cpu": "prefork", "io": "threads"}


def kind_of_pools(pools: Sequence[str], settings: Settings) -> PoolKind:
    """The one kind of `pools`; ConfigError when they mix io and cpu pools (one worker
    process runs one Celery pool implementation)."""
    kinds = {pool: settings.pool_kind(pool) for pool in pools}
    if len(set(kinds.values())) > 1:
        io = ", ".join(p for p, k in kinds.items() if k == "io")
        cpu = ", ".join(p for p, k in kinds.items() if k == "cpu")
        raise ConfigError(
            f"one worker cannot serve io pools ({io}) and cpu pools ({cpu}): start a worker "
            "for each kind (`toolfleet worker --pool io` and `toolfleet worker --pool default`)"
        )
    return next(iter(kinds.values()), "cpu")


def concurrency_for(kind: PoolKind, settings: Settings, asked: int | None, cpu_default: int) -> int:
    """Calls one worker process of `kind` runs at once: `asked`, else for io pools the
    settings' io concurrency (its intake runs coroutine calls without a thread each; with
    the intake off, Celery's pool gives every call a thread: io_threads at most), else
    `cpu_default` (prefork children)."""
    if asked:
        return asked
    if kind == "cpu":
        return cpu_default
    if settings.io_intake:
        return settings.io_concurrency
    return min(settings.io_concurrency, settings.io_threads)


def worker_pool_argv(kind: PoolKind, concurrency: int) -> list[str]:
    """`celery worker` options for a worker of `kind`: pool implementation and concurrency."""
    return ["-P", CELERY_POOL[kind], "-c", str(concurrency)]
