"""Token usage a model reports for one call, to the current span (and the metrics)."""

from __future__ import annotations

from google.genai import types

from toolfleet.shared import tracing


def report_usage(model: str, response: types.GenerateContentResponse) -> None:
    """Record the response's token counts: on the model call's span (GenAI conventions)."""
    usage = response.usage_metadata
    if usage is None:
        return
    tracing.annotate(
        {
            "gen_ai.usage.input_tokens": usage.prompt_token_count,
            "gen_ai.usage.output_tokens": usage.candidates_token_count,
            "gen_ai.response.model": response.model_version,
        }
    )
