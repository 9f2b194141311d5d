"""The record a running `toolfleet dev` leaves for the other commands: its pid, the
server's URL, the fleet and credential keys its workers use, and what it serves; kept in
this user's private state folder, readable by this user only."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from toolfleet.orchestrator.cli.embedded import state_dir
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError


@dataclass
class DevFleet:
    """What a running `toolfleet dev` serves, and how to reach it."""

    pid: int
    redis_url: str
    fleet_key: str
    credential_key: str
    log: str
    agents: list[str] = field(default_factory=list)
    tool_modules: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)

    def settings(self, settings: Settings) -> Settings:
        """`settings` pointed at this fleet, with the keys its workers use."""
        return settings.model_copy(
            update={
                "redis_url": self.redis_url,
                "fleet_key": settings.fleet_key or self.fleet_key,
                "credential_key": settings.credential_key or self.credential_key,
            }
        )


def record_file() -> Path:
    """Where the running dev fleet's record is."""
    return state_dir() / "dev.json"


def log_file() -> Path:
    """Where the dev fleet's output goes: resumed conversations, the workers' output."""
    return state_dir() / "dev.log"


def running_dev_fleet() -> DevFleet | None:
    """The record of the dev fleet running now; None if none is (a stale record is removed)."""
    path = record_file()
    try:
        fleet = DevFleet(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is not a dev fleet's record ({exc}): remove it") from exc
    if not alive(fleet.pid):
        path.unlink(missing_ok=True)
        return None
    return fleet


def alive(pid: int) -> bool:
    """Whether process `pid` exists (and is not a zombie left to reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
            return False
    return True


def write_record(fleet: DevFleet) -> None:
    """Write `fleet`'s record, readable by this user only (it holds the fleet's keys)."""
    path = record_file()
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(asdict(fleet), out)
    temporary.replace(path)
