"""What a local command may leave in the temporary folder it ran with: nothing but the
user's private state folder, empty (made once, 0700, reused by every command)."""

from __future__ import annotations

import os
from pathlib import Path


def assert_nothing_left(temporary: Path) -> None:
    """Fail naming what a command left in `temporary` besides its empty state folder."""
    state = temporary / f"toolfleet-{os.getuid()}"
    assert [p for p in temporary.iterdir() if p != state] == []
    assert not state.exists() or list(state.iterdir()) == []
