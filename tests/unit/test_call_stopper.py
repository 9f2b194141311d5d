"""CallStopper: a wide turn's cancellation reaches the workers in bounded broadcasts."""

from __future__ import annotations

from typing import Any

from toolfleet.orchestrator.fleet.stopping import STOP_BATCH, CallStopper
from toolfleet.shared.cancellation import STOP_COMMAND
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key


class Control:
    """Celery's remote control, recording each broadcast."""

    def __init__(self) -> None:
        self.broadcasts: list[tuple[str, list[dict[str, Any]]]] = []

    def broadcast(self, command: str, *, arguments: dict[str, Any], reply: bool) -> None:
        assert reply is False
        self.broadcasts.append((command, arguments["calls"]))


class App:
    def __init__(self) -> None:
        self.control = Control()


async def test_the_calls_of_a_wide_turn_are_named_in_broadcasts_of_at_most_stop_batch() -> None:
    stopper = CallStopper(Settings(redis_url="redis://unused"))
    app = App()
    stopper._app = app  # type: ignore[assignment]
    ids = [f"c{i}" for i in range(2 * STOP_BATCH + 1)]

    await stopper.stop(session_key("app", "u", "s"), ids)

    sizes = [len(calls) for _, calls in app.control.broadcasts]
    assert sizes == [STOP_BATCH, STOP_BATCH, 1]
    assert {command for command, _ in app.control.broadcasts} == {STOP_COMMAND}
    named = [c for _, calls in app.control.broadcasts for c in calls]
    assert [c["call_id"] for c in named] == ids  # each once, in order
    assert named[0] == {"call_id": "c0", "app_name": "app", "user_id": "u", "session_id": "s"}
