"""A model turn's calls checked one by one: each is either planned (sent to the fleet)
or answered here (invalid, over the cap, a callback's answer, a confirmation to ask, a
repeat), in chunks, so that a wide turn's first calls are sent while the rest are still
being checked."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from google.genai import types
from pydantic_core import from_json, to_json

from toolfleet.orchestrator.agents.structured import SetModelResponseTool, answer_structured
from toolfleet.orchestrator.agents.transfer import TransferTool, answer_transfer
from toolfleet.orchestrator.fleet.protocol import PlannedCall, failed
from toolfleet.orchestrator.loop.callbacks import Hooks
from toolfleet.orchestrator.loop.confirmation import ask_confirmation
from toolfleet.orchestrator.loop.deep_args import deep_args_problem, large_args_problem
from toolfleet.orchestrator.loop.duplicates import Duplicates
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Invocation
from toolfleet.orchestrator.loop.tool_callbacks import ToolCallbacks
from toolfleet.orchestrator.plugins.llm_calls import ceiling_of
from toolfleet.shared import tracing
from toolfleet.shared.config import Settings
from toolfleet.shared.messages import ToolCall, ToolResult
from toolfleet.shared.redaction import SEALED, mask_values, mentions_sealed, secret_values
from toolfleet.shared.tools import FunctionTool, ToolRegistry

# Calls checked between two sends of a wide turn: about one write's worth of messages.
PLAN_CHUNK = 200


class TurnPlan:
    """The calls of one model turn, checked in order (`chunks`); the answers made here
    go in `results`, and `announce` says what the turn did with each call."""

    def __init__(
        self, inv: Invocation, tools: ToolRegistry, results: dict[str, ToolResult]
    ) -> None:
        self._inv = inv
        self._tools = tools
        self.results = results  # call id -> the answer made here, and later the fleet's
        self.callbacks = ToolCallbacks(Hooks(inv.agent, inv.plugins))
        self.duplicates = Duplicates(inv.settings.dedupe_tool_calls)
        self.planned: list[PlannedCall] = []
        self.skipping: set[str] = set()  # AgentTool(skip_summarization=True)'s calls
        self.done = False  # every call checked
        self.announced = False

    async def chunks(
        self, calls: list[types.FunctionCall], size: int = PLAN_CHUNK
    ) -> AsyncGenerator[list[PlannedCall], None]:
        """The calls to send, checked `size` calls at a time (a chunk may be empty: its
        calls were all answered here); `done` once the last is checked."""
        chunk: list[PlannedCall] = []
        for index, fc in enumerate(calls):
            planned = await self._check(index, fc, len(calls))
            if planned is not None:
                chunk.append(planned)
            if (index + 1) % size == 0 and index + 1 < len(calls):
                yield chunk
                chunk = []
        self.done = True
        yield chunk

    def announce(self) -> Iterator[CallFinished | CallsDispatched]:
        """Once every call is checked (and before any result of the fleet is told): the
        answers made here, then the calls sent. Once only."""
        assert self.done and not self.announced
        self.announced = True
        inv = self._inv
        for result in list(self.results.values()):
            for copy in [result, *self.duplicates.copies(result)]:
                self.results[copy.call_id] = copy
                yield CallFinished(inv.id, copy)
        if self.planned:
            yield CallsDispatched(inv.id, [p.call for p in self.planned])

    async def finish(self, arrived: ToolResult) -> list[CallFinished]:
        """A result of the fleet, through the after-tool callbacks, with the copies of
        the calls that repeated it."""
        result = await self.callbacks.finish(arrived)
        if result.call_id in self.skipping:
            result.actions.skip_summarization = True
        finished = []
        for copy in [result, *self.duplicates.copies(result)]:
            self.results[copy.call_id] = copy
            finished.append(CallFinished(self._inv.id, copy))
        return finished

    async def _check(self, index: int, fc: types.FunctionCall, made: int) -> PlannedCall | None:
        """Plan one call, or answer it here (into `results`): None then."""
        inv, results, callbacks = self._inv, self.results, self.callbacks
        cap = inv.settings.max_calls_per_turn
        args = dict(fc.args or {})
        # Measured first: everything below (size, sealed keys, the schema) recurses.
        too_deep = deep_args_problem(fc.name or "", args, inv.settings.max_json_depth)
        envelope = make_envelope(inv, fc.id or "", fc.name or "", {} if too_deep else args)
        if index >= cap:
            results[envelope.call_id] = over_cap(envelope, made, cap)
            return None
        tool = self._tools.get(envelope.tool)
        if tool is None:
            available = ", ".join(sorted(self._tools)) or "none"
            results[envelope.call_id] = failed(
                envelope,
                "UnknownTool",
                f"there is no tool named {envelope.tool!r}; available tools: {available}",
            )
            return None
        if too_deep:
            results[envelope.call_id] = failed(envelope, "InvalidArguments", too_deep)
            return None
        args, refused = checked_args(tool, envelope, inv.settings)
        if refused is not None:
            results[envelope.call_id] = refused
            return None
        if isinstance(tool, TransferTool | SetModelResponseTool):
            # Answered here, around the tool callbacks as ADK's function tools are; stored
            # with the others.
            answer = await callbacks.before(tool, envelope, args)
            if answer is None and isinstance(tool, TransferTool):
                answer = answer_transfer(envelope, tool, args["agent_name"])
            elif answer is None and isinstance(tool, SetModelResponseTool):
                answer = answer_structured(envelope, tool)  # the final answer, as a call
            assert answer is not None
            results[envelope.call_id] = await callbacks.finish(answer)
            return None
        if self.duplicates.drop(envelope, tool):
            return None
        given = to_json(args, fallback=str) if callbacks.active else None
        answer = await callbacks.before(tool, envelope, args)
        if answer is None and given is not None:
            edited = to_json(args, fallback=str)
            if edited != given:
                # before_tool changed the arguments in place, as ADK's may: the tool runs
                # with those (checked as the model's were), and the confirmation asks of
                # them.
                envelope.args = from_json(edited)
                args, answer = checked_args(tool, envelope, inv.settings)
        if answer is None:  # not sent until a person confirms it
            answer = await ask_confirmation(tool, envelope, args)
        if answer is not None:
            results[envelope.call_id] = await callbacks.finish(answer)
            return None
        planned = PlannedCall(envelope, tool, tracing.traceparent(inv.span))
        self.planned.append(planned)
        if getattr(tool, "skip_summarization", False):
            self.skipping.add(envelope.call_id)
        return planned


def checked_args(
    tool: FunctionTool, envelope: ToolCall, settings: Settings
) -> tuple[dict[str, Any], ToolResult | None]:
    """The call's arguments as its tool takes them, or the answer refusing them: over the
    size limit, naming the reserved sealed key, or not what the tool declares."""
    too_large = large_args_problem(envelope.args, settings.max_payload_bytes)
    if too_large:
        return {}, failed(envelope, "InvalidArguments", too_large)
    if mentions_sealed(envelope.args):
        # Only the orchestrator seals; a model (or a prompt injected into it) that passes
        # a sealed token of someone else's must not have a worker open it.
        reserved = f"the key {SEALED!r} is reserved: it may not appear in a tool's arguments"
        return {}, failed(envelope, "InvalidArguments", reserved)
    args, problems = tool.validate(envelope.args)
    if problems:
        # A problem quotes the value it found: a secret argument's is masked.
        secrets = secret_values(envelope.args, settings.secret_arg_names)
        detail = mask_values("; ".join(str(p) for p in problems), secrets)
        invalid = f"invalid arguments for {tool.name}: {detail}"
        return {}, failed(envelope, "InvalidArguments", invalid)
    return args, None


def over_cap(call: ToolCall, made: int, cap: int) -> ToolResult:
    """The answer to a call beyond the turn's cap: not run, and the model is told the limit
    and what to do."""
    return failed(
        call,
        "TooManyCalls",
        f"this turn made {made:,} function calls, but the fleet runs at most {cap:,} calls of "
        f"one turn (a guard against runaway turns, TOOLFLEET_MAX_CALLS_PER_TURN): the first "
        f"{cap:,} ran and the other {made - cap:,}, this call ({call.tool}) among them, did "
        "not. If you still need it, call it again in a later turn; make at most "
        f"{cap:,} calls per turn.",
    )


def make_envelope(inv: Invocation, call_id: str, tool: str, args: dict[str, Any]) -> ToolCall:
    """The ToolCall sent for one call: its session's state snapshot, the stream to reply on
    and the run's ceiling on model calls, for an agent tool's run to obey."""
    return ToolCall(
        call_id=call_id,
        tool=tool,
        args=args,
        session_id=inv.session.id,
        app_name=inv.session.app_name,
        user_id=inv.session.user_id,
        invocation_id=inv.id,
        agent=inv.agent.name,
        state=dict(inv.session.state),
        reply_to=inv.keys.results(inv.session.key),
        dispatched_at=time.time(),
        depth=inv.depth,
        max_llm_calls=ceiling_of(inv.plugins),
    )
