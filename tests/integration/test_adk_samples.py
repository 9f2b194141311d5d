"""ADK's own samples (google/adk-python contributing/samples), ported under
examples/adk_samples/ with only their import lines changed, run on toolfleet as their
main.py files run them: InMemoryRunner on the sample's root_agent, on the offline
model and through the real google-genai SDK against the Gemini REST stand-in.

What each run prints (tool calls, their responses, the answers, the state the sample
builds) is what ADK prints for the same model turns. Samples run in a few processes,
not one: the local fleet of one process serves one module's tools per pool (samples
define tools of the same name in different modules), so each process holds at most
one sample with tools of its own.
"""

from __future__ import annotations

import os
import re

import pytest

from tests.integration.test_adk_examples import STAND_IN_LINE, run_program

pytestmark = pytest.mark.integration

MODELS = "--models=tests.integration.adk_sample_models:MODELS"
DRIVERS = "tests.integration.adk_sample_drivers"

# Samples run together in one process: tool-less ones ride with one that has tools.
GROUPS = [
    ("artifact_save_text", "fields_output_schema"),
    ("callbacks",),
    ("fields_planner", "non_llm_sequential"),
    ("hello_world", "workflow_agent_seq"),
    ("hello_world_ma",),
    ("human_in_loop", "memory"),
    ("quickstart",),
    ("session_state_agent",),
    ("simple_sequential_agent",),
    ("parallel_functions",),
    ("history_management",),
    ("human_tool_confirmation",),
    ("plugin_basic",),
    ("workflow_triage",),
    ("pydantic_argument",),
    ("runner_debug_example",),
    ("json_passing_agent",),
]
ROLL_AND_CHECK = [
    '** {agent}: fc / roll_die / {{"sides": 1}}',
    '** {agent}: fr / roll_die / {{"result": 1}}',
    '** {agent}: fc / check_prime / {{"nums": [1]}}',
    '** {agent}: fr / check_prime / {{"result": "No prime numbers found."}}',
    "** {agent}: You rolled a 1. No prime numbers found.",
    "state rolls: [1]",
]
CB_TOOL = ["@before_tool_cb1", "@before_tool_cb2", "@before_tool_cb3"]
CB_TOOL += ["@after_tool_cb1", "@after_tool_cb2"]  # cb2 answers, so cb3 never runs
CB_MODEL = ["@before_model_callback", "@after_model_callback"]
STATE_KEYS = [f"{w}_callback" for w in ("before_agent", "before_model", "after_model")]
STATE_KEYS.append("after_agent_callback")


def checked(title: str) -> list[str]:
    """What session_state_agent's assert_session_values prints, all passing."""
    passed = "\033[92mpass \u2705\033[0m"
    return [
        f"===================== In {title} ==============================",
        f"** Asserting keys are cached in context: {ANY} {passed}",
        f"** Asserting keys are already persisted in session: {ANY} {passed}",
        f"** Asserting keys are not persisted in session yet: {ANY} {passed}",
        "=" * 60,
    ]


