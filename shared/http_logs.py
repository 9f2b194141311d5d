"""httpx logs every request's URL at INFO ("HTTP Request: GET https://..."): its query may
hold a credential (an API key a spec puts there) and its path or query a secret-named
argument. A filter on httpx's logger (and the MCP client's) masks, in each of its lines,
every query value, a password in the URL, and the secret values of the request being sent."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

from toolfleet.shared.redaction import MASK, mask_values

# The loggers whose lines hold request URLs: httpx's (INFO), the MCP client's (DEBUG).
HTTP_LOGGERS = ("httpx", "mcp.client.streamable_http", "mcp.client.sse")
_QUERY_VALUE = re.compile(r"([?&][^=&#\s\"']*=)[^&#\s\"']*")
_PASSWORD = re.compile(r"(://[^/?#@:\s\"']*:)[^/?#@\s\"']*@")
# The secret values of the requests this context is sending (a task sees its own).
_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("toolfleet_http_secrets", default=())


class MaskRequestSecrets(logging.Filter):
    """Rewrite a record's message with query values, URL passwords and the secret values
    of the request in flight masked as `***`; drop nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record's formatted message (its arguments are formatted here, once)."""
        try:
            text = record.getMessage()
        except Exception:  # a broken record: show none of it
            text = f"(a {record.name} log line that does not format)"
        record.msg, record.args = masked(text), None
        return True


def masked(text: str) -> str:
    """`text` with query values, URL passwords and the current request's secrets masked."""
    text = _QUERY_VALUE.sub(rf"\1{MASK}", text)
    text = _PASSWORD.sub(rf"\1{MASK}@", text)
    return mask_values(text, _SECRETS.get())


def mask_http_logs() -> None:
    """Put the filter on each of HTTP_LOGGERS, once (again after a logging configuration
    that replaced it: callers call this before each request)."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MaskRequestSecrets) for f in logger.filters):
            logger.addFilter(MaskRequestSecrets())


@contextlib.contextmanager
def hidden_in_http_logs(values: Iterable[str]) -> Iterator[None]:
    """While the block runs, httpx's lines in this context mask `values` (a request's
    credential and secret-named arguments, wherever in the URL they are)."""
    mask_http_logs()
    token = _SECRETS.set((*_SECRETS.get(), *(v for v in values if v)))
    try:
        yield
    finally:
        _SECRETS.reset(token)
