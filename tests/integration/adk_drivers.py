"""Programs around the reference's snippets, which define tools but no agent or main:
each puts the snippet's tool in an agent, as the snippet's own comment says, and runs
it with toolfleet.adk's Runner on the embedded default. Run through
`python -m tests.integration.adk_example_run tests.integration.adk_drivers NAME`.
"""

from __future__ import annotations

import asyncio
import json
import sys

from google.genai import types

from examples.adk.math_toolset import calculator_agent
from examples.adk.process_document import doc_analysis_tool
from examples.adk.user_preference import pref_tool
from toolfleet.adk import (
    Agent,
    Event,
    InMemoryArtifactService,
    InMemoryMemoryService,
    InMemorySessionService,
    Runner,
)

USER = "user1"


def message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def ask(runner: Runner, session_id: str, text: str) -> list[Event]:
    """Run one message; print the final answer as the reference's examples do."""
    events = []
    async for event in runner.run_async(
        user_id=USER, session_id=session_id, new_message=message(text)
    ):
        events.append(event)
        if event.is_final_response() and event.content and event.content.parts:
            print("Agent Response: ", event.content.parts[0].text)
    return events


async def user_preference() -> None:
    """The snippet's `my_agent = Agent(..., tools=[pref_tool])`; the write shows in the
    tool response event's state_delta and in the user's other sessions."""
    agent = Agent(
        model="gemini-2.0-flash",
        name="preference_agent",
        instruction="Save the preferences the user states with update_user_preference.",
        tools=[pref_tool],
    )
    service = InMemorySessionService()
    runner = Runner(agent=agent, app_name="preferences", session_service=service)
    await service.create_session(app_name="preferences", user_id=USER, session_id="first")
    events = await ask(runner, "first", "I prefer the dark theme")
    for event in events:
        if event.get_function_responses() and event.actions.state_delta:
            print("state_delta:", json.dumps(event.actions.state_delta, sort_keys=True))
    other = await service.create_session(app_name="preferences", user_id=USER)
    print("other session sees:", json.dumps(other.state.get("user:preferences")))


async def process_document() -> None:
    """The snippet's agent with `artifact_service=` and `memory_service=`: the artifact
    saved first, memory holding a past session."""
    agent = Agent(
        model="gemini-2.0-flash",
        name="document_agent",
        instruction="Analyze documents with process_document.",
        tools=[doc_analysis_tool],
    )
    service = InMemorySessionService()
    artifacts, memory = InMemoryArtifactService(), InMemoryMemoryService()
    runner = Runner(
        agent=agent,
        app_name="documents",
        session_service=service,
        artifact_service=artifacts,
        memory_service=memory,
    )
    past = await service.create_session(app_name="documents", user_id=USER)
    await ask(runner, past.id, "Remember: the revenue grew 12 percent in Q3")
    past_session = await service.get_session(app_name="documents", user_id=USER, session_id=past.id)
    assert past_session is not None
    await memory.add_session_to_memory(past_session)

    now = await service.create_session(app_name="documents", user_id=USER)
    report = types.Part.from_text(text="Q3 report: revenue 4.2M, costs 3.1M.")
    await artifacts.save_artifact(
        app_name="documents",
        user_id=USER,
        session_id=now.id,
        filename="report.txt",
        artifact=report,
    )
    await ask(runner, now.id, "Analyze report.txt for revenue")
    analysis = await artifacts.load_artifact(
        app_name="documents", user_id=USER, session_id=now.id, filename="analysis_report.txt"
    )
    print("analysis artifact:", analysis.text if analysis else None)
    found = await memory.search_memory(
        app_name="documents", user_id=USER, query="Context for analyzing document about revenue"
    )
    print("memory:", [m.content.parts[0].text for m in found.memories if m.content.parts])


async def math_toolset() -> None:
    """The snippet's calculator_agent, with its toolset and its single tool."""
    service = InMemorySessionService()
    runner = Runner(agent=calculator_agent, app_name="calculator", session_service=service)
    session = await service.create_session(app_name="calculator", user_id=USER)
    await ask(runner, session.id, "Add 5 and 3, and greet Ann")
    done = await service.get_session(app_name="calculator", user_id=USER, session_id=session.id)
    assert done is not None
    print("last_math_operation:", done.state.get("last_math_operation"))


DRIVERS = {
    "user_preference": user_preference,
    "process_document": process_document,
    "math_toolset": math_toolset,
}

if __name__ == "__main__":
    asyncio.run(DRIVERS[sys.argv[1]]())
