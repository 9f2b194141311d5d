"""A small HTTP app that serves an OpenAPI spec and implements it (for OpenAPIToolset)."""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_http import JsonHandler, serving

# A big response, over the toolset's bound in the tests (bytes).
BIG_BYTES = 100_000
# What /bomb's small gzip body inflates to (bytes).
BOMB_BYTES = 200 << 20


def pets_spec(url: str, key_in: str = "header") -> dict[str, Any]:
    """The app's spec: parameters and bodies through $refs, a recursive schema, an apiKey
    (in the X-Pets-Key header, or the `key` query parameter)."""
    key = {"type": "apiKey", "in": key_in, "name": "X-Pets-Key" if key_in == "header" else "key"}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": url}],
        "components": {
            "securitySchemes": {"key": key},
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
                        {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                        {"name": "token", "in": "query", "schema": {"type": "string"}},
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
            "/items/{itemId}/details": {
                "get": {
                    "operationId": "getItemDetails",
                    "parameters": [{"name": "itemId", "in": "path", "required": True}],
                }
            },
            "/big": {
                "get": {
                    "operationId": "getBig",
                    "parameters": [
                        {"name": "size", "in": "query", "schema": {"type": "integer"}},
                        {"name": "fill", "in": "query", "schema": {"type": "string"}},
                    ],
                }
            },
            "/bomb": {"get": {"operationId": "getBomb"}},
            "/echo-secrets": {"get": {"operationId": "echoSecrets"}},
        },
    }


@dataclass
class PetsApi:
    """The running app: its URL and what it received."""

    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)
    valid_keys: set[str] = field(default_factory=set)  # empty: no key needed


class _Handler(JsonHandler):
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
        seen = {"method": self.command, "path": parts.path, "query": parts.query, "body": body}
        api.seen.append({**seen, **headers})
        if parts.path == "/openapi.json":
            return self.reply(200, pets_spec(api.url))
        if api.valid_keys and headers.get("x-pets-key") not in api.valid_keys:
            return self.reply(401, {"error": "bad key"})
        if parts.path.endswith("/details"):
            return self.reply(200, {"path": parts.path})
        if parts.path == "/big":
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            size = int(query.get("size", BIG_BYTES))
            return self.reply(200, {"data": query.get("fill", "x") * size})
        if parts.path == "/bomb":
            return self._raw(gzip_bomb(), {"Content-Encoding": "gzip"})
        if parts.path == "/echo-secrets":
            key = headers.get("x-pets-key", "")
            return self.reply(403, {"token": "t0p", "note": f"you sent {key}"})
        if parts.path == "/pets" and self.command == "POST":
            return self.reply(201, {"id": "p1", **(body or {})})
        if parts.path.startswith("/pets/"):
            pet = parts.path.removeprefix("/pets/")
            if pet != "p1":
                return self.reply(404, {"error": f"no pet {pet}"})
            query = parse_qs(parts.query)
            return self.reply(200, {"id": pet, "name": "Rex", "query": query})
        if parts.path == "/tree":
            return self.reply(200, body or {})
        return self.reply(404, {"error": "no such path"})

    def _raw(self, payload: bytes, headers: dict[str, str]) -> None:
        self.send_response(200)
        for name, value in {"Content-Type": "text/plain", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@functools.cache
def gzip_bomb() -> bytes:
    """BOMB_BYTES of zeros, gzipped (about a thousandth of that), made a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(1 << 20)
    packed = [packer.compress(zeros) for _ in range(BOMB_BYTES >> 20)]
    return b"".join([*packed, packer.flush()])


class _Server(ThreadingHTTPServer):
    api: PetsApi


@contextmanager
def serve_pets_api() -> Iterator[PetsApi]:
    """Start the app on a free port; stop it on exit."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = PetsApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    with serving(server):
        yield server.api
