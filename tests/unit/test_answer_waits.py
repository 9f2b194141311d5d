"""The orchestrator's waits for an answer read the store in an order that a result's
apply, landing between their two reads, cannot fool.

A result's apply drops the pending call and marks the session as owing the model a turn
in one step; the turn's answer clears the mark. A wait that read the mark first and the
pending calls second saw "not owed" (before the apply) and "not pending" (after it), and
returned while the agent was still answering.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal

from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.keys import SessionKey

SESSION = SessionKey("desk:u:s1")
CALL = "tf-call-1"
WAIT_S = 5.0


@dataclass
class ApplyingStore:
    """A store where the result's apply lands right after the wait's first read, and the
    agent's answer (clearing the owed mark) comes once `answer()` is called."""

    pending: set[str] = field(default_factory=lambda: {CALL})
    owed: bool = False
    reads: int = 0
    asked: int = 0  # the question its call asks

    def _read(self) -> None:
        self.reads += 1
        if self.reads == 1:  # the apply: one step, as the store's script does it
            self.pending.clear()
            self.owed = True

    async def pending_calls(self, session: SessionKey) -> list[Any]:
        snapshot = [SimpleNamespace(call_id=c, asked_again=self.asked) for c in self.pending]
        self._read()
        return snapshot

    async def sessions_to_resume(self) -> list[SessionKey]:
        snapshot = [SESSION] if self.owed else []
        self._read()
        return snapshot

    def answer(self) -> None:
        self.owed = False


class AnsweringEvent(asyncio.Event):
    """The listener's `handled`: a wait that blocks on it gets the agent's answer (the
    owed mark cleared, then the event set), as the listener's handling ends."""

    def __init__(self, store: ApplyingStore) -> None:
        super().__init__()
        self.store = store
        self.waits = 0

    async def wait(self) -> Literal[True]:
        self.waits += 1
        self.store.answer()
        self.set()
        return await super().wait()


def replica_with(store: ApplyingStore) -> Any:
    """Just what the waits read of an Orchestrator: its store and its listener's event."""
    listener = SimpleNamespace(handled=AnsweringEvent(store))
    return SimpleNamespace(replica=SimpleNamespace(store=store), listener=listener)


async def test_an_answer_wait_outlasts_a_result_applied_between_its_reads() -> None:
    store = ApplyingStore()
    orch = replica_with(store)
    answered = await Orchestrator.wait_until_answered(orch, SESSION, [CALL], WAIT_S)
    assert answered is True
    assert orch.listener.handled.waits == 1  # it waited for the answer, once
    assert not store.owed


async def test_an_answer_wait_ends_when_its_call_asks_again() -> None:
    """The answer was applied and the tool asked again: the call stays pending, with a
    new question for the client, and the wait ends without waiting for it."""
    store = ApplyingStore(asked=1)
    store.reads = 1  # no apply to come: the call stays pending
    orch = replica_with(store)
    answered = await Orchestrator.wait_until_answered(
        orch, SESSION, [CALL], WAIT_S, asked={CALL: 0}
    )
    assert answered is True and store.pending == {CALL}
    assert orch.listener.handled.waits == 0  # no wait for an apply


async def test_a_settle_wait_outlasts_a_result_applied_between_its_reads() -> None:
    store = ApplyingStore()
    orch = replica_with(store)
    settled = await Orchestrator.wait_until_settled(orch, SESSION, WAIT_S)
    assert settled is True
    assert orch.listener.handled.waits == 1
    assert not store.owed
