"""Function calling through a Jinja chat template, against the official `openai` Python client.

The server (started by ci/checks.d/56-serve-openai.sh) serves SmolLM2-135M-Instruct with
`--chat-template-file $TEMPLATE` — Qwen2.5's template (calls in `<tool_call>` JSON blocks) or
Llama 3.1's (a bare `{"name", "parameters"}` object) — at $SERVE_URL as $SERVE_MODEL, no key.
The tools are rendered as transformers renders them (runner/tests/chat_templates.rs holds that
byte for byte); a 135M model rarely calls on its own, so these tests force calls with
`tool_choice` and check each call against its function's JSON Schema.
"""
import json
import os

import jsonschema
import openai
import pytest

URL = os.environ["SERVE_URL"]
MODEL = os.environ["SERVE_MODEL"]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "now", "description": "The time.",
                                          "parameters": {"type": "object", "properties": {},
                                                         "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, CLOCK)}


def client():
    return openai.OpenAI(api_key="unused", base_url=URL + "/v1", max_retries=0, timeout=600)


def check_calls(calls):
    assert calls, "no tool call"
    for c in calls:
        assert c.type == "function"
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])


def test_required_forces_calls_that_validate():
    r = client().chat.completions.create(
        model=MODEL, messages=ASK, tools=[WEATHER, CLOCK], tool_choice="required",
        max_tokens=200, temperature=0.8, seed=1)
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
    check_calls(r.choices[0].message.tool_calls)


def test_a_named_function_is_the_one_called_streamed_and_not():
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER, CLOCK], max_tokens=200, temperature=0.8,
              seed=2, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    r = client().chat.completions.create(**kw)
    calls = r.choices[0].message.tool_calls
    check_calls(calls)
    assert [c.function.name for c in calls] == ["get_weather"] * len(calls)
    streamed, finish = [], None
    for chunk in client().chat.completions.create(stream=True, **kw):
        if chunk.choices:
            streamed += chunk.choices[0].delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in streamed] == \
        [(c.function.name, c.function.arguments) for c in calls]


def test_parallel_tool_calls_false_forces_exactly_one_call_streamed_and_not():
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER, CLOCK], tool_choice="required",
              parallel_tool_calls=False, max_tokens=200, temperature=0.8, seed=5)
    r = client().chat.completions.create(**kw)
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
    calls = r.choices[0].message.tool_calls
    check_calls(calls)
    assert len(calls) == 1
    streamed = [d for chunk in client().chat.completions.create(stream=True, **kw)
                if chunk.choices for d in chunk.choices[0].delta.tool_calls or []]
    assert [(c.function.name, c.function.arguments) for c in streamed] == \
        [(calls[0].function.name, calls[0].function.arguments)]


def test_none_renders_no_tools_and_a_call_round_trips():
    auto = client().chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                            max_tokens=1, temperature=0)
    none = client().chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                            tool_choice="none", max_tokens=1, temperature=0)
    assert none.usage.prompt_tokens < auto.usage.prompt_tokens
    assert not none.choices[0].message.tool_calls
    # the call handed back with its result renders (as transformers renders it) and is answered
    history = ASK + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "18 degrees, sunny"},
    ]
    r = client().chat.completions.create(model=MODEL, messages=history, tools=[WEATHER],
                                         max_tokens=5, temperature=0)
    assert r.usage.prompt_tokens > auto.usage.prompt_tokens


def test_a_choice_naming_no_offered_function_is_a_400():
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(
            model=MODEL, messages=ASK, tools=[WEATHER], max_tokens=5,
            tool_choice={"type": "function", "function": {"name": "launch"}})
    assert e.value.param == "tool_choice"
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(model=MODEL, messages=ASK, max_tokens=5,
                                         tool_choice="required")
    assert e.value.param == "tool_choice"
