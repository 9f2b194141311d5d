"""Settings of the HTTP API (`toolfleet serve --http`), read from TOOLFLEET_HTTP_* variables."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from toolfleet.shared.confirmation import RESERVED_SUBJECT, SERVED_USER
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


class ApiKey(BaseModel):
    """A static API key (TOOLFLEET_HTTP_API_KEYS): the caller it stands for and their roles.

    Give the key itself (`key`) or, to keep it out of the configuration, its SHA-256 in hex
    (`key_sha256`, e.g. `printf %s "$KEY" | sha256sum`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    subject: str = Field(min_length=1, description="The caller's user id.")
    roles: tuple[str, ...] = Field(default=(), description="e.g. admin, approver:<app>.")
    key: SecretStr | None = None
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")

    @model_validator(mode="after")
    def _one_key(self) -> ApiKey:
        if self.subject == SERVED_USER:
            raise ValueError(f"API key of {self.subject!r}: {RESERVED_SUBJECT}")
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError(f"API key of {self.subject!r}: give exactly one of key, key_sha256")
        if self.key is not None and len(self.key.get_secret_value()) < 16:
            raise ValueError(f"API key of {self.subject!r}: use at least 16 characters")
        return self


class HttpSettings(BaseSettings):
    """How the HTTP API listens and whom it lets in."""

    model_config = SettingsConfigDict(env_prefix="TOOLFLEET_HTTP_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address `--http` binds when given none.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port `--http` binds by default.")
    token: SecretStr | None = Field(
        default=None,
        description="The operator's bearer token (`Authorization: Bearer ...`): its caller is "
        "`admin`, subject `operator`. Setting it, API keys or JWTs requires callers to "
        "identify themselves.",
    )
    api_keys: list[ApiKey] = Field(
        default_factory=list,
        description='Static API keys, a JSON list: [{"key": ..., "subject": "alice", '
        '"roles": ["approver:travel"]}].',
    )
    jwt_secret: SecretStr | None = Field(
        default=None, description="Shared secret of HS256 JWTs (32 bytes or more)."
    )
    jwt_jwks_url: str | None = Field(
        default=None, description="JWKS URL of the identity provider (RS256 and ES256 JWTs)."
    )
    jwt_audience: str | None = Field(default=None, description="Required `aud` of JWTs.")
    jwt_issuer: str | None = Field(default=None, description="Required `iss` of JWTs.")
    jwt_roles_claim: str = Field(
        default="roles", description="The JWT claim holding the caller's roles (a list)."
    )
    jwt_leeway_s: float = Field(
        default=30.0, ge=0, le=300, description="Clock skew allowed on `exp` and `nbf`."
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Addresses or networks (comma-separated) of proxies whose "
        "X-Forwarded-For is believed; from any other peer it is ignored.",
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
    max_streams: int = Field(
        default=256, ge=1, description="Open event streams per replica; more get 503."
    )
    max_streams_per_caller: int = Field(
        default=8, ge=1, description="Open event streams per caller (subject); more get 429."
    )
    sse_ping_s: float = Field(
        default=15.0, gt=0, description="Comment line sent on an idle event stream (keep-alive)."
    )
    shutdown_grace_s: float = Field(
        default=10.0, ge=0, description="How long running invocations may finish at shutdown."
    )

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"trusted proxy {entry!r} is not an address or network") from exc
        return value

    def auth_required(self) -> bool:
        """True when callers must identify themselves: a token, API keys or JWTs are set up."""
        token = self.token is not None and bool(self.token.get_secret_value())
        return token or bool(self.api_keys) or self.jwt_enabled()

    def jwt_enabled(self) -> bool:
        """True when JWTs are accepted (a shared secret or a JWKS URL is set)."""
        return self.jwt_secret is not None or self.jwt_jwks_url is not None

    def check(self, host: str) -> None:
        """Refuse, at start-up and naming the setting, an API open beyond loopback or a JWT
        set-up that would not check audience and issuer."""
        if self.jwt_enabled() and not (self.jwt_audience and self.jwt_issuer):
            raise ConfigError(
                "JWTs are accepted but TOOLFLEET_HTTP_JWT_AUDIENCE and TOOLFLEET_HTTP_JWT_ISSUER "
                "are not both set: a token minted for another service would pass"
            )
        secret = self.jwt_secret.get_secret_value() if self.jwt_secret else None
        if secret is not None and len(secret.encode()) < 32:
            raise ConfigError("TOOLFLEET_HTTP_JWT_SECRET must be 32 bytes or more (HS256)")
        if self.auth_required() or is_loopback(host):
            return
        if self.allow_no_auth and self.trusted_proxies:
            return
        if self.allow_no_auth:
            raise ConfigError(
                f"TOOLFLEET_HTTP_ALLOW_NO_AUTH on {host} needs TOOLFLEET_HTTP_TRUSTED_PROXIES: the "
                "address of the authenticating proxy, the only peer then let in"
            )
        raise ConfigError(
            f"the HTTP API would listen on {host}, beyond loopback, without a token: set "
            "TOOLFLEET_HTTP_TOKEN (e.g. `openssl rand -hex 32`), TOOLFLEET_HTTP_API_KEYS or a "
            "JWT issuer, bind 127.0.0.1, or set TOOLFLEET_HTTP_ALLOW_NO_AUTH=true with "
            "TOOLFLEET_HTTP_TRUSTED_PROXIES behind a proxy that authenticates"
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
