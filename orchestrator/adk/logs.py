"""ADK's `google.adk.cli.utils.logs`, which ADK's sample programs call before they run:
log to a file of the system's temporary folder, or set the log format and level."""

from __future__ import annotations

import logging
import os
import tempfile
import time

LOG_FORMAT = "%(asctime)s - %(levelname)s - %(filename)s:%(lineno)d - %(message)s"


def setup_adk_logger(level: int = logging.INFO) -> None:
    """Log at `level` to stderr, in ADK's format."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    logging.getLogger("toolfleet").setLevel(level)


def log_to_tmp_folder(
    level: int = logging.INFO,
    *,
    sub_folder: str = "agents_log",
    log_file_prefix: str = "agent",
    log_file_timestamp: str | None = None,
) -> str:
    """Send the program's log (root logger, `level`) to a new file in the temporary
    folder's `sub_folder` instead of stderr, and say where; return the file's path.
    `<prefix>.latest.log` beside it links to the newest one where links can be made."""
    folder = os.path.join(tempfile.gettempdir(), sub_folder)
    os.makedirs(folder, exist_ok=True)
    stamp = log_file_timestamp or time.strftime("%Y%m%d_%H%M%S")
    path = os.path.join(folder, f"{log_file_prefix}.{stamp}.log")
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    for previous in list(root.handlers):  # instead of stderr, not beside it
        root.removeHandler(previous)
    root.addHandler(handler)
    root.setLevel(level)
    print(f"Log setup complete: {path}")
    latest = os.path.join(folder, f"{log_file_prefix}.latest.log")
    try:
        if os.path.islink(latest):
            os.unlink(latest)
        os.symlink(path, latest)
        print(f"To access latest log: tail -F {latest}")
    except OSError:  # a file is there, or links cannot be made: the path was said
        pass
    return path
