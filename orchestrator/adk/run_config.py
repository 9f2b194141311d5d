"""ADK's RunConfig, and the limit on model calls it sets for one run.

Every field of ADK's RunConfig is accepted, so a program's `RunConfig(...)` moves over
unchanged; `max_llm_calls` is enforced (LlmCallsLimitExceededError, as ADK raises).
The others shape ADK's live and streaming modes, which toolfleet does not have: they
are taken and change nothing (a run yields whole events, `partial` never True).
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Any

from google.genai import types
from pydantic import BaseModel, ConfigDict, Field, field_validator

# Defined with the plugin that enforces the limit (the loop raises it too); ADK's names.
from toolfleet.orchestrator.plugins.llm_calls import LlmCallLimit as LlmCallLimit
from toolfleet.orchestrator.plugins.llm_calls import (
    LlmCallsLimitExceededError as LlmCallsLimitExceededError,
)

DEFAULT_MAX_LLM_CALLS = 500  # ADK's, unless ADK_MAX_LLM_CALLS says otherwise


class StreamingMode(Enum):
    """ADK's streaming modes (toolfleet's runs yield whole events in each)."""

    NONE = None
    SSE = "sse"
    BIDI = "bidi"


def _default_max_llm_calls() -> int:
    try:
        return int(os.environ.get("ADK_MAX_LLM_CALLS") or DEFAULT_MAX_LLM_CALLS)
    except ValueError:
        return DEFAULT_MAX_LLM_CALLS  # as ADK: a bad value leaves the default


class RunConfig(BaseModel):
    """ADK's RunConfig: its fields, checked for names as ADK checks them.

    Attributes:
        max_llm_calls: Model calls one run may make, and each agent tool's run within it
            (counted apart); 0 or less: no limit (as ADK). Default: ADK_MAX_LLM_CALLS,
            else 500.
        streaming_mode: Taken; a run yields whole events in every mode.
        custom_metadata: Taken and not used.
        model_input_context: Taken and not used.
        include_thoughts_from_other_agents: Taken and not used.
        support_cfc: Taken and not used.
        save_input_blobs_as_artifacts: Taken and not used.
        save_live_blob: Taken and not used.
        save_live_audio: Taken and not used.
        explicit_vad_signal: Taken and not used.
        enable_affective_dialog: Taken and not used.
        labels: Taken and not used.
        response_modalities: Taken and not used.
        speech_config: Taken and not used.
        http_options: Taken and not used.
        service_tier: Taken and not used.
        avatar_config: Taken and not used.
        output_audio_transcription: Taken and not used.
        input_audio_transcription: Taken and not used.
        realtime_input_config: Taken and not used.
        translation_config: Taken and not used.
        proactivity: Taken and not used.
        session_resumption: Taken and not used.
        history_config: Taken and not used.
        context_window_compression: Taken and not used.
        tool_thread_pool_config: Taken and not used.
        telemetry: Taken and not used.
        get_session_config: Taken and not used.

    Raises:
        pydantic.ValidationError: A field ADK's RunConfig does not have, or
            `max_llm_calls` of sys.maxsize or more.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    max_llm_calls: int = Field(default_factory=_default_max_llm_calls)
    """Model calls one run may make, and each agent tool's run within it (counted apart);
    0 or less: no limit (as ADK)."""
    streaming_mode: StreamingMode = StreamingMode.NONE
    custom_metadata: dict[str, Any] | None = None
    model_input_context: list[types.Content] | None = None
    include_thoughts_from_other_agents: bool = False
    support_cfc: bool = False
    save_input_blobs_as_artifacts: bool = False
    save_live_blob: bool = False
    save_live_audio: bool = False
    explicit_vad_signal: bool | None = None
    enable_affective_dialog: bool | None = None
    labels: dict[str, str] | None = None
    response_modalities: list[Any] | None = None
    # Live, speech and transport settings of ADK's: taken as given.
    speech_config: Any = None
    http_options: Any = None
    service_tier: Any = None
    avatar_config: Any = None
    output_audio_transcription: Any = None
    input_audio_transcription: Any = None
    realtime_input_config: Any = None
    translation_config: Any = None
    proactivity: Any = None
    session_resumption: Any = None
    history_config: Any = None
    context_window_compression: Any = None
    tool_thread_pool_config: Any = None
    telemetry: Any = None
    get_session_config: Any = None

    @field_validator("max_llm_calls")
    @classmethod
    def _below_maxsize(cls, value: int) -> int:
        if value >= sys.maxsize:
            raise ValueError(f"max_llm_calls should be less than {sys.maxsize}.")
        return value


def checked_run_config(run_config: object) -> RunConfig:
    """`run_config`, or the default; another library's RunConfig is refused by name."""
    if run_config is None:
        return RunConfig()
    if not isinstance(run_config, RunConfig):
        raise TypeError(
            f"run_config must be toolfleet.adk's RunConfig, not {type(run_config).__module__}."
            f"{type(run_config).__name__}: import RunConfig from toolfleet.adk"
        )
    return run_config
