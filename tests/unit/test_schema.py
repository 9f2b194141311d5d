"""Tool declarations are a contract with the model: snapshot them, and check the rules."""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel

import tests.seed_tools as seeds
from examples.orders import lookup_order_status
from examples.stocks import get_stock_price
from examples.weather import analyze_sentiment, get_weather_report
from tests.support import LocalTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool, ToolRegistry, tool

SNAPSHOTS = Path(__file__).parent / "snapshots"
SEEDS = [
    seeds.get_weather,
    seeds.search_flights,
    seeds.create_user_profile,
    seeds.add_numbers,
    seeds.subtract_numbers,
    get_weather_report,
    analyze_sentiment,
    get_stock_price,
    lookup_order_status,
]


@pytest.mark.parametrize("func", SEEDS, ids=lambda f: f.__name__)
def test_seed_declaration_matches_snapshot(func: Any) -> None:
    declaration = FunctionTool(func).declaration()
    path = SNAPSHOTS / f"{func.__name__}.json"
    if os.environ.get("TOOLFLEET_UPDATE_SNAPSHOTS"):
        path.write_text(json.dumps(declaration, indent=2, sort_keys=True) + "\n")
    assert declaration == json.loads(path.read_text())


def test_required_is_exactly_the_parameters_without_default() -> None:
    schema = FunctionTool(seeds.search_flights).parameters_json_schema
    assert schema["required"] == ["destination", "departure_date"]
    assert schema["properties"]["flexible_days"] == {
        "type": "integer",
        "default": 0,
        "description": "Number of flexible days for the search. Defaults to 0.",
    }


def test_optional_parameter_is_nullable_and_not_required() -> None:
    schema = FunctionTool(seeds.create_user_profile).parameters_json_schema
    assert schema["required"] == ["username"]
    assert schema["properties"]["bio"]["type"] == ["string", "null"]


def test_tool_context_args_and_kwargs_are_hidden_from_the_model() -> None:
    def note(text: str, *extra: str, tool_context: ToolContext, **options: Any) -> dict[str, str]:
        """Saves a note."""
        return {}

    fn = LocalTool(note)
    assert list(fn.parameters_json_schema["properties"]) == ["text"]
    assert fn.signature.context_param == "tool_context"


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


def test_rich_types_become_json_schema() -> None:
    def rich(
        mode: Literal["fast", "slow"],
        color: Color,
        tags: list[str],
        weights: dict[str, float],
        address: Address,
        limit: Optional[int] = None,  # noqa: UP045 - the typing.Optional spelling is supported
    ) -> None:
        """Exercises every supported annotation.

        Args:
            mode: How to run.
            color: A color.
            tags: Labels.
            weights: Weight per label.
            address: Where.
            limit: At most this many.
        """

    props = LocalTool(rich).parameters_json_schema["properties"]
    assert props["mode"] == {
        "enum": ["fast", "slow"],
        "type": "string",
        "description": "How to run.",
    }
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": "Labels."}
    assert props["weights"]["additionalProperties"] == {"type": "number"}
    assert props["address"]["type"] == "object"
    assert props["address"]["properties"]["street"] == {"type": "string"}
    assert props["address"]["properties"]["zip_code"]["type"] == ["string", "null"]
    assert props["limit"]["type"] == ["integer", "null"]
    assert "$defs" not in json.dumps(props) and "$ref" not in json.dumps(props)


def test_validation_names_every_problem() -> None:
    fn = FunctionTool(seeds.search_flights)
    _, problems = fn.validate({"departure_date": 5, "flexible_days": "many", "seats": 2})
    by_arg = {p.argument: p.message for p in problems}
    assert by_arg["destination"] == "required argument is missing"
    assert "departure_date" in by_arg and "flexible_days" in by_arg
    assert by_arg["seats"] == "unknown argument"


def test_validation_returns_python_values() -> None:
    def place(address: Address, color: Color) -> None:
        """Place."""

    args, problems = LocalTool(place).validate({"address": {"street": "Main"}, "color": "red"})
    assert problems == []
    assert args == {"address": Address(street="Main"), "color": Color.RED}


class Opaque:
    pass


def test_unsupported_annotation_fails_at_definition_naming_function_and_problem() -> None:
    def bad(thing: Opaque, other: set[Opaque]) -> None:
        """Bad."""

    with pytest.raises(ToolDefinitionError) as err:
        LocalTool(bad)
    message = str(err.value)
    assert "'bad'" in message and "test_schema" in message
    assert "'thing': unsupported type Opaque (supported: str, int," in message
    assert "'other': unsupported type Opaque" in message
    assert "a pydantic model, a dataclass" in message  # what to use instead


def test_untyped_parameter_takes_any_json_value_as_in_adk() -> None:
    def legacy(x, y):  # type: ignore[no-untyped-def]
        """Adds."""
        return x + y

    fn = LocalTool(legacy)
    assert fn.parameters_json_schema["properties"] == {"x": {}, "y": {}}
    assert fn.validate({"x": [1], "y": {"a": 2}}) == ({"x": [1], "y": {"a": 2}}, [])


def test_duplicate_tool_names_are_a_definition_error() -> None:
    def lookup(q: str) -> str:
        """A."""
        return q

    first = LocalTool(lookup)
    other = FunctionTool(seeds.get_weather, name="lookup")
    with pytest.raises(ToolDefinitionError, match="duplicate tool name 'lookup'"):
        ToolRegistry([first, other])
    assert len(ToolRegistry([first, first])) == 1  # the same tool twice is harmless


@tool(pool="heavy", timeout_s=5, retry_on=[ConnectionError])
def render(page: int) -> str:
    """Renders a page."""
    return "x"


def test_tool_options_and_long_running_note() -> None:
    assert render.options.pool == "heavy" and render.options.timeout_s == 5
    assert render.options.retry_on == (ConnectionError,)
    approval = LongRunningFunctionTool(seeds.get_weather)
    assert approval.is_long_running
    assert "Do not call this tool again" in approval.description
