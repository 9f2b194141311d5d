"""One invocation's working set, and the updates the loop yields while it runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.fleet.protocol import ToolRunner
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.plugins.context import CallbackContext
from toolfleet.orchestrator.sessions.cancels import Cancellation
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import HeldAppend, SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.ids import unique_hex
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall, ToolResult
from toolfleet.shared.toolsets import ReadonlyContext

if TYPE_CHECKING:
    from opentelemetry.trace import Span


@dataclass
class Invocation:
    """What one run of the loop works with: the agent answering, the session, and the
    replica's store, fleet and models."""

    agent: Agent  # the agent answering now; transfer_to_agent and escalate change it
    models: Callable[[Agent], Model]
    session: Session
    store: SessionStore
    runner: ToolRunner
    settings: Settings
    keys: Keys
    id: str = ""
    depth: int = 0  # agent-tool nesting: 0 for a user's invocation
    answered: bool = False  # the model's answer is stored (and the session owes nothing)
    lease: LeaseHold | None = None  # every write is fenced by it
    release_on_answer: bool = True  # release the lease in the answer's write (last step)
    plugins: Sequence[BasePlugin] = field(default_factory=tuple)  # the app's, around every call
    cancellation: Cancellation | None = None  # set when the session is cancelled
    # Set by a cancellation kept for the session that stops only its open turn: the
    # message that found the turn open came after it.
    cancels_open_turn_only: bool = False
    span: Span | None = None  # its trace's root span; None while tracing is off
    # A turn's responses, in the session in memory, for the next write to store (held.py).
    held: HeldAppend | None = None
    held_in_doubt: bool = False  # a write carrying them failed: they may have landed
    # Agents whose before_agent_callback ran, in order; whether one answered (agent_callbacks.py).
    entered: list[Agent] = field(default_factory=list)
    answered_by_callback: bool = False
    branch: str | None = None  # set on every event it stores (a ParallelAgent's branch)
    # Its answer is the call's: the session owes nothing after it. False for the
    # sub-agents of a workflow agent, which runs on after them (loop/workflow.py).
    answers_call: bool = True
    # Whether the ParallelAgent around it was told to stop (a branch escalated): then
    # it starts no more model turns nor sub-agents (loop/workflow.py).
    halted: Callable[[], bool] | None = None

    def __post_init__(self) -> None:
        self.id = self.id or new_invocation_id()

    @property
    def fence(self) -> Fence | None:
        """The lease every write of this invocation is fenced by (None: in-process tests)."""
        return self.lease.fence if self.lease is not None else None

    def callback_context(self, agent: Agent | None = None) -> CallbackContext:
        """What callbacks and plugins' run callbacks see of this invocation, as `agent`'s
        (default: the agent answering now)."""
        return CallbackContext(
            self.session.state,
            agent_name=(agent or self.agent).name,
            invocation_id=self.id,
            session_id=self.session.id,
            user_id=self.session.user_id,
            app_name=self.session.app_name,
            events=self.session.events,
            stored=self.store,
        )

    def readonly_context(self) -> ReadonlyContext:
        """What toolsets see when they choose their tools for this invocation."""
        return ReadonlyContext.of(
            self.session.state,
            agent_name=self.agent.name,
            invocation_id=self.id,
            session_id=self.session.id,
            user_id=self.session.user_id,
            app_name=self.session.app_name,
        )


@dataclass(frozen=True)
class CallsDispatched:
    """Progress: the calls of a turn left for the fleet. Once per turn, after the loop's
    own answers and before any result of the fleet; a turn wider than one chunk of
    checks (`loop/planning.py`) is told once its last call is checked, its first ones
    already sent.

    Attributes:
        invocation_id: The invocation whose turn made the calls.
        calls: The calls sent, in the model's order.
    """

    invocation_id: str
    calls: list[ToolCall]


@dataclass(frozen=True)
class CallFinished:
    """Progress: one call's result arrived (in arrival order, not call order).

    Attributes:
        invocation_id: The invocation whose turn made the call.
        result: The call's result as the worker posted it.
    """

    invocation_id: str
    result: ToolResult


class EndReason(StrEnum):
    """Why an invocation ended.

    Attributes:
        ANSWERED: The model replied without calls.
        SKIPPED_SUMMARY: The tools' responses are the answer (skip_summarization).
        ESCALATED: The root agent gave up its turn.
        AWAITING_CREDENTIAL: A tool asked the user for a credential.
        AWAITING_CONFIRMATION: A call waits for a person's yes or no.
        CANCELLED: The session was cancelled: what was in flight was stopped.
        MAX_STEPS: The loop stopped after `max_steps` model calls.
    """

    ANSWERED = "answered"  # the model replied without calls
    SKIPPED_SUMMARY = "skipped_summary"  # the tools' responses are the answer
    ESCALATED = "escalated"  # the root agent gave up its turn
    AWAITING_CREDENTIAL = "awaiting_credential"  # a tool asked the user for a credential
    AWAITING_CONFIRMATION = "awaiting_confirmation"  # a call waits for a person's yes or no
    CANCELLED = "cancelled"  # the session was cancelled: what was in flight was stopped
    MAX_STEPS = "max_steps"  # the loop stopped after max_steps model calls


@dataclass(frozen=True)
class InvocationEnded:
    """The last update of every invocation that ends normally (one that fails raises).

    Attributes:
        invocation_id: The invocation that ended.
        reason: Why it ended.
        error: A failure the user should see (max_steps); None otherwise.
    """

    invocation_id: str
    reason: EndReason
    error: str | None = None


Update = Event | CallsDispatched | CallFinished | InvocationEnded


def new_invocation_id() -> str:
    """A new invocation's id."""
    return f"inv-{unique_hex()}"
