"""Chat-template oracle (issue 17): render each recorded template with transformers' own renderer
(`render_jinja_template`, what `PreTrainedTokenizerBase.apply_chat_template` calls) for fixed
conversations and write, or check, ci/oracles/chat_templates.recorded.json.

    python ci/oracles/chat_templates.py [--check]

Run in $CI_CACHE/venv-chat (transformers and jinja2 pinned in ci/install.d/10-python.sh). The
templates are the files in ci/oracles/chat_templates/ (sources and digests in its SOURCES.md);
transformers' `strftime_now` is fixed to FIXED_TIME (and minirun's in the test) so that a template
that prints today's date renders the same on both sides. `--check` re-renders and exits 1 if anything differs from the recorded file.
"""

import datetime
import hashlib
import json
import pathlib
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

HERE = pathlib.Path(__file__).resolve().parent
RECORDED = HERE / "chat_templates.recorded.json"
FIXED_TIME = 1767225600  # 2026-01-01T00:00:00Z

TEMPLATES = {
    "smollm2": ("HuggingFaceTB-SmolLM2-135M-Instruct.jinja", "<|im_start|>", "<|im_end|>"),
    "deepseek-r1-distill-qwen": (
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
    ),
    "mistral-small-3.1": ("mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", "<s>", "</s>"),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"),
    "llama-3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
}

# Functions offered, as transformers takes them (OpenAI's `tools` entries).
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city — in °C or °F.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "now", "description": "The time.",
                                          "parameters": {"type": "object", "properties": {}}}}


CASES = [
    ("one user turn", [{"role": "user", "content": "What is 2+2?"}], True),
    (
        "system and two turns",
        [
            {"role": "system", "content": "You answer in French."},
            {"role": "user", "content": "Say hello.\nThen stop."},
            {"role": "assistant", "content": "Bonjour."},
            {"role": "user", "content": "Encore — une fois 🙂"},
        ],
        True,
    ),
    (
        "finished conversation, reasoning in the answer",
        [
            {"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "<think>Because.</think>Because it is so."},
        ],
        False,
    ),
    (
        "two user turns in a row",
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        True,
    ),
    (
        "a role the template does not know",
        [{"role": "user", "content": "x"}, {"role": "narrator", "content": "y"}],
        True,
    ),
    (
        "tools offered",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        True,
        [WEATHER, CLOCK],
    ),
    (
        "a tool call and its result",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call12345",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call12345", "content": "18 degrees, sunny"},
        ],
        True,
        [WEATHER],
    ),
]


class _FixedClock(datetime.datetime):
    """transformers' `strftime_now` global formats `datetime.now()` of its module: fix it."""

    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.fromtimestamp(FIXED_TIME, datetime.timezone.utc).replace(tzinfo=None)


chat_template_utils.datetime = _FixedClock


def render_all():
    out = {
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "fixed_time": FIXED_TIME,
        "templates": {},
    }
    for name, (file, bos, eos) in TEMPLATES.items():
        text = (HERE / "chat_templates" / file).read_text(encoding="utf-8")
        cases = []
        for case, messages, gen, *tools in CASES:
            tools = tools[0] if tools else None
            rec = {"case": case, "messages": messages, "add_generation_prompt": gen}
            if tools:
                rec["tools"] = tools
            try:
                rec["rendered"] = render_jinja_template(
                    conversations=[messages],
                    tools=tools,
                    chat_template=text,
                    add_generation_prompt=gen,
                    bos_token=bos,
                    eos_token=eos,
                )[0][0]
            except Exception as e:  # the template refused the conversation
                rec["error"] = str(e)
                rec["error_type"] = type(e).__name__
            cases.append(rec)
        out["templates"][name] = {
            "file": file,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "bos_token": bos,
            "eos_token": eos,
            "cases": cases,
        }
    return out


def main():
    got = render_all()
    text = json.dumps(got, indent=1, ensure_ascii=False) + "\n"
    if "--check" in sys.argv:
        want = RECORDED.read_text(encoding="utf-8")
        if want != text:
            print("chat_templates.recorded.json differs from a fresh rendering", file=sys.stderr)
            sys.exit(1)
        print(f"chat templates: {len(got['templates'])} templates x {len(CASES)} cases as recorded")
        return
    RECORDED.write_text(text, encoding="utf-8")
    print(f"wrote {RECORDED}")


if __name__ == "__main__":
    main()
