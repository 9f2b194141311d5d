"""A small HTTP app that serves an OpenAPI spec and implements it (for OpenAPIToolset)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# A big response, over the toolset's bound in the tests (bytes).
BIG_BYTES = 100_000


def pets_spec(url: str) -> dict[str, Any]:
    """The app's spec: parameters and bodies through $refs, a recursive schema, an apiKey."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": url}],
        "components": {
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Pets-Key"}},
            "parameters": {
                "PetId": {
                    "name": "petId",
                    "in": "path",
                    "required": True,
                    "description": "The pet's id.",
                    "schema": {"type": "string"},
                }
            },
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "tag": {"$ref": "#/components/schemas/Tag"},
                    },
                },
                "Tag": {"type": "string", "enum": ["dog", "cat"]},
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Node"},
                        }
                    },
                },
            },
        },
        "paths": {
            "/pets/{petId}": {
                "parameters": [{"$ref": "#/components/parameters/PetId"}],
                "get": {
                    "operationId": "getPet",
                    "summary": "Get one pet by its id.",
                    "parameters": [
                        {"name": "verbose", "in": "query", "schema": {"type": "boolean"}}
                    ],
                },
            },
            "/pets": {
                "post": {
                    "operationId": "createPet",
                    "description": "Add a pet.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                        },
                    },
                }
            },
            "/tree": {
                "put": {
                    "operationId": "putTree",
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                        }
                    },
                }
            },
            "/big": {"get": {"operationId": "getBig"}},
            "/echo-secrets": {"get": {"operationId": "echoSecrets"}},
        },
    }


@dataclass
class PetsApi:
    """The running app: its URL and what it received."""

    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)
    valid_keys: set[str] = field(default_factory=set)  # empty: no key needed


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def _handle(self) -> None:
        api = self.server.api
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        api.seen.append({"method": self.command, "path": parts.path, "body": body, **headers})
        if parts.path == "/openapi.json":
            return self._reply(200, pets_spec(api.url))
        if api.valid_keys and headers.get("x-pets-key") not in api.valid_keys:
            return self._reply(401, {"error": "bad key"})
        if parts.path == "/big":
            return self._reply(200, {"data": "x" * BIG_BYTES})
        if parts.path == "/echo-secrets":
            key = headers.get("x-pets-key", "")
            return self._reply(403, {"token": "t0p", "note": f"you sent {key}"})
        if parts.path == "/pets" and self.command == "POST":
            return self._reply(201, {"id": "p1", **(body or {})})
        if parts.path.startswith("/pets/"):
            pet = parts.path.removeprefix("/pets/")
            if pet != "p1":
                return self._reply(404, {"error": f"no pet {pet}"})
            query = parse_qs(parts.query)
            return self._reply(200, {"id": pet, "name": "Rex", "query": query})
        if parts.path == "/tree":
            return self._reply(200, body or {})
        return self._reply(404, {"error": "no such path"})

    def _reply(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded on PetsApi instead


class _Server(ThreadingHTTPServer):
    api: PetsApi


@contextmanager
def serve_pets_api() -> Iterator[PetsApi]:
    """Start the app on a free port; stop it on exit."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = PetsApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.api
    finally:
        server.shutdown()
        server.server_close()
