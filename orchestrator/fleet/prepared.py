"""A call as the fleet runs it, prepared once when its turn is dispatched."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from toolfleet.orchestrator.fleet.dispatch import Dispatch
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.shared.messages import ToolCall


@dataclass(frozen=True)
class PreparedCall:
    """A planned call with what the fleet derives from it, each computed once: the pool
    that runs it, its time limit, and its message (arguments masked for Flower and the
    call's span, sealed and signed for the wire).

    The message is made when first needed (`make_dispatch(call)`), as its call is about to
    be sent: a wide turn's first calls then reach the workers while the last ones are
    still to be encoded, rather than after every call of the turn was."""

    planned: PlannedCall
    pool: str
    time_limit_s: float
    make_dispatch: Callable[[ToolCall], Dispatch] = field(repr=False, compare=False)
    # The call's id: a turn's bookkeeping reads it ten times per call.
    call_id: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "call_id", self.planned.call.call_id)

    @cached_property
    def dispatch(self) -> Dispatch:
        """The call's message, made once."""
        return self.make_dispatch(self.planned.call)

    @property
    def call(self) -> ToolCall:
        """The call's envelope."""
        return self.planned.call

    @property
    def has_masked_args(self) -> bool:
        """Whether an argument's value is secret-named (masked where the call is shown)."""
        return self.dispatch.shown_args is not self.planned.call.args
