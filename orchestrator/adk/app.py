"""ADK's App: an agent with its name and the plugins that run around it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.plugins.apps import register_app_plugins
from toolfleet.orchestrator.plugins.base import BasePlugin

_VALID_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*$")


class ResumabilityConfig(BaseModel):
    """ADK's `ResumabilityConfig(is_resumable=)`, taken by App and changing nothing:
    toolfleet stores every step, so an invocation waiting for a long-running call, a
    confirmation or a credential always resumes where it stopped.

    Attributes:
        is_resumable: Taken and not read.
    """

    model_config = ConfigDict(extra="forbid")

    is_resumable: bool = False


class EventsCompactionConfig(BaseModel):
    """ADK's `EventsCompactionConfig`, with ADK's fields and checks, taken by App and
    changing nothing: toolfleet's own settings (TOOLFLEET_*) decide compaction.

    Attributes:
        summarizer: Taken and not used.
        compaction_interval: ADK's sliding-window trigger; set with `overlap_size`.
        overlap_size: Set with `compaction_interval`.
        token_threshold: ADK's token trigger; set with `event_retention_size`.
        event_retention_size: Set with `token_threshold`.

    Raises:
        pydantic.ValidationError: Neither trigger pair is set, or one is half set.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    summarizer: Any = None
    compaction_interval: int | None = Field(default=None, gt=0)
    overlap_size: int | None = Field(default=None, ge=0)
    token_threshold: int | None = Field(default=None, gt=0)
    event_retention_size: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _validate_trigger_params(self) -> EventsCompactionConfig:
        tokens = self.token_threshold is not None
        if tokens != (self.event_retention_size is not None):
            raise ValueError("token_threshold and event_retention_size must be set together.")
        interval = self.compaction_interval is not None
        if interval != (self.overlap_size is not None):
            raise ValueError("compaction_interval and overlap_size must be set together.")
        if not (tokens or interval):
            raise ValueError(
                "At least one compaction trigger must be configured: the token-threshold "
                "pair or the sliding-window pair."
            )
        return self


class App(BaseModel):
    """`App(name=, root_agent=, plugins=[...])`, as ADK's. The compaction, cache and
    resumability configs are taken as ADK takes them; toolfleet's own settings
    (TOOLFLEET_*) decide those.

    Attributes:
        name: The app's name: a letter, then letters, digits, "_" and "-"; not "user".
        root_agent: The agent that answers the app's sessions; required.
        plugins: BasePlugins run around every model and tool call of its agents.
        events_compaction_config: Taken and not used.
        context_cache_config: Taken and not used.
        resumability_config: Taken and not used.

    Raises:
        pydantic.ValidationError: The name is not valid, `root_agent` is missing or not an
            Agent, or a plugin is not a BasePlugin.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str
    # Checked by isinstance below: an Agent is a dataclass pydantic would rebuild.
    root_agent: Any = None
    plugins: list[Any] = Field(default_factory=list)
    events_compaction_config: Any = None
    context_cache_config: Any = None
    resumability_config: Any = None

    @model_validator(mode="after")
    def _validate(self) -> App:
        if not _VALID_NAME.match(self.name):
            raise ValueError(
                f"Invalid app name '{self.name}': must start with a letter and can only "
                "consist of letters, digits, underscores, and hyphens."
            )
        if self.name == "user":
            raise ValueError("App name cannot be 'user'; reserved for end-user input.")
        if self.root_agent is None:
            raise ValueError("root_agent must be provided.")
        if not isinstance(self.root_agent, Agent):
            raise ValueError(f"root_agent must be an Agent, not {type(self.root_agent).__name__}")
        for plugin in self.plugins:
            if not isinstance(plugin, BasePlugin):
                raise ValueError(f"plugins must be BasePlugins, not {type(plugin).__name__}")
        # Where its agent tools' runs on the workers find them (AgentTool include_plugins).
        register_app_plugins(self.name, self.plugins)
        return self


def resolved_app(
    app: App | None,
    app_name: str | None,
    agent: Agent | None,
    plugins: Sequence[BasePlugin] | None,
) -> App:
    """The App a Runner runs: `app`, or `agent` named `app_name` (ADK's rules and
    messages for what may be combined)."""
    if (app is None) == (agent is None):
        raise ValueError(
            "Pass exactly one of app or agent to Runner()"
            + (" (got both)." if app is not None else ".")
        )
    if app is not None:
        if plugins is not None:
            raise ValueError(
                "When app is provided, plugins should not be provided and should be "
                "provided in the app instead."
            )
        return app
    if not app_name:
        raise ValueError("app_name is required when agent is provided without app.")
    # Not validated, as ADK's: an (app_name, agent) Runner took any name.
    return App.model_construct(name=app_name, root_agent=agent, plugins=list(plugins or ()))
