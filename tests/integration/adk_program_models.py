"""The scripted model turns of the programs in examples/adk_programs, by agent name.

The same scripts play the model on google-adk when the programs are run there, so
what toolfleet prints can be checked against what ADK prints for the same turns.
"""

from __future__ import annotations

import json

from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, Step, call, say


def _done(view: ScriptView) -> Step:
    return say(f"Done: {json.dumps(dict(view.responses), sort_keys=True)}")


def _leave_next(view: ScriptView) -> Step:
    """What the leave desk does next, from the last responses alone: ADK sends the
    manager's decision in place of the pending answer and may leave out or keep the
    turn that said it was pending, so the step number does not tell."""
    answers = dict(view.responses)
    if "book_leave" in answers:
        return say(f"Booked; {answers['book_leave']['remaining_allowance']} days left.")
    asked = answers["ask_manager"]
    if asked["status"] == "approved":
        return call(Call("book_leave", {"days": asked["days"]}))
    return say(f"Asked your manager (ticket {asked['ticket']}).")


MODELS: dict[str, ScriptedModel] = {
    "pantry_clerk": ScriptedModel(
        [
            call(Call("count_items", {"shelf": "top"})),
            lambda v: call(
                *(
                    Call("restock", {"item": i, "quantity": 2})
                    for i in v.response("count_items")["low"]
                )
            ),
            lambda v: say(f"Ordered more: {v.response('restock')['ordered']}."),
        ]
    ),
    # thermostat: a reading, an allowed target, a refused one, one call a turn.
    "thermostat": ScriptedModel(
        [
            call(Call("read_temperature", {"room": "kitchen"})),
            lambda v: call(
                Call(
                    "set_target",
                    {"room": "kitchen", "celsius": v.response("read_temperature")["celsius"] + 2},
                )
            ),
            call(Call("set_target", {"room": "study", "celsius": 35})),
            lambda v: say(f"Kitchen set; study refused: {v.response('set_target')['error']}"),
        ]
    ),
    # front_desk: the desk transfers; the clerk books, then hands over to a sibling.
    "front_desk": ScriptedModel([call(Call("transfer_to_agent", {"agent_name": "booking_clerk"}))]),
    "booking_clerk": ScriptedModel(
        by_message={
            "breakfast": [call(Call("transfer_to_agent", {"agent_name": "concierge"}))],
            "room": [
                call(Call("reserve_room", {"nights": 2})),
                lambda v: say(f"Booked: {v.response('reserve_room')['confirmation']}."),
            ],
        }
    ),
    "concierge": ScriptedModel(
        [
            call(Call("opening_hours", {"place": "breakfast room"})),
            lambda v: say(f"Breakfast is served {v.response('opening_hours')['result']}."),
        ]
    ),
    # newsletter: the loop runs twice; the editor ends it the second time.
    "fact_finder": ScriptedModel([say("Bees see ultraviolet. Hives hold 50,000 bees.")]),
    "quote_finder": ScriptedModel([say("'The bee is more honored.' - Chrysostom")]),
    "writer": ScriptedModel(
        [
            say("Bees see colours we cannot. A hive can hold 50,000 of them."),
            say("BUSY BEES: Bees see colours we cannot. A hive can hold 50,000 of them."),
        ]
    ),
    "editor": ScriptedModel(
        [
            say("Add a headline."),
            call(Call("word_count", {"text": "Busy bees"})),
            lambda v: (
                call(Call("exit_loop", {}))
                if v.response("word_count")["result"] == 2
                else say("Too long.")
            ),
        ]
    ),
    "publisher": ScriptedModel([say("Issue 1 is laid out.")]),
    # leave_request: the manager's answer comes back as the call's FunctionResponse.
    "leave_desk": ScriptedModel(
        [call(Call("ask_manager", {"days": 3, "reason": "moving house"}))] + [_leave_next] * 3
    ),
    # recipe_card: the answer is the card's JSON.
    "recipe_writer": ScriptedModel(
        [say('{"title": "Pancakes", "servings": 4, "steps": ["Mix", "Fry"]}')]
    ),
    # receipts: two receipts from one store make two versions of one artifact.
    "receipt_clerk": ScriptedModel(
        by_message={
            "read": [
                call(Call("read_receipts", {})),
                lambda v: say("; ".join(v.response("read_receipts")["receipts"])),
            ],
            "file": [
                call(
                    Call("file_receipt", {"store": "Bakery", "amount": 4.5}),
                ),
                call(Call("file_receipt", {"store": "Bakery", "amount": 6})),
                call(Call("file_receipt", {"store": "Chemist", "amount": 12.25})),
                lambda v: say(f"Filed {v.response('file_receipt')['filed']}."),
            ],
        }
    ),
    # notebook: the second session's question is answered from memory.
    "notebook": ScriptedModel(
        by_message={
            "^what": [
                call(Call("load_memory", {"query": "bike lock code"})),
                # ADK's response holds its memories as an object, toolfleet's as JSON.
                lambda v: say(f"Remembered: {'4711' in str(v.response('load_memory'))}"),
            ],
            "lock": [say("Noted.")],
        }
    ),
    # library: the plugin blocks clear_shelf.
    "librarian": ScriptedModel(
        [
            call(Call("lend_book", {"title": "Dune"})),
            call(Call("clear_shelf", {"shelf": "B2"})),
            lambda v: say(f"Lent Dune; {v.response('clear_shelf')['error']}"),
        ]
    ),
    # parcel_desk: pydantic arguments, an optional one left out, a union.
    "parcel_desk": ScriptedModel(
        by_message={
            "locker": [
                call(Call("deliver_to", {"target": {"locker_id": "L-19"}})),
                lambda v: say(f"Delivering to {v.response('deliver_to')['at']}."),
            ],
            "fragile": [
                call(
                    Call(
                        "quote_shipping",
                        {
                            "parcel": {"weight_kg": 2, "fragile": True},
                            "destination": {"city": "Ghent", "country": "BE"},
                        },
                    )
                ),
                lambda v: say(f"That is EUR {v.response('quote_shipping')['price_eur']}."),
            ],
            "quote": [
                call(Call("quote_shipping", {"parcel": {"weight_kg": 1.5}})),
                lambda v: say(f"That is EUR {v.response('quote_shipping')['price_eur']}."),
            ],
        }
    ),
    # trivia: the country is the message's last word.
    "trivia": ScriptedModel(
        [
            call(Call("capital_of", lambda v: {"country": v.user_text.rstrip("?").split()[-1]})),
            lambda v: say(f"It is {v.response('capital_of')['result']}."),
        ]
    ),
    # payments: each answer repeats the last turn's responses.
    "payments": ScriptedModel(
        by_message={
            r"pay 40": [call(Call("send_payment", {"amount": 40, "payee": "Ann"})), _done],
            r"pay 250": [call(Call("send_payment", {"amount": 250, "payee": "Bob"})), _done],
            "cards": [call(Call("order_cards", {"count": 3})), _done, _done],
        }
    ),
    # city_guide: two calls in one turn, one answered with the tool's error dict.
    "city_guide": ScriptedModel(
        by_message={
            "weather": [
                call(
                    Call("weather_in", {"city": "Oslo"}),
                    Call("weather_in", {"city": "Atlantis"}),
                ),
                lambda v: say(
                    " / ".join(str(r.get("report", r.get("error_message"))) for _, r in v.responses)
                ),
            ],
            "population": [
                call(Call("population_of", {"city": "Oslo"})),
                lambda v: say(f"About {v.response('population_of')['population']} people."),
            ],
        }
    ),
    # visit_log: three calls in one turn, each appending to one state list.
    "visit_log": ScriptedModel(
        [
            call(*(Call("log_visit", {"museum": m}) for m in ("Louvre", "Prado", "Uffizi"))),
            say("Logged three visits."),
        ]
    ),
    # briefing: the summariser sees no history.
    "note_taker": ScriptedModel([say("- budget up 5%\n- launch in May")]),
    "summariser": ScriptedModel([say("Budget up 5%, launch in May.")]),
    # order_desk: as ADK's model answers an output_schema agent with tools (off Vertex
    # AI): its final answer is a call of ADK's set_model_response.
    "order_desk": ScriptedModel(
        [
            call(Call("list_teas", {})),
            call(Call("set_model_response", {"tea": "oolong", "cups": 2})),
        ]
    ),
    # countdown: one number a loop pass, then exit_loop.
    "counter": ScriptedModel([say("3"), say("2"), say("1"), call(Call("exit_loop", {}))]),
    # short_memory: the trimmed request starts at the latest message: always step one.
    "short_memory": ScriptedModel([say("Hello.")]),
}
