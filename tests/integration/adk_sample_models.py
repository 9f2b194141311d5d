"""The scripted models that run ADK's own samples (examples/adk_samples), by agent name.

Samples that share an agent name (`root_agent`, `data_processing_agent`) are told
apart by the user's message. Dice have one side, so every roll is 1 and the run's
output is fixed, as ADK's would be for the same model turns.
"""

from __future__ import annotations

import json

from toolfleet.orchestrator.models.offline import (
    Call,
    ScriptedModel,
    ScriptEntry,
    ScriptView,
    Step,
    call,
    say,
)

WEATHER_JSON = json.dumps({"temperature": "26 C", "humidity": "20%", "wind_speed": "29 mph"})
CODE = "```python\ndef add(a, b):\n    return a + b\n```"


def _rolled(view: ScriptView) -> Step:
    # The callbacks sample's after_tool_cb2 nests the roll under "response".
    answer = view.response("roll_die")
    return call(Call("check_prime", {"nums": [answer.get("result", answer.get("response"))]}))


def _roll_and_check() -> list[ScriptEntry]:
    return [
        call(Call("roll_die", {"sides": 1})),
        _rolled,
        _primes,
    ]


def _profiled(view: ScriptView) -> Step:
    ((_, answer),) = view.responses
    return say(f"{answer['status']}: {answer['message']}")


def _done(view: ScriptView) -> Step:
    return say(f"Done: {json.dumps(dict(view.responses), sort_keys=True)}")


def _memory_answer(view: ScriptView) -> Step:
    memories = view.response("load_memory")["memories"]
    told = [m["content"]["parts"][0]["text"] for m in memories if m["author"] == "user"]
    return say(f"From memory: {' | '.join(t for t in told if 'teal' in t)}")


def _primes(view: ScriptView) -> Step:
    answer = view.response("check_prime")
    return say(f"You rolled a 1. {answer.get('result', answer.get('response'))}")


