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
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from google.genai import types

from tests.integration.adk_sample_models import MODELS
from toolfleet.adk import Event, InMemoryRunner

CONFIRMATION = "adk_request_confirmation"

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

    async def send(self, message: types.Content, *, show: bool = True) -> list[Event]:
        events = []
        async for event in self.runner.run_async(
            user_id=USER, session_id=self.session_id, new_message=message
        ):
            if show:
                print_event(event)
            events.append(event)
        return events

    async def say(self, text: str, *, show: bool = True) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return await self.send(message, show=show)

    async def session_state(self) -> dict[str, Any]:
        session = await self.runner.session_service.get_session(
            app_name=self.name, user_id=USER, session_id=self.session_id
        )
        assert session is not None
        return dict(session.state)

    async def state(self, *keys: str) -> None:
        state = await self.session_state()
        for key in keys:
            print(f"state {key}: {_show(state.get(key))}")


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


async def parallel_functions(s: Sample) -> None:
    await s.say("Compare New York and London")
    state = await s.session_state()
    # What the tools appended to state (their entries carry times: only what is fixed).
    print(f"state weather cities: {sorted(r['city'] for r in state['weather_requests'])}")
    print(f"state distance requests: {len(state['distance_requests'])}")
    print(f"state population cities: {[r['cities'] for r in state['population_requests']]}")


async def history_management(s: Sample) -> None:
    """As its main.py, with one-sided dice; then what its callback left of the history."""
    for text in ("Hi", "Roll a die with 1 side", "Roll a die again with 1 side.", "What numbers?"):
        await s.say(text)
    seen = MODELS["short_history_agent"].requests[-1]
    texts = [p.text for c in seen.contents if c.role == "user" for p in c.parts or () if p.text]
    print(f"model saw {len(seen.contents)} contents, user texts: {texts}")
    await s.state("rolls")


async def human_tool_confirmation(s: Sample) -> None:
    async def confirm(events: list[Event], **response: Any) -> None:
        (asked,) = [c for e in events for c in e.get_function_calls() if c.name == CONFIRMATION]
        assert asked.args is not None
        original, confirmation = asked.args["originalFunctionCall"], asked.args["toolConfirmation"]
        print(f"asked: {original['name']} {_show(confirmation.get('payload'))}")
        answer = types.FunctionResponse(id=asked.id, name=CONFIRMATION, response=response)
        await s.send(types.Content(role="user", parts=[types.Part(function_response=answer)]))

    await s.say("Reimburse $500")
    await confirm(await s.say("Reimburse $2000"), confirmed=True)
    await confirm(await s.say("Request 5 days off"), confirmed=True, payload={"approved_days": 3})


async def pydantic_argument(s: Sample) -> None:
    await s.say("Create a user account for Alice, 30")
    await s.say("Create an account for Bob, 41, bob@example.com, dark theme")
    await s.say("Create a profile for the company Acme")


async def runner_debug_example(s: Sample) -> None:
    """As its main.py's example_with_tools: run_debug prints, quiet and verbose."""
    await s.runner.run_debug(["What's the weather in Tokyo?", "Calculate (42 * 3.14) + 10"])
    await s.runner.run_debug(["What's the weather in Paris?", "Calculate 100 / 5"], verbose=True)
    session = await s.runner.session_service.get_session(
        app_name=s.name, user_id="debug_user_id", session_id="debug_session_id"
    )
    assert session is not None
    print(f"state weather_queries: {_show(session.state.get('weather_queries'))}")


async def json_passing_agent(s: Sample) -> None:
    await s.say("I'd like a large pizza with pepperoni and mushrooms on a thin crust.")
    await s.state("pizza_order")


def in_branch_order(events: list[Event]) -> list[Event]:
    """A ParallelAgent's branches finish in any order (in ADK too): each run of branch
    events in the order of their branches, the rest as they came."""
    ordered: list[Event] = []
    run: list[Event] = []
    for event in [*events, None]:
        if event is not None and event.branch:
            run.append(event)
            continue
        ordered += sorted(run, key=lambda e: e.branch or "")
        run = []
        if event is not None:
            ordered.append(event)
    return ordered


async def workflow_triage(s: Sample) -> None:
    for event in in_branch_order(await s.say("Write a function that adds two numbers", show=False)):
        print_event(event)
    seen = MODELS["execution_summary_agent"].requests[-1]
    involved = re.search(r"the following agents were involved: (.*)\.", seen.instruction)
    assert involved is not None, seen.instruction
    print(f"summary saw {len(seen.contents)} content(s); involved: {involved[1]}")
    await s.state("execution_agents", "code_agent_output", "math_agent_output")


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
        parallel_functions,
        history_management,
        human_tool_confirmation,
        json_passing_agent,
        pydantic_argument,
        quickstart,
        runner_debug_example,
        session_state_agent,
        simple_sequential_agent,
        workflow_agent_seq,
        workflow_triage,
    )
}
# Samples whose own main() runs them (it prints what the sample prints).
MAINS = ("plugin_basic",)


async def main(names: list[str]) -> None:
    """Run the named samples (all by default), each under a `=== name` header."""
    for name in names or sorted([*DRIVERS, *MAINS]):
        print(f"=== {name}")
        if name in MAINS:
            await importlib.import_module(f"examples.adk_samples.{name}.main").main()
            continue
        sample = Sample(name)
        await sample.new_session()
        await DRIVERS[name](sample)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
