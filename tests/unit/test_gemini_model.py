"""GeminiModel with the real google-genai client against a local fake Gemini REST server."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
from google.genai import types

from tests.gemini_stand_in import GENERATE_PATH, FakeGemini, error_body, serve_gemini
from tests.local_http import Recorded
from tests.support import InProcessRunner, in_memory_spans
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.gemini import GeminiModel
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared import tracing
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError, ModelError
from toolfleet.shared.keys import Keys
from toolfleet.shared.metrics import metrics
from toolfleet.shared.tools import FunctionTool

MODEL = "gemini-2.5-flash"


def stand_in_model(fake: FakeGemini, **kwargs: Any) -> GeminiModel:
    kwargs.setdefault("api_key", "test-key")
    return GeminiModel(MODEL, base_url=fake.base_url, initial_delay_s=0.01, **kwargs)


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with serve_gemini() as fake:
        yield fake


def _text_reply(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ]
    }


def _two_parallel_calls_reply() -> dict[str, Any]:
    """A turn of two parallel calls: the first with an id and a thought signature, the
    second with neither (as Gemini sends them)."""
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {
                                "id": "call-abc",
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                            },
                            "thoughtSignature": _b64(b"sig-1"),
                        },
                        {"functionCall": {"name": "get_time", "args": {"tz": "UTC"}}},
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }


def _declaration(sent: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, schema) of a function declaration as sent on the wire.

    google-genai 3.x dumps FunctionDeclaration objects without camel-casing their
    keys, so the schema goes out as "parameters_json_schema"; the API's proto3
    JSON parser accepts that as well as "parametersJsonSchema".
    """
    schema_keys = {"parametersJsonSchema", "parameters_json_schema"} & sent.keys()
    assert len(schema_keys) == 1, sent
    assert set(sent) == {"name", "description", *schema_keys}, sent
    return sent["name"], sent["description"], sent[schema_keys.pop()]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        units: Temperature units.
    """
    return {"city": city, "units": units}


def get_time(tz: str) -> str:
    """Current time in a time zone.

    Args:
        tz: IANA time zone name.
    """
    return tz


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def _request(contents: list[types.Content], tools: list[FunctionTool]) -> ModelRequest:
    return ModelRequest("weather", "You answer weather questions.", contents, tools)


async def test_parallel_calls_round_trip_ids_and_thought_signature(gemini: FakeGemini) -> None:
    gemini.reply(_two_parallel_calls_reply())
    gemini.reply(_text_reply("Sunny in Paris; it is noon UTC."))
    tools = [FunctionTool(get_weather), FunctionTool(get_time)]
    model = stand_in_model(
        gemini,
    )
    user = _user("Weather in Paris, and the time in UTC?")

    turn = await model.generate(_request([user], tools))

    assert model.name == MODEL
    assert turn.role == "model"
    parts = turn.parts or []
    calls = [p.function_call for p in parts]
    assert [(c.id, c.name, c.args) for c in calls if c is not None] == [
        ("call-abc", "get_weather", {"city": "Paris"}),
        (None, "get_time", {"tz": "UTC"}),
    ]
    assert parts[0].thought_signature == b"sig-1"
    assert parts[1].thought_signature is None

    # What the orchestrator loop does: name the id-less call, answer both in call order.
    second_call = parts[1].function_call
    assert second_call is not None
    second_call.id = "tf-123"
    responses = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="call-abc", name="get_weather", response={"temp_c": 21}
                )
            ),
            types.Part(
                function_response=types.FunctionResponse(
                    id="tf-123", name="get_time", response={"time": "12:00"}
                )
            ),
        ],
    )
    final = await model.generate(_request([user, turn, responses], tools))

    assert [p.text for p in final.parts or []] == ["Sunny in Paris; it is noon UTC."]
    # Automatic function calling is off: exactly one HTTP request per generate().
    assert len(gemini.requests) == 2
    # The request's contents are not modified in place.
    assert second_call.id == "tf-123"
    assert responses.parts is not None and responses.parts[1].function_response is not None
    assert responses.parts[1].function_response.id == "tf-123"

    first, second = gemini.requests
    for recorded in gemini.requests:
        match = GENERATE_PATH.match(recorded.path)
        assert match is not None and match["model"] == MODEL
        # The key travels in a header, never in the URL.
        assert recorded.headers.get("x-goog-api-key") == "test-key"
        assert "test-key" not in recorded.path
    assert first.body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Paris, and the time in UTC?"}]}
    ]

    sent_user, sent_model, sent_responses = second.body["contents"]
    assert sent_user == first.body["contents"][0]
    assert sent_model["role"] == "model"
    assert sent_model["parts"][0] == {
        "functionCall": {"id": "call-abc", "name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": _b64(b"sig-1"),
    }
    # Gemini never saw "tf-123": the call goes back exactly as it came, without an id.
    assert sent_model["parts"][1] == {"functionCall": {"name": "get_time", "args": {"tz": "UTC"}}}
    assert sent_responses == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "call-abc",
                    "name": "get_weather",
                    "response": {"temp_c": 21},
                }
            },
            {"functionResponse": {"name": "get_time", "response": {"time": "12:00"}}},
        ],
    }

    for recorded in gemini.requests:
        body = recorded.body
        assert body["systemInstruction"]["parts"] == [{"text": "You answer weather questions."}]
        assert [_declaration(d) for d in body["tools"][0]["functionDeclarations"]] == [
            (t.name, t.description, t.parameters_json_schema) for t in tools
        ]
        assert len(body["tools"]) == 1
        # Function calling config is left to the server's default (AUTO).
        assert "toolConfig" not in body
    _, description, schema = _declaration(second.body["tools"][0]["functionDeclarations"][0])
    assert description.startswith("Current weather for a city.")
    assert set(schema["properties"]) == {"city", "units"}


async def test_thought_signature_bytes_survive_round_trip(gemini: FakeGemini) -> None:
    # Bytes whose standard base64 has '+' and '/': the SDK reads standard base64
    # but writes the URL-safe alphabet ('-', '_'); both decode to the same bytes.
    signature = b"\xfb\xff\xfe-sig"
    gemini.reply(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {"name": "get_time", "args": {"tz": "UTC"}},
                                "thoughtSignature": _b64(signature),
                            }
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    gemini.reply(_text_reply("ok"))
    model = stand_in_model(
        gemini,
    )
    user = _user("time?")
    turn = await model.generate(_request([user], [FunctionTool(get_time)]))
    assert turn.parts is not None and turn.parts[0].thought_signature == signature
    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="tf-1", name="get_time", response={"result": "12:00"}
                )
            )
        ],
    )

    await model.generate(_request([user, turn, answer], [FunctionTool(get_time)]))

    sent = gemini.requests[1].body["contents"][1]["parts"][0]["thoughtSignature"]
    assert base64.urlsafe_b64decode(sent) == signature


async def test_retries_429_then_succeeds(gemini: FakeGemini) -> None:
    gemini.reply(error_body(429, "quota", "RESOURCE_EXHAUSTED"), status=429)
    gemini.reply(_text_reply("hello"))

    turn = await stand_in_model(
        gemini,
    ).generate(_request([_user("hi")], []))

    assert [p.text for p in turn.parts or []] == ["hello"]
    assert len(gemini.requests) == 2
    assert gemini.requests[0].body == gemini.requests[1].body
    # No tools: no tools field and no system instruction left empty.
    assert "tools" not in gemini.requests[1].body


async def test_retries_stop_after_attempts(gemini: FakeGemini) -> None:
    for _ in range(3):
        gemini.reply(error_body(503, "overloaded", "UNAVAILABLE"), status=503)

    with pytest.raises(ModelError, match=r"after 2 attempts: HTTP 503 UNAVAILABLE: overloaded"):
        await stand_in_model(gemini, retry_attempts=2).generate(_request([_user("hi")], []))

    assert len(gemini.requests) == 2


async def test_an_answer_nested_too_deep_to_parse_is_a_model_error(gemini: FakeGemini) -> None:
    # Function-call arguments 1,200 levels deep: the SDK's json.loads cannot parse them.
    deep = '{"k": ' * 1_199 + "{}" + "}" * 1_199
    call = f'{{"functionCall": {{"name": "get_weather", "args": {{"city": {deep}}}}}}}'
    content = f'{{"role": "model", "parts": [{call}]}}'
    gemini.reply(f'{{"candidates": [{{"content": {content}, "finishReason": "STOP"}}]}}'.encode())

    with pytest.raises(ModelError, match="nested too deep to parse") as info:
        await stand_in_model(gemini).generate(_request([_user("hi")], []))
    assert "TOOLFLEET_MAX_JSON_DEPTH" in str(info.value)
    assert len(gemini.requests) == 1  # not retried: the same answer would come back


async def test_400_is_not_retried(gemini: FakeGemini) -> None:
    gemini.reply(error_body(400, "Request contains an invalid argument.", "INVALID_ARGUMENT"), 400)
    gemini.reply(_text_reply("never sent"))

    with pytest.raises(ModelError, match=r"HTTP 400 INVALID_ARGUMENT") as info:
        await stand_in_model(
            gemini,
        ).generate(_request([_user("hi")], []))

    assert "invalid argument" in str(info.value)
    assert "test-key" not in str(info.value)
    assert info.value.__cause__ is not None
    assert len(gemini.requests) == 1


async def test_blocked_prompt_raises_with_block_reason(gemini: FakeGemini) -> None:
    gemini.reply({"promptFeedback": {"blockReason": "SAFETY"}})

    with pytest.raises(ModelError, match=r"prompt blocked: SAFETY"):
        await stand_in_model(
            gemini,
        ).generate(_request([_user("something unsafe")], []))

    assert len(gemini.requests) == 1


async def test_candidate_without_content_raises_with_finish_reason(gemini: FakeGemini) -> None:
    gemini.reply({"candidates": [{"finishReason": "SAFETY"}]})

    with pytest.raises(ModelError, match=r"empty turn \(finish_reason=SAFETY\)"):
        await stand_in_model(
            gemini,
        ).generate(_request([_user("something unsafe")], []))


async def test_unreachable_server_raises_modelerror_body() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = GeminiModel(
        MODEL,
        api_key="test-key",
        base_url=f"http://127.0.0.1:{port}",
        retry_attempts=2,
        initial_delay_s=0.01,
    )

    with pytest.raises(ModelError, match=r"could not reach the API after 2 attempts") as info:
        await model.generate(_request([_user("hi")], []))

    assert "ConnectError" in str(info.value)


async def test_api_key_read_from_environment(
    gemini: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "env-key")
    gemini.reply(_text_reply("hello"))

    await GeminiModel(MODEL, base_url=gemini.base_url).generate(_request([_user("hi")], []))

    assert gemini.requests[0].headers.get("x-goog-api-key") == "env-key"


def test_missing_api_key_is_a_configerror_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)

    with pytest.raises(ConfigError, match="GOOGLE_API_KEY") as info:
        GeminiModel(MODEL)

    assert "GEMINI_API_KEY" in str(info.value)


async def test_the_loop_drives_gemini_through_a_parallel_turn(
    gemini: FakeGemini, store: SessionStore
) -> None:
    """The whole loop, not a hand-made exchange: ids, signature and responses on the wire."""
    gemini.reply(_two_parallel_calls_reply())
    gemini.reply(_text_reply("Sunny in Paris; it is UTC there."))
    model = stand_in_model(
        gemini,
    )
    agent = Agent(
        name="weather", instruction="Be brief.", tools=[get_weather, get_time], model=model
    )
    session = await store.create("app", "u1")
    invocation = Invocation(
        agent, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )

    updates = [u async for u in run_invocation(invocation, _user("Paris weather and UTC time?"))]

    final = [u for u in updates if isinstance(u, Event) and u.author == "weather"][-1]
    assert final.content is not None and final.content.parts is not None
    assert final.content.parts[0].text == "Sunny in Paris; it is UTC there."
    assert len(gemini.requests) == 2
    sent_model, sent_responses = gemini.requests[1].body["contents"][1:]
    assert sent_model["parts"][0]["thoughtSignature"] == _b64(b"sig-1")
    assert sent_model["parts"][0]["functionCall"]["id"] == "call-abc"
    assert "id" not in sent_model["parts"][1]["functionCall"]
    weather, clock = (p["functionResponse"] for p in sent_responses["parts"])
    assert weather == {
        "id": "call-abc",
        "name": "get_weather",
        "response": {"city": "Paris", "units": "celsius"},
    }
    assert clock == {"name": "get_time", "response": {"result": "UTC"}}
    # The session keeps the loop's own id for the id-less call, and the signature.
    stored = await store.get(session.key)
    model_content = stored.events[1].content
    assert model_content is not None and model_content.parts is not None
    assert model_content.parts[0].thought_signature == b"sig-1"
    call_id = model_content.parts[1].function_call.id  # type: ignore[union-attr]
    assert call_id is not None and call_id.startswith("tf-")


@dataclass
class StallingGemini:
    """Takes every request and holds it without answering until `release` is set."""

    port: int
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[Recorded] = field(default_factory=list)
    finished: int = 0  # requests whose handler stopped holding
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _StallingHandler(BaseHTTPRequestHandler):
    server: _StallingServer

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            fake.requests.append(Recorded(self.path, dict(self.headers.items()), body))
        # A hung model: no answer until the test's cleanup sets release (bounded, so a
        # broken test cannot hang the run). Then close without a reply: the client is gone.
        fake.release.wait(timeout=30)
        with fake.lock:
            fake.finished += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _StallingServer(ThreadingHTTPServer):
    fake: StallingGemini


@pytest.fixture
def stalling_gemini() -> Iterator[StallingGemini]:
    server = _StallingServer(("127.0.0.1", 0), _StallingHandler)
    server.fake = StallingGemini(port=server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server.fake
    finally:
        server.fake.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


async def test_hung_call_times_out_after_retries(stalling_gemini: StallingGemini) -> None:
    model = GeminiModel(
        MODEL,
        api_key="test-key",
        base_url=stalling_gemini.base_url,
        retry_attempts=2,
        initial_delay_s=0.01,
        timeout_s=0.5,
    )

    with pytest.raises(ModelError) as info:
        await model.generate(_request([_user("hi")], []))

    message = str(info.value)
    assert "did not answer within 0.5 s on any of 2 attempts" in message
    assert "TOOLFLEET_MODEL_TIMEOUT_S" in message
    assert "test-key" not in message
    assert info.value.__cause__ is not None
    # Both attempts were sent and both gave up while the server was still holding them:
    # the client's timeout ended the call, not an answer.
    with stalling_gemini.lock:
        assert len(stalling_gemini.requests) == 2
        assert stalling_gemini.finished == 0
    assert stalling_gemini.requests[0].body == stalling_gemini.requests[1].body
    # The limit travels with the request too (whole seconds, rounded up).
    assert stalling_gemini.requests[0].headers.get("X-Server-Timeout") == "1"


def test_model_timeout_setting_reaches_gemini(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from toolfleet.orchestrator.agents.model_choice import choose_model

    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.setenv("TOOLFLEET_MODEL_TIMEOUT_S", "7.5")
    settings = Settings()
    assert settings.model_timeout_s == 7.5
    assert Settings.model_fields["model_timeout_s"].default == 120.0

    model = choose_model(Agent(name="a"), settings)

    assert isinstance(model, GeminiModel) and model.timeout_s == 7.5
    for bad in ("0", "-1", "inf"):
        monkeypatch.setenv("TOOLFLEET_MODEL_TIMEOUT_S", bad)
        with pytest.raises(ValidationError, match="model_timeout_s"):
            Settings()
    with pytest.raises(ConfigError, match="TOOLFLEET_MODEL_TIMEOUT_S"):
        GeminiModel(MODEL, api_key="test-key", timeout_s=0)


async def test_token_usage_goes_to_the_model_calls_span_and_the_tokens_counter(
    gemini: FakeGemini,
) -> None:
    reply = _text_reply("hello")
    reply["usageMetadata"] = {"promptTokenCount": 42, "candidatesTokenCount": 7}
    reply["modelVersion"] = "gemini-2.5-flash-001"
    gemini.reply(reply)
    tokens = metrics().model_tokens
    before = tokens.labels(MODEL, "input")._value.get(), tokens.labels(MODEL, "output")._value.get()
    with in_memory_spans() as spans:
        span = tracing.start("chat " + MODEL, {"gen_ai.operation.name": "chat"})
        with tracing.current(span):
            await stand_in_model(gemini).generate(_request([_user("hi")], []))
        tracing.finish(span)

    (done,) = spans.get_finished_spans()
    assert done.attributes["gen_ai.usage.input_tokens"] == 42
    assert done.attributes["gen_ai.usage.output_tokens"] == 7
    assert done.attributes["gen_ai.response.model"] == "gemini-2.5-flash-001"
    after = tokens.labels(MODEL, "input")._value.get(), tokens.labels(MODEL, "output")._value.get()
    assert (after[0] - before[0], after[1] - before[1]) == (42, 7)
