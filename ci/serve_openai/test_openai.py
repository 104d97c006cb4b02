"""minirun-serve against the official `openai` Python client (pinned in venv-openai).

The server (started by ci/checks.d/56-serve-openai.sh, SmolLM2-135M-Instruct Q4_1 on the wgpu
engine, an API key, --queue 1) is at $SERVE_URL, its model id is $SERVE_MODEL and the key is in
the file $SERVE_KEY_FILE; it loaded a prompt cache of QUESTION at start. Raw HTTP (malformed JSON, oversized bodies, the 503 header) goes through
the standard library's http.client, a second independent client.
"""
import http.client
import json
import os
import re
import threading
import time
import urllib.parse

import jsonschema
import openai
import pydantic
import pytest

URL = os.environ["SERVE_URL"]
MODEL = os.environ["SERVE_MODEL"]
with open(os.environ["SERVE_KEY_FILE"]) as f:
    KEY = f.read().strip()
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def client(**kw):
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(api_key=KEY, base_url=URL + "/v1", **kw)


def raw(method, path, body=None, headers=None, key=KEY):
    u = urllib.parse.urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def health():
    status, _, data = raw("GET", "/health", key=None)
    assert status == 200
    return json.loads(data)


def test_0_the_prompt_cache_loaded_at_start_serves_the_first_request():
    # The script made the cache from this very question (minirun-run --chat -n 0 --prompt-cache).
    assert health()["generations"] == 0
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=2, temperature=0)
    assert health()["reused_prompt_tokens"] == r.usage.prompt_tokens - 1


def test_models_lists_the_served_model():
    models = client().models.list()
    ids = [m.id for m in models.data]
    assert ids == [MODEL]
    extra = models.data[0].model_extra["minirun"]
    assert extra["chat_capable"] is True and extra["chat_template"] is True
    assert extra["source"] == "gguf" and extra["context"] > 0


def test_chat_non_streamed_has_text_usage_and_finish_reason():
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=12, temperature=0)
    c = r.choices[0]
    assert r.object == "chat.completion" and r.model == MODEL
    assert c.message.role == "assistant" and c.message.content.strip()
    assert c.finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 12
    assert r.usage.prompt_tokens > 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # Greedy: the same request gives the same answer, and reuses the cached prompt.
    before = health()["reused_prompt_tokens"]
    again = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=12, temperature=0)
    assert again.choices[0].message.content == c.message.content
    assert health()["reused_prompt_tokens"] - before == r.usage.prompt_tokens - 1


def test_chat_streamed_equals_non_streamed_and_reports_usage():
    whole = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=12, temperature=0)
    chunks = list(
        client().chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=12, temperature=0,
            stream=True, stream_options={"include_usage": True},
        )
    )
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # The wire format ends in `data: [DONE]` (the client hides it).
    status, headers, data = raw("POST", "/v1/chat/completions", json.dumps(
        {"model": MODEL, "messages": QUESTION, "max_tokens": 3, "stream": True}).encode())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [l for l in data.decode().split("\n") if l.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) >= 3


def test_completions_streamed_and_not():
    r = client().completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text
    assert r.usage.completion_tokens <= 6
    s = client().completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6,
                                    temperature=0, stream=True)
    assert "".join(ch.choices[0].text for ch in s if ch.choices) == r.choices[0].text
    # OpenAI's default for /v1/completions is 16 tokens.
    d = client().completions.create(model=MODEL, prompt="Once upon a time", temperature=0)
    assert d.usage.completion_tokens <= 16


def test_seed_reproduces_a_sampled_answer():
    def ask(seed):
        r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=16,
                                             temperature=1.0, top_p=1.0, seed=seed)
        return r.choices[0].message.content
    a, b = ask(7), ask(7)
    assert a == b
    others = {ask(s) for s in (8, 9, 10)}
    assert others - {a}, "three other seeds all gave seed 7's answer"


