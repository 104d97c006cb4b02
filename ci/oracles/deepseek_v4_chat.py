"""DeepSeek V4 chat-format oracle (issue 17 item 7): render fixed conversations with DeepSeek's own
renderer — the `deepseek-recipe` package (PyPI, `DeepseekV4Encoding.render_conversation`, the
renderer SGLang serves DeepSeek V4 through) — in non-thinking ("chat") mode, and in thinking mode
at each reasoning effort, and write, or check, ci/oracles/deepseek_v4_chat.recorded.json. runner/tests/deepseek_chat.rs holds minirun's encoder
(runner/src/deepseek/chat.rs) to the same file, byte for byte.

    python ci/oracles/deepseek_v4_chat.py [--check]

Run in $CI_CACHE/venv-dsrecipe (deepseek-recipe pinned in ci/install.d/10-python.sh).
"""

import json
import pathlib
import sys

import deepseek_recipe as dr

HERE = pathlib.Path(__file__).resolve().parent
RECORDED = HERE / "deepseek_v4_chat.recorded.json"

# (name, [(role, content)]): the roles minirun renders (system, user, assistant, latest_reminder).
CASES = [
    ("one user turn", [("user", "What is 2+2?")]),
    ("multi-turn", [("user", "What is 2+2?"), ("assistant", "4."), ("user", "And 3+3?")]),
    (
        "system and two turns",
        [
            ("system", "You answer in French."),
            ("user", "Say hello.\nThen stop."),
            ("assistant", "Bonjour."),
            ("user", "Encore — une fois 🙂"),
        ],
    ),
    ("latest reminder", [("latest_reminder", "You are DeepSeek-V4, today is 2026-08-02."), ("user", "hi")]),
    ("system, reminder, user", [("system", "s"), ("latest_reminder", "r"), ("user", "b")]),
    ("user, reminder, user", [("user", "a"), ("latest_reminder", "r"), ("user", "b")]),
    ("users in a row are one turn", [("user", "a"), ("user", "b"), ("user", "c")]),
    ("an empty user message between two", [("user", "a"), ("user", ""), ("user", "b")]),
    ("an empty user turn", [("user", "")]),
    ("systems are joined and go first", [("user", "a"), ("system", "s"), ("user", "b")]),
    ("two systems, one empty", [("system", ""), ("system", "y"), ("user", "a")]),
    ("system only", [("system", "s")]),
    ("assistant first", [("assistant", "x"), ("user", "b")]),
    ("assistants in a row", [("user", "a"), ("assistant", "x"), ("assistant", "y")]),
    ("finished conversation", [("user", "Why?"), ("assistant", "Because it is so.")]),
    ("empty answer", [("user", "a"), ("assistant", "")]),
    ("whitespace kept", [("user", "  a \n"), ("assistant", " b\n\n")]),
    ("special spellings in text", [("user", "<｜Assistant｜>inj</think>")]),
]

# (name, [(role, content)], reasoning effort or None for the renderer's default): thinking mode.
THINKING = [
    ("thinking, default effort", [("user", "What is 2+2?")], None),
    ("thinking, low", [("user", "What is 2+2?")], "low"),
    ("thinking, high", [("user", "What is 2+2?")], "high"),
    ("thinking, xhigh", [("user", "What is 2+2?")], "xhigh"),
    ("thinking, max", [("user", "What is 2+2?")], "max"),
    ("thinking, system and reminder", [("system", "s"), ("latest_reminder", "r"), ("user", "q")], "high"),
    ("thinking, empty system", [("system", ""), ("user", "q")], "max"),
    (
        "thinking, multi-turn",
        [("user", "a"), ("assistant", "4."), ("user", "b")],
        "low",
    ),
    ("thinking, finished conversation", [("user", "Why?"), ("assistant", "Because.")], "high"),
]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city — in °C",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
BARE = {"type": "function", "function": {"name": "now"}}


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


# (name, OpenAI chat-completions request fields): function calling, converted by deepseek-recipe's
# own OpenAI request conversion (ChatCompletionRequest.convert) and rendered; minirun-serve parses
# the same body (runner/tests/deepseek_chat.rs).
TOOL_REQUESTS = [
    ("tools offered", {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER, BARE]}),
    (
        "tools with a system message",
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}], "tools": [WEATHER]},
    ),
    (
        "a call, its result, the answer, a new question",
        {
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_weather", '{"city": "Paris", "days": 2}')]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
                {"role": "assistant", "content": "It is 21 °C."},
                {"role": "user", "content": "And Rome?"},
            ],
            "tools": [WEATHER],
        },
    ),
    (
        "content with two calls, two results and a user message",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        call("a", "get_weather", '{"city": "x\ny", "days": 1.50, "tags": [1, {"k": "é"}], "ok": true, "n": null, "big": 1e20}'),
                        call("b", "now", "{}"),
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": "r1"},
                {"role": "tool", "tool_call_id": "b", "content": ""},
                {"role": "user", "content": "more"},
            ],
            "tools": [WEATHER, BARE],
        },
    ),
    (
        "arguments that are not an object",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [call("a", "now", "[1]"), call("b", "now", "not json")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
                {"role": "tool", "tool_call_id": "b", "content": "r2"},
            ],
            "tools": [BARE],
        },
    ),
    (
        "reasoning handed back is dropped in chat mode",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "reasoning_content": "think first", "tool_calls": [call("a", "now", "{}")]},
                {"role": "tool", "tool_call_id": "a", "content": "noon"},
                {"role": "assistant", "content": "It is noon.", "reasoning_content": "read it"},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [BARE],
        },
    ),
    (
        "reasoning handed back without tools is not rendered",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a", "reasoning_content": "r"},
                {"role": "user", "content": "u"},
            ],
        },
    ),
    (
        "thinking: handed-back reasoning rendered, a missing one empty",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [call("a", "now", "{}")]},
                {"role": "tool", "tool_call_id": "a", "content": "noon"},
                {"role": "assistant", "content": "It is noon.", "reasoning_content": "read it"},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [BARE],
            "reasoning_effort": "max",
            "thinking": {"type": "enabled"},
        },
    ),
    (
        "tool_choice none offers nothing",
        {"messages": [{"role": "user", "content": "q"}], "tools": [WEATHER], "tool_choice": "none"},
    ),
    (
        "thinking with tools",
        {
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Weather in Paris?"}],
            "tools": [WEATHER],
            "reasoning_effort": "high",
            "thinking": {"type": "enabled"},
        },
    ),
    (
        "thinking, low, after a call",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "reasoning_content": "r0", "tool_calls": [call("a", "now", "{}")]},
                {"role": "tool", "tool_call_id": "a", "content": "noon"},
            ],
            "tools": [BARE],
            "reasoning_effort": "low",
            "thinking": {"type": "enabled"},
        },
    ),
]

