"""An agent whose tool prints to stdout and stderr and logs, for the local-output tests:
`toolfleet run --agent tests.integration.printing_tools:agent` on its offline script."""

from __future__ import annotations

import logging
import sys

from toolfleet import Agent
from toolfleet.orchestrator.models.offline import Call, call, say

LINES = 200  # more than one read of the pipe: the answer must still come after all of them
log = logging.getLogger("printing_tools")


def count_sheep(n: int) -> str:
    """Counts `n` sheep aloud."""
    for i in range(n):
        print(f"sheep {i}")
    print("to stderr: done counting", file=sys.stderr)
    log.warning("logged: %d sheep", n)
    log.info("logged below WARNING: not shown")
    return f"counted {n}"


agent = Agent(
    name="shepherd",
    tools=[count_sheep],
    offline_script=[call(Call("count_sheep", {"n": LINES})), say("ANSWER: all sheep counted")],
)