def test_stop_sequence_cuts_before_it():
    prompt = "Count: 1, 2, 3, 4, 5, 6, 7,"
    full = client().completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0).choices[0].text
    # A stop sequence taken from the middle of the greedy answer.
    cut = len(full) // 2
    stop = full[cut:cut + 2]
    assert stop.strip(), full
    want = full[: full.find(stop)]
    for stream in (False, True):
        r = client().completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0,
                                        stop=[stop, "never-seen"], stream=stream)
        if stream:
            chunks = list(r)
            text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
            finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        else:
            text, finish = r.choices[0].text, [r.choices[0].finish_reason]
        assert text == want, (full, stop, text)
        assert finish == ["stop"]


def test_a_disconnect_mid_stream_cancels_and_the_next_request_runs():
    before = health()
    stream = client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        max_tokens=400, temperature=0, stream=True)
    got = 0
    for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            got += 1
        if got == 3:
            break
    stream.close()
    deadline = time.time() + 60
    while time.time() < deadline and health()["cancelled"] == before["cancelled"]:
        time.sleep(0.1)
    after = health()
    assert after["cancelled"] == before["cancelled"] + 1
    assert after["completion_tokens"] - before["completion_tokens"] < 100
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4, temperature=0)
    assert r.choices[0].message.content


def test_chat_logprobs_streamed_and_not():
    import math
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8, temperature=0,
                                         logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    # one entry per generated token, EOS excepted, whose texts make the answer
    assert 0 < len(content) <= r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        assert bytes(t.bytes) == t.token.encode()
        tops = [a.logprob for a in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        # greedy: the chosen token is the most likely one
        assert t.token == t.top_logprobs[0].token and math.isclose(t.logprob, tops[0], abs_tol=1e-6)
        assert sum(math.exp(l) for l in tops) <= 1 + 1e-5
    s = list(client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8, temperature=0,
                                              logprobs=True, top_logprobs=3, stream=True))
    streamed = [t for ch in s if ch.choices and ch.choices[0].logprobs for t in ch.choices[0].logprobs.content]
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
    # without logprobs the field is null
    plain = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=2, temperature=0)
    assert plain.choices[0].logprobs is None


def test_completion_logprobs_have_offsets():
    r = client().completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6,
                                    temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    assert all(len(t) <= 2 for t in lp.top_logprobs) and all(l <= 0 for l in lp.token_logprobs)
    with pytest.raises(openai.BadRequestError) as e:
        client().completions.create(model=MODEL, prompt="x", max_tokens=1, logprobs=9)
    assert e.value.param == "logprobs"
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=1, top_logprobs=2)
    assert e.value.param == "top_logprobs"


def test_frequency_and_presence_penalties_change_a_repetitive_answer():
    prompt = "Repeat after me: the the the the the the the the"
    ask = lambda **kw: client().completions.create(
        model=MODEL, prompt=prompt, max_tokens=12, temperature=0, **kw).choices[0].text
    plain = ask()
    assert ask(frequency_penalty=0.0) == plain
    penalized = ask(frequency_penalty=2.0, presence_penalty=2.0)
    assert penalized != plain
    # a generated token's count lowers it: no token of the penalized answer repeats as often
    def most(text):
        words = text.split()
        return max((words.count(w) for w in words), default=0)
    assert most(penalized) < most(plain), (plain, penalized)
    with pytest.raises(openai.BadRequestError) as e:
        ask(presence_penalty=2.5)
    assert e.value.param == "presence_penalty"


def test_a_long_prefill_streams_pings():
    # the script starts the server with --sse-ping 0.2: a prefill of a few hundred tokens is
    # silent for longer than that, and the stream says it is alive with `: ping` comments
    prompt = "Once upon a time, in a land far away, there lived a curious fox. " * 20
    status, _, data = raw("POST", "/v1/completions", json.dumps(
        {"model": MODEL, "prompt": prompt, "max_tokens": 2, "stream": True}).encode())
    assert status == 200
    lines = data.decode().split("\n")
    assert ": ping" in lines, lines[:8]
    assert lines.index(": ping") < lines.index("data: [DONE]")


