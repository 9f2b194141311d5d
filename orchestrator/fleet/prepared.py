"""A call as the fleet runs it, prepared once when its turn is dispatched."""

from __future__ import annotations

from dataclasses import dataclass

from toolfleet.orchestrator.fleet.dispatch import Dispatch
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.shared.messages import ToolCall


@dataclass(frozen=True)
class PreparedCall:
    """A planned call with what the fleet derives from it, each computed once: the pool
    that runs it, its time limit, and its message (arguments masked for Flower and the
    call's span, sealed for the wire)."""

    planned: PlannedCall
    pool: str
    time_limit_s: float
    dispatch: Dispatch

    @property
    def call(self) -> ToolCall:
        """The call's envelope."""
        return self.planned.call

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.planned.call.call_id

    @property
    def has_masked_args(self) -> bool:
        """Whether an argument's value is secret-named (masked where the call is shown)."""
        return self.dispatch.shown_args is not self.planned.call.args
