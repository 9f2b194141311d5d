"""The scripted models that run the ported ADK examples, by agent name.

The same scripts answer as the offline model (TOOLFLEET_OFFLINE_MODELS names this
dict) and behind the Gemini REST stand-in (tests/gemini_stand_in.py), so each example
runs both ways unedited. Workers running agent tools import this module too.
"""

from __future__ import annotations

from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, Step, call, say

QUANTUM_SUMMARY = (
    "Quantum computers use qubits, which superpose and entangle, to solve some problems "
    "far faster than classical computers; the technology is still young."
)


def _after_approval(view: ScriptView) -> Step:
    if view.response("ask_for_approval").get("status") == "approved":
        return call(Call("reimburse", {"purpose": "meals", "amount": 200}))
    return say("The manager rejected your reimbursement of $200 for meals.")


def _waiting(view: ScriptView) -> Step:
    ticket = view.response("ask_for_approval")
    return say(
        f"Your $200 reimbursement is waiting for {ticket['approver']} ({ticket['ticket-id']})."
    )


def _stock_answer(view: ScriptView) -> Step:
    return say(f"The current price of GOOG is {view.response('get_stock_price')['result']}.")


def _analysis_answer(view: ScriptView) -> Step:
    done = view.response("process_document")
    return say(f"Saved the analysis as {done['analysis_artifact']} (version {done['version']}).")


def _calculator_answer(view: ScriptView) -> Step:
    total = view.response("calculator_add_numbers")["result"]
    greeting = view.response("greet_user")["greeting"]
    return say(f"{greeting} 5 + 3 = {total}.")


MODELS: dict[str, ScriptedModel] = {
    "weather_sentiment_agent": ScriptedModel(
        [
            call(Call("get_weather_report", {"city": "London"})),
            lambda v: say(v.response("get_weather_report")["report"]),
        ]
    ),
    "reimbursement_agent": ScriptedModel(
        by_message={
            r"50\$": [
                call(Call("reimburse", {"purpose": "meals", "amount": 50})),
                say("Reimbursed $50 for meals: approved automatically."),
            ],
            r"200\$": [
                call(Call("ask_for_approval", {"purpose": "meals", "amount": 200})),
                _waiting,
                _after_approval,
                say("The manager approved: $200 for meals is reimbursed."),
            ],
        }
    ),
    "stock_agent": ScriptedModel(
        [call(Call("get_stock_price", {"symbol": "GOOG"})), _stock_answer]
    ),
    "root_agent": ScriptedModel(
        [
            call(Call("summary_agent", lambda v: {"request": v.user_text})),
            lambda v: say(f"Summary: {v.response('summary_agent')['result']}"),
        ]
    ),
    "summary_agent": ScriptedModel([say(QUANTUM_SUMMARY)]),
    "main_agent": ScriptedModel(
        [call(Call("check_and_transfer", lambda v: {"query": v.user_text}))]
    ),
    "support_agent": ScriptedModel(
        [say("I am the support handler for urgent issues: let us get you logged in again.")]
    ),
    "preference_agent": ScriptedModel(
        [
            call(Call("update_user_preference", {"preference": "theme", "value": "dark"})),
            say("Saved: you prefer the dark theme."),
        ]
    ),
    "document_agent": ScriptedModel(
        by_message={
            "remember": [say("Noted.")],
            "analy[sz]e": [
                call(
                    Call(
                        "process_document",
                        {"document_name": "report.txt", "analysis_query": "revenue"},
                    )
                ),
                _analysis_answer,
            ],
        }
    ),
    "CalculatorAgent": ScriptedModel(
        [
            call(
                Call("calculator_add_numbers", {"a": 5, "b": 3}),
                Call("greet_user", {"name": "Ann"}),
            ),
            _calculator_answer,
        ]
    ),
}
