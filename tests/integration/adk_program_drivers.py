"""Run the ADK-style programs of examples/adk_programs with InMemoryRunner on each
program's `root_agent`, printing each event's text, function calls and responses,
then what the program left in the session.

    python -m tests.integration.adk_example_run tests.integration.adk_program_drivers \
        --models tests.integration.adk_program_models:MODELS [PROGRAM...]

The same drivers run the programs on google-adk itself when `toolfleet.adk` resolves to
ADK's names and PREPARE gives every agent a model that plays adk_program_models' scripts.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from google.genai import types

from tests.integration.adk_program_models import MODELS
from toolfleet.adk import Event, InMemoryRunner

USER = "user1"
PACKAGE = "examples.adk_programs"
# Set by a run on ADK itself: called on each program's root agent before it runs.
PREPARE: Callable[[Any], None] | None = None


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def print_event(event: Event) -> None:
    """One line per part: its text, or its function call or response."""
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


class Program:
    """One program's runner and session."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module = importlib.import_module(f"{PACKAGE}.{name}.agent")
        agent = self.module.root_agent
        if PREPARE is not None:
            PREPARE(agent)
        plugins = list(getattr(self.module, "plugins", ()))
        self.runner = InMemoryRunner(agent=agent, app_name=name, plugins=plugins or None)
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


async def pantry(p: Program) -> None:
    await p.say("Check the top shelf and restock what is low")
    await p.state("restock_log", "orders_placed")


async def thermostat(p: Program) -> None:
    await p.say("What is the kitchen at? Set it to 21 and the study to 35")
    await p.say("Emergency: I smell smoke")
    await p.state("targets", "visits")


def what_it_saw(agent: str) -> None:
    """The texts of the last request the agent's model got, one line each."""
    request = MODELS[agent].requests[-1]
    for content in request.contents:
        for part in content.parts or ():
            if part.text:
                print(f"{agent} saw {content.role}: {json.dumps(part.text)}")


async def front_desk(p: Program) -> None:
    await p.say("I need a room for two nights")
    what_it_saw("booking_clerk")
    await p.say("When is breakfast?")
    what_it_saw("concierge")
    await p.state("reserved_nights")


def in_branch_order(events: list[Event]) -> list[Event]:
    """A ParallelAgent's branches finish in any order (in ADK too): each run of branch
    events in the order of their branches, the rest as they came."""
    ordered: list[Event] = []
    run: list[Event] = []
    for event in [*events, None]:
        if event is not None and event.branch and "." in event.branch:
            run.append(event)
            continue
        ordered += sorted(run, key=lambda e: e.branch or "")
        run = []
        if event is not None:
            ordered.append(event)
    return ordered


async def newsletter(p: Program) -> None:
    for event in in_branch_order(await p.say("Bees", show=False)):
        print_event(event)
    await p.state("facts", "quotes", "draft", "notes", "issue")


async def leave_request(p: Program) -> None:
    events = await p.say("I'd like three days off to move house")
    (asked,) = [c for e in events for c in e.get_function_calls() if c.name == "ask_manager"]
    (pending,) = [
        r.response for e in events for r in e.get_function_responses() if r.name == "ask_manager"
    ]
    print(f"long-running calls: {[e.long_running_tool_ids == {asked.id} for e in events]}")
    assert pending is not None
    decision = types.FunctionResponse(
        id=asked.id, name=asked.name, response={**pending, "status": "approved"}
    )
    await p.send(types.Content(role="user", parts=[types.Part(function_response=decision)]))


async def recipe_card(p: Program) -> None:
    await p.say("Pancakes please")
    await p.state("card")


async def receipts(p: Program) -> None:
    await p.say("File my receipts")
    await p.say("Now read them back")
    service = p.runner.artifact_service
    keys = await service.list_artifact_keys(app_name=p.name, user_id=USER, session_id=p.session_id)
    print(f"artifacts: {keys}")
    for key in keys:
        first, latest = [
            await service.load_artifact(
                app_name=p.name, user_id=USER, session_id=p.session_id, filename=key, version=v
            )
            for v in (0, None)
        ]
        assert first is not None and latest is not None
        print(f"{key}: first {first.text!r}, latest {latest.text!r}")