def test_each_answer_carries_its_timings():
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5, temperature=0)
    t = r.model_extra["timings"]
    assert t["cache_n"] + t["prompt_n"] == r.usage.prompt_tokens
    assert t["predicted_n"] == r.usage.completion_tokens
    assert t["prompt_ms"] > 0 and t["predicted_ms"] >= 0 and t["prompt_per_second"] > 0
    chunks = list(client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5,
                                                   temperature=0, stream=True))
    last = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason][0]
    assert last.model_extra["timings"]["predicted_n"] == t["predicted_n"]


CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "country": {"type": "string", "maxLength": 24},
        "size": {"type": "string", "enum": ["village", "town", "city", "megacity"]},
        "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2},
        "location": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "coastal": {"type": "boolean"}},
            "required": ["lat", "coastal"],
            "additionalProperties": False,
        },
    },
    "required": ["city", "country", "size", "landmarks", "location"],
    "additionalProperties": False,
}
CITY_FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": CITY}}


def test_json_schema_output_validates_streamed_and_not():
    ask = [{"role": "user", "content": "Describe Paris as JSON."}]
    kw = dict(model=MODEL, messages=ask, max_tokens=400, temperature=0.8, seed=11,
              response_format=CITY_FORMAT)
    r = client().chat.completions.create(**kw)
    assert r.choices[0].finish_reason == "stop"
    answer = json.loads(r.choices[0].message.content)
    jsonschema.validate(answer, CITY)
    streamed = "".join(c.choices[0].delta.content or ""
                       for c in client().chat.completions.create(stream=True, **kw) if c.choices)
    assert streamed == r.choices[0].message.content
    # the client's own structured-output helper: a pydantic model sent as a strict json_schema
    class Answer(pydantic.BaseModel):
        capital: str
        confident: bool
    p = client().chat.completions.parse(model=MODEL, messages=QUESTION, max_tokens=200,
                                        temperature=0.8, seed=3, response_format=Answer)
    assert isinstance(p.choices[0].message.parsed, Answer)


def test_json_object_and_the_grammar_extension():
    r = client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Give me a JSON object about cats."}],
        max_tokens=300, temperature=0, response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:
        assert r.choices[0].message.content.startswith("{")
    c = client().completions.create(
        model=MODEL, prompt="The year the Berlin wall fell:", max_tokens=20, temperature=0.8, seed=5,
        extra_body={"grammar": {"type": "regex", "value": " [0-9]{4}\\."}})
    assert re.fullmatch(r" [0-9]{4}\.", c.choices[0].text), c.choices[0].text
    assert c.choices[0].finish_reason == "stop"
    lark = 'start: " " answer\nanswer: "yes" | "no"'
    c = client().completions.create(
        model=MODEL, prompt="Is Paris in France? Answer:", max_tokens=5, temperature=0,
        extra_body={"grammar": {"type": "lark", "value": lark}})
    assert c.choices[0].text in (" yes", " no")


def test_a_wrong_schema_or_grammar_is_a_400_naming_it():
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=5,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "no-such-type"}}})
    assert e.value.param == "response_format"
    with pytest.raises(openai.BadRequestError) as e:
        client().completions.create(model=MODEL, prompt="x", max_tokens=5,
                                    extra_body={"grammar": {"type": "lark", "value": "start: nowhere"}})
    assert e.value.param == "grammar"
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=5,
                                         response_format={"type": "yaml"})
    assert e.value.param == "response_format"


