"""A two-step briefing: one agent takes notes, the next summarises them without
seeing the conversation.

Exercises include_contents="none" (the summariser is sent no history, only the
current turn's input) with an instruction provider that reads the earlier step's
output_key value from the state.
"""

from toolfleet.adk import Agent, ReadonlyContext, SequentialAgent


def summary_instruction(context: ReadonlyContext) -> str:
    """Ask for a summary of the notes taken so far."""
    notes = context.state.get("notes", "(no notes)")
    return f"Summarise these notes in one line: {notes}"


note_taker = Agent(
    name="note_taker",
    model="gemini-2.0-flash",
    instruction="Write down the user's points as short notes.",
    output_key="notes",
)

summariser = Agent(
    name="summariser",
    model="gemini-2.0-flash",
    instruction=summary_instruction,
    include_contents="none",
    output_key="summary",
)

root_agent = SequentialAgent(
    name="briefing",
    description="Takes notes, then summarises them.",
    sub_agents=[note_taker, summariser],
)
