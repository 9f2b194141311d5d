"""The orchestrator's garbage-collector policy: each collection's survivors are frozen,
young garbage is still collected, and a reclaim collects what reached frozen objects."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from toolfleet.shared import gc_policy
from toolfleet.shared.gc_policy import SURVIVOR_YOUNG_THRESHOLD, SurvivorFreezer


class Node:
    """A container the collector tracks, which can take part in a cycle."""

    def __init__(self) -> None:
        self.ref: Node | None = None


class CountedFreezer(SurvivorFreezer):
    """Tells when its thread has reclaimed."""

    def __init__(self, reclaim_every_s: float, reclaim_after: int | None = None) -> None:
        super().__init__(reclaim_every_s, reclaim_after)
        self.reclaimed = threading.Event()

    def reclaim(self) -> int:
        found = super().reclaim()
        self.reclaimed.set()
        return found


@pytest.fixture
def freezer() -> Iterator[SurvivorFreezer]:
    started = SurvivorFreezer(reclaim_every_s=3600).start()
    yield started
    started.stop()


def in_a_generation(obj: object) -> bool:
    """Whether the collector still scans `obj` (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def test_what_survives_a_collection_is_frozen(freezer: SurvivorFreezer) -> None:
    kept = Node()
    assert in_a_generation(kept)
    gc.collect(0)
    assert not in_a_generation(kept)
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == SURVIVOR_YOUNG_THRESHOLD


def test_young_garbage_in_a_cycle_is_still_collected(freezer: SurvivorFreezer) -> None:
    first, second = Node(), Node()
    first.ref, second.ref = second, first
    gone = weakref.ref(first)
    del first, second
    gc.collect(0)
    assert gone() is None


def test_a_cycle_through_a_frozen_object_waits_for_the_reclaim(freezer: SurvivorFreezer) -> None:
    old = Node()
    gc.collect(0)  # `old` survives: frozen
    young = Node()
    old.ref, young.ref = young, old
    gone = weakref.ref(young)
    del old, young
    gc.collect(0)
    assert gone() is not None  # the young collection cannot see the frozen half
    assert freezer.reclaim() >= 2
    assert gone() is None


def test_the_reclaim_runs_on_its_own_thread() -> None:
    counted = CountedFreezer(reclaim_every_s=0.01)
    counted.start()
    try:
        assert counted.reclaimed.wait(timeout=10)
    finally:
        counted.stop()


def test_a_cycle_is_reclaimed_after_as_many_collections_as_asked_without_waiting() -> None:
    counted = CountedFreezer(reclaim_every_s=3600, reclaim_after=3).start()
    try:
        old = Node()
        gc.collect(0)  # one: `old` survives, frozen
        young = Node()
        old.ref, young.ref = young, old
        gone = weakref.ref(young)
        del old, young
        gc.collect(0)  # two: the cycle reaches a frozen object, so it stays
        assert gone() is not None and not counted.reclaimed.is_set()
        gc.collect(0)  # three: a reclaim is due, on the freezer's thread
        assert counted.reclaimed.wait(timeout=10)
        assert gone() is None
    finally:
        counted.stop()


def test_stop_gives_the_collector_back_its_policy() -> None:
    before = gc.get_threshold()
    started = SurvivorFreezer(reclaim_every_s=3600).start()
    gc.collect(0)
    started.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    kept = Node()
    gc.collect(0)
    assert in_a_generation(kept)  # no longer frozen after a collection


def test_the_worker_policy_reclaims_after_a_bounded_number_of_collections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = gc.get_threshold()
    monkeypatch.setattr(gc_policy, "_freezer", None)
    started = gc_policy.worker_policy()
    try:
        assert started.reclaim_after == gc_policy.WORKER_RECLAIM_AFTER
        assert gc_policy.worker_policy() is started
    finally:
        started.stop()
    gc.set_threshold(*before)


def test_the_orchestrator_policy_starts_one_freezer(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gc.get_threshold()
    monkeypatch.setattr(gc_policy, "_freezer", None)
    first = gc_policy.orchestrator_policy()
    try:
        assert gc_policy.orchestrator_policy() is first
        assert gc.get_threshold()[0] == SURVIVOR_YOUNG_THRESHOLD  # not reset by the repeat
    finally:
        first.stop()
    gc.set_threshold(*before)
