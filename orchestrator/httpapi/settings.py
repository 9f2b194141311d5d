"""Settings of the HTTP API (`toolfleet serve --http`), read from TOOLFLEET_HTTP_* variables."""

from __future__ import annotations

import ipaddress

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from toolfleet.shared.errors import ConfigError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """True for `localhost` or a loopback IP address (IPv6 with or without brackets); other
    names are not resolved, so they do not count."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpSettings(BaseSettings):
    """How the HTTP API listens and whom it lets in."""

    model_config = SettingsConfigDict(env_prefix="TOOLFLEET_HTTP_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address `--http` binds when given none.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port `--http` binds by default.")
    token: SecretStr | None = Field(
        default=None,
        description="Bearer token every API request must carry (`Authorization: Bearer ...`). "
        "Required when the API binds beyond loopback.",
    )
    allow_no_auth: bool = Field(
        default=False,
        description="Serve beyond loopback without a token (only behind a proxy that "
        "authenticates).",
    )
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest request body; larger ones get 413."
    )
    max_wait_s: float = Field(
        default=300.0,
        ge=0,
        description="Longest `wait_for_tickets_s` a message may ask for; longer waits belong "
        "on an event stream (HTTP proxies drop idle requests after a minute or two).",
    )
    sse_ping_s: float = Field(
        default=15.0, gt=0, description="Comment line sent on an idle event stream (keep-alive)."
    )
    shutdown_grace_s: float = Field(
        default=10.0, ge=0, description="How long running invocations may finish at shutdown."
    )

    def auth_required(self) -> bool:
        """True when a non-empty token is set: the API routes then require it, and the server may
        bind beyond loopback."""
        return self.token is not None and bool(self.token.get_secret_value())

    def check_bind(self, host: str) -> None:
        """Refuse to serve beyond loopback without a token (fail at start-up, naming why)."""
        if self.auth_required() or is_loopback(host) or self.allow_no_auth:
            return
        raise ConfigError(
            f"the HTTP API would listen on {host}, beyond loopback, without a token: set "
            "TOOLFLEET_HTTP_TOKEN (e.g. `openssl rand -hex 32`), bind 127.0.0.1, or set "
            "TOOLFLEET_HTTP_ALLOW_NO_AUTH=true behind a proxy that authenticates"
        )


def parse_bind(value: str, defaults: HttpSettings) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, `HOST`, or `[::1]:PORT`; missing parts from the settings."""
    host, port = defaults.host, defaults.port
    value = value.strip()
    if value.startswith("["):
        inside, _, rest = value[1:].partition("]")
        host, port_text = inside, rest.removeprefix(":")
    elif value.count(":") == 1:
        host_text, _, port_text = value.partition(":")
        host = host_text or host
    elif ":" in value:  # a bare IPv6 address
        host, port_text = value, ""
    else:
        host, port_text = value or host, ""
    if port_text:
        try:
            port = int(port_text)
        except ValueError as exc:
            raise ConfigError(f"--http {value!r}: the port must be a number (HOST:PORT)") from exc
        if not 0 <= port <= 65535:
            raise ConfigError(f"--http {value!r}: the port must be 0-65535")
    return host, port
