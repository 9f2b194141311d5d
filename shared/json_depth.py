"""One nesting limit for every JSON value taken from outside (TOOLFLEET_MAX_JSON_DEPTH).

Python's json module, pydantic's parser and serializer, and toolfleet's own walks over
values (masking secrets, looking for sealed ones) all recurse: a value nested deeply
enough raises RecursionError, or is refused with a message that names neither the
limit nor the setting. So each entry measures the depth first, without recursing:
over raw JSON text before it is parsed, over parsed values before anything walks them.

Depth counts objects and arrays: a scalar is 0, `{}` and `{"a": 1}` are 1,
`{"a": [1]}` is 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

SETTING = "TOOLFLEET_MAX_JSON_DEPTH"
DEFAULT_MAX_JSON_DEPTH = 64
# Stored documents wrap a value in a few levels more (an event, its content, its part,
# the function response), and pydantic's JSON parser stops at 200 levels: a higher
# limit would let in values that could be stored but never read back.
HIGHEST_MAX_JSON_DEPTH = 128
# A document that carries a value from outside (an HTTP body, a completions stream
# entry) may nest this many levels more than the value: its own objects around it.
ENVELOPE_LEVELS = 2
# Put where a value too deep to keep was (a model's arguments, a refused completion's
# response); a call whose arguments hold it is refused like the value it replaced.
TOO_DEEP_KEY = "$too_deep"

# A JSON string (escapes included): its brackets are text, not structure. Without a
# closing quote it runs to the end of the text, as it ends the document. The closing
# quote is optional so that a match never fails: a pattern that had to find it would
# scan to the end again from every later quote of an unterminated string (quadratic).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PLAIN = (dict, list)
# JSON's scalars as Python parses them: nothing nests in them (checked before the ABCs).
JSON_SCALARS = (str, int, float, bool, type(None))


def text_depth(text: str | bytes | bytearray, stop_above: int | None = None) -> int:
    """The deepest nesting of objects and arrays in the JSON `text`, found without
    parsing it; with `stop_above`, the first depth found over it.

    Text that is not JSON gets a depth too (its parser says what is wrong with it); an
    unterminated string ends the scan, as it ends the document.
    """
    if not isinstance(text, str):
        text = _as_parsed(bytes(text))
    structure = _STRING.sub("", text)
    depth = deepest = 0
    for bracket in _NOT_BRACKET.sub("", structure):
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and depth > stop_above:
                    return depth
        else:
            depth -= 1
    return deepest


def _as_parsed(data: bytes) -> str:
    """`data` as json.loads reads bytes: UTF-16 and UTF-32 too, where a character's bytes
    may look like a quote or a bracket (U+2200 is 00 22 in UTF-16-LE)."""
    encoding = json.detect_encoding(data)
    if encoding in ("utf-8", "utf-8-sig"):
        # Latin-1 maps each byte to one character, in one pass: UTF-8 never uses an ASCII
        # byte inside a multi-byte character, so brackets and quotes stay where they are.
        return data.decode("latin-1")
    # Undecodable, json.loads fails before it parses anything: any depth will do.
    return data.decode(encoding, errors="replace")


def value_depth(value: Any, stop_above: int | None = None) -> int:
    """The deepest nesting of mappings, lists and tuples in `value`, walked without
    recursion; with `stop_above`, the first depth found over it (a value that contains
    itself is as deep as the walk goes, so give `stop_above` for values from outside)."""
    if not _is_container(value):
        return 0
    if not any(map(_is_container, value.values() if isinstance(value, Mapping) else value)):
        return 1  # flat, as most arguments are: no walk needed
    deepest = 0
    # The depth each container was seen at: one reached again, no deeper, adds nothing.
    seen: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if seen.get(id(item), 0) >= depth:
            continue
        seen[id(item)] = depth
        if depth > deepest:
            deepest = depth
            if stop_above is not None and depth > stop_above:
                return depth
        below = depth + 1
        children = item.values() if isinstance(item, Mapping) else item
        stack.extend((child, below) for child in children if _is_container(child))
    return deepest


def _is_container(value: Any) -> bool:
    # The plain types first: the Mapping check is an ABC's, slower.
    kind = type(value)
    if kind in _PLAIN:
        return True
    return kind not in JSON_SCALARS and isinstance(value, Mapping | list | tuple)


def too_deep(what: str, limit: int, around: int = 0) -> str:
    """The message for `what` nested over `limit` levels (with `around`, a document
    allowed that many levels more around the value it carries): it names the setting."""
    if not around:
        return (
            f"{what} nests JSON objects and arrays more than {limit} levels deep; the limit "
            f"is {limit} ({SETTING})"
        )
    return (
        f"{what} nests JSON objects and arrays more than {limit + around} levels deep: the "
        f"limit is {limit} ({SETTING}) for the value it carries, and {around} more around it"
    )


def dropped(message: str) -> dict[str, str]:
    """What is kept in place of a value too deep to keep: why it is not there."""
    return {TOO_DEEP_KEY: message}
