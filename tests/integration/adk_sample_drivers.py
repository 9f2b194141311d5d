"""Run ADK's own samples (examples/adk_samples, imports changed only) the way their
main.py files do: InMemoryRunner on the sample's `root_agent`, printing each event's
text, function calls and responses, then the session state the sample builds.

    python -m tests.integration.adk_example_run tests.integration.adk_sample_drivers \
        --models tests.integration.adk_sample_models:MODELS [SAMPLE...]

All samples run in one process, so they share one private Redis and worker fleet.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from google.genai import types

from toolfleet.adk import Event, InMemoryRunner

USER = "user1"


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def print_event(event: Event) -> None:
    """One line per part, as the samples' main.py loops print them."""
    for part in event.content.parts or () if event.content else ():
        if part.text and not part.thought:
            print(f"** {event.author}: {part.text}")
        elif part.function_call:
            print(
                f"** {event.author}: fc / {part.function_call.name} / "
                f"{_show(part.function_call.args)}"
            )
        elif part.function_response:
            print(
                f"** {event.author}: fr / {part.function_response.name} / "
                f"{_show(part.function_response.response)}"
            )


class Sample:
    """One sample's runner and session, with the samples' run_prompt helper."""

    def __init__(self, name: str) -> None:
        self.name = name
        agent = importlib.import_module(f"examples.adk_samples.{name}.agent").root_agent
        self.runner = InMemoryRunner(agent=agent, app_name=name)
        self.session_id = ""

    async def new_session(self) -> None:
        session = await self.runner.session_service.create_session(app_name=self.name, user_id=USER)
        self.session_id = session.id

    async def send(self, message: types.Content) -> list[Event]:
        events = []
        async for event in self.runner.run_async(
            user_id=USER, session_id=self.session_id, new_message=message
        ):
            print_event(event)
            events.append(event)
        return events

    async def say(self, text: str) -> list[Event]:
        return await self.send(types.Content(role="user", parts=[types.Part(text=text)]))

    async def state(self, *keys: str) -> None:
        session = await self.runner.session_service.get_session(
            app_name=self.name, user_id=USER, session_id=self.session_id
        )
        assert session is not None
        for key in keys:
            print(f"state {key}: {_show(session.state.get(key))}")


async def hello_world(s: Sample) -> None:
    await s.say("Hi")
    await s.say("Roll a die with 1 side and check if it is prime")
    await s.state("rolls")


async def callbacks(s: Sample) -> None:
    await s.say("Roll a die with 1 side and check if it is prime")
    await s.state("rolls")


async def fields_planner(s: Sample) -> None:
    await callbacks(s)


async def artifact_save_text(s: Sample) -> None:
    await s.say("Remember the milk")
    keys = await s.runner.artifact_service.list_artifact_keys(
        app_name=s.name, user_id=USER, session_id=s.session_id
    )
    saved = await s.runner.artifact_service.load_artifact(
        app_name=s.name, user_id=USER, session_id=s.session_id, filename="query"
    )
    assert saved is not None and saved.inline_data is not None
    print(f"artifacts: {keys}, query: {saved.inline_data.data!r}")


async def fields_output_schema(s: Sample) -> None:
    await s.say("What is the weather in San Jose?")
    await s.state("weather_data")


async def hello_world_ma(s: Sample) -> None:
    await s.say("Roll a dice with 1 side")


async def human_in_loop(s: Sample) -> None:
    events = await s.say("Please reimburse $500 for travel")
    call = next(
        fc for e in events for fc in e.get_function_calls() if fc.name == "ask_for_approval"
    )
    pending = next(
        fr.response
        for e in events
        for fr in e.get_function_responses()
        if fr.name == "ask_for_approval"
    )
    assert pending is not None
    approved = types.Part(
        function_response=types.FunctionResponse(
            id=call.id, name=call.name, response={**pending, "status": "approved"}
        )
    )
    await s.send(types.Content(role="user", parts=[approved]))


async def memory(s: Sample) -> None:
    await s.say("My favorite color is teal")
    session = await s.runner.session_service.get_session(
        app_name=s.name, user_id=USER, session_id=s.session_id
    )
    assert session is not None
    await s.runner.memory_service.add_session_to_memory(session)
    await s.new_session()
    await s.say("What is my favorite color?")
    session = await s.runner.session_service.get_session(
        app_name=s.name, user_id=USER, session_id=s.session_id
    )
    assert session is not None
    print(f"state _time is a time: {datetime.fromisoformat(session.state['_time']) is not None}")


async def non_llm_sequential(s: Sample) -> None:
    await s.say("Count")


async def quickstart(s: Sample) -> None:
    await s.say("What is the weather in New York and Paris?")


async def session_state_agent(s: Sample) -> None:
    await s.say("Log this: hello")
    await s.say("Log this too")
    keys = (
        "before_agent_callback_state_key",
        "before_model_callback_state_key",
        "after_model_callback_state_key",
        "after_agent_callback_state_key",
    )
    await s.state(*keys)


async def simple_sequential_agent(s: Sample) -> None:
    await s.say("Roll a die with 1 side, then check if it is prime")


async def workflow_agent_seq(s: Sample) -> None:
    await s.say("Write a function that adds two numbers")
    await s.state("generated_code", "review_comments", "refactored_code")


DRIVERS: dict[str, Callable[[Sample], Awaitable[None]]] = {
    f.__name__: f
    for f in (
        artifact_save_text,
        callbacks,
        fields_output_schema,
        fields_planner,
        hello_world,
        hello_world_ma,
        human_in_loop,
        memory,
        non_llm_sequential,
        quickstart,
        session_state_agent,
        simple_sequential_agent,
        workflow_agent_seq,
    )
}


async def main(names: list[str]) -> None:
    """Run the named samples (all by default), each under a `=== name` header."""
    for name in names or sorted(DRIVERS):
        print(f"=== {name}")
        sample = Sample(name)
        await sample.new_session()
        await DRIVERS[name](sample)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
