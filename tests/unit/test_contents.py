"""The Contents toolfleet builds without validation equal google-genai's validated ones."""

from __future__ import annotations

from google.genai import types

from toolfleet.orchestrator.contents import call_part, content, response_part, text_part


def test_each_part_equals_and_serializes_as_the_validated_one() -> None:
    pairs = [
        (text_part("hello"), types.Part(text="hello")),
        (
            call_part("lookup", {"q": "x", "n": 2}),
            types.Part(function_call=types.FunctionCall(name="lookup", args={"q": "x", "n": 2})),
        ),
        (
            response_part("c1", "lookup", {"result": [1, 2]}),
            types.Part(
                function_response=types.FunctionResponse(
                    id="c1", name="lookup", response={"result": [1, 2]}
                )
            ),
        ),
    ]
    for built, validated in pairs:
        assert built == validated
        assert built.model_dump_json(exclude_defaults=True) == validated.model_dump_json(
            exclude_defaults=True
        )
        assert built.model_dump(exclude_none=True) == validated.model_dump(exclude_none=True)
    built_content = content("model", [p for p, _ in pairs])
    validated_content = types.Content(role="model", parts=[v for _, v in pairs])
    assert built_content == validated_content
    assert built_content.model_dump_json(exclude_defaults=True) == (
        validated_content.model_dump_json(exclude_defaults=True)
    )
    # What google-genai reads of them works alike.
    assert built_content.parts is not None and built_content.parts[0].text == "hello"
    assert types.Content.model_validate_json(built_content.model_dump_json()) == validated_content


def test_built_parts_share_nothing_with_each_other() -> None:
    first, second = text_part("a"), text_part("b")
    assert (first.text, second.text) == ("a", "b")
    assert first.model_fields_set == {"text"}
    one, two = call_part("f", {"n": 1}), call_part("g", {"n": 2})
    assert one.function_call is not two.function_call
    assert (one.function_call.name, two.function_call.name) == ("f", "g")  # type: ignore[union-attr]


def test_built_parts_behave_as_validated_ones_when_changed_and_copied() -> None:
    built = response_part("c1", "lookup", {"n": 1})
    validated = types.Part(
        function_response=types.FunctionResponse(id="c1", name="lookup", response={"n": 1})
    )
    for part in (built, validated):
        assert part.function_response is not None
        part.function_response.id = "c2"  # as the loop renames call ids
        copied = part.model_copy(deep=True)
        assert copied == part and copied.function_response is not part.function_response
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set == {"function_response"}
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built.__pydantic_private__ == validated.__pydantic_private__
    assert repr(built) == repr(validated)
