"""ADK's own HTTP client against an ADK api_server: the desk app's turns, its state, its
artifact and its long-running call, through google.adk's AdkWebServerClient (plain httpx
where the client has no method), printed as a JSON summary.

    .venv-adk/bin/python -m tests.integration.adk_web_client http://127.0.0.1:8000

Run with a Python that has google-adk (the ADK virtualenv): tests/integration/
test_adk_web.py runs it against toolfleet's /adk routes and against ADK's own server,
and compares what each answered. Ids, times and versions differ between servers; the
summary keeps what a client relies on (authors, calls, responses, texts, state, names).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
from google.adk.cli.adk_web_server import RunAgentRequest
from google.adk.cli.conformance.adk_web_server_client import AdkWebServerClient
from google.adk.events import Event
from google.genai import types

APP = "desk"
USER = "desk-user"
TIMEOUT_S = 30.0
# What the event summaries keep of each event's content and actions.
EventSummary = dict[str, Any]


def user_text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def summary(event: Event) -> EventSummary:
    """An event as the servers must agree on it: author, what it says or calls, its
    state and artifact deltas, and whether it names long-running calls."""
    return summary_of_json(event.model_dump(mode="json", by_alias=True, exclude_none=True))


def summary_of_json(event: dict[str, Any]) -> EventSummary:
    """The same summary from an event as the server sent it (camelCase JSON)."""
    parts = (event.get("content") or {}).get("parts") or []
    kinds, names, texts = [], [], []
    for part in parts:
        for kind in ("functionCall", "functionResponse"):
            if kind in part:
                kinds.append(kind)
                names.append(part[kind]["name"])
        if "text" in part:
            kinds.append("text")
            texts.append(part["text"])
    actions = event.get("actions") or {}
    return {
        "author": event.get("author"),
        "kinds": kinds or ["actions"],
        "names": names,
        "texts": texts,
        "stateDelta": actions.get("stateDelta") or {},
        "artifactDelta": actions.get("artifactDelta") or {},
        "longRunning": bool(event.get("longRunningToolIds")),
    }


def responses_of(event: Event) -> list[dict[str, Any]]:
    return [
        {"id": p.function_response.id, "response": p.function_response.response}
        for p in (event.content.parts or []) if event.content
        if p.function_response
    ]  # fmt: skip


def wire_keys(event: dict[str, Any]) -> set[str]:
    """The field names ADK's serialisation chooses (not the tools' argument names): the
    event's, its actions', its parts' and their calls' and responses'."""
    keys = set(event) | set(event.get("actions") or {})
    for part in (event.get("content") or {}).get("parts") or []:
        keys |= set(part)
        for kind in ("functionCall", "functionResponse"):
            keys |= set(part.get(kind) or {})
    return keys


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


class Desk:
    """One session of the desk app, spoken to through ADK's client."""

    def __init__(self, client: AdkWebServerClient, http: httpx.AsyncClient) -> None:
        self.client = client
        self.http = http
        self.session_id = ""

    def request(self, message: types.Content, **fields: Any) -> RunAgentRequest:
        return RunAgentRequest(
            app_name=APP, user_id=USER, session_id=self.session_id, new_message=message, **fields
        )

    async def turn(self, message: types.Content) -> list[Event]:
        return [event async for event in self.client.run_agent(self.request(message))]

    async def state(self) -> dict[str, Any]:
        found = await self.client.get_session(
            app_name=APP, user_id=USER, session_id=self.session_id
        )
        return dict(found.state)

    def session_path(self) -> str:
        return f"/apps/{APP}/users/{USER}/sessions/{self.session_id}"


async def artifacts(desk: Desk) -> dict[str, Any]:
    names = await desk.http.get(f"{desk.session_path()}/artifacts")
    note = f"{desk.session_path()}/artifacts/note.txt"
    versions = await desk.http.get(f"{note}/versions")
    where = {"app_name": APP, "user_id": USER, "session_id": desk.session_id}
    listed = await desk.client.list_artifact_versions_metadata(**where, artifact_name="note.txt")
    first = await desk.client.get_artifact_version_metadata(
        **where, artifact_name="note.txt", version=0
    )
    loaded = await desk.http.get(note)
    loaded_first = await desk.http.get(f"{note}/versions/0")
    return {
        "names": names.json(),
        "versions": versions.json(),
        "metadata": [
            {
                "version": v.version,
                "mimeType": v.mime_type,
                "uriNamesIt": v.canonical_uri.endswith("/artifacts/note.txt/versions/0"),
                "created": v.create_time > 0,
            }
            for v in [*listed, first]
        ],
        "loaded": loaded.json(),
        "loadedVersion0": loaded_first.json(),
    }


