"""minirun-serve --artifact against the official `openai` Python client (pinned in venv-openai).

The server (started by ci/checks.d/56-serve-openai.sh) serves the verified DeepSeek V4 demo
artifact (minirun-demo's consumer copy, generated weights) at $SERVE_URL as $SERVE_MODEL, no key.
Its chat format is DeepSeek's own encoding (deepseek-recipe, chat mode): the generated weights
answer nonsense, so these tests check the protocol and the accounting, not the words.
"""
import os

import openai

URL = os.environ["SERVE_URL"]
MODEL = os.environ["SERVE_MODEL"]
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
]


def client():
    return openai.OpenAI(api_key="unused", base_url=URL + "/v1", max_retries=0, timeout=600)


def test_the_artifact_is_listed_as_verified_and_chat_capable():
    models = client().models.list()
    m = models.data[0]
    assert m.id == MODEL
    extra = m.model_extra["minirun"]
    assert extra["source"] == "artifact"
    assert extra["chat_capable"] is True
    assert extra["chat_template"] is True
    assert "@" in extra["origin"]


def test_a_chat_completion_in_deepseeks_format():
    r = client().chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, seed=1)
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.completion_tokens <= 3
    # BOS, the system text, <｜User｜>, the question, <｜Assistant｜>, </think>
    assert r.usage.prompt_tokens > 6


def test_the_same_request_streamed_gives_the_same_text():
    c = client()
    whole = c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, temperature=0)
    parts = c.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, temperature=0, stream=True
    )
    text = "".join(ch.choices[0].delta.content or "" for ch in parts if ch.choices)
    assert text == whole.choices[0].message.content
