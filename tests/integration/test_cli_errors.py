"""Every command that talks to Redis reports a Redis it cannot use the same way: one line
naming TOOLFLEET_REDIS_URL and what to change, exit status 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    ["tickets", "list"],
    ["status"],
    ["worker"],
    ["serve", "--agent", "examples.weather:agent"],
    ["run", "--agent", "examples.weather:agent", "hi"],
    ["flower"],
]


def unused_database(url: str) -> str:
    """`url` with a database index no default server has."""
    return url.rsplit("/", 1)[0] + "/99"


def bad_urls(redis_url: str) -> dict[str, tuple[str, str]]:
    """Each kind of bad URL, and what its message must say."""
    return {
        "unreachable": ("redis://127.0.0.1:1/0", "cannot connect to Redis at redis://127.0.0.1:1/0"),
        "no scheme": ("127.0.0.1:6379/0", "is not a Redis URL"),
        "no such database": (unused_database(redis_url), "has no such database"),
    }  # fmt: skip


def run(command: list[str], url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLFLEET_", "GOOGLE_"))}
    env["TOOLFLEET_REDIS_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "toolfleet", *command],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["unreachable", "no scheme", "no such database"])
def test_each_command_names_the_setting_and_the_fix_in_one_line(kind: str, redis_url: str) -> None:
    url, says = bad_urls(redis_url)[kind]
    with ThreadPoolExecutor(len(COMMANDS)) as pool:
        done = list(pool.map(lambda command: run(command, url), COMMANDS))
    for command, result in zip(COMMANDS, done, strict=True):
        shown = " ".join(command)
        assert result.returncode == 2, (shown, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("toolfleet: "), (shown, result.stderr)
        assert says in lines[0] and "TOOLFLEET_REDIS_URL" in lines[0], (shown, lines[0])
