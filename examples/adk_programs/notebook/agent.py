"""A notebook assistant that recalls what was said in earlier conversations.

Exercises memory: the program adds a finished session to the memory service, and in
a new session the agent searches it with the load_memory tool.
"""

from toolfleet.adk import Agent, load_memory

root_agent = Agent(
    name="notebook",
    model="gemini-2.0-flash",
    description="Remembers what the user told it.",
    instruction=(
        "Acknowledge what the user tells you. When asked about something said before, "
        "search with load_memory."
    ),
    tools=[load_memory],
)
