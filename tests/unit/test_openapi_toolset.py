"""OpenAPIToolset against a real HTTP app serving its spec: schemas with $refs resolved,
calls made by the worker's executor, HTTP errors for the model, bounds and secrets."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import fakeredis
import httpx
import pytest

from tests.pets_api import PetsApi, pets_spec, serve_pets_api
from toolfleet.shared.auth import AuthConfig, CredentialStore, new_credential_key
from toolfleet.shared.context import ToolServices
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.openapi import OpenAPIToolset
from toolfleet.shared.openapi.request import prepare
from toolfleet.shared.openapi.spec import RECURSION_STUB, Parameter, operations
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.executor import execute

PETS_AUTH = AuthConfig(key="pets", scheme="api_key", description="Your Pets API key.")


@pytest.fixture
def api() -> Iterator[PetsApi]:
    with serve_pets_api() as running:
        yield running


@pytest.fixture
def spec_text(api: PetsApi) -> str:
    # Given the spec as the app serves it
    return httpx.get(f"{api.url}/openapi.json").text


def tools_of(toolset: OpenAPIToolset) -> dict[str, FunctionTool]:
    return {t.name: t for t in toolset.all_tools()}


def call(
    tool: FunctionTool,
    args: dict[str, Any],
    services: ToolServices | None = None,
    max_result_bytes: int = 1_000_000,
) -> ToolResult:
    envelope = ToolCall(
        call_id="c1", tool=tool.name, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", state={}, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip
    return execute(
        tool,
        envelope,
        worker="w",
        max_result_bytes=max_result_bytes,
        time_limit_s=10,
        services=services,
    ).result


def test_one_tool_per_operation_with_refs_resolved(spec_text: str) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text))

    assert sorted(tools) == [
        "create_pet", "echo_secrets", "get_big", "get_bomb", "get_item_details", "get_pet",
        "put_tree",
    ]  # fmt: skip
    get_pet = tools["get_pet"].parameters_json_schema
    assert get_pet["required"] == ["pet_id"]
    assert get_pet["properties"]["pet_id"] == {"type": "string", "description": "The pet's id."}
    assert get_pet["properties"]["verbose"] == {"type": "boolean"}
    body = tools["create_pet"].parameters_json_schema["properties"]["body"]
    assert body["properties"]["tag"] == {"type": "string", "enum": ["dog", "cat"]}
    assert "$ref" not in json.dumps([t.declaration() for t in tools.values()])
    assert tools["create_pet"].description == "Add a pet."
    # A recursive schema is cut where it refers to itself.
    tree = tools["put_tree"].parameters_json_schema["properties"]["body"]
    assert tree["properties"]["children"]["items"] == RECURSION_STUB


def test_filter_and_prefix(spec_text: str) -> None:
    toolset = OpenAPIToolset(spec_str=spec_text, tool_filter=["get_pet"], tool_name_prefix="pets")
    assert list(tools_of(toolset)) == ["pets_get_pet"]


def test_calls_run_on_the_executor_with_path_query_and_body(api: PetsApi, spec_text: str) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text))

    got = call(tools["get_pet"], {"pet_id": "p1", "verbose": True})
    created = call(tools["create_pet"], {"body": {"name": "Tom", "tag": "cat"}})

    assert got.status is CallStatus.SUCCESS
    assert got.response == {
        "status_code": 200,
        "body": {"id": "p1", "name": "Rex", "query": {"verbose": ["true"]}},
    }
    assert created.response["status_code"] == 201
    assert created.response["body"] == {"id": "p1", "name": "Tom", "tag": "cat"}
    assert api.seen[-1]["body"] == {"name": "Tom", "tag": "cat"}


@pytest.mark.parametrize(
    "item", [".", "..", "%2e%2e", "%2E.", ".%2e", "%252e%252E", "a/../b", "..\\x", "%2F..", ""]
)
def test_a_path_argument_naming_another_path_is_refused(
    api: PetsApi, spec_text: str, item: str
) -> None:
    # Given an API under /api, whose /api/items/{itemId}/details a dot segment would leave
    tools = tools_of(OpenAPIToolset(spec_str=spec_text, base_url=f"{api.url}/api"))
    before = len(api.seen)

    result = call(tools["get_item_details"], {"item_id": item})

    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "ToolError"
    assert "'.' or '..' segment" in result.response["error_message"]
    assert len(api.seen) == before  # nothing was sent


@pytest.mark.parametrize(
    ("item", "path"),
    [("a/b", "/api/items/a%2Fb/details"), ("...", "/api/items/.../details"),
     ("50%", "/api/items/50%25/details"), ("x.y", "/api/items/x.y/details")],
)  # fmt: skip
def test_a_path_argument_stays_in_its_segment(
    api: PetsApi, spec_text: str, item: str, path: str
) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text, base_url=f"{api.url}/api"))

    result = call(tools["get_item_details"], {"item_id": item})

    assert result.status is CallStatus.SUCCESS
    assert api.seen[-1]["path"] == path == result.response["body"]["path"]


def test_http_error_is_an_error_response_with_status_and_body(spec_text: str) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text))

    result = call(tools["get_pet"], {"pet_id": "p9"})

    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "ToolError"
    message = result.response["error_message"]
    assert message.startswith("HTTP 404 Not Found from GET ")
    assert '{"error": "no pet p9"}' in message


def test_missing_argument_never_reaches_the_api(api: PetsApi, spec_text: str) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text))
    before = len(api.seen)

    result = call(tools["create_pet"], {})

    assert result.response["error_type"] == "InvalidArguments"
    assert len(api.seen) == before


def test_an_oversized_response_is_cut(spec_text: str) -> None:
    tools = tools_of(OpenAPIToolset(spec_str=spec_text, max_response_bytes=1000))

    result = call(tools["get_big"], {})

    assert result.response["truncated"] is True
    assert len(result.response["body"]) == 1000


def test_secrets_sent_never_come_back(api: PetsApi, spec_text: str) -> None:
    # Given a static header whose value the server echoes back in an error body
    canary = "canary-5ec7e7"
    toolset = OpenAPIToolset(spec_str=spec_text, headers={"X-Pets-Key": canary})

    result = call(tools_of(toolset)["echo_secrets"], {})

    assert api.seen[-1]["x-pets-key"] == canary  # it was sent
    assert result.status is CallStatus.ERROR
    message = result.response["error_message"]
    assert "HTTP 403" in message and canary not in message and "t0p" not in message
    assert "you sent ***" in message


def test_credential_is_asked_for_then_sent_where_the_spec_says(
    api: PetsApi, spec_text: str
) -> None:
    store = CredentialStore(fakeredis.FakeRedis(), Keys("t"), new_credential_key())
    services = ToolServices(credentials=store)
    tools = tools_of(OpenAPIToolset(spec_str=spec_text, auth=PETS_AUTH))
    api.valid_keys.add("k-123")
    before = len(api.seen)

    # When no credential is stored, the call asks for it and sends nothing
    asked = call(tools["get_pet"], {"pet_id": "p1"}, services)
    assert asked.actions.requested_auth is not None
    assert asked.actions.requested_auth["key"] == "pets"
    assert len(api.seen) == before

    # When the user supplied it, it goes in the spec's apiKey header, masked in results
    store.put("app", "u", PETS_AUTH, "k-123")
    got = call(tools["get_pet"], {"pet_id": "p1"}, services)
    assert got.status is CallStatus.SUCCESS and api.seen[-1]["x-pets-key"] == "k-123"

    # When the API refuses it, the user is asked again
    store.put("app", "u", PETS_AUTH, "k-wrong")
    refused = call(tools["get_pet"], {"pet_id": "p1"}, services)
    assert refused.status is CallStatus.ERROR and "HTTP 401" in refused.response["error_message"]
    assert refused.actions.requested_auth is not None
    assert store.get("app", "u", PETS_AUTH) is None


def test_the_model_cannot_replace_the_credential_or_the_toolsets_headers(
    api: PetsApi,
) -> None:
    # Given a spec whose getPet also declares the credential's header, Authorization,
    # Host, the toolset's own header and a header of its own as parameters
    spec = pets_spec(api.url)
    spec["paths"]["/pets/{petId}"]["get"]["parameters"] += [
        {"name": name, "in": "header", "schema": {"type": "string"}}
        for name in ("x-pets-key", "Authorization", "Host", "X-Tenant", "X-Trace")
    ]
    store = CredentialStore(fakeredis.FakeRedis(), Keys("t"), new_credential_key())
    store.put("app", "u", PETS_AUTH, "k-123")
    api.valid_keys.add("k-123")
    toolset = OpenAPIToolset(spec_dict=spec, auth=PETS_AUTH, headers={"X-Tenant": "acme"})
    get_pet = tools_of(toolset)["get_pet"]

    # Then only the header of its own is offered to the model
    offered = set(get_pet.parameters_json_schema["properties"])
    assert offered == {"pet_id", "verbose", "token", "x_trace"}

    # When the model passes the others anyway, the user's credential and the toolset's
    # header are sent, not the model's values
    args = {"pet_id": "p1", "x_pets_key": "attacker", "authorization": "Bearer x",
            "host": "evil.test", "x_tenant": "other", "x_trace": "t-1"}  # fmt: skip
    got = call(get_pet, args, ToolServices(credentials=store))

    assert got.status is CallStatus.SUCCESS
    seen = api.seen[-1]
    assert seen["x-pets-key"] == "k-123" and seen["x-tenant"] == "acme"
    assert seen["x-trace"] == "t-1"
    assert "authorization" not in seen and seen["host"] != "evil.test"


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda s: s["components"]["schemas"].update(Tag={"$ref": "#/components/schemas/Tag"}),
         "reference cycle"),
        (lambda s: s["paths"]["/pets/{petId}"]["parameters"].append({"$ref": "http://evil/p"}),
         "outside the document"),
        (lambda s: s["paths"]["/big"]["get"].update(operationId="getPet"),
         "two operations are named 'get_pet'"),
        (lambda s: s.update(servers=[{"url": "/v1"}]), "pass base_url="),
        (lambda s: s.update(servers={"url": "https://x.test"}), "pass base_url="),
        (lambda s: s["paths"].update({"/a": {"$ref": "#/paths/~1b"},
                                      "/b": {"$ref": "#/paths/~1a"}}),
         "path '/a': reference cycle through '#/paths/~1b'"),
        (lambda s: s["paths"].update({"/a": {"$ref": "https://evil.test/paths.json"}}),
         "path '/a': reference 'https://evil.test/paths.json' is outside the document"),
        (lambda s: s["paths"].update({"/a": {"$ref": "#/nowhere"}}), "points at nothing"),
        (lambda s: s["paths"]["/pets"]["post"]["requestBody"].update(content=["json"]),
         "`content` is not an object"),
        (lambda s: s["paths"]["/big"]["get"]["parameters"].append(nested(900)),
         "nested deeper than 100 levels"),
        (lambda s: s.update({"x-deep": nested(100)}), "nested deeper than 100 levels"),
        (lambda s: s.update({"x-self": s}), "nested deeper than 100 levels"),
    ],
)  # fmt: skip
def test_a_bad_spec_is_refused_at_definition(mutate: Any, problem: str) -> None:
    spec = pets_spec("http://127.0.0.1:1")
    mutate(spec)
    with pytest.raises(ToolDefinitionError, match=problem):
        OpenAPIToolset(spec_dict=spec)


def nested(levels: int) -> Any:
    """A JSON value `levels` objects deep."""
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    "text",
    [
        "openapi: 3.0.3\nx: " + "[" * 900 + "]" * 900,  # YAML
        json.dumps({"openapi": "3.0.3", "x": nested(900)}),
        '{"openapi": "3.0.3", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_a_spec_text_nested_without_end_is_refused(text: str) -> None:
    with pytest.raises(ToolDefinitionError, match="nested deeper than 100 levels"):
        OpenAPIToolset(spec_str=text)


def test_a_spec_of_aliases_expanding_without_end_is_refused() -> None:
    # Each level refers to the one before nine times: 9**12 nodes read, a few KB written
    lines = ["a0: &a0 [x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 13)
    ]
    with pytest.raises(ToolDefinitionError, match="over 1000000 objects and lists"):
        OpenAPIToolset(spec_str="\n".join(lines))


def test_a_schema_nested_without_end_is_refused() -> None:
    spec = pets_spec("http://127.0.0.1:1")
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "array", "items": deep}
    spec["components"]["schemas"]["Tag"] = deep
    with pytest.raises(ToolDefinitionError, match="nested deeper"):
        OpenAPIToolset(spec_dict=spec)


def test_a_header_the_toolset_sets_is_kept_whatever_its_case() -> None:
    # Given an operation that takes X-Tenant, and a request the toolset sends as x-tenant
    operation = operations(pets_spec("http://api.test"))[0]
    header = Parameter("X-Tenant", "header", "x_tenant", False, {"type": "string"})
    operation = replace(operation, parameters=(*operation.parameters, header))

    sent = prepare(operation, "http://api.test", {"pet_id": "p1", "x_tenant": "other"},
                   {"x-tenant": "acme"})  # fmt: skip

    # Then the toolset's value goes, alone
    assert sent.headers == {"x-tenant": "acme"}
