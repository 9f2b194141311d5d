"""Declarations of Python functions are ADK's (google-adk 2.x), case by case.

The functions are ADK's own declaration test cases (adk_declaration_cases.py); the
expected declarations were recorded from ADK 2.13's `FunctionTool(f)._get_declaration()`
into snapshots/adk_declarations.json, so these tests do not need ADK installed.

Each case says how close toolfleet's declaration is:
- ADK: the same JSON, but for pydantic's `title` keys, which toolfleet drops (each
  repeats a parameter's or model's name) and an absent description, which is "".
- SAME: the same meaning for the model, in the form toolfleet writes: models inlined
  where ADK points into `$defs`, `Optional[T]` as `"type": [T, "null"]` where ADK writes
  `anyOf`, and no parameters as an empty object where ADK leaves `parameters` out.
- OWN: given literally below, with why it means what ADK's does.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tests.unit.adk_declaration_cases as cases
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.messages import CallStatus, ToolCall
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.executor import execute

RECORDED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "snapshots" / "adk_declarations.json").read_text()
)
ADK, SAME = "adk", "same"

CASES = {
    "add_point": ADK,
    "aliased_count": ADK,
    "annotated_defaults": ADK,
    "any_annotation": ADK,
    "array_input": ADK,
    "async_generator_dict": ADK,
    "async_generator_return": ADK,
    "async_order_lookup": ADK,
    "authenticate": SAME,  # $defs inlined
    "basemodel_input": SAME,  # $defs inlined
    "basemodel_list": SAME,  # $defs inlined
    "basic_boolean": ADK,
    "basic_float": ADK,
    "basic_integer": ADK,
    "basic_string": ADK,
    "bool_input": ADK,
    "complex_dict_tool": ADK,
    "complex_fn": SAME,  # $defs inlined, Optional as a type list
    "complex_tool": ADK,
    "configure_mode": ADK,
    "configure_widgets": ADK,
    "count_items": ADK,
    "counter": ADK,
    "create_item_with_metadata": SAME,  # $defs inlined, Optional as a type list
    "create_profile": SAME,  # $defs inlined
    "create_tagged_item": SAME,  # $defs inlined
    "create_task": ADK,
    "create_user": ADK,
    "create_user_with_address": SAME,  # $defs inlined
    "dict_input": ADK,
    "dict_return": ADK,
    "documented": ADK,
    "enum_input": SAME,  # $defs inlined
    "execute_task": SAME,  # $defs inlined
    "fetch_user": ADK,
    "fetch_user_address": SAME,  # $defs inlined, Optional as a type list
    "flexible_input": ADK,
    "float_input": ADK,
    "forecast": ADK,
    "forecast_partial": ADK,
    "forward_dict": SAME,  # $defs inlined
    "forward_dict_annotated": SAME,  # $defs inlined
    "forward_list": SAME,  # $defs inlined
    "forward_list_annotated": SAME,  # $defs inlined
    "function_no_return": ADK,
    "function_none_return": ADK,
    "function_string_return": ADK,
    "generator_return": ADK,
    "get_status": SAME,  # no parameters: an empty object
    "get_time": SAME,  # no parameters: an empty object
    "greet": ADK,
    "greet_annotated": ADK,
    "greet_optional": SAME,  # Optional as ["T", "null"]
    "greet_with_default": ADK,
    "int_input": ADK,
    "int_return": ADK,
    "join_strings": ADK,
    "legacy_function": ADK,
    "list_input": ADK,
    "mixed_annotations": ADK,
    "my_tool": ADK,
    "nested_basemodel_input": SAME,  # $defs inlined
    "nested_weather_partial": ADK,
    "no_params": SAME,  # no parameters: an empty object
    "optional_annotated": SAME,  # Optional as ["T", "null"]
    "order_lookup": ADK,
    # A default that is not a member: ADK 2.x's builder (its default) declares it as it
    # is; only its older builder refused it.
    "paint": SAME,  # $defs inlined
    "paint_default": SAME,  # $defs inlined
    "ParentInput": SAME,  # $defs inlined
    "process_any": ADK,
    "process_data": ADK,
    "process_items": ADK,
    "process_union": ADK,
    "register_aliased": SAME,  # $defs inlined
    "register_annotated": SAME,  # $defs inlined
    "repeat": ADK,
    "repo_and_branch": ADK,
    "resize_window": SAME,  # $defs inlined
    "save_address": SAME,  # $defs inlined
    "save_addresses": SAME,  # $defs inlined
    "save_edit_ids": ADK,
    "save_person": SAME,  # $defs inlined
    "search": SAME,  # Optional as ["T", "null"]
    "search_repos": ADK,
    "sequence_return": ADK,
    "set_color": SAME,  # $defs inlined
    "set_mode": ADK,
    "ship": SAME,  # $defs inlined, Optional as a type list
    "simple_func": ADK,
    "SimpleFunction": ADK,
    "store_blob": ADK,
    "streaming_dict": ADK,
    "streaming_tool": ADK,
    "string_input": ADK,
    "sum_numbers": ADK,
    "sum_scores": ADK,
    "sync_counter": ADK,
    "sync_streaming_tool": ADK,
    "tags_factory_required": ADK,
    "tags_factory_with_default": ADK,
    "tally": ADK,
    "toolcontext_ignored": ADK,
    "transfer_to_agent": ADK,
    "undocumented": ADK,
    "weather_partial": ADK,
    "widgets_default": ADK,
    "widgets_field_default": ADK,
}

OWN: dict[str, dict[str, Any]] = {
    # ADK's parameters also repeat the model's docstring as their top-level description;
    # the declaration's own description already says it.
    "CreateUserRequest": {
        "name": "CreateUserRequest",
        "description": "Request to create a user.",
        "parameters_json_schema": {
            "properties": {
                "age": {"default": None, "type": ["integer", "null"]},
                "email": {"type": "string"},
                "name": {"type": "string"},
            },
            "required": ["name", "email"],
            "type": "object",
        },
    },
    # A tree: ADK points `root` at $defs/TreeNode; toolfleet inlines its first level
    # (carrying the same fields and descriptions) and keeps the $ref only where the
    # model contains itself.
    "create_tree": {
        "name": "create_tree",
        "description": "Create a tree structure.",
        "parameters_json_schema": {
            "$defs": {
                "TreeNode": {
                    "description": "A tree node.",
                    "properties": {
                        "children": {
                            "description": "Child nodes",
                            "items": {"$ref": "#/$defs/TreeNode"},
                            "type": "array",
                        },
                        "value": {"description": "Node value", "type": "string"},
                    },
                    "required": ["value"],
                    "type": "object",
                }
            },
            "properties": {
                "root": {
                    "description": "Root node of the tree",
                    "properties": {
                        "children": {
                            "description": "Child nodes",
                            "items": {"$ref": "#/$defs/TreeNode"},
                            "type": "array",
                        },
                        "value": {"description": "Node value", "type": "string"},
                    },
                    "required": ["value"],
                    "type": "object",
                }
            },
            "required": ["root"],
            "type": "object",
        },
    },
    # ADK sends the whole docstring; toolfleet moves each Args entry to its parameter's
    # description (the same words, where the model reads about that parameter).
    "well_documented": {
        "name": "well_documented",
        "description": (
            "This is a well-documented function.\n\nIt does something useful.\n\n"
            "Returns:\nThe squared number."
        ),
        "parameters_json_schema": {
            "properties": {"x": {"description": "The number to square.", "type": "integer"}},
            "required": ["x"],
            "type": "object",
        },
    },
}


def without_titles(node: Any, in_properties: bool = False) -> Any:
    """ADK's declaration less pydantic's `title` keys (a property may be named title)."""
    if isinstance(node, list):
        return [without_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: without_titles(value, key == "properties")
        for key, value in node.items()
        if in_properties or key != "title"
    }


def meaning(declaration: dict[str, Any]) -> dict[str, Any]:
    """What the model is told, in one form: titles dropped, $refs inlined, a nullable
    type written one way, no parameters as an empty object."""
    schema = declaration.get("parameters_json_schema") or {"type": "object", "properties": {}}
    defs = schema.get("$defs", {})

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        out = {
            key: walk(value, key == "properties")
            for key, value in node.items()
            if key != "$defs" and (in_properties or key != "title")
        }
        options = out.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            (other,) = [o for o in options if o != {"type": "null"}]
            if isinstance(other.get("type"), str) and set(other) <= {"type", "description"}:
                del out["anyOf"]
                out = {**other, **out, "type": [other["type"], "null"]}
        return out

    return {
        "name": declaration["name"],
        "description": declaration.get("description") or "",
        "parameters": walk(schema),
    }


def test_every_recorded_case_is_checked() -> None:
    assert sorted([*CASES, *OWN]) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(CASES))
def test_declaration_is_adks(name: str) -> None:
    ours = FunctionTool(getattr(cases, name)).declaration()
    adk = RECORDED[name]
    if CASES[name] == ADK:
        assert ours == {"description": "", **without_titles(adk)}
    else:
        assert ours != {"description": "", **without_titles(adk)}  # else it would be ADK
        assert meaning(ours) == meaning(adk)


@pytest.mark.parametrize("name", sorted(OWN))
def test_declaration_means_adks(name: str) -> None:
    assert FunctionTool(getattr(cases, name)).declaration() == OWN[name]


def run(name: str, args: dict[str, Any]) -> Any:
    """The call as a worker runs it: arguments validated again, the function called."""
    tool = FunctionTool(getattr(cases, name))
    call = ToolCall(
        call_id="c1", tool=tool.name, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", state={}, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip
    result = execute(tool, call, worker="w", max_result_bytes=10_000).result
    assert result.status is CallStatus.SUCCESS, result.response
    response: dict[str, Any] = result.response
    return response.get("result", response)  # a dict is the response; else {"result": ...}


def test_arguments_reach_the_function_as_adk_passes_them() -> None:
    assert run("process_items", {"items": ["a", "b"]}) == 2  # a list for Sequence[str]
    assert run("resize_window", {"window": {"width": 3, "height": 4}}) == "Resized to 3x4"
    address = {"street": "a", "city": "Oslo", "zip_code": "12345"}
    assert run("save_address", {"address": address}) == "Saved address in Oslo"
    assert run("create_user_with_address", {"address": {**address, "zipcode": "1"}}) == {
        "city": "Oslo"
    }
    assert run("store_blob", {"data": "abc"}) == 3  # bytes
    assert run("legacy_function", {"x": [1], "y": [2]}) == [1, 2]  # untyped: as sent
    assert run("aliased_count", {"count": 3}) == "3"  # under its name, not its alias
    assert run("weather_partial", {"city": "Oslo"}) == "Oslo"
    assert run("order_lookup", {"order_id": "o-1"}) == "o-1"
    assert run("async_order_lookup", {"order_id": "o-2"}) == "o-2"
    assert run("create_tree", {"root": {"value": "a", "children": [{"value": "b"}]}}) == {
        "children": 1
    }


def test_a_callable_object_with_async_call_is_an_async_tool() -> None:
    assert FunctionTool(cases.async_order_lookup).is_async
    assert not FunctionTool(cases.order_lookup).is_async


def test_a_field_default_alone_leaves_the_argument_required_as_in_adk() -> None:
    for func in (cases.widgets_field_default, cases.tags_factory_required):
        _, problems = FunctionTool(func).validate({})
        assert [p.message for p in problems] == ["required argument is missing"]


def test_an_annotated_constraint_is_checked() -> None:
    _, problems = FunctionTool(cases.configure_widgets).validate({"count": 11, "zip_code": "1"})
    assert {p.argument for p in problems} == {"count", "zip_code"}


def test_partials_of_two_functions_are_two_tools() -> None:
    names = {FunctionTool(f).name for f in (cases.weather_partial, cases.forecast_partial)}
    assert names == {"get_weather", "get_forecast"}


def test_an_unresolvable_parameter_hint_is_refused_naming_it() -> None:
    # ADK declares such a function with no parameters at all, so the model could never
    # pass the argument; toolfleet refuses it at definition, saying what is missing.
    def process(widget: UndefinedWidget, count: int) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "ok"

    process.__qualname__ = "process"  # as if at module level
    with pytest.raises(ToolDefinitionError, match="UndefinedWidget"):
        FunctionTool(process)
