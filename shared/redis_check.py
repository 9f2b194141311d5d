"""Check at start that Redis answers, with the URL's credentials: a clear error, bounded.

Celery retries its broker forever at start and redis-py's errors name neither the
setting nor the fix, so `toolfleet serve/worker/run` ping first.
"""

from __future__ import annotations

import time

import redis

from toolfleet.shared.errors import ConfigError
from toolfleet.shared.redaction import mask_url
from toolfleet.shared.redis_clients import sync_client

# How long an unreachable Redis is waited for (it may be starting too); refused
# credentials and TLS failures are reported at once.
STARTUP_WAIT_S = 5.0
_URL_FORM = (
    "redis://[USER:PASSWORD@]HOST:PORT/DB (rediss:// for TLS; "
    "redis+sentinel://[USER:PASSWORD@]HOST:PORT,HOST:PORT/SERVICE/DB for Sentinel)"
)


def check_redis(url: str, wait_s: float = STARTUP_WAIT_S) -> None:
    """Ping Redis at `url`; raise ConfigError naming the URL (password masked) and what
    to change in TOOLFLEET_REDIS_URL if it does not answer as it should."""
    shown = mask_url(url)
    try:
        client = sync_client(url, socket_connect_timeout=2, socket_timeout=2)
    except ValueError as exc:
        raise ConfigError(
            f"TOOLFLEET_REDIS_URL {shown} is not a Redis URL ({exc}): use {_URL_FORM}"
        ) from None
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                client.ping()
                return
            except redis.AuthenticationError as exc:
                raise ConfigError(_auth_problem(url, shown, exc)) from None
            except redis.ResponseError as exc:  # NOPERM: an ACL user without the rights
                if "DB index" in str(exc):
                    raise ConfigError(
                        f"Redis at {shown} has no such database ({exc}): use a database "
                        "index it has in TOOLFLEET_REDIS_URL (0 to 15 unless its "
                        "`databases` setting says more), e.g. redis://host:6379/0"
                    ) from None
                raise ConfigError(
                    f"Redis at {shown} refused a command: {exc}. Grant the user of "
                    "TOOLFLEET_REDIS_URL what toolfleet needs, e.g. "
                    "`ACL SETUSER <user> on >PASSWORD ~* &* +@all`"
                ) from None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                tls = "SSL" in str(exc) or "certificate" in str(exc)
                if tls or time.monotonic() >= deadline:
                    raise ConfigError(_unreachable(shown, exc, wait_s, tls)) from None
                time.sleep(0.25)  # Redis may be starting: try again until the deadline
    finally:
        client.close()


def _auth_problem(url: str, shown: str, exc: Exception) -> str:
    has_credentials = "@" in url.split("://", 1)[-1].split("/", 1)[0]
    if has_credentials:
        fix = (
            "the user name or password in TOOLFLEET_REDIS_URL was refused: correct them "
            "(redis://:PASSWORD@host:port/db for requirepass, redis://USER:PASSWORD@... for "
            "an ACL user; percent-encode special characters)"
        )
    else:
        fix = (
            "it needs credentials: put them in TOOLFLEET_REDIS_URL, redis://:PASSWORD@host:port/db "
            "for requirepass or redis://USER:PASSWORD@host:port/db for an ACL user"
        )
    return f"Redis at {shown} refused the connection ({exc}); {fix}"


def _unreachable(shown: str, exc: Exception, wait_s: float, tls: bool) -> str:
    if tls:
        fix = (
            "the TLS handshake failed: check the server certificate and pass its CA as "
            "?ssl_ca_certs=/path/ca.pem in TOOLFLEET_REDIS_URL"
        )
    else:
        fix = (
            f"nothing answered for {wait_s:g} s: start Redis there or correct "
            f"TOOLFLEET_REDIS_URL ({_URL_FORM})"
        )
    return f"cannot connect to Redis at {shown} ({exc}); {fix}"
