"""A newsletter desk: research in parallel, draft and edit in a loop, then publish.

Exercises SequentialAgent, ParallelAgent and LoopAgent (ended by exit_loop), stages
that pass their answers on through output_key and state placeholders, and a
before_agent_callback that answers for a stage, its answer saved under output_key.
"""

from google.genai import types

from toolfleet.adk import (
    Agent,
    CallbackContext,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
    exit_loop,
)


def word_count(text: str) -> int:
    """Count the words of a piece of text.

    Args:
        text: The text to count.
    """
    return len(text.split())


def skip_quotes_unless_wanted(callback_context: CallbackContext) -> types.Content | None:
    """Answer for the quote finder when the issue is to have no quotes."""
    if callback_context.state.get("quotes_wanted", False):
        return None
    return types.Content(role="model", parts=[types.Part(text="(no quotes this issue)")])


fact_finder = Agent(
    name="fact_finder",
    model="gemini-2.0-flash",
    instruction="List three short facts about the topic the user gives.",
    output_key="facts",
)

quote_finder = Agent(
    name="quote_finder",
    model="gemini-2.0-flash",
    instruction="Find one short quotation about the topic the user gives.",
    output_key="quotes",
    before_agent_callback=skip_quotes_unless_wanted,
)

writer = Agent(
    name="writer",
    model="gemini-2.0-flash",
    instruction=(
        "Write a two-sentence item from these facts: {facts}. Editor's notes so far: {notes?}"
    ),
    output_key="draft",
)

editor = Agent(
    name="editor",
    model="gemini-2.0-flash",
    instruction=(
        "Review this item: {draft}. Check its length with word_count. If it is ready, "
        "call exit_loop; otherwise say what to change in one line."
    ),
    tools=[word_count, exit_loop],
    output_key="notes",
)

publisher = Agent(
    name="publisher",
    model="gemini-2.0-flash",
    instruction="Lay out the issue from the item {draft} and the quotations {quotes}.",
    output_key="issue",
)

root_agent = SequentialAgent(
    name="newsletter",
    description="Researches, drafts and publishes one newsletter item.",
    sub_agents=[
        ParallelAgent(name="research", sub_agents=[fact_finder, quote_finder]),
        LoopAgent(name="drafting", sub_agents=[writer, editor], max_iterations=3),
        publisher,
    ],
)
