"""Function signature + Google-style docstring -> argument model and JSON schema.

The pydantic model built from the signature is both the validator of the model's
arguments and the source of `parameters_json_schema`, so the two never disagree.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Union

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from toolfleet.shared.callables import callable_doc, parameter_hints

_SCALARS = (str, int, float, bool, bytes, type(None))
_LIST_ORIGINS = (list, tuple, set, frozenset, collections.abc.Sequence)
SUPPORTED_KINDS = (
    "str, int, float, bool, bytes, None, Any, Literal, an Enum, a pydantic model, a "
    "dataclass, list/tuple/set/Sequence of these, dict with str keys, a union of these"
)


@dataclass(frozen=True)
class Signature:
    """What a function offers the model: description, argument model, schema."""

    description: str
    args_model: type[BaseModel]
    parameters_json_schema: dict[str, Any]
    context_param: str | None


@dataclass(frozen=True)
class ArgumentProblem:
    """One thing wrong with a call's arguments, phrased for the model."""

    argument: str
    message: str

    def __str__(self) -> str:
        return f"{self.argument}: {self.message}"


def describe_function(func: Callable[..., Any], name: str, context_type: type) -> Signature:
    """Build the signature; raise ValueError listing every problem at once."""
    doc = docstring_parser.parse(callable_doc(func), docstring_parser.Style.GOOGLE)
    arg_docs = {p.arg_name: (p.description or "").strip() for p in doc.params}
    try:
        hints = parameter_hints(func)
    except Exception as exc:  # NameError from a forward reference, mostly
        raise ValueError(f"type hints of {name} cannot be resolved: {exc}") from exc

    problems: list[str] = []
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue  # never shown to the model, as in ADK
        hint = hints.get(param.name)
        if param.name == "tool_context" or (
            isinstance(hint, type) and issubclass(hint, context_type)
        ):
            context_param = param.name
            continue
        if param.kind is param.POSITIONAL_ONLY:
            problems.append(f"parameter {param.name!r} is positional-only; tools take keywords")
            continue
        unsupported = _unsupported(Any if hint is None else hint)  # untyped: any JSON, as ADK
        if unsupported:
            problems.append(
                f"parameter {param.name!r}: unsupported type {unsupported} "
                f"(supported: {SUPPORTED_KINDS})"
            )
            continue
        fields[param.name] = _field(hint, param, arg_docs.get(param.name) or None)
    if problems:
        raise ValueError("; ".join(problems))

    args_model = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    return Signature(
        description=_description(doc),
        args_model=args_model,
        parameters_json_schema=clean_schema(args_model.model_json_schema()),
        context_param=context_param,
    )


def _field(hint: Any, param: inspect.Parameter, arg_doc: str | None) -> tuple[Any, Any]:
    """(type, FieldInfo) as ADK builds it: the signature alone says whether an argument
    is required and its default; an Annotated Field gives the rest, under the
    parameter's own name (its alias dropped)."""
    default = PydanticUndefined if param.default is param.empty else param.default
    if typing.get_origin(hint) is not typing.Annotated:
        return (Any if hint is None else hint), Field(default=default, description=arg_doc)
    info = FieldInfo.from_annotation(hint)
    info.alias = info.validation_alias = info.serialization_alias = None
    info.default, info.default_factory = default, None
    if info.description is None:
        info.description = arg_doc  # the docstring's Args entry, unless Field has one
    return (info.annotation if info.annotation is not None else Any), info


def validate_arguments(
    args_model: type[BaseModel], args: object
) -> tuple[dict[str, Any], list[ArgumentProblem]]:
    """Validate the model's arguments; return (python values, problems)."""
    if not isinstance(args, dict):
        return {}, [
            ArgumentProblem("(arguments)", f"expected an object, got {type(args).__name__}")
        ]
    try:
        validated = args_model.model_validate(args)
    except ValidationError as exc:
        return {}, [
            ArgumentProblem(
                ".".join(str(part) for part in err["loc"]) or "(arguments)", _phrase(err)
            )
            for err in exc.errors(include_url=False)
        ]
    # Keep nested pydantic models as models: the function's annotations ask for them.
    return {name: getattr(validated, name) for name in type(validated).model_fields}, []


def _phrase(err: Any) -> str:
    if err["type"] == "missing":
        return "required argument is missing"
    if err["type"] == "extra_forbidden":
        return "unknown argument"
    return f"{err['msg']} (got {err.get('input')!r})"


def _description(doc: docstring_parser.Docstring) -> str:
    parts = [p for p in (doc.short_description, doc.long_description) if p]
    if doc.returns and doc.returns.description:
        parts.append(f"Returns:\n{doc.returns.description.strip()}")
    return "\n\n".join(part.strip() for part in parts)


def _unsupported(hint: Any) -> str | None:
    """Return the offending type's name if the model cannot be told about it."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _unsupported(typing.get_args(hint)[0])
    if origin is Literal:
        return None
    if origin in (Union, types.UnionType):
        return next(filter(None, (_unsupported(arg) for arg in typing.get_args(hint))), None)
    if origin in _LIST_ORIGINS:
        args = typing.get_args(hint)
        return next(filter(None, (_unsupported(a) for a in args if a is not Ellipsis)), None)
    if origin is dict:
        key, value = typing.get_args(hint) or (str, Any)
        if key is not str:
            return f"dict with {getattr(key, '__name__', key)} keys (JSON keys are strings)"
        return _unsupported(value)
    if hint in (list, dict):
        return None
    if isinstance(hint, type) and (issubclass(hint, (BaseModel, Enum)) or hint in _SCALARS):
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return None  # pydantic's and the standard library's: an object of their fields
    return getattr(hint, "__name__", None) or repr(hint)


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline $refs, drop pydantic's titles, and write `X | None` as a nullable type.

    A model that contains itself (a tree) cannot be inlined: inside itself it stays a
    $ref, and its definition stays in $defs.
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    recursive: dict[str, Any] = {}

    def walk(node: Any, path: tuple[str, ...], in_properties: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(item, path) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            rest = {k: walk(v, path) for k, v in node.items() if k != "$ref"}
            if name in path:
                recursive.setdefault(name, None)
                return {"$ref": f"#/$defs/{name}", **rest}
            return {**walk(defs[name], (*path, name)), **rest}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$defs" or (key == "title" and not in_properties):
                continue
            # Unknown arguments are refused by the validator; Gemini's schema subset
            # does not need to be told.
            if key == "additionalProperties" and value is False and not in_properties:
                continue
            out[key] = walk(value, path, in_properties=key == "properties")
        return _collapse_nullable(out)

    cleaned = typing.cast(dict[str, Any], walk(schema, ()))
    while pending := [name for name, done in recursive.items() if done is None]:
        for name in pending:
            recursive[name] = walk(defs[name], (name,))
    if recursive:
        cleaned["$defs"] = recursive
    return cleaned


def _collapse_nullable(node: dict[str, Any]) -> dict[str, Any]:
    options = node.get("anyOf")
    if not isinstance(options, list) or {"type": "null"} not in options or len(options) != 2:
        return node
    (other,) = [o for o in options if o != {"type": "null"}]
    if set(other) - {"type", "description"} or not isinstance(other.get("type"), str):
        return node  # an object or enum: keep anyOf, which Gemini accepts
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    return {"type": [other["type"], "null"], **rest}
