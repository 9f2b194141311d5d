"""AgentTool: another agent as a tool, run as a task on a worker pool (`agents`).

The wrapped agent runs its own model loop on the worker, in a child session of the
caller's (same app and user, so `user:`/`app:` state is shared); its tool calls are
dispatched to the fleet like any other. Its final text - or, with an output schema,
the parsed object - is the function response; its state writes come back as the
calling tool's delta. It obeys the calling run's ceiling on model calls (ADK's
RunConfig.max_llm_calls), counting its own calls from 0, and runs with its app's
plugins (those of the App defined in the module the worker imports), unless
`include_plugins` is False.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from google.genai import types
from pydantic import ValidationError

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError, ToolError
from toolfleet.shared.keys import SessionKey, agent_tool_child_id, session_key
from toolfleet.shared.state import TEMP_PREFIX
from toolfleet.shared.tools import FunctionTool, ToolOptions

if TYPE_CHECKING:
    from toolfleet.orchestrator.loop.runner import Runner
    from toolfleet.orchestrator.sessions.leases import LeaseHold
    from toolfleet.orchestrator.sessions.session import Session

log = logging.getLogger(__name__)

DEFAULT_POOL = "agents"
DEFAULT_TIMEOUT_S = 300.0
MAX_DEPTH = 3  # an agent tool may call agent tools this many levels deep
CLOSE_ATTEMPTS = 3  # to close a child's open turn when its run is cut short


@dataclass(frozen=True, eq=False)
class AgentToolSpec(FunctionTool):
    """A FunctionTool that remembers its agent, so workers register the agent's tools."""

    agent: Agent | None = field(default=None, kw_only=True)
    skip_summarization: bool = field(default=False, kw_only=True)
    include_plugins: bool = field(default=True, kw_only=True)
    # The module that made it: the one a worker imports to find it (its function is
    # toolfleet's own), e.g. when an ADK program's Runner starts local workers.
    defined_in: str = field(default="", kw_only=True)
    # Its function is made per agent; workers find it through the agent, not by name.
    checks_importable: ClassVar[bool] = False

    def renamed(self, name: str) -> FunctionTool:
        """The same agent tool under another name, keeping its agent and skip_summarization."""
        return AgentToolSpec(
            self.func,
            name,
            self.options,
            agent=self.agent,
            skip_summarization=self.skip_summarization,
            include_plugins=self.include_plugins,
            defined_in=self.defined_in,
        )


