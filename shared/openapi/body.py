"""An API's response body read within bounds: bytes counted as they are decoded (a small
gzip body cannot make a large one in memory), and a result cut to what a tool may send."""

from __future__ import annotations

import json
import zlib
from typing import Any

import httpx

from toolfleet.shared.errors import ToolError

# The content codings we ask for and decode ourselves, each within the bound.
ACCEPT_ENCODING = "gzip, deflate"


class _Decoder:
    """One response's content coding (identity, gzip or deflate), decoded piece by piece,
    never more than asked for at a time."""

    def __init__(self, encoding: str) -> None:
        self._coding = encoding.strip().lower()
        self._deflate_first = False  # a "deflate" body may be zlib-wrapped or raw
        if self._coding in ("", "identity"):
            self._inflate: Any = None
        elif self._coding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self._coding == "deflate":
            self._inflate = zlib.decompressobj()
            self._deflate_first = True
        else:
            raise ToolError(
                f"the API answered with Content-Encoding {encoding!r}, which is not decoded "
                f"here (the request asks for {ACCEPT_ENCODING})"
            )

    def decode(self, data: bytes, room: int) -> bytes:
        """At most `room` (over 0) bytes decoded from `data`; what is left of `data` then
        is never decoded (the caller stops there)."""
        if self._inflate is None:
            return data[:room]
        try:
            decoded: bytes = self._inflate.decompress(data, room)
        except zlib.error as exc:
            if not self._deflate_first:
                raise ToolError(f"the API's {self._coding} body does not decode: {exc}") from exc
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, no header
            self._deflate_first = False
            return self.decode(data, room)
        self._deflate_first = False
        return decoded


async def read_bounded(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The response's body decoded, at most `max_bytes` (over 0) of it; True when there
    was more. Reads the raw stream and decodes it here: httpx would inflate a whole
    received chunk at once (megabytes from kilobytes of gzip) before we could count."""
    decoder = _Decoder(response.headers.get("content-encoding", ""))
    body = bytearray()
    async for raw in response.aiter_raw():
        body += decoder.decode(raw, max_bytes + 1 - len(body))
        if len(body) > max_bytes:
            del body[max_bytes:]
            return bytes(body), True
    return bytes(body), False


def json_size(value: Any) -> int:
    """Bytes of `value` as JSON, measured as the worker measures a tool's result."""
    return len(json.dumps(value).encode())


def fitted(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """`result` when its JSON is within `limit` bytes; else with its `body` cut (as text)
    to the longest start that fits, and "truncated": true."""
    if json_size(result) <= limit:
        return result
    body = result.get("body")
    text = body if isinstance(body, str) else json.dumps(body)
    cut: dict[str, Any] = {**result, "body": "", "truncated": True}
    if json_size(cut) > limit:
        raise ToolError(f"the API's answer does not fit in {limit} bytes even without its body")
    low, high = 0, len(text)  # the longest start of `text` that fits: low <= n < high + 1
    while low < high:
        middle = (low + high + 1) // 2
        if json_size({**cut, "body": text[:middle]}) <= limit:
            low = middle
        else:
            high = middle - 1
    return {**cut, "body": text[:low]}