WEATHER = '{"temperature": "26 C", "humidity": "20%", "wind_speed": "29 mph"}'
# ANY in a line matches anything there (a memory carries its timestamp).
ANY = "<any>"
EXPECTED: dict[str, list[str]] = {
    "artifact_save_text": [
        '** log_agent: fc / log_query / {"query": "Remember the milk"}',
        '** log_agent: fr / log_query / {"result": null}',
        "** log_agent: kk, I've logged.",
        "artifacts: ['query'], query: b'Remember the milk'",
    ],
    # after_tool_callback gets the tool's own return value (1), as ADK hands it, and
    # after_tool_cb2's dict replaces the response.
    "callbacks": [
        "@before_agent_cb1",
        "@before_agent_cb2",
        "@before_agent_cb3",
        *CB_MODEL,
        '** data_processing_agent: fc / roll_die / {"sides": 1}',
        *CB_TOOL,
        '** data_processing_agent: fr / roll_die / {"response": 1, "test": "after_tool_cb2"}',
        *CB_MODEL,
        '** data_processing_agent: fc / check_prime / {"nums": [1]}',
        *CB_TOOL,
        "** data_processing_agent: fr / check_prime / "
        '{"response": "No prime numbers found.", "test": "after_tool_cb2"}',
        *CB_MODEL,
        "** data_processing_agent: You rolled a 1. No prime numbers found.",
        "@after_agent_cb1",
        "@after_agent_cb2",  # it answers, so cb3 never runs
        "** data_processing_agent: (stopped) after_agent_cb2",
        "state rolls: [1]",
    ],
    # output_schema with output_key: the state holds the parsed object.
    "fields_output_schema": [
        f"** root_agent: {WEATHER}",
        'state weather_data: {"humidity": "20%", "temperature": "26 C", "wind_speed": "29 mph"}',
    ],
    "fields_planner": [line.format(agent="data_processing_agent") for line in ROLL_AND_CHECK],
    "hello_world": [
        "** hello_world_agent: Hello! Ask me to roll a die.",
        *(line.format(agent="hello_world_agent") for line in ROLL_AND_CHECK),
    ],
    # The root transfers; roll_agent (no model of its own: its parent's) rolls.
    "hello_world_ma": [
        '** root_agent: fc / transfer_to_agent / {"agent_name": "roll_agent"}',
        '** root_agent: fr / transfer_to_agent / {"result": null}',
        '** roll_agent: fc / roll_die / {"sides": 1}',
        '** roll_agent: fr / roll_die / {"result": 1}',
        "** roll_agent: I rolled a 1 for you.",
    ],
    # The long-running call is answered by the user's FunctionResponse (approved).
    "human_in_loop": [
        '** reimbursement_agent: fc / ask_for_approval / {"amount": 500, "purpose": "travel"}',
        "** reimbursement_agent: fr / ask_for_approval / "
        '{"amount": 500.0, "status": "pending", "ticketId": "reimbursement-ticket-001"}',
        "** reimbursement_agent: Your request is pending approval (reimbursement-ticket-001).",
        '** reimbursement_agent: fc / reimburse / {"amount": 500, "purpose": "travel"}',
        '** reimbursement_agent: fr / reimburse / {"status": "ok"}',
        "** reimbursement_agent: Reimbursed $500 for travel.",
    ],
    # before_agent_callback sets {_time}; load_memory finds the first session's words.
    "memory": [
        "** memory_agent: Noted: your favorite color is teal.",
        '** memory_agent: fc / load_memory / {"query": "favorite color"}',
        f'** memory_agent: fr / load_memory / {{"memories": [{ANY}',
        "** memory_agent: From memory: My favorite color is teal",
        "state _time is a time: True",
    ],
    "non_llm_sequential": ["** sub_agent_1: 1", "** sub_agent_2: 2"],
    # Two calls in one turn; the tools' own error dict is a result like any other.
    "quickstart": [
        '** weather_time_agent: fc / get_weather / {"city": "New York"}',
        '** weather_time_agent: fc / get_weather / {"city": "Paris"}',
        '** weather_time_agent: fr / get_weather / {"report": "The weather in New York is '
        'sunny with a temperature of 25 degrees Celsius (77 degrees Fahrenheit).", '
        '"status": "success"}',
        "** weather_time_agent: fr / get_weather / "
        '{"error_message": "Weather information for \'Paris\' is not available.", '
        '"status": "error"}',
        "** weather_time_agent: It is sunny in New York; I have no report for Paris.",
    ],
    # Each callback checks which state keys are cached in the context and which are
    # already persisted; the second query is refused by before_agent_callback.
    "session_state_agent": [
        *checked("before_agent_callback"),
        *checked("before_model_callback"),
        *checked("after_model_callback"),
        "** root_agent: Logged. I cannot answer a second query because of my setup.",
        *checked("after_agent_callback"),
        "** root_agent: Sorry, I can only reply once.",
        *[f'state {key}_state_key: "{key}_state_value"' for key in STATE_KEYS],
    ],
    "simple_sequential_agent": [
        '** roll_agent: fc / roll_die / {"sides": 1}',
        '** roll_agent: fr / roll_die / {"result": 1}',
        "** roll_agent: I rolled a 1 for you.",
        '** prime_agent: fc / check_prime / {"nums": [1]}',
        '** prime_agent: fr / check_prime / {"result": "No prime numbers found."}',
        "** prime_agent: No prime numbers found.",
    ],
    # output_key stores each stage's answer for the next stage's {placeholders}.
    "workflow_agent_seq": [
        "** CodeWriterAgent: ```python",
        "def add(a, b):",
        "    return a + b",
        "```",
        "** CodeReviewerAgent: - Add type hints and a docstring.",
        "** CodeRefactorerAgent: ```python",
        "def add(a: int, b: int) -> int:",
        '    """Sum."""',
        "    return a + b",
        "```",
        'state generated_code: "```python\\ndef add(a, b):\\n    return a + b\\n```"',
        'state review_comments: "- Add type hints and a docstring."',
        'state refactored_code: "```python\\ndef add(a: int, b: int) -> int:\\n    '
        '\\"\\"\\"Sum.\\"\\"\\"\\n    return a + b\\n```"',
    ],
}
PARALLEL = "** parallel_function_test_agent:"
CONFIRM_HINT = (
    "Please approve or reject the tool call {}() by responding with a FunctionResponse "
    "with an expected ToolConfirmation payload."
)
EXPECTED |= {
    # Four calls in one turn; their writes to state, each appending to a list.
    "parallel_functions": [
        f'{PARALLEL} fc / get_weather / {{"city": "New York"}}',
        f'{PARALLEL} fc / get_weather / {{"city": "London"}}',
        f'{PARALLEL} fc / calculate_distance / {{"city1": "New York", "city2": "London"}}',
        f'{PARALLEL} fc / get_population / {{"cities": ["New York", "London"]}}',
        f'{PARALLEL} fr / get_weather / {{"city": "New York", "condition": "sunny", '
        '"humidity": 45, "temperature": 72}',
        f'{PARALLEL} fr / get_weather / {{"city": "London", "condition": "cloudy", '
        '"humidity": 80, "temperature": 60}',
        f'{PARALLEL} fr / calculate_distance / {{"city1": "New York", "city2": "London", '
        '"distance_km": 8287, "distance_miles": 5149}',
        f'{PARALLEL} fr / get_population / {{"cities_count": 2, "populations": '
        '{"London": 9648110, "New York": 8336817}, "total_population": 17984927}',
        f"{PARALLEL} They are 8287 km apart; 17984927 people live there.",
        "state weather cities: ['London', 'New York']",
        "state distance requests: 1",
        "state population cities: [['New York', 'London']]",
    ],
    # before_model_callback keeps the request from the second-to-last user-role content
    # on (a function response is one): the last question, the answer before it.
    "history_management": [
        "** short_history_agent: Hello! Ask me to roll a die.",
        *(
            '** short_history_agent: fc / roll_die / {"sides": 1}',
            '** short_history_agent: fr / roll_die / {"result": 1}',
            "** short_history_agent: You rolled a 1.",
        )
        * 2,
        "** short_history_agent: You rolled a 1 twice.",
        "model saw 3 contents, user texts: ['What numbers?']",
        "state rolls: [1, 1]",
    ],
    "human_tool_confirmation": [
        '** time_off_agent: fc / reimburse / {"amount": 500}',
        '** time_off_agent: fr / reimburse / {"status": "ok"}',
        '** time_off_agent: Done: {"reimburse": {"status": "ok"}}',
        '** time_off_agent: fc / reimburse / {"amount": 2000}',
        "** time_off_agent: fc / adk_request_confirmation / "
        f'{{"originalFunctionCall": {{"args": {{"amount": 2000}}, "id": "{ANY}", '
        '"name": "reimburse"}, "toolConfirmation": {"confirmed": false, '
        f'"hint": "{CONFIRM_HINT.format("reimburse")}"}}}}',
        "** time_off_agent: fr / reimburse / "
        '{"error": "This tool call requires confirmation, please approve or reject."}',
        "asked: reimburse null",
        '** time_off_agent: fr / reimburse / {"status": "ok"}',
        '** time_off_agent: Done: {"reimburse": {"status": "ok"}}',
        '** time_off_agent: fc / request_time_off / {"days": 5}',
        "** time_off_agent: fc / adk_request_confirmation / "
        f'{{"originalFunctionCall": {{"args": {{"days": 5}}, "id": "{ANY}", '
        '"name": "request_time_off"}, "toolConfirmation": {"confirmed": false, '
        f'"hint": "{CONFIRM_HINT.format("request_time_off")}", '
        '"payload": {"approved_days": 0}}}',
        '** time_off_agent: fr / request_time_off / {"status": "Manager approval is required."}',
        "** time_off_agent: Done: "
        '{"request_time_off": {"status": "Manager approval is required."}}',
        'asked: request_time_off {"approved_days": 0}',
        '** time_off_agent: fr / request_time_off / {"approved_days": 3, "status": "ok"}',
        '** time_off_agent: Done: {"request_time_off": {"approved_days": 3, "status": "ok"}}',
    ],
    # Its main(): InMemoryRunner with the sample's plugin; the tool prints on a worker.
    "plugin_basic": [
        "[Plugin] Agent run count: 1",
        "[Plugin] LLM request count: 1",
        "** Got event from hello_world",
        "Hello world: query is [hello world]",
        "** Got event from hello_world",
        "[Plugin] LLM request count: 2",
        "** Got event from hello_world",
    ],
    # The manager transfers to a SequentialAgent: a ParallelAgent whose math branch is
    # skipped by its before_agent_callback (its answer saved under output_key, as ADK
    # does), then a summary agent with an instruction provider and no history.
    "workflow_triage": [
        '** execution_manager_agent: fc / update_execution_plan / {"execution_agents": '
        '["code_agent"]}',
        "** execution_manager_agent: fr / update_execution_plan / "
        '{"result": "execution_agents updated."}',
        '** execution_manager_agent: fc / transfer_to_agent / {"agent_name": '
        '"plan_execution_agent"}',
        '** execution_manager_agent: fr / transfer_to_agent / {"result": null}',
        "** code_agent: ```python",
        "def add(a, b):",
        "    return a + b",
        "```",
        "** math_agent: Skipping execution agent math_agent as it is not relevant to the "
        "current state.",
        "** execution_summary_agent: The code agent wrote add().",
        "summary saw 1 content(s); involved: code_agent",
        'state execution_agents: ["code_agent"]',
        'state code_agent_output: "```python\\ndef add(a, b):\\n    return a + b\\n```"',
        'state math_agent_output: "Skipping execution agent math_agent as it is not relevant '
        'to the current state."',
    ],
}
# What create_full_user_account says of the conversions (json.dumps escapes the arrow).
CONVERTED = (
    '{"preferences_converted": "JSON dict \\u2192 UserPreferences instance", '
    '"profile_converted": "JSON dict \\u2192 UserProfile instance"}'
)
ACCOUNT = "** profile_agent: fr / create_full_user_account / "
EXPECTED |= {
    # Tools taking pydantic models (one Optional, one a Union of two) get instances.
    "pydantic_argument": [
        "** profile_agent: fc / create_full_user_account / "
        '{"profile": {"age": 30, "name": "Alice"}}',
        f'{ACCOUNT}{{"conversion_demo": {CONVERTED}, "message": "Full account created for '
        'Alice!", "preferences": {"language": "English", "notifications_enabled": true, '
        '"preferences_type": "UserPreferences", "theme": "light"}, "profile": {"age": 30, '
        '"email": "Not provided", "name": "Alice", "profile_type": "UserProfile"}, '
        '"status": "account_created"}',
        "** profile_agent: account_created: Full account created for Alice!",
        '** profile_agent: fc / create_full_user_account / {"preferences": {"theme": "dark"}, '
        '"profile": {"age": 41, "email": "bob@example.com", "name": "Bob"}}',
        f'{ACCOUNT}{{"conversion_demo": {CONVERTED}, "message": "Full account created for '
        'Bob!", "preferences": {"language": "English", "notifications_enabled": true, '
        '"preferences_type": "UserPreferences", "theme": "dark"}, "profile": {"age": 41, '
        '"email": "bob@example.com", "name": "Bob", "profile_type": "UserProfile"}, '
        '"status": "account_created"}',
        "** profile_agent: account_created: Full account created for Bob!",
        '** profile_agent: fc / create_entity_profile / {"entity": {"company_name": "Acme", '
        '"employee_count": 12, "industry": "tools"}}',
        '** profile_agent: fr / create_entity_profile / {"entity_type": "company", "message": '
        '"Company profile created for Acme!", "profile": {"company_name": "Acme", '
        '"employee_count": 12, "industry": "tools", "model_type": "CompanyProfile", '
        '"website": "Not provided"}, "status": "company_profile_created"}',
        "** profile_agent: company_profile_created: Company profile created for Acme!",
    ],
    # run_debug prints as ADK's does: the answers, and with verbose=True the calls too.
    "runner_debug_example": [
        "agent > Here you go: Clear, 25\u00b0C (77\u00b0F)",
        "agent > Here you go: Result: 141.88",
        "agent > [Calling tool: get_weather({'city': 'Paris'})]",
        "agent > [Tool result: {'result': 'Cloudy, 18\u00b0C (64\u00b0F)'}]",
        "agent > Here you go: Cloudy, 18\u00b0C (64\u00b0F)",
        "agent > [Calling tool: calculate({'expression': '100 / 5'})]",
        "agent > [Tool result: {'result': 'Result: 20.0'}]",
        "agent > Here you go: Result: 20.0",
        'state weather_queries: ["Tokyo", "Paris"]',
    ],
}
INTAKE = "** order_intake_agent:"
PIZZA = '{"crust": "thin", "size": "large", "toppings": ["pepperoni", "mushrooms"]}'
EXPECTED |= {
    # A SequentialAgent passes the first agent's structured answer (output_key) on.
    "json_passing_agent": [
        f"{INTAKE} fc / get_available_sizes / {{}}",
        f"{INTAKE} fc / get_available_crusts / {{}}",
        f"{INTAKE} fc / get_available_toppings / {{}}",
        f'{INTAKE} fr / get_available_sizes / {{"result": ["small", "medium", "large"]}}',
        f'{INTAKE} fr / get_available_crusts / {{"result": ["thin", "thick", "stuffed"]}}',
        f'{INTAKE} fr / get_available_toppings / {{"result": ["pepperoni", "mushrooms", '
        '"onions", "sausage", "bacon", "pineapple"]}',
        f"{INTAKE} fc / set_model_response / {PIZZA}",
        f"{INTAKE} fr / set_model_response / {PIZZA}",
        f'{INTAKE} {{"size": "large", "crust": "thin", "toppings": ["pepperoni", "mushrooms"]}}',
        "** order_confirmation_agent: fc / calculate_price / {}",
        "** order_confirmation_agent: fr / calculate_price / "
        '{"result": "The total price for your order is $15.00."}',
        "** order_confirmation_agent: A large thin crust pizza with pepperoni and mushrooms. "
        "The total price for your order is $15.00.",
        f"state pizza_order: {PIZZA}",
    ],
}
# Model requests each group makes through the stand-in.
REQUESTS = {
    GROUPS[0]: 3,
    GROUPS[1]: 3,
    GROUPS[2]: 5,
    GROUPS[3]: 7,
    GROUPS[4]: 3,
    GROUPS[5]: 7,
    GROUPS[6]: 2,
    GROUPS[7]: 1,
    GROUPS[8]: 4,
    GROUPS[10]: 6,
    GROUPS[12]: 2,
    GROUPS[13]: 4,
    GROUPS[14]: 6,
    GROUPS[15]: 8,
}
# Where toolfleet differs from ADK on a sample as written: the offline run shows it, so
# these samples are not run through the stand-in again.
DIFFERS = {
    "session_state_agent": "CallbackContext has no _invocation_context (ADK's private API)",
    # Each call writes to a snapshot of the state; ADK's parallel calls share one dict,
    # so both appends to weather_requests land there, where toolfleet keeps the last.
    "parallel_functions": "parallel calls' in-place writes to one state key: the last wins",
    # toolfleet parks a call that asks for confirmation: the model is not given the
    # tool's interim response (ADK lets it answer it), and a require_confirmation call
    # shows no interim error response. The answers after confirming are ADK's.
    "human_tool_confirmation": "a call waiting for confirmation is parked, not answered",
    # ADK (off Vertex AI) offers an agent with output_schema and tools the function
    # set_model_response, whose call is its final answer; toolfleet does not offer it.
    "json_passing_agent": "output_schema with tools: no set_model_response function",
}
# Through Gemini only.
DIFFERS_ON_GEMINI: dict[str, str] = {}


