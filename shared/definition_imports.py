"""Knowing when a module is imported for its definitions, not run as a program.

Workers (and `toolfleet run --agent`) import a program's module to find its agents and
tools. An ADK script often runs its client code at module level (`call_agent("...")`
after the agent's definition); that code is the program's, not its tools', and run in a
worker it would start a whole fleet inside the fleet. toolfleet's ADK client entry
points ask `importing_definitions()` and do nothing while it is true.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

_local = threading.local()  # per thread: another thread's import is not this one's


@contextmanager
def definitions_import(module_name: str) -> Iterator[None]:
    """Mark the current thread as importing `module_name` for its definitions."""
    outer = getattr(_local, "module", None)
    _local.module = module_name
    try:
        yield
    finally:
        _local.module = outer


def importing_definitions() -> str | None:
    """The module this thread is importing for its definitions, or None."""
    return getattr(_local, "module", None)


def skipped_at_import(what: str) -> bool:
    """True (and logged) when `what`, a client entry point, is called while a module is
    imported for its definitions: the caller then does nothing."""
    module = importing_definitions()
    if module is None:
        return False
    log.info(
        "%s at module level of %s skipped: the module is imported for its tools, "
        "not run as a program",
        what,
        module,
    )
    return True
