"""JSON text without NaN or the infinities: JSON has no such numbers, and Python's writer
puts them out as tokens no strict reader (a browser's JSON.parse, ADK's dev UI) takes.
Where a value holds one, it is written as null, as pydantic writes the stored events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_core import to_json


def finite_json(
    value: Any,
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`value` as json.dumps writes it (these options as it takes them), a NaN or an
    infinity anywhere in it written as null."""
    try:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            allow_nan=False,
            separators=separators,
            default=default,
        )
    except ValueError:  # a number out of JSON's range somewhere in it
        return to_json(value, inf_nan_mode="null", fallback=default).decode()