def sections(lines: list[str]) -> dict[str, list[str]]:
    """The printed lines under each `=== sample` header."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("=== "):
            current = found.setdefault(line[4:], [])
        elif current is not None:
            current.append(line)
    return found


def check(sample: str, got: list[str]) -> None:
    want = EXPECTED[sample]
    assert len(got) == len(want), "\n".join(got)
    for line, expected in zip(got, want, strict=True):
        pattern = ".*".join(re.escape(part) for part in expected.split(ANY))
        assert re.fullmatch(pattern, line), f"{line!r} is not {expected!r}"


def group_param(group: tuple[str, ...], differs: dict[str, str]) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=differs[s]) for s in group if s in differs]
    return pytest.param(group, id="+".join(group), marks=marks)


@pytest.mark.parametrize("group", [group_param(g, DIFFERS) for g in GROUPS])
def test_on_the_offline_model(group: tuple[str, ...]) -> None:
    found = sections(run_program(f"{MODELS} {DRIVERS} {' '.join(group)}"))
    assert list(found) == list(group)
    for sample in group:
        check(sample, found[sample])


@pytest.mark.parametrize(
    "group",
    [group_param(g, DIFFERS_ON_GEMINI) for g in GROUPS if not set(g) & set(DIFFERS)],
)
def test_through_google_genai_against_the_gemini_stand_in(group: tuple[str, ...]) -> None:
    *lines, summary = run_program(f"{MODELS} {DRIVERS} {' '.join(group)}", "--gemini")
    found = sections(lines)
    assert list(found) == list(group)
    for sample in group:
        check(sample, found[sample])
    counted = STAND_IN_LINE.match(summary)
    assert counted is not None, summary
    # Every model call went over HTTP, each carrying the key the SDK was given.
    assert int(counted[1]) == int(counted[2]) == REQUESTS[group]


def test_every_port_is_run_here() -> None:
    """A sample added under examples/adk_samples/ without a test fails here."""
    ported = {
        name
        for name in os.listdir("examples/adk_samples")
        if os.path.isdir(f"examples/adk_samples/{name}") and not name.startswith("_")
    }
    assert ported == set(EXPECTED) == {s for g in GROUPS for s in g}
