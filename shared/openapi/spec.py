"""Read an OpenAPI 3 document into operations: their parameters and body, `$ref`s resolved.

Only references inside the document (`#/...`) are followed: a spec never makes toolfleet
fetch anything. A malicious or broken spec (a reference cycle, an external reference, a
document or schema nested without end, thousands of operations) is refused with a
ToolDefinitionError naming the problem, or cut at a bound, never followed forever.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolfleet.shared.errors import ToolDefinitionError

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
LOCATIONS = ("path", "query", "header", "cookie")
# Header parameters never offered to the model: OpenAPI ignores the first three (the
# media types and the credential are not arguments), and the others frame or route the
# request - a model that set Host would send the user's credential to another site.
IGNORED_HEADERS = frozenset(
    {"accept", "content-type", "authorization", "host", "content-length",
     "transfer-encoding", "connection", "cookie", "accept-encoding"}
)  # fmt: skip
# Bounds on what one spec may make us build (a spec is data, possibly hostile).
MAX_OPERATIONS = 500
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_NODES = 20_000
# Bounds on the document itself, checked before anything reads it: far beyond a real spec.
MAX_SPEC_DEPTH = 100
MAX_SPEC_NODES = 1_000_000
# A recursive schema (a tree of nodes) is cut where it refers to itself: any JSON there.
RECURSION_STUB: dict[str, Any] = {"description": "(recursive: same shape as its parent)"}


@dataclass(frozen=True)
class Parameter:
    """One operation parameter: its name in the spec, where it goes, the argument's name."""

    name: str
    location: str  # path, query, header or cookie
    arg: str  # the argument the model passes (an identifier)
    required: bool
    schema: dict[str, Any]


@dataclass(frozen=True)
class Operation:
    """One operation of the spec, as a tool."""

    name: str
    method: str
    path: str
    description: str
    parameters: tuple[Parameter, ...]
    body_schema: dict[str, Any] | None  # JSON request body, None when there is none
    body_required: bool

    def without(self, location: str, names: Iterable[str]) -> Operation:
        """This operation less its parameters in `location` with one of `names`
        (case-insensitive): those the toolset sets itself."""
        dropped = {n.lower() for n in names}
        kept = tuple(
            p for p in self.parameters if p.location != location or p.name.lower() not in dropped
        )
        return replace(self, parameters=kept)

    def parameters_json_schema(self) -> dict[str, Any]:
        """The arguments the model passes: one per parameter, and `body` for the body."""
        properties: dict[str, Any] = {p.arg: p.schema for p in self.parameters}
        required = [p.arg for p in self.parameters if p.required]
        if self.body_schema is not None:
            properties["body"] = self.body_schema
            if self.body_required:
                required.append("body")
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return schema


def load_spec(spec_dict: Mapping[str, Any] | None, spec_str: str | None) -> dict[str, Any]:
    """The spec as a dict, from exactly one of a dict or a JSON (or YAML) string."""
    if (spec_dict is None) == (spec_str is None):
        raise ToolDefinitionError(["OpenAPIToolset: pass exactly one of spec_dict= or spec_str="])
    if spec_dict is not None:
        loaded: Any = dict(spec_dict)
    else:
        assert spec_str is not None
        try:
            try:
                loaded = json.loads(spec_str)
            except ValueError:
                loaded = _yaml(spec_str)
        except RecursionError:
            raise _too_deep() from None
    if not isinstance(loaded, dict):
        raise ToolDefinitionError(["OpenAPIToolset: the spec is not a JSON or YAML object"])
    _check_shape(loaded)
    return loaded


def _check_shape(spec: dict[str, Any]) -> None:
    """ToolDefinitionError when the document nests deeper than MAX_SPEC_DEPTH or holds over
    MAX_SPEC_NODES objects and lists (counted as read: a YAML alias counts each time, and
    a document that contains itself is too deep). Iterative, so no stack to exhaust; then
    no recursive reading of the spec can go deeper."""
    stack: list[tuple[Any, int]] = [(spec, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_SPEC_DEPTH:
            raise _too_deep()
        if nodes > MAX_SPEC_NODES:
            raise ToolDefinitionError(
                [f"OpenAPI spec: over {MAX_SPEC_NODES} objects and lists (refused)"]
            )
        children = node.values() if isinstance(node, Mapping) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, Mapping | list))


def _too_deep() -> ToolDefinitionError:
    return ToolDefinitionError(
        [f"OpenAPI spec: nested deeper than {MAX_SPEC_DEPTH} levels (refused, not read)"]
    )


