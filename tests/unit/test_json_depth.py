"""One nesting limit (TOOLFLEET_MAX_JSON_DEPTH) for JSON from outside: the measure, taken
without recursing, and the setting's bounds. Each path's refusal has its own tests
(test_deep_calls, test_deep_completions, test_deep_tool_io, faults/test_deep_json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from toolfleet.shared.config import Settings
from toolfleet.shared.json_depth import text_depth, value_depth

SETTING = "TOOLFLEET_MAX_JSON_DEPTH"
# Deeper than Python's recursion limit lets json, pydantic or a recursive walk go.
ABYSS = 3_000


def nested(levels: int) -> dict[str, Any]:
    """An object `levels` deep: {"k": {"k": ... {}}}."""
    top: dict[str, Any] = {}
    inner = top
    for _ in range(levels - 1):
        inner["k"] = {}
        inner = inner["k"]
    return top


def nested_text(levels: int) -> str:
    return '{"k": ' * (levels - 1) + "{}" + "}" * (levels - 1)


# --- the measure -------------------------------------------------------------------------


def test_depth_is_measured_without_recursing_on_text_and_values() -> None:
    assert [text_depth(t) for t in ("1", '"[{"', "{}", '{"a": [1]}', '[{"a": "]]"}, []]')] == [
        0, 0, 1, 2, 2,
    ]  # fmt: skip
    assert text_depth(json.dumps({"a": '\\"[['})) == 1  # an escaped quote ends no string
    assert text_depth('{"é": [[]]}'.encode()) == 3
    assert text_depth('[["a\\') == 2 and text_depth('[{"a": "]]') == 2  # unterminated
    # One pass however the quotes fall: an unterminated string of escaped quotes (a
    # megabyte body) is measured at once, where a rescan from every quote never ends.
    assert text_depth("[" + '"' + '\\"' * 500_000) == 1
    # Bytes are read as json.loads reads them: in UTF-16-LE, U+2200 is 00 22, a quote.
    hidden = '["\u2200", ' + nested_text(ABYSS) + ', "\u2200"]'
    assert text_depth(hidden.encode("utf-16-le")) == ABYSS + 1
    assert text_depth(hidden.encode("utf-32")) == ABYSS + 1
    assert text_depth(nested_text(ABYSS)) == ABYSS
    assert text_depth("[" * ABYSS, stop_above=64) == 65
    assert [value_depth(v) for v in (1, "[", {}, {"a": [1]}, ({"a": ()},))] == [0, 0, 1, 2, 3]
    assert value_depth(nested(ABYSS)) == ABYSS
    loop: dict[str, Any] = {}
    loop["a"] = loop["b"] = loop  # contains itself, twice: the walk still ends
    assert value_depth(loop, stop_above=64) == 65


def test_the_limit_is_bounded_by_what_stored_documents_can_hold() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 128"):
        Settings(max_json_depth=1_000)