def AgentTool(
    agent: Agent,
    skip_summarization: bool = False,
    *,
    include_plugins: bool = True,
    pool: str = DEFAULT_POOL,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> AgentToolSpec:
    """`agent` as a tool, run with its whole loop by a worker of `pool` within `timeout_s`.

    With `skip_summarization`, the agent's answer goes to the user as is: the calling
    model is not asked to summarize it.

    Args:
        agent: The agent the tool runs; the tool is named after it and takes one
            argument, `request`, the text the agent is asked.
        skip_summarization: The agent's answer ends the calling agent's turn as is.
        include_plugins: The agent's run has its app's plugins (those of the App
            defined in a module the worker imports), as ADK's nested run has its
            parent runner's; False: none. Every AgentTool of one agent says the same.
        pool: The pool whose workers run it; default `"agents"`.
        timeout_s: Time limit of the whole run of the agent; default 300 seconds.

    Returns:
        The FunctionTool (an AgentToolSpec, which keeps the agent so that workers
        register its tools too).

    Raises:
        ToolDefinitionError: The agent's name is not an identifier, a limit is out of
            range, or another AgentTool of the agent said otherwise of include_plugins.
    """
    return AgentToolSpec(
        _runner_function(agent, include_plugins),
        agent.name,
        ToolOptions(pool=pool, timeout_s=timeout_s),
        agent=agent,
        skip_summarization=skip_summarization,
        include_plugins=include_plugins,
        defined_in=sys._getframe(1).f_globals.get("__name__", ""),
    )


_FUNCTIONS: dict[int, tuple[Callable[..., Any], bool]] = {}


def _runner_function(agent: Agent, include_plugins: bool) -> Callable[..., Any]:
    """One function per agent, so two AgentTools of one agent are the same worker task
    (skip_summarization is applied by the calling orchestrator, not on the worker);
    whether its run has the app's plugins is the task's, so they must agree on it."""
    if id(agent) in _FUNCTIONS:
        function, included = _FUNCTIONS[id(agent)]
        if included != include_plugins:
            raise ToolDefinitionError(
                [
                    f"AgentTools of agent {agent.name!r} disagree on include_plugins: the "
                    "agent runs as one task on the workers; give every one the same value"
                ]
            )
        return function

    async def run_agent(request: str, tool_context: ToolContext) -> str | dict[str, Any]:
        return await run_agent_as_tool(agent, request, tool_context, include_plugins)

    run_agent.__name__ = agent.name
    run_agent.__doc__ = (
        f"{agent.description or f'Agent {agent.name}.'}\n\n"
        "Args:\n    request: Everything the agent needs to know to do its job."
    )
    _FUNCTIONS[id(agent)] = (run_agent, include_plugins)
    return run_agent


async def run_agent_as_tool(
    agent: Agent, request: str, tool_context: ToolContext, include_plugins: bool = True
) -> str | dict[str, Any]:
    """Runs on a worker: the agent's whole loop, in a child session. Returns what ADK's
    AgentTool returns: the answer's text (the model gets {"result": text}), or with an
    output schema its validated dict."""
    # Imported when an agent tool runs: a module that only declares one (and the
    # workers that import it) does not load the loop.
    from toolfleet.orchestrator.loop.runner import Runner
    from toolfleet.orchestrator.plugins.apps import app_plugins
    from toolfleet.orchestrator.plugins.llm_calls import limited

    if tool_context.depth >= MAX_DEPTH:
        raise ToolError(
            f"agent tool {agent.name!r} would nest deeper than {MAX_DEPTH} levels; answer directly"
        )
    settings = tool_context.settings  # the worker's own: its Redis, prefix and pools
    child_id = agent_tool_child_id(tool_context.session_id, tool_context.function_call_id)
    child = session_key(tool_context.app_name, tool_context.user_id, child_id)
    # The caller's ceiling on model calls holds for this run too, counted from 0 (ADK's
    # nested run is given the caller's RunConfig).
    inherited = app_plugins(tool_context.app_name) if include_plugins else ()
    plugins = (*inherited, *limited(tool_context.max_llm_calls))
    async with Runner(agent, settings, depth=tool_context.depth + 1, plugins=plugins) as runner:
        await runner.store.get_or_create(
            tool_context.app_name, tool_context.user_id, child_id, owner=agent.name
        )
        # The child runs under its own lease, renewed by this worker: no sweep takes it
        # over while it runs. A redelivered call waits for a dead worker's lease to lapse.
        wait_s = 2 * settings.lease_ttl_s
        async with runner.leases.hold(child, wait_s=wait_s) as hold:
            session = await runner.store.get(child)
            session.state.update(tool_context.state)  # the caller's snapshot, temp: included
            before = dict(session.state)
            # A delivery of this call that ran before (its worker died) left the request
            # in the child: its answer, if it came, is the call's; else the child goes on
            # from where it was (its open turn collected, not sent again).
            ran_before = any(e.author == "user" for e in session.events)
            answer = _answer_given(session) if ran_before else ""
            message = types.Content(role="user", parts=[types.Part(text=request)])
            try:
                if not answer:
                    updates = runner.invoke(session, None if ran_before else message, lease=hold)
                    async for update in updates:
                        if isinstance(update, Event) and answer_of(update):
                            answer = answer_of(update)
            except BaseException as exc:
                await _close_child(runner, child, agent.name, exc, hold)
                raise
        for key, value in session.state.items():
            if before.get(key) != value or key not in before:
                tool_context.state[key] = value
        for key, value in _temp_writes(session.events).items():
            tool_context.state[key] = value
    return _response(agent, answer)


async def _close_child(
    runner: Runner, child: SessionKey, name: str, exc: BaseException, hold: LeaseHold
) -> None:
    """The child's run ended without its answer: answer what its turn left open (calls
    still running, or never sent), so the child keeps no call without a response, and
    have the workers stop those still running. If
    this fails too (Redis away, the lease lost), the child stays owed and the sweep
    closes it once its lease lapses."""
    from toolfleet.orchestrator.loop.closing import AGENT_TOOL_ENDED, close_open_turn

    if isinstance(exc, asyncio.CancelledError):
        how = "was stopped (its time limit, or its session was cancelled)"
    else:
        how = f"failed ({type(exc).__name__})"
    why = f"agent tool {name!r} {how} before this call was answered; its result is not used"
    # Its time limit and Celery's soft limit both cancel the run, one after the other: a
    # second cancellation must not cut the close short (the caller raises it on anyway).
    for _ in range(CLOSE_ATTEMPTS):
        try:
            session = await runner.store.get(child)
            closed = await close_open_turn(
                runner.store, session, error_type=AGENT_TOOL_ENDED, why=why, fence=hold.fence
            )
            # Those running on other workers are stopped, as a cancelled turn's are.
            await runner.tool_runner.stop(child, closed)
            return
        except asyncio.CancelledError:
            continue  # a write it cut short is found stored, or made again: fenced, once
        except Exception as exc:
            log.warning("could not close the open turn of %s; the sweep will", child, exc_info=exc)
            return
    log.warning("could not close the open turn of %s (cancelled); the sweep will", child)


def _answer_given(session: Session) -> str:
    """The child's answer, when a run of it before this one answered ("" otherwise: it
    stopped before, with its turn open or owed)."""
    if session.open_turn() is not None:
        return ""
    for event in reversed(session.events):
        if event.content is None:
            continue
        if event.author == "user" or not event.is_final_response():
            return ""
        return answer_of(event)
    return ""


def _temp_writes(events: list[Event]) -> dict[str, Any]:
    """temp: keys written inside the child invocation (cleared from its state at the end)."""
    writes: dict[str, Any] = {}
    for event in events:
        writes.update({k: v for k, v in event.state_delta.items() if k.startswith(TEMP_PREFIX)})
    return writes


def _response(agent: Agent, answer: str) -> str | dict[str, Any]:
    if agent.output_schema is None:
        return answer
    try:
        return agent.output_schema.model_validate_json(answer).model_dump(mode="json")
    except ValidationError as exc:
        raise ToolError(
            f"agent {agent.name!r} answered {answer[:200]!r}, not JSON of its output schema: "
            f"{json.dumps(exc.errors(include_url=False), default=str)[:500]}"
        ) from exc