async def long_running(desk: Desk) -> dict[str, Any]:
    asked = await desk.turn(user_text("refund 40"))
    (call,) = [e for e in asked if e.get_function_calls()]
    call_id = call.get_function_calls()[0].id
    pending = [r for e in asked for r in responses_of(e)]
    answer = types.FunctionResponse(
        id=call_id, name="request_refund", response={"status": "approved"}
    )
    approval = types.Content(role="user", parts=[types.Part(function_response=answer)])
    resumed = await desk.turn(approval)
    return {
        "asked": [summary(e) for e in asked],
        "callIsLongRunning": call_id in (call.long_running_tool_ids or set()),
        "pendingAnswersTheCall": [r["id"] == call_id for r in pending],
        "pending": [r["response"] for r in pending],
        "resumed": [summary(e) for e in resumed],
    }


async def plain_run(desk: Desk, text: str) -> dict[str, Any]:
    """POST /run with plain httpx: the events as one JSON list."""
    body = desk.request(user_text(text)).model_dump(by_alias=True, exclude_none=True)
    answered = await desk.http.post("/run", json=body)
    events = answered.json()
    keys = set().union(*(wire_keys(e) for e in events)) if isinstance(events, list) else set()
    return {
        "status": answered.status_code,
        "contentType": answered.headers.get("content-type", ""),
        "isList": isinstance(events, list),
        "snakeKeys": sorted(k for k in keys if "_" in k),
        "hasCamelKeys": {"invocationId", "functionCall", "stateDelta"} <= keys,
        "events": [summary_of_json(e) for e in events] if isinstance(events, list) else [],
    }


async def streamed_run(desk: Desk, text: str) -> dict[str, Any]:
    """POST /run_sse with `streaming` true, read as `data:` frames."""
    body = desk.request(user_text(text), streaming=True).model_dump(
        by_alias=True, exclude_none=True
    )
    async with desk.http.stream("POST", "/run_sse", json=body) as answered:
        events = [e async for e in sse_events(answered)]
        return {
            "status": answered.status_code,
            "contentType": answered.headers.get("content-type", "").split(";")[0],
            "events": [summary_of_json(e) for e in events],
        }


async def run(base_url: str) -> dict[str, Any]:
    """Every step against `base_url`; what each answered."""
    async with (
        AdkWebServerClient(base_url, timeout=TIMEOUT_S) as client,
        httpx.AsyncClient(base_url=base_url, timeout=TIMEOUT_S) as http,
    ):
        desk = Desk(client, http)
        out: dict[str, Any] = {"version": sorted(await client.get_version_data())}
        created = await client.create_session(app_name=APP, user_id=USER, state={"tier": "gold"})
        desk.session_id = created.id
        out["created"] = {"state": dict(created.state), "events": len(created.events)}
        out["stock"] = [summary(e) for e in await desk.turn(user_text("stock pens"))]
        out["stateAfterStock"] = await desk.state()
        out["note"] = [summary(e) for e in await desk.turn(user_text("note hello"))]
        out["artifacts"] = await artifacts(desk)
        out["refund"] = await long_running(desk)
        patched = await client.update_session(
            app_name=APP, user_id=USER, session_id=desk.session_id, state_delta={"tier": "platinum"}
        )
        out["patchedState"] = dict(patched.state)
        out["run"] = await plain_run(desk, "stock cups")
        out["runSse"] = await streamed_run(desk, "stock mugs")
        out["stateAtEnd"] = await desk.state()
        await client.delete_session(app_name=APP, user_id=USER, session_id=desk.session_id)
        try:
            await desk.state()
            out["afterDelete"] = 200
        except httpx.HTTPStatusError as exc:
            out["afterDelete"] = exc.response.status_code
        out["listApps"] = (await http.get("/list-apps")).json()
        health = await http.get("/health")
        out["health"] = {"status": health.status_code, "body": health.json()}
        return out


def main(argv: list[str]) -> None:
    """Print the summary of a run against the base URL `argv[0]`."""
    print(json.dumps(asyncio.run(run(argv[0])), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
