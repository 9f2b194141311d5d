"""An event's stored JSON joined from pieces encoded earlier.

A wide turn's responses event carries thousands of function responses and call records.
Encoded whole once the last result is in, it is megabytes of JSON made while nothing
else can go on; encoded piece by piece as each result arrives (while the turn waits for
its other calls), storing it only joins the pieces. The join is checked: the event's
own text is made with one marker in place of its parts and one in place of its records,
and a marker found other than once makes the whole text the usual way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.genai import types
from pydantic import BaseModel

from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.shared.messages import CallStatus

# A marker no event of this process holds: a NUL and a random tag, in a text part and in
# a call record standing in for the pieces.
_TAG = f"\x00{uuid.uuid4().hex}"
_PART = types.Part(text=_TAG)
_RECORD = CallRecord(call_id=_TAG, tool=_TAG, status=CallStatus.SUCCESS)


def encoded(model: BaseModel) -> str:
    """`model` (a part or a record) as it is written inside a stored event."""
    return model.__pydantic_serializer__.to_json(model, exclude_defaults=True).decode()


_PART_TEXT = encoded(_PART)
_RECORD_TEXT = encoded(_RECORD)


@dataclass(frozen=True)
class EncodedPieces:
    """An event's content parts and call records, each encoded (`encoded`), in order;
    `may_name_secret`: whether any of them may hold a secret-named key (as the store's
    check finds in a text)."""

    parts: Sequence[str]
    calls: Sequence[str]
    may_name_secret: bool


def joined_text(
    event: Event, pieces: EncodedPieces, may_name_secret: Callable[[str], bool]
) -> tuple[str, bool] | None:
    """`event`'s stored text (`model_dump_json(exclude_defaults=True)`) with its parts
    and records taken from `pieces`, and whether it may name a secret; None when the
    pieces are not the event's (counts differ) or the markers do not join."""
    content = event.content
    if content is None or not content.parts or not event.calls:
        return None
    if len(content.parts) != len(pieces.parts) or len(event.calls) != len(pieces.calls):
        return None
    frame = event.model_copy(
        update={
            "content": content.model_copy(update={"parts": [_PART]}),
            "calls": (_RECORD,),
        }
    ).model_dump_json(exclude_defaults=True)
    if frame.count(_PART_TEXT) != 1 or frame.count(_RECORD_TEXT) != 1:
        return None
    # The frame is checked without the markers: their tag could spell anything.
    bare = frame.replace(_PART_TEXT, "").replace(_RECORD_TEXT, "")
    text = frame.replace(_PART_TEXT, ",".join(pieces.parts), 1).replace(
        _RECORD_TEXT, ",".join(pieces.calls), 1
    )
    return text, pieces.may_name_secret or may_name_secret(bare)
