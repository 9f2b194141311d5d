"""A vhost of a test module's own on the local RabbitMQ (127.0.0.1:5672, guest/guest).

Made with `rabbitmqctl` and deleted after (bench.rabbit, shared with the benchmarks).
Where RabbitMQ is not there the test is skipped with the reason, except under CI=true,
where it fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from urllib.parse import unquote, urlparse

import pytest

from bench.rabbit import own_vhost, rabbit_missing, rabbitmqctl

__all__ = ["close_connections", "rabbit_vhost", "rabbitmqctl", "require_rabbit"]


def require_rabbit() -> None:
    """Skip the test where RabbitMQ is not there (fail under CI=true), saying why."""
    missing = rabbit_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"RabbitMQ is required under CI=true: {missing}")
        pytest.skip(missing)


@contextlib.contextmanager
def rabbit_vhost() -> Iterator[str]:
    """The amqp:// URL of a new vhost, deleted at the end (or skip/fail, see above)."""
    require_rabbit()
    with own_vhost("toolfleet-test") as url:
        yield url


def vhost_of(url: str) -> str:
    """The vhost of an amqp:// URL."""
    return unquote(urlparse(url).path.removeprefix("/")) or "/"


def close_connections(url: str) -> None:
    """Close every client connection to the vhost of `url` (RabbitMQ's side: as a broker
    restart does to them, the broker's other vhosts untouched)."""
    rabbitmqctl("close_all_connections", "-p", vhost_of(url), "closed by a toolfleet test")
