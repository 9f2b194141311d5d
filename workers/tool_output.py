"""A local worker's tool output on pipes of its own, which the program that started it shows.

Under `toolfleet run` or an ADK Runner the workers are this machine's: the program passes
two pipes and names them in TOOL_OUTPUT_FDS. Once Celery has set up (its banner, log lines
and shutdown notes stay on the worker's own stdout/stderr, its log), the tools' `sys.stdout`
and `sys.stderr` become those pipes, unbuffered, so a line is in the pipe before the call's
result is posted. A tool's loggers show on the stderr pipe as Python shows them in a program
that configures no logging: WARNING and above, the message alone. Prefork children inherit
all of it.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, TextIO

from celery import signals

TOOL_OUTPUT_FDS = "TOOLFLEET_TOOL_OUTPUT_FDS"  # "stdout_fd,stderr_fd", set by the local group
# The fleet's own loggers: the worker's chatter, not the tool's.
OWN_LOGGERS = ("celery", "kombu", "amqp", "billiard", "toolfleet", "py.warnings")


def _is_tools(record: logging.LogRecord) -> bool:
    return not any(record.name == n or record.name.startswith(f"{n}.") for n in OWN_LOGGERS)


def tool_log_handler(stream: TextIO) -> logging.Handler:
    """WARNING and above of loggers other than the fleet's own, message only, on `stream`."""
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_is_tools)
    return handler


def _stream(fd: int) -> TextIO:
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=True)


def install_tool_output(fds: str) -> None:
    """Give the tools the pipes `fds` names as stdout and stderr once Celery has set up."""
    out_fd, err_fd = (int(n) for n in fds.split(","))

    def redirect(**_: Any) -> None:
        sys.stdout = _stream(out_fd)
        sys.stderr = _stream(err_fd)
        logging.getLogger().addHandler(tool_log_handler(sys.stderr))

    signals.celeryd_after_setup.connect(redirect, weak=False)
