"""Every Python example of ADK's tool documentation, ported under
examples/adk/ with only its import lines changed, runs as a program: on the offline
model, and through the real google-genai SDK against the Gemini REST stand-in.

Each run is `python -m tests.integration.adk_example_run ...` in a fresh process
without TOOLFLEET_REDIS_URL: InMemorySessionService starts a private server and the
workers the agent needs, and stops them when the program exits. The reference's
snippets (tools without an agent) run inside tests/integration/adk_drivers.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.integration.adk_example_models import QUANTUM_SUMMARY

pytestmark = pytest.mark.integration

WAITING = (
    "[reimbursement_agent]: Your $200 reimbursement is waiting for Sean Zhou (approval-ticket-1)."
)
REIMBURSED_50 = "[reimbursement_agent]: Reimbursed $50 for meals: approved automatically."

# The printed lines each program must end with (setup chatter before them is ignored): what
# a tool prints on a local worker shows there, in order with the agent's, as in ADK.
EXPECTED: dict[str, list[str]] = {
    "examples.adk.weather_sentiment": [
        "User Query: weather in london?",
        "Agent Response: The current weather in London is cloudy with a temperature of 18 "
        "degrees Celsius and a chance of rain.",
    ],
    # The long-running call is completed by a FunctionResponse message.
    "examples.adk.human_in_the_loop": [
        REIMBURSED_50,
        "",
        "Running agent...",
        WAITING,
        "[reimbursement_agent]: The manager approved: $200 for meals is reimbursed.",
    ],
    # The Japanese page's older loop keeps only the last event's response (None after the
    # model's text), so it never sends the approval: it behaves so on ADK too.
    "examples.adk.human_in_the_loop_ja": [REIMBURSED_50, "", "Running agent...", WAITING],
    "examples.adk.stock_price": ["Agent Response:  The current price of GOOG is 175.25."],
    "examples.adk.stock_price_ja": ["Agent Response:  The current price of GOOG is 175.25."],
    # skip_summarization: the final event is the agent tool's response, whose first part
    # has no text, as in ADK.
    "examples.adk.summarizer": ["Agent Response:  None"],
    "examples.adk.summarizer_ja": [f"Agent Response:  Summary: {QUANTUM_SUMMARY}"],
    # The tool transfers by its action; the sub-agent answers. What the tool printed on
    # its local worker shows in the program's output, before the answer, as in ADK.
    "examples.adk.customer_support": [
        "Tool: Detected urgency, transferring to the support agent.",
        "Agent Response:  I am the support handler for urgent issues: let us get you logged "
        "in again.",
    ],
    "tests.integration.adk_drivers user_preference": [
        "Tool: Updated user preference 'theme' to 'dark'",
        "Agent Response:  Saved: you prefer the dark theme.",
        'state_delta: {"user:preferences": {"theme": "dark"}}',
        'other session sees: {"theme": "dark"}',
    ],
    "tests.integration.adk_drivers process_document": [
        "Agent Response:  Noted.",
        "Tool: Attempting to load artifact: report.txt",
        "Tool: Loaded document 'report.txt' (36 chars).",
        "Tool: Searching memory for context related to: 'revenue'",
        # Memory holds the past session the driver added, as ADK's: not the current one.
        "Tool: Found memory context: Remember: the revenue grew 12 percent in Q3...",
        "Tool: Performed analysis.",
        "Tool: Saved analysis result as 'analysis_report.txt' version 0.",
        "Agent Response:  Saved the analysis as analysis_report.txt (version 0).",
        "analysis artifact: Analysis of 'report.txt' regarding 'revenue' using memory "
        "context: [Placeholder Analysis Result]",
        "memory: ['Remember: the revenue grew 12 percent in Q3']",
    ],
    "tests.integration.adk_drivers math_toolset": [
        "Agent Response:  Hello, Ann! 5 + 3 = 8.",
        "last_math_operation: addition",
    ],
}
# Model requests each program makes (the agent tool's on a worker included).
REQUESTS = {
    "examples.adk.weather_sentiment": 2,
    "examples.adk.human_in_the_loop": 6,
    "examples.adk.human_in_the_loop_ja": 4,
    "examples.adk.stock_price": 2,
    "examples.adk.stock_price_ja": 2,
    "examples.adk.summarizer": 2,
    "examples.adk.summarizer_ja": 3,
    "examples.adk.customer_support": 2,
    "tests.integration.adk_drivers user_preference": 2,
    "tests.integration.adk_drivers process_document": 3,
    "tests.integration.adk_drivers math_toolset": 2,
}
STAND_IN_LINE = re.compile(r"^\[stand-in\] (\d+) requests, (\d+) with the API key$")


def run_program(program: str, *flags: str) -> list[str]:
    """The printed lines of the program, run as a new user runs it (no TOOLFLEET_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.adk_example_run", *program.split(), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_on_the_offline_model(program: str) -> None:
    lines = run_program(program)
    assert lines[-len(EXPECTED[program]) :] == EXPECTED[program]


@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_through_google_genai_against_the_gemini_stand_in(program: str) -> None:
    *lines, summary = run_program(program, "--gemini")
    assert lines[-len(EXPECTED[program]) :] == EXPECTED[program]
    counted = STAND_IN_LINE.match(summary)
    assert counted is not None, summary
    # Every model call went over HTTP, each carrying the key the SDK was given.
    assert int(counted[1]) == int(counted[2]) == REQUESTS[program]


def test_every_port_is_run_here() -> None:
    """A port added under examples/adk/ without a test fails here."""
    ported = {
        f"examples.adk.{name.removesuffix('.py')}"
        for name in os.listdir("examples/adk")
        if name.endswith(".py") and name != "__init__.py"
    }
    snippets = {p.split()[1] for p in EXPECTED if p.startswith("tests.")}
    covered = {p for p in EXPECTED if p.startswith("examples.")}
    covered |= {f"examples.adk.{name}" for name in snippets}
    assert ported == covered
