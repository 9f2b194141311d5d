"""The orchestrator processes a fault test starts, stopped after the test whatever its
outcome: one left running after a failure would act on later tests' keys, and its
`Popen` would warn, when collected, inside whichever test runs then."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any, TypeVar

STOP_WAIT_S = 10.0

_started: list[subprocess.Popen[Any]] = []
_P = TypeVar("_P", bound="subprocess.Popen[Any]")


def started(process: _P) -> _P:
    """`process`, to be stopped after the test that started it."""
    _started.append(process)
    return process


def stop_started() -> None:
    """Kill what is still running of the processes started, and reap every one."""
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_WAIT_S)
