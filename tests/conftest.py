"""Fixtures and hooks shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest.terminal import TerminalReporter

from tests.adk_venv import AdkVenvError, adk_venv
from tests.parallel import FIGURE, make_scheduler, sendable

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling


@pytest.fixture(scope="session")
def adk_python() -> Path:
    """The python of `.venv-adk` (google-adk 2.x, google-genai 2.x), built on first use.

    Its first build takes a minute or more: a test that is first to use it wants a
    `pytest.mark.timeout` that allows for that. Where it cannot be built the test is
    skipped with the reason, except under CI=true, where it fails.
    """
    try:
        return adk_venv()
    except AdkVenvError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the ADK virtualenv: {exc}")
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport]:
    report = yield
    if hasattr(item.config, "workerinput"):  # an xdist worker sends it to the controller
        sendable(report)
    return report


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the suite runs without it too
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    return make_scheduler(config, log)


class FigureSummary:
    """The fault figures of the run's reports, listed at its end. Reports reach the
    process that prints (the xdist controller, or the only one) wherever the test ran."""

    def __init__(self) -> None:
        self.figures: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            props = report.user_properties
            self.figures += [(str(v[0]), str(v[1])) for k, v in props if k == FIGURE]

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        if not self.figures:
            return
        terminalreporter.section("fault figures")
        width = max(len(name) for name, _ in self.figures)
        for name, value in self.figures:
            terminalreporter.write_line(f"{name.ljust(width)}  {value}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FigureSummary(), "toolfleet-fault-figures")
