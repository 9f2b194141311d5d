"""What a completions-stream entry holds: its completion, or why it is refused.

Entries are read as they were written, by anyone who may write the stream: the depth is
measured on the raw text before it is parsed, so a deeply nested entry is refused with
the limit named (and dead-lettered) rather than failing the parser. An entry is parsed
once, where it is read (`PostedEntry.read`); what applies it is handed the result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import to_json

from toolfleet.shared.completions import KEPT_REFUSED_BYTES, NOT_KEPT
from toolfleet.shared.json_depth import ENVELOPE_LEVELS, text_depth, too_deep
from toolfleet.shared.messages import COMPLETION_FIELD, Completion


@dataclass(frozen=True)
class PostedEntry:
    """One entry as read from a completions stream: its id, its text as written, and
    the completion it holds - or, as a string, why it cannot be parsed."""

    entry_id: str
    raw: bytes
    completion: Completion | str

    @classmethod
    def read(cls, entry_id: str, fields: Mapping[bytes, bytes], max_json_depth: int) -> PostedEntry:
        """The entry with the stream fields `fields`, parsed (`parse_entry`)."""
        raw = fields.get(COMPLETION_FIELD.encode(), b"")
        return cls(entry_id, raw, parse_entry(raw, max_json_depth))

    def kept(self) -> bytes:
        """What the entry's dead letter keeps: its text, or past KEPT_REFUSED_BYTES the
        completion with its response's size for the response (an unreadable entry: its
        size alone). Any caller of the API can get an entry refused here (a result
        posted twice before either applies): refused entries must not fill Redis."""
        if len(self.raw) <= KEPT_REFUSED_BYTES:
            return self.raw
        completion = self.completion
        if isinstance(completion, str):
            return json.dumps({NOT_KEPT: f"{len(self.raw)} bytes"}).encode()
        size = f"{len(to_json(completion.response))} bytes of JSON"
        kept = completion.model_copy(update={"response": {NOT_KEPT: size}})
        return kept.model_dump_json().encode()


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