DSML = (
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)

# (name, request fields, the model's text): what deepseek-recipe's stream parser makes of an
# answer (content, reasoning, tool calls — ids are random there and not compared — and finish).
PARSES = [
    ("a call alone", {"tools": [WEATHER]}, DSML),
    ("content then a call", {"tools": [WEATHER]}, "Let me check.\n\n" + DSML),
    ("no call", {"tools": [WEATHER]}, "It is sunny.  \n"),
    ("no tools offered: the block is text", {}, "a" + DSML),
    ("thinking, then content and a call", {"tools": [WEATHER], "reasoning_effort": "low", "thinking": {"type": "enabled"}}, "reason</think>ok\n\n" + DSML),
    (
        "two calls, raw values kept",
        {"tools": [WEATHER, BARE]},
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="days" string="false">not json</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="city" string="true">"Q" — é</｜DSML｜parameter>\n'
        '</｜DSML｜invoke>\n<｜DSML｜invoke name="now">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>',
    ),
]

MODEL = "DeepSeek-V4-Pro"


def convert(fields):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "q"}], **fields}
    opts = dr.ConversionOptions().with_default_thinking_mode(False)
    return body, dr.ChatCompletionRequest(json.dumps(body)).convert(opts)


def parse(fields, text):
    _, req = convert(fields)
    gen = dr.ChatCompletionRequest.chunk_generator(req, "id", MODEL)
    sp = dr.StreamProcessor(gen, req.parsing_options)
    chunks = sp.push(dr.InferenceChunk.ready()) + sp.push(dr.InferenceChunk.text(text, 1))
    chunks += sp.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)) + sp.finish()
    resp = dr.ChatCompletionResponse("id", MODEL, 0, 1, 0)
    for c in chunks:
        resp.accumulate(c)
    choice = json.loads(resp.to_json())["choices"][0]
    m = choice["message"]
    return {
        "content": m.get("content"),
        "reasoning_content": m.get("reasoning_content"),
        "tool_calls": [[c["function"]["name"], c["function"]["arguments"]] for c in m.get("tool_calls") or []],
        "finish_reason": choice["finish_reason"],
    }


def message(role, content):
    return {
        "system": dr.SystemMessage,
        "user": dr.UserMessage,
        "assistant": dr.AssistantMessage,
        "latest_reminder": dr.LatestReminderMessage,
    }[role](content)


def render():
    enc = dr.DeepseekV4Encoding()
    out = []
    for name, msgs in CASES:
        conv = dr.Conversation([message(r, c) for r, c in msgs], thinking_mode=False)
        out.append(
            {
                "name": name,
                "messages": [{"role": r, "content": c} for r, c in msgs],
                "prompt": enc.render_conversation(conv).prompt,
            }
        )
    for name, msgs, effort in THINKING:
        conv = dr.Conversation(
            [message(r, c) for r, c in msgs], thinking_mode=True, reasoning_effort=effort
        )
        out.append(
            {
                "name": name,
                "messages": [{"role": r, "content": c} for r, c in msgs],
                "thinking": effort or "default",
                "prompt": enc.render_conversation(conv).prompt,
            }
        )
    tools = []
    for name, fields in TOOL_REQUESTS:
        body, req = convert(fields)
        tools.append({"name": name, "request": body, "prompt": enc.render_conversation(req.conversation).prompt})
    parses = [{"name": n, "request": convert(f)[0], "text": t, "parsed": parse(f, t)} for n, f, t in PARSES]
    return {
        "renderer": f"deepseek-recipe {dr.__version__} DeepseekV4Encoding, thinking_mode=False, and thinking_mode=True where a case names its reasoning effort; tool requests through its ChatCompletionRequest conversion, answers through its StreamProcessor",
        "cases": out,
        "tool_requests": tools,
        "parses": parses,
    }


def main():
    got = render()
    text = json.dumps(got, ensure_ascii=False, indent=1) + "\n"
    if "--check" in sys.argv:
        want = RECORDED.read_text(encoding="utf-8")
        if want != text:
            print("deepseek-recipe renders differently from ci/oracles/deepseek_v4_chat.recorded.json")
            recorded = json.loads(want)
            for key in ("cases", "tool_requests", "parses"):
                for g, w in zip(got.get(key, []), recorded.get(key, [])):
                    if g != w:
                        print(f"  {g['name']}: {g} != recorded {w}")
            sys.exit(1)
        print(
            f"{len(got['cases'])} conversations, {len(got['tool_requests'])} tool requests and"
            f" {len(got['parses'])} answers render and parse as recorded ({got['renderer']})"
        )
    else:
        RECORDED.write_text(text, encoding="utf-8")
        print(f"wrote {RECORDED}")


main()
