"""The intake's AMQP ack window: a multiple ack only over a run of finished deliveries
with nothing unfinished below it, single acks above a delivery still running."""

from __future__ import annotations

import random

from toolfleet.workers.intake.ack_window import AckPlan, AckWindow


def window_of(*tags: int) -> AckWindow:
    window = AckWindow()
    for tag in tags:
        window.delivered(tag)
    return window


def test_a_run_of_finished_deliveries_from_the_lowest_is_one_multiple_ack() -> None:
    window = window_of(1, 2, 3, 4, 5)
    for tag in (3, 1, 2):
        window.finish(tag)
    assert window.plan() == AckPlan(multiple=3, covered=3, singles=[])
    assert window.unsettled == 2
    window.finish(4)
    window.finish(5)
    assert window.plan() == AckPlan(multiple=5, covered=2, singles=[])
    assert window.unsettled == 0


def test_a_finished_delivery_above_one_still_running_is_acked_alone() -> None:
    window = window_of(1, 2, 3, 4)
    window.finish(2)
    window.finish(4)
    # A multiple ack of 2 or 4 would also ack 1 (and 3), still running.
    assert window.plan() == AckPlan(multiple=None, covered=0, singles=[2, 4])
    assert window.unsettled == 2
    assert window.plan() == AckPlan(multiple=None, covered=0, singles=[])


def test_a_multiple_ack_never_names_a_tag_acked_alone_before() -> None:
    window = window_of(1, 2, 3, 4)
    window.finish(2)
    assert window.plan().singles == [2]
    window.finish(1)
    window.finish(3)
    # 1..3 are settled now; 2 went alone, so the multiple ack names 3 (RabbitMQ closes
    # the channel on an ack of a tag it no longer holds).
    assert window.plan() == AckPlan(multiple=3, covered=2, singles=[])
    window.finish(4)
    assert window.plan() == AckPlan(multiple=4, covered=1, singles=[])


def test_a_run_ending_in_tags_acked_alone_is_named_by_its_last_unacked_one() -> None:
    window = window_of(1, 2, 3)
    window.finish(2)
    window.finish(3)
    assert window.plan().singles == [2, 3]
    window.finish(1)
    assert window.plan() == AckPlan(multiple=1, covered=1, singles=[])
    assert window.unsettled == 0


def test_a_requeued_delivery_is_never_acked_and_does_not_hold_the_run_back() -> None:
    window = window_of(1, 2, 3)
    assert window.forget(2)
    window.finish(1)
    window.finish(3)
    assert window.plan() == AckPlan(multiple=3, covered=2, singles=[])
    assert window.unsettled == 0


def test_a_tag_not_open_is_neither_acked_nor_requeued() -> None:
    window = window_of(1, 2)
    window.finish(1)
    window.plan()
    assert not window.finish(1)  # acked already: a second ack would close the channel
    assert not window.forget(1)
    assert not window.finish(9)  # never delivered on this channel
    assert window.plan() == AckPlan(multiple=None, covered=0, singles=[])
    assert window.unsettled == 1


def settled_by(plan: AckPlan, unacked: set[int]) -> set[int]:
    """What RabbitMQ acknowledges for `plan`, given the tags it holds unacknowledged;
    fails where RabbitMQ would close the channel (a tag it does not hold)."""
    acked: set[int] = set()
    if plan.multiple is not None:
        assert plan.multiple in unacked, plan
        acked |= {tag for tag in unacked if tag <= plan.multiple}
    for tag in plan.singles:
        assert tag in unacked - acked, plan
        acked.add(tag)
    return acked


def test_in_any_order_only_finished_deliveries_are_acked_each_once() -> None:
    rng = random.Random(7)
    for _ in range(200):
        window, unacked, finished = AckWindow(), set[int](), set[int]()
        tags = list(range(1, rng.randint(2, 40)))
        for tag in tags:
            window.delivered(tag)
            unacked.add(tag)
        pending = tags[:]
        rng.shuffle(pending)
        while pending:
            for _ in range(rng.randint(1, 4)):
                if pending:
                    tag = pending.pop()
                    window.finish(tag)
                    finished.add(tag)
            acked = settled_by(window.plan(), unacked)
            assert acked <= finished  # nothing running is acked
            unacked -= acked
            assert unacked == set(tags) - finished  # every finished one is acked now
        assert window.unsettled == 0