async def notebook(p: Program) -> None:
    await p.say("My bike lock code is 4711")
    session = await p.runner.session_service.get_session(
        app_name=p.name, user_id=USER, session_id=p.session_id
    )
    assert session is not None
    await p.runner.memory_service.add_session_to_memory(session)
    await p.new_session()
    await p.say("What was my bike lock code?")
    found = await p.runner.memory_service.search_memory(
        app_name=p.name, user_id=USER, query="bike lock"
    )
    texts = [part.text for m in found.memories for part in (m.content.parts or ()) if part.text]
    print(f"memory search: {[m.author for m in found.memories]} {texts}")


async def library(p: Program) -> None:
    await p.say("Lend me Dune, then clear shelf B2")


async def parcel_desk(p: Program) -> None:
    await p.say("Quote a 1.5 kg parcel")
    await p.say("Quote a fragile 2 kg parcel to Ghent, Belgium")
    await p.say("Deliver it to locker L-19")


async def trivia(p: Program) -> None:
    await p.runner.run_debug(["What is the capital of Peru?", "And of Kenya?"])
    await p.runner.run_debug(["What is the capital of Laos?"], verbose=True)
    session = await p.runner.session_service.get_session(
        app_name=p.name, user_id="debug_user_id", session_id="debug_session_id"
    )
    assert session is not None
    print(f"state countries_asked: {_show(session.state.get('countries_asked'))}")


CONFIRMATION = "adk_request_confirmation"


async def payments(p: Program) -> None:
    async def confirm(events: list[Event], **response: Any) -> None:
        (asked,) = [c for e in events for c in e.get_function_calls() if c.name == CONFIRMATION]
        assert asked.args is not None
        original, confirmation = asked.args["originalFunctionCall"], asked.args["toolConfirmation"]
        print(f"asked: {original['name']} {_show(confirmation.get('payload'))}")
        answer = types.FunctionResponse(id=asked.id, name=CONFIRMATION, response=response)
        await p.send(types.Content(role="user", parts=[types.Part(function_response=answer)]))

    await p.say("Pay 40 to Ann")
    await confirm(await p.say("Pay 250 to Bob"), confirmed=True)
    await confirm(await p.say("Order 3 cards"), confirmed=True, payload={"cards": 2})


async def city_guide(p: Program) -> None:
    await p.say("What is the weather in Oslo and in Atlantis?")
    await p.say("And the population of Oslo?")
    seen = MODELS["city_guide"].requests[-1]
    texts = [part.text for c in seen.contents for part in c.parts or () if part.text]
    print(f"model saw {len(seen.contents)} contents, texts: {texts}")
    # toolfleet's request holds the instruction in `instruction`, ADK's in its config.
    instruction = getattr(seen, "instruction", "") or str(seen.config.system_instruction)
    provided = re.search(r"You are a city guide [^.]*\.", instruction)
    print(f"instruction: {provided[0] if provided else None}")


async def visit_log(p: Program) -> None:
    await p.say("I went to the Louvre, the Prado and the Uffizi")
    state = await p.session_state()
    print(f"state visits: {sorted(state.get('visits', []))}")


async def briefing(p: Program) -> None:
    await p.say("Budget is up five percent and we launch in May")
    seen = MODELS["summariser"].requests[-1]
    texts = [part.text for c in seen.contents for part in c.parts or () if part.text]
    print(f"summariser saw {len(seen.contents)} contents: {texts}")
    await p.state("notes", "summary")


async def order_desk(p: Program) -> None:
    await p.say("Two cups of oolong, please")
    await p.state("order")


async def countdown(p: Program) -> None:
    await p.say("Count down")


async def short_memory(p: Program) -> None:
    await p.say("Hi")
    await p.say("Hi again")
    seen = MODELS["short_memory"].requests[-1]
    texts = [part.text for c in seen.contents for part in c.parts or () if part.text]
    print(f"model saw {len(seen.contents)} contents, texts: {texts}")


DRIVERS: dict[str, Callable[[Program], Awaitable[None]]] = {
    f.__name__: f
    for f in (
        pantry,
        thermostat,
        front_desk,
        newsletter,
        leave_request,
        recipe_card,
        receipts,
        notebook,
        library,
        parcel_desk,
        trivia,
        payments,
        city_guide,
        visit_log,
        briefing,
        order_desk,
        countdown,
        short_memory,
    )
}


async def main(names: list[str]) -> None:
    """Run the named programs (all by default), each under a `=== name` header."""
    for name in names or sorted(DRIVERS):
        print(f"=== {name}")
        program = Program(name)
        await program.new_session()
        await DRIVERS[name](program)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
