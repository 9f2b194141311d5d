"""Tools the integration tests run on real worker processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from toolfleet.shared.context import ToolContext
from toolfleet.shared.tools import LongRunningFunctionTool, tool


@tool
def nap(seconds: float, label: str = "") -> dict[str, object]:
    """Sleeps, to show calls overlapping on several workers.

    Args:
        seconds: How long to sleep.
        label: Echoed back.
    """
    time.sleep(seconds)  # ok: the tool under test sleeps on purpose
    return {"slept": seconds, "label": label}


@tool
async def shout(text: str) -> dict[str, str]:
    """Answers `text` in capitals, from the io pool (an async tool).

    Args:
        text: What to shout.
    """
    return {"shouted": text.upper()}


@tool
def fail(message: str) -> None:
    """Always raises ValueError(message)."""
    raise ValueError(message)


@tool(timeout_s=1)
def overrun(seconds: float) -> str:
    """Sleeps past its 1 s time limit."""
    time.sleep(seconds)  # ok: the tool under test sleeps on purpose
    return "finished"


@tool
def remember(key: str, value: str, tool_context: ToolContext) -> str:
    """Stores a value in the session state."""
    tool_context.state[key] = value
    return "stored"


@tool(pool="other")
def recall(key: str, tool_context: ToolContext) -> dict[str, object]:
    """Reads a value from the session state (runs on the `other` pool)."""
    return {"value": tool_context.state.get(key)}


@tool(retry_on=[ConnectionError], max_retries=3, retry_backoff_s=0.05)
def flaky(counter_file: str, failures: int) -> dict[str, int]:
    """Raises ConnectionError on its first `failures` runs (counted in a file), then succeeds."""
    path = Path(counter_file)
    runs = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(runs))
    if runs <= failures:
        raise ConnectionError(f"transient failure {runs}")
    return {"runs": runs}


def open_case(name: str) -> dict[str, str]:
    """Opens a case that someone completes later."""
    return {"status": "pending", "case": name}


open_case_tool = LongRunningFunctionTool(open_case)


def purchase_approval(order: dict[str, Any], api_key: str) -> dict[str, str]:
    """Asks for the approval of a purchase order (nested arguments, one of them secret)."""
    return {"status": "pending", "vendor": str(order.get("vendor", ""))}


purchase_approval_tool = LongRunningFunctionTool(purchase_approval)


@tool
def call_api(endpoint: str, api_key: str) -> dict[str, object]:
    """Calls an API with a key; the result never contains the key (a redaction test).

    Args:
        endpoint: The API path.
        api_key: A secret: shown as *** in Flower and worker logs.
    """
    # The key's length proves the real key arrived (not "***") without revealing it.
    return {"endpoint": endpoint, "key_length": len(api_key)}


@tool
def remember_after(key: str, value: str, delay_s: float, tool_context: ToolContext) -> str:
    """Waits, then stores a value in the state (to finish after a later call)."""
    time.sleep(delay_s)  # ok: the tool under test sleeps on purpose
    tool_context.state[key] = value
    return "stored"


@tool(pool="other")
async def load_note(
    filename: str, tool_context: ToolContext, version: int | None = None
) -> dict[str, object]:
    """Loads an artifact (runs on the `other` pool, away from where it was saved)."""
    part = await tool_context.load_artifact(filename, version)
    return {
        "text": None if part is None else part.text,
        "names": await tool_context.list_artifacts(),
    }
