"""What a completions-stream entry holds: its completion, or why it is refused.

Entries are read as they were written, by anyone who may write the stream: the depth is
measured on the raw text before it is parsed, so a deeply nested entry is refused with
the limit named (and dead-lettered) rather than failing the parser.
"""

from __future__ import annotations

from pydantic import ValidationError

from toolfleet.shared.json_depth import ENVELOPE_LEVELS, text_depth, too_deep
from toolfleet.shared.messages import Completion


def parse_entry(raw: bytes, max_json_depth: int) -> Completion | str:
    """The completion in `raw`, or the reason to refuse it. The entry may nest
    ENVELOPE_LEVELS more than the limit: its own object, and a confirmation's around the
    payload a person sent."""
    deepest = max_json_depth + ENVELOPE_LEVELS
    if text_depth(raw, stop_above=deepest) > deepest:
        return too_deep("the completion", max_json_depth, ENVELOPE_LEVELS)
    try:
        return Completion.model_validate_json(raw)
    except ValidationError as exc:
        return f"malformed completion: {exc}"