def _yaml(text: str) -> Any:
    try:
        import yaml
    except ImportError as exc:
        raise ToolDefinitionError(
            ["OpenAPIToolset: spec_str is not JSON, and PyYAML is not installed to read YAML"]
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ToolDefinitionError(
            [f"OpenAPIToolset: spec_str is neither JSON nor YAML: {exc}"]
        ) from exc


def operations(spec: Mapping[str, Any]) -> list[Operation]:
    """Every operation of the spec; ToolDefinitionError listing every problem found."""
    resolver = _Resolver(spec)
    problems: list[str] = []
    found: list[Operation] = []
    paths = spec.get("paths")
    if not isinstance(paths, Mapping):
        raise ToolDefinitionError(["OpenAPI spec has no `paths` object"])
    for path, raw_item in paths.items():
        try:
            item = resolver.deref(raw_item)
        except ValueError as exc:  # a path item's $ref: a cycle, outside, or nowhere
            problems.append(f"path {path!r}: {exc}")
            continue
        if not isinstance(item, Mapping):
            problems.append(f"path {path!r} is not an object")
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            try:
                found.append(_operation(resolver, str(path), method, resolver.deref(op), shared))
            except (ValueError, TypeError, AttributeError) as exc:  # a malformed part
                problems.append(f"{method.upper()} {path}: {exc}")
    if len(found) > MAX_OPERATIONS:
        problems.append(f"{len(found)} operations, over the bound of {MAX_OPERATIONS}")
    names: dict[str, Operation] = {}
    for op in found:
        other = names.setdefault(op.name, op)
        if other is not op:
            where = f"{other.method.upper()} {other.path} and {op.method.upper()} {op.path}"
            problems.append(f"two operations are named {op.name!r}: {where}")
    if problems:
        raise ToolDefinitionError([f"OpenAPI spec: {p}" for p in problems])
    return found


def _operation(resolver: _Resolver, path: str, method: str, op: Any, shared: Any) -> Operation:
    if not isinstance(op, Mapping):
        raise ValueError("the operation is not an object")
    by_key: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*_list(shared), *_list(op.get("parameters"))]:
        param = resolver.deref(raw)
        if not isinstance(param, Mapping) or param.get("in") not in LOCATIONS:
            raise ValueError(f"parameter {reprlib.repr(raw)} has no valid `in`")
        by_key[(str(param.get("name")), str(param["in"]))] = param  # the operation's wins
    params: list[Parameter] = []
    taken = {"body"}
    for (name, location), param in by_key.items():
        if location == "header" and name.lower() in IGNORED_HEADERS:
            continue
        arg = _unique(_identifier(name), taken)
        schema = resolver.schema(param.get("schema") or {"type": "string"})
        if param.get("description"):
            schema = {**schema, "description": str(param["description"])}
        required = bool(param.get("required")) or location == "path"
        params.append(Parameter(name, location, arg, required, schema))
    body_schema, body_required = None, False
    body = resolver.deref(op.get("requestBody"))
    if isinstance(body, Mapping):
        content = body.get("content") or {}
        if not isinstance(content, Mapping):
            raise ValueError("the request body's `content` is not an object")
        media = next((content[m] for m in content if "json" in str(m)), None)
        if media is None:
            kinds = sorted(str(m) for m in content)
            raise ValueError(f"request body of type {kinds} (only JSON is supported)")
        media = resolver.deref(media)
        if not isinstance(media, Mapping):
            raise ValueError("the request body's JSON media type is not an object")
        body_schema = resolver.schema(media.get("schema") or {})
        body_required = bool(body.get("required"))
    name = op.get("operationId") or f"{method}_{path}"
    text = op.get("description") or op.get("summary") or f"{method.upper()} {path}"
    return Operation(
        _identifier(str(name)), method, path, str(text), tuple(params), body_schema, body_required
    )


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _identifier(name: str) -> str:
    """A tool or argument name from a spec's name: snake_case letters, digits, underscores."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    cleaned = re.sub(r"[^0-9a-zA-Z_]+", "_", snake).strip("_").lower()
    if not cleaned or cleaned[0].isdigit():
        cleaned = f"op_{cleaned}"
    return cleaned[:64]


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate


class _Resolver:
    """Follows `#/...` references of one document, within the bounds above."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self._spec = spec
        self._nodes = 0

    def deref(self, value: Any, seen: tuple[str, ...] = ()) -> Any:
        """`value` with a top-level `$ref` followed (chains too); ValueError on a cycle."""
        while isinstance(value, Mapping) and isinstance(value.get("$ref"), str):
            ref = value["$ref"]
            if ref in seen:
                raise ValueError(f"reference cycle through {ref!r}")
            seen = (*seen, ref)
            value = self._target(ref)
        return value

    def schema(self, value: Any) -> dict[str, Any]:
        """A JSON Schema with every reference inlined; recursion is cut at RECURSION_STUB."""
        inlined = self._inline(value, (), 0)
        return inlined if isinstance(inlined, dict) else {}

    def _inline(self, value: Any, refs: tuple[str, ...], depth: int, alias: bool = False) -> Any:
        """`value` with references inlined; `alias`: `value` is what a reference points at
        (a reference straight back is a cycle with no schema in it, not a recursive one)."""
        self._nodes += 1
        if self._nodes > MAX_SCHEMA_NODES:
            raise ValueError(f"schemas expand to over {MAX_SCHEMA_NODES} nodes")
        if depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"a schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(value, Mapping):
            ref = value.get("$ref")
            if isinstance(ref, str):
                if ref in refs:
                    if alias:
                        raise ValueError(f"reference cycle through {ref!r}")
                    return dict(RECURSION_STUB)
                return self._inline(self._target(ref), (*refs, ref), depth + 1, alias=True)
            return {str(k): self._inline(v, refs, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self._inline(v, refs, depth + 1) for v in value]
        return value

    def _target(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"reference {ref!r} is outside the document (not followed)")
        node: Any = self._spec
        for raw in ref[2:].split("/"):
            key = raw.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or key not in node:
                raise ValueError(f"reference {ref!r} points at nothing")
            node = node[key]
        return node