def metrics():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    status, headers, data = raw("GET", "/metrics", key=None)
    assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
    samples = {}
    for family in text_string_to_metric_families(data.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_metrics_parse_as_openmetrics_and_count_a_request():
    def get(m, name, **labels):
        return m.get((name, tuple(sorted(labels.items()))), 0)
    before = metrics()
    r = client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=6, temperature=0)
    after = metrics()
    delta = lambda name, **l: get(after, name, **l) - get(before, name, **l)
    finish = r.choices[0].finish_reason
    assert delta("minirun_requests_total", outcome=finish) == 1
    assert delta("minirun_prompt_tokens_total") == r.usage.prompt_tokens
    assert delta("minirun_generation_tokens_total") == r.usage.completion_tokens
    assert delta("minirun_time_to_first_token_seconds_count") == 1
    assert delta("minirun_inter_token_latency_seconds_count") == r.usage.completion_tokens - 1
    assert get(after, "minirun_device_memory_bytes") > 0
    assert get(after, "minirun_requests_admitted") == 0
    # /health reads the same counters
    assert health()["completion_tokens"] == get(after, "minirun_generation_tokens_total")


def test_tokenize_and_detokenize_round_trip():
    root = openai.OpenAI(api_key=KEY, base_url=URL, max_retries=0)
    text = "The capital of France is Paris."
    r = root.post("/tokenize", body={"content": text}, cast_to=object)
    ids = r["tokens"]
    assert ids and all(isinstance(i, int) for i in ids)
    # the same ids the server feeds: a completion of this prompt counts them
    c = client().completions.create(model=MODEL, prompt=text, max_tokens=1, temperature=0)
    assert c.usage.prompt_tokens == len(ids)
    back = root.post("/detokenize", body={"tokens": ids}, cast_to=object)
    assert back["content"] == text
    pieces = root.post("/tokenize", body={"content": text, "with_pieces": True}, cast_to=object)["tokens"]
    assert [p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == text
    with pytest.raises(openai.BadRequestError) as e:
        root.post("/detokenize", body={"tokens": [10**9]}, cast_to=object)
    assert "past the vocabulary" in str(e.value)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=URL, max_retries=0).post(
            "/tokenize", body={"content": "x"}, cast_to=object)


def test_errors_are_openai_error_bodies():
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(model="no-such-model", messages=QUESTION, max_tokens=2)
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=10**6)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client().completions.create(model=MODEL, prompt="word " * 5000, max_tokens=1)
    assert e.value.code == "context_length_exceeded"
    # a reasoning effort is DeepSeek V4's thinking mode; SmolLM2 renders its own template
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=2, reasoning_effort="high")
    assert e.value.param == "reasoning_effort"
    # tools are rendered in DeepSeek V4's format; SmolLM2's template is its own
    with pytest.raises(openai.BadRequestError) as e:
        client().chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=2,
            tools=[{"type": "function", "function": {"name": "f"}}])
    assert e.value.param == "tools"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=URL + "/v1", max_retries=0).models.list()
    status, _, data = raw("POST", "/v1/chat/completions", b'{"model": ')
    assert status == 400 and json.loads(data)["error"]["type"] == "invalid_request_error"
    status, _, data = raw("POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": "x" * (5 << 20)}).encode())
    assert status == 413 and json.loads(data)["error"]["code"] == "request_too_large"
    status, _, _ = raw("GET", "/v1/models", key=None)
    assert status == 401


def test_a_full_queue_answers_503_with_retry_after():
    # --queue 1: one generation runs, one waits, the third is refused.
    running = client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me a long story."}],
        max_tokens=300, temperature=0, stream=True)
    first = next(iter(running))
    assert first.choices[0].delta.role == "assistant"
    waiting = {}
    t = threading.Thread(target=lambda: waiting.update(r=client(timeout=300).completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=3, temperature=0)))
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and health()["admitted"] < 2:
        time.sleep(0.05)
    assert health()["admitted"] == 2
    status, headers, data = raw("POST", "/v1/completions", json.dumps(
        {"model": MODEL, "prompt": "hi", "max_tokens": 1}).encode())
    assert status == 503 and headers["retry-after"] == "1"
    assert json.loads(data)["error"]["code"] == "server_busy"
    with pytest.raises(openai.InternalServerError):
        client().completions.create(model=MODEL, prompt="hi", max_tokens=1)
    running.close()
    t.join(300)
    assert waiting["r"].choices[0].text
