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
    return {
        "renderer": f"deepseek-recipe {dr.__version__} DeepseekV4Encoding, thinking_mode=False, and thinking_mode=True where a case names its reasoning effort",
        "cases": out,
    }


def main():
    got = render()
    text = json.dumps(got, ensure_ascii=False, indent=1) + "\n"
    if "--check" in sys.argv:
        want = RECORDED.read_text(encoding="utf-8")
        if want != text:
            print("deepseek-recipe renders differently from ci/oracles/deepseek_v4_chat.recorded.json")
            for g, w in zip(got["cases"], json.loads(want)["cases"]):
                if g != w:
                    print(f"  {g['name']}: {g['prompt']!r} != recorded {w['prompt']!r}")
            sys.exit(1)
        print(f"{len(got['cases'])} conversations render as recorded ({got['renderer']})")
    else:
        RECORDED.write_text(text, encoding="utf-8")
        print(f"wrote {RECORDED}")


main()
