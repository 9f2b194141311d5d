"""ADK's LlmAgent keywords on toolfleet's Agent, checked when it is built.

An ADK program moved over keeps every keyword it passes: the ones toolfleet runs
work as in ADK (their values are checked here as ADK checks them), and each one in
REFUSED stops the build with what to use instead - never ignored, so an agent never
runs without something its author asked for.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from google.genai import types

from toolfleet.orchestrator.agents.builtin_tools import BuiltInCodeExecutor
from toolfleet.orchestrator.agents.planners import BasePlanner
from toolfleet.shared.errors import ConfigError

# Each refused field, the values it is accepted with (ADK's default, or what toolfleet
# does anyway), and what to do instead.
REFUSED: dict[str, tuple[tuple[object, ...], str]] = {
    "input_schema": (
        (None,),
        "it shapes the input of the agent used as a tool: give the AgentTool's agent a "
        "typed tool function instead, or describe the input in its description",
    ),
    "state_schema": (
        (None,),
        "check the state in a before_agent_callback and return a Content to refuse the run",
    ),
    "mode": (
        (None, "chat"),
        "an agent answers in chat mode only: leave mode unset (or 'chat')",
    ),
    "parallel_worker": (
        (None,),
        "the calls of one model turn already run in parallel on the fleet; leave it unset",
    ),
    "retry_config": (
        (None,),
        "a model call is retried by GeminiModel (retry_attempts); a tool call as its "
        "@tool(retry_on=..., max_retries=...) says",
    ),
    "timeout": (
        (None,),
        "set TOOLFLEET_MODEL_TIMEOUT_S for model calls and @tool(timeout_s=...) (or "
        "TOOLFLEET_DEFAULT_TIMEOUT_S) for tool calls",
    ),
    "rerun_on_resume": (
        (False,),
        "a resumed invocation goes on from its open turn; leave it False",
    ),
    "wait_for_output": (
        (False,),
        "an invocation always runs until the agent answers; leave it False",
    ),
    "parent_agent": (
        (None,),
        "list the agent in its parent's sub_agents; the parent is set from there",
    ),
}


_C = TypeVar("_C", bound=type)


def takes_adk_keywords(cls: _C) -> _C:
    """Let a dataclass's constructor take ADK's keywords it has no field for: a refused
    field at its default is dropped, set otherwise it is a ConfigError saying what to use
    instead; a GenerateContentConfig field passed on its own (temperature=...) points at
    generate_content_config, as ADK's LlmAgent does. Any other keyword stays a TypeError."""
    init = vars(cls)["__init__"]
    own = set(getattr(cls, "__dataclass_fields__", ()))

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        foreign = {k: kwargs.pop(k) for k in list(kwargs) if k not in own and k in _ADK_ONLY}
        if foreign:
            name = kwargs.get("name", args[0] if args else "?")
            _refuse(str(name), foreign)
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _refuse(agent_name: str, given: dict[str, Any]) -> None:
    """Raise ConfigError naming every keyword of `given` that may not be set so."""
    problems = [
        f"{field}: {REFUSED[field][1]}"
        for field in given
        if field in REFUSED and given[field] not in REFUSED[field][0]
    ]
    problems += [f"{k}: set {_OWN[k]} instead" for k in given if k in _OWN]
    misplaced = [k for k in given if k in _CONFIG_FIELDS]
    if misplaced:
        example = ", ".join(f"{k}=..." for k in misplaced)
        problems.append(
            f"{', '.join(misplaced)} {'is a' if len(misplaced) == 1 else 'are'} "
            f"GenerateContentConfig field{'s' if len(misplaced) > 1 else ''}: pass "
            f"generate_content_config=types.GenerateContentConfig({example})"
        )
    if problems:
        raise ConfigError(
            f"agent {agent_name!r} sets what toolfleet does not take so - " + "; ".join(problems)
        )


# GenerateContentConfig fields the agent sets from fields of its own, as ADK points them.
_OWN = {
    "system_instruction": "Agent(instruction=...)",
    "response_schema": "Agent(output_schema=...)",
    "response_json_schema": "Agent(output_schema=...)",
    "http_options": "the model's options (GeminiModel(base_url=...))",
}
_CONFIG_FIELDS = frozenset(types.GenerateContentConfig.model_fields) - set(_OWN) - {"tools"}
_ADK_ONLY = frozenset(REFUSED) | _CONFIG_FIELDS | frozenset(_OWN)


def checked_config(agent_name: str, config: object) -> types.GenerateContentConfig | None:
    """The agent's generate_content_config, checked as ADK checks it: what the agent sets
    itself (tools, instruction, output schema) and transport settings are refused."""
    if config is None:
        return None
    if isinstance(config, dict):
        config = types.GenerateContentConfig.model_validate(config)
    if not isinstance(config, types.GenerateContentConfig):
        raise ConfigError(
            f"agent {agent_name!r}: generate_content_config must be a "
            f"google.genai types.GenerateContentConfig, not {type(config).__name__}"
        )
    where = f"agent {agent_name!r}: "
    if config.tools:
        raise ConfigError(
            where + "all tools must be set via Agent(tools=[...]), not via "
            "generate_content_config.tools"
        )
    if config.system_instruction:
        raise ConfigError(
            where + "the system instruction must be set via Agent(instruction=...), not via "
            "generate_content_config.system_instruction"
        )
    if config.response_schema or config.response_json_schema:
        raise ConfigError(
            where + "a response schema must be set via Agent(output_schema=...), not via "
            "generate_content_config"
        )
    http = config.http_options
    if http is not None and http.base_url:
        raise ConfigError(
            where + "the base URL is a transport setting: set it on the model "
            "(GeminiModel(base_url=...)), not in generate_content_config.http_options"
        )
    if http is not None and (http.timeout is not None or http.retry_options is not None):
        # The model's own bound and retries, which its errors report, hold for every call.
        raise ConfigError(
            where + "a model call's time limit and retries are the model's: set "
            "TOOLFLEET_MODEL_TIMEOUT_S (or GeminiModel(timeout_s=..., retry_attempts=...)), "
            "not generate_content_config.http_options.timeout or retry_options"
        )
    return config


def static_text(agent_name: str, value: object) -> str:
    """The text of an agent's static_instruction (a str, Part, Content or list of them);
    ConfigError for anything but text, which toolfleet's system instruction cannot carry."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, types.Content):
        items: list[object] = list(value.parts or ())
    elif isinstance(value, list):
        items = list(value)
    else:
        items = [value]
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, types.Part) and item.text is not None:
            texts.append(item.text)
        else:
            raise ConfigError(
                f"agent {agent_name!r}: static_instruction may hold text only (a str, or Parts "
                f"with text), not {type(item).__name__}; put files in the user's message"
            )
    return "".join(texts)


def checked_planning(agent_name: str, planner: object, code_executor: object) -> None:
    """ConfigError for a planner or code executor toolfleet does not run: ADK's
    planners and BuiltInCodeExecutor (from toolfleet.adk) only."""
    where = f"agent {agent_name!r}: "
    if planner is not None and not isinstance(planner, BasePlanner):
        raise ConfigError(
            where + "planner must be a BuiltInPlanner, a PlanReActPlanner or another "
            f"BasePlanner (from toolfleet.adk), not {type(planner).__name__}"
        )
    if code_executor is not None and not isinstance(code_executor, BuiltInCodeExecutor):
        raise ConfigError(
            where + "code_executor must be BuiltInCodeExecutor() (Gemini runs the code), "
            f"not {type(code_executor).__name__}: run other code in a tool function on "
            "the fleet's workers, where tools run"
        )
