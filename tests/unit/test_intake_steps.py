"""The intake's step threads: conclusions wait for the admissions queued before them,
for a bounded time, and only once until the admissions drain."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from toolfleet.workers.intake.steps import Steps

# Far longer than any test: a bound this long never ends a wait here.
NEVER_S = 60.0
# How long a step that must not run yet is given to show that it does not.
HELD_S = 0.2
# How long a step that must run is waited for.
RUNS_S = 10.0


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Lets the blocked admission steps of a test end (at the latest when it ends)."""
    release = threading.Event()
    yield release
    release.set()


def blocked_admission(steps: Steps, release: threading.Event, order: list[str]) -> None:
    """An admission step that runs until `release` is set."""

    def admit() -> None:
        release.wait(RUNS_S)
        order.append("admitted")

    steps.admit(admit)


def conclusion(steps: Steps, order: list[str], name: str = "concluded") -> threading.Event:
    """A conclusion step; the event is set once it ran."""
    ran = threading.Event()

    def conclude() -> None:
        order.append(name)
        ran.set()

    steps.conclude(conclude)
    return ran


def test_a_conclusion_runs_at_once_when_nothing_is_admitted() -> None:
    order: list[str] = []
    assert conclusion(Steps(4, most_wait_s=NEVER_S), order).wait(RUNS_S)


def test_a_conclusion_waits_for_the_admission_running_before_it(
    released: threading.Event,
) -> None:
    steps, order = Steps(4, most_wait_s=NEVER_S), []
    blocked_admission(steps, released, order)
    ran = conclusion(steps, order)
    assert not ran.wait(HELD_S)  # a free thread, and still it waits
    released.set()
    assert ran.wait(RUNS_S)
    assert order == ["admitted", "concluded"]


def test_conclusions_wait_at_most_the_bound_and_then_not_again_until_admissions_drain(
    released: threading.Event,
) -> None:
    steps, order = Steps(4, most_wait_s=HELD_S), []
    blocked_admission(steps, released, order)
    assert conclusion(steps, order, "first").wait(RUNS_S)  # after the bound
    assert conclusion(steps, order, "second").wait(RUNS_S)
    assert order == ["first", "second"]  # the admission still runs
    released.set()
    steps.shutdown(wait=True)
    assert order[-1] == "admitted"


def test_once_admissions_drained_a_later_conclusion_waits_again(
    released: threading.Event,
) -> None:
    steps, order = Steps(4, most_wait_s=NEVER_S), []
    first = threading.Event()
    blocked_admission(steps, first, order)
    first.set()
    steps.admit(lambda: None)  # queued behind nothing: both end
    assert conclusion(steps, order, "between").wait(RUNS_S)
    blocked_admission(steps, released, order)
    ran = conclusion(steps, order)
    assert not ran.wait(HELD_S)
    released.set()
    assert ran.wait(RUNS_S)
    assert order == ["admitted", "between", "admitted", "concluded"]


def test_after_shutdown_a_conclusion_runs_on_the_callers_thread_and_admitting_fails() -> None:
    steps, order = Steps(2), []
    steps.shutdown(wait=True)
    callers: list[threading.Thread] = []
    steps.conclude(lambda: callers.append(threading.current_thread()))
    assert callers == [threading.current_thread()]
    with pytest.raises(RuntimeError):
        steps.admit(lambda: order.append("admitted"))
    assert order == []
