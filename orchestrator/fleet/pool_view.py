"""Each pool as its live workers' heartbeats describe it: who serves it, which tools, and
the tools only some of them serve (their TOOLFLEET_TOOL_MODULES differ)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from toolfleet.shared.worker_records import WorkerInfo, tools_of


@dataclass(frozen=True)
class ToolServed:
    """A tool of a pool, the live workers of the pool that registered it, and those that
    did not (`lacking`) with the tool modules the others load and they do not."""

    name: str
    workers: list[str]
    lacking: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PoolView:
    """A pool's live workers, their slots and calls running (None: a worker does not say),
    the tools they serve, and the workers that do not say which tools they have."""

    pool: str
    workers: list[str]
    slots: int
    busy: int | None
    tools: list[ToolServed]
    unlisted: list[str]

    @property
    def partial(self) -> list[ToolServed]:
        """Tools only some of the pool's workers serve: a call of one fails on the others."""
        return [t for t in self.tools if t.lacking]


def pool_views(workers: Sequence[WorkerInfo]) -> list[PoolView]:
    """One view per pool a live worker serves, by pool name."""
    by_pool: dict[str, list[WorkerInfo]] = {}
    for worker in workers:
        for pool in worker.pools:
            by_pool.setdefault(pool, []).append(worker)
    return [_view(pool, by_pool[pool]) for pool in sorted(by_pool)]


def _view(pool: str, workers: list[WorkerInfo]) -> PoolView:
    listing = [w for w in workers if w.tools is not None]
    has = {w.hostname: tools_of(w, pool) for w in listing}
    names = sorted(set().union(*has.values()))
    tools = []
    for name in names:
        have = [w for w in listing if name in has[w.hostname]]
        lack = [w for w in listing if name not in has[w.hostname]]
        theirs = {m for w in have for m in w.modules or ()}
        missing = {m for w in lack for m in theirs - set(w.modules or ())}
        tools.append(
            ToolServed(
                name, [w.hostname for w in have], [w.hostname for w in lack], sorted(missing)
            )
        )
    busy = [w.busy for w in workers]
    return PoolView(
        pool=pool,
        workers=[w.hostname for w in workers],
        slots=sum(w.concurrency for w in workers),
        busy=None if any(b is None for b in busy) else sum(b or 0 for b in busy),
        tools=tools,
        unlisted=[w.hostname for w in workers if w.tools is None],
    )
