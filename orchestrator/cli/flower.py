"""`toolfleet flower`: Celery's monitoring UI on the fleet's Redis, behind a password."""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import sys
from typing import Any

from toolfleet.orchestrator.cli.launch import redis_url_or_embedded_file
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.redaction import mask_url
from toolfleet.shared.redis_check import check_redis

DEFAULT_PORT = 5555
USER = "admin"


def flower_command(host: str, port: int, credentials: str) -> list[str]:
    """The `celery flower` command line for the fleet's Celery app."""
    return [
        sys.executable, "-m", "celery", "-A", "toolfleet.workers.app", "flower",
        f"--address={host}", f"--port={port}", f"--basic-auth={credentials}",
    ]  # fmt: skip


def basic_auth(given: str | None) -> tuple[str, bool]:
    """`user:password` for Flower, and whether it was made here (then it is printed)."""
    if given is not None:
        if ":" not in given or not given.partition(":")[2]:
            raise ConfigError(
                f"--basic-auth takes USER:PASSWORD, got {given.partition(':')[0]!r} without "
                "a password"
            )
        return given, False
    return f"{USER}:{secrets.token_urlsafe(12)}", True


def cmd_flower(args: argparse.Namespace) -> None:
    """Start Flower on the fleet's broker (TOOLFLEET_REDIS_URL, else the embedded server a
    running `toolfleet run` or `demo` published), print where to open it, and become
    Flower until Ctrl-C. Flower always asks for a password: `--basic-auth`, else one made
    for this run."""
    if importlib.util.find_spec("flower") is None:
        raise ConfigError("`toolfleet flower` needs Flower: pip install 'toolfleet[flower]'")
    settings = Settings()
    url = redis_url_or_embedded_file(settings)
    check_redis(url)
    credentials, made = basic_auth(args.basic_auth or os.environ.get("FLOWER_BASIC_AUTH"))
    where = f"http://{args.host}:{args.port}"
    login = f" (user {USER}, password {credentials.partition(':')[2]})" if made else ""
    print(f"Flower for the fleet on {mask_url(url)}: open {where}{login}", flush=True)
    env = {**os.environ, "TOOLFLEET_REDIS_URL": url}
    env.pop("FLOWER_UNAUTHENTICATED_API", None)  # its API must ask for the password too
    # Flower takes this process's place: Ctrl-C and SIGTERM reach it, and nothing is left
    # running behind a parent that was stopped.
    command = flower_command(args.host, args.port, credentials)
    os.execve(command[0], command, env)


def add_flower_command(sub: Any) -> None:
    """Register `toolfleet flower`."""
    flower = sub.add_parser("flower", help="Celery's Flower UI on the fleet's Redis")
    flower.add_argument("--host", default="127.0.0.1", help="address to listen on")
    flower.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    flower.add_argument(
        "--basic-auth",
        metavar="USER:PASSWORD",
        help="Flower's login (default: FLOWER_BASIC_AUTH, else user admin with a password "
        "made for this run and printed)",
    )
    flower.set_defaults(func=cmd_flower)
