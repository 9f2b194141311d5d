"""Token usage a model reports for one call, to the current span and the metrics."""

from __future__ import annotations

from google.genai import types

from toolfleet.shared import tracing
from toolfleet.shared.metrics import guarded, metrics


def report_usage(model: str, response: types.GenerateContentResponse) -> None:
    """Record the response's token counts: on the model call's span (GenAI conventions)
    and in the tokens counter."""
    usage = response.usage_metadata
    if usage is None:
        return
    with guarded():
        counted = metrics().model_tokens
        counted.labels(model, "input").inc(usage.prompt_token_count or 0)
        counted.labels(model, "output").inc(usage.candidates_token_count or 0)
    tracing.annotate(
        {
            "gen_ai.usage.input_tokens": usage.prompt_token_count,
            "gen_ai.usage.output_tokens": usage.candidates_token_count,
            "gen_ai.response.model": response.model_version,
        }
    )
