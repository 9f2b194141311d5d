"""The suite under pytest-xdist (`-n N --dist loadfile`): what each worker process keeps
to itself.

A test file is the unit of distribution (its module-scoped fixtures start servers and
worker processes), except the files of tests/hosts, which share network namespace names
and addresses and so run as one unit (`HostsTogether`). The integration tests' Redis
database is the worker's own: its tool queues are not prefixed, and the session start
deletes them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

# Node ids are relative to the repository root (pyproject.toml's folder).
HOSTS_UNIT = "tests/hosts"
# The user property of a fault test's figure (tests/faults/conftest.py `report_figure`):
# a test's report carries it from an xdist worker to the process that prints the summary.
FIGURE = "fault figure"
# Redis's default `databases`: the highest database number is 15.
MAX_DATABASE = 15


def worker_index() -> int | None:
    """This xdist worker's number (gw0 -> 0), or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return None
    return int(worker.removeprefix("gw"))


def unit_of(nodeid: str) -> str:
    """The unit of distribution of a test: its file, or tests/hosts for every file there."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(f"{HOSTS_UNIT}/"):
        return HOSTS_UNIT
    return path


def make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """`--dist loadfile` with the files of tests/hosts as one unit; None for the others."""
    if config.getoption("dist", None) != "loadfile":
        return None
    # Imported here: pytest-xdist calls this, and the suite runs without it too.
    from xdist.scheduler import LoadFileScheduling

    class HostsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    # Files in collection order, not most tests first: the fault tests (few, long, mostly
    # waiting) start first and the unit files (many short tests) fill in at the end.
    config.option.loadscopereorder = False
    return HostsTogether(config, log)


def sendable(report: pytest.TestReport) -> None:
    """Make the captured output of a report encodable as UTF-8, as an xdist worker must to
    send it: a test may log text with lone surrogates (undecodable input), which become
    backslash escapes."""
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, text in report.sections
    ]


def database_url(url: str, index: int | None) -> str:
    """`url` on database (its own + `index`): one database per xdist worker.

    Raises:
        ValueError: the database would be past Redis's default 15.
    """
    if index is None:
        return url
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    database = base + index
    if database > MAX_DATABASE:
        raise ValueError(
            f"xdist worker {index} would use Redis database {database} of {url}: past "
            f"{MAX_DATABASE}. Run fewer workers (-n) or start TOOLFLEET_TEST_REDIS_URL at a "
            "lower database."
        )
    return urlunsplit(parts._replace(path=f"/{database}"))