MODELS: dict[str, ScriptedModel] = {
    "hello_world_agent": ScriptedModel(
        by_message={
            "^hi$": [say("Hello! Ask me to roll a die.")],
            "roll": _roll_and_check(),
        }
    ),
    "data_processing_agent": ScriptedModel(_roll_and_check()),
    "log_agent": ScriptedModel(
        [call(Call("log_query", lambda v: {"query": v.user_text})), say("kk, I've logged.")]
    ),
    "root_agent": ScriptedModel(
        by_message={
            "san jose": [say(WEATHER_JSON)],
            "log this": [say("Logged. I cannot answer a second query because of my setup.")],
            "dice": [call(Call("transfer_to_agent", {"agent_name": "roll_agent"}))],
        }
    ),
    "roll_agent": ScriptedModel(
        [
            call(Call("roll_die", {"sides": 1})),
            lambda v: say(f"I rolled a {v.response('roll_die')['result']} for you."),
        ]
    ),
    "prime_agent": ScriptedModel(
        [
            call(Call("check_prime", {"nums": [1]})),
            lambda v: say(v.response("check_prime")["result"]),
        ]
    ),
    "reimbursement_agent": ScriptedModel(
        [
            call(Call("ask_for_approval", {"purpose": "travel", "amount": 500})),
            say("Your request is pending approval (reimbursement-ticket-001)."),
            lambda v: (
                call(Call("reimburse", {"purpose": "travel", "amount": 500}))
                if v.response("ask_for_approval")["status"] == "approved"
                else say("The manager rejected it.")
            ),
            say("Reimbursed $500 for travel."),
        ]
    ),
    "memory_agent": ScriptedModel(
        by_message={
            "^what": [call(Call("load_memory", {"query": "favorite color"})), _memory_answer],
            "favorite": [say("Noted: your favorite color is teal.")],
        }
    ),
    "sub_agent_1": ScriptedModel([say("1")]),
    "sub_agent_2": ScriptedModel([say("2")]),
    "weather_time_agent": ScriptedModel(
        [
            call(Call("get_weather", {"city": "New York"}), Call("get_weather", {"city": "Paris"})),
            say("It is sunny in New York; I have no report for Paris."),
        ]
    ),
    "CodeWriterAgent": ScriptedModel([say(CODE)]),
    "CodeReviewerAgent": ScriptedModel([say("- Add type hints and a docstring.")]),
    "CodeRefactorerAgent": ScriptedModel(
        [say('```python\ndef add(a: int, b: int) -> int:\n    """Sum."""\n    return a + b\n```')]
    ),
    # parallel_functions: four calls in one turn, answered together.
    "parallel_function_test_agent": ScriptedModel(
        [
            call(
                Call("get_weather", {"city": "New York"}),
                Call("get_weather", {"city": "London"}),
                Call("calculate_distance", {"city1": "New York", "city2": "London"}),
                Call("get_population", {"cities": ["New York", "London"]}),
            ),
            lambda v: say(
                f"They are {v.response('calculate_distance')['distance_km']} km apart; "
                f"{v.response('get_population')['total_population']} people live there."
            ),
        ]
    ),
    # history_management: its before_model_callback cuts what this model is sent.
    "short_history_agent": ScriptedModel(
        by_message={
            "^hi$": [say("Hello! Ask me to roll a die.")],
            "roll": [
                call(Call("roll_die", {"sides": 1})),
                lambda v: say(f"You rolled a {v.response('roll_die')['result']}."),
            ],
            "numbers": [say("You rolled a 1 twice.")],
        }
    ),
    # human_tool_confirmation: each answer repeats the last turn's responses.
    "time_off_agent": ScriptedModel(
        by_message={
            r"\$500": [call(Call("reimburse", {"amount": 500})), _done],
            r"\$2000": [call(Call("reimburse", {"amount": 2000})), _done],
            "5 days": [call(Call("request_time_off", {"days": 5})), _done, _done],
        }
    ),
    # plugin_basic
    "hello_world": ScriptedModel(
        [call(Call("hello_world", {"query": "hello world"})), say("I printed hello world.")]
    ),
    # workflow_triage: the manager plans, then hands over to the SequentialAgent.
    "execution_manager_agent": ScriptedModel(
        [
            call(Call("update_execution_plan", {"execution_agents": ["code_agent"]})),
            call(Call("transfer_to_agent", {"agent_name": "plan_execution_agent"})),
        ]
    ),
    "code_agent": ScriptedModel([say(CODE)]),
    "math_agent": ScriptedModel([say("2")]),
    "execution_summary_agent": ScriptedModel([say("The code agent wrote add().")]),
    # pydantic_argument: arguments the tools get as pydantic models.
    "profile_agent": ScriptedModel(
        by_message={
            "company": [
                call(
                    Call(
                        "create_entity_profile",
                        {
                            "entity": {
                                "company_name": "Acme",
                                "industry": "tools",
                                "employee_count": 12,
                            }
                        },
                    )
                ),
                _profiled,
            ],
            "dark": [
                call(
                    Call(
                        "create_full_user_account",
                        {
                            "profile": {"name": "Bob", "age": 41, "email": "bob@example.com"},
                            "preferences": {"theme": "dark"},
                        },
                    )
                ),
                _profiled,
            ],
            "alice": [
                call(Call("create_full_user_account", {"profile": {"name": "Alice", "age": 30}})),
                _profiled,
            ],
        }
    ),
    # runner_debug_example (its agent is named "agent").
    "agent": ScriptedModel(
        by_message={
            "weather in": [
                call(
                    Call(
                        "get_weather", lambda v: {"city": v.user_text.split("weather in ")[1][:-1]}
                    )
                ),
                lambda v: say(f"Here you go: {v.response('get_weather')['result']}"),
            ],
            "calculate": [
                call(
                    Call("calculate", lambda v: {"expression": v.user_text.split("Calculate ")[1]})
                ),
                lambda v: say(f"Here you go: {v.response('calculate')['result']}"),
            ],
        }
    ),
    # json_passing_agent: as ADK's model answers an output_schema agent with tools (off
    # Vertex AI): its final answer is a call of ADK's set_model_response.
    "order_intake_agent": ScriptedModel(
        [
            call(
                Call("get_available_sizes", {}),
                Call("get_available_crusts", {}),
                Call("get_available_toppings", {}),
            ),
            call(
                Call(
                    "set_model_response",
                    {"size": "large", "crust": "thin", "toppings": ["pepperoni", "mushrooms"]},
                )
            ),
        ]
    ),
    "order_confirmation_agent": ScriptedModel(
        [
            call(Call("calculate_price", {})),
            lambda v: say(
                "A large thin crust pizza with pepperoni and mushrooms. "
                f"{v.response('calculate_price')['result']}"
            ),
        ]
    ),
}
