"""Kimi's tokenizer as Moonshot's own code builds it: `tiktoken` over a `tiktoken.model` rank file,
with the pre-tokenizer regex of `tokenization_kimi.py` (the same for Kimi K2, K2.5, Kimi Linear
and K3 as far as public copies show) and the block of 256 control tokens after the ranks, named
from `tokenizer_config.json`'s `added_tokens_decoder` and `<|reserved_token_{id}|>` elsewhere.

The rank file is the generated K3 checkpoint's (`minirun-synth kimi-k3`, deterministic); the
control names are Kimi K2's published ones at their offsets from the first control id. Writes
the ids `tiktoken` gives each text (`allowed_special="all"`) into
ci/oracles/kimi_tokenizer.recorded.json, which runner/tests/kimi_tokenizer.rs holds minirun's
conversion to; `--check` compares instead of writing (ci/checks.d/59-kimi-tokenizer.sh).

Usage: kimi_tokenizer.py TIKTOKEN_MODEL [--check]   (venv-tiktoken: tiktoken 0.12.0)
"""
import base64
import hashlib
import json
import sys
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

RECORD = Path(__file__).with_name("kimi_tokenizer.recorded.json")

PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

RESERVED = 256
# Kimi K2's named control tokens, as offsets from the first control id (163584 there).
NAMED = {
    0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
    6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
    11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>",
    13: "<|tool_call_begin|>", 14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>",
    17: "<|im_middle|>",
}

TEXTS = [
    "A checkpoint is a set of named tensors stored in shards.",
    "The data section follows the header without holes, and every tensor starts where the previous one ended.",
    "  leading spaces, trailing spaces   ",
    "lines\nand\r\nbreaks\n\n\nand tabs\tand\t\tmore",
    "Numbers: 1, 12, 123, 1234, 12345678 and 3.14159; dates 2026-12-07.",
    "It's, we're, they've, I'm, you'll, he'd — IT'S, WE'RE.",
    "CamelCase words like HyperConnection and QuantizedWeights, ALLCAPS and mIxEd.",
    "中文文本：模型的权重被量化了。Kimi 模型支持中文和English混合。",
    "日本語のテキストとひらがな、カタカナ。한국어 문장도 있습니다.",
    "Ünïcödé àccents, ß, Ωmega, naïve café; emoji 🙂🚀 and symbols ©®™.",
    "code: fn main() { println!(\"{}\", x[0] + y.z); } // done",
    "<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>Hi!<|im_end|><|im_assistant|>assistant<|im_middle|>",
    "[BOS]text between [EOS] markers and <|reserved_token_9999|> that is not one",
    "",
    " ",
    "a",
    "!!!???...,,,;;;",
    "x" * 300,
]


def control_names(base):
    """The tokenizer_config.json `added_tokens_decoder` of the named controls at `base`."""
    return {str(base + off): {"content": name, "special": True} for off, name in NAMED.items()}


def record(model_path):
    data = Path(model_path).read_bytes()
    ranks = load_tiktoken_bpe(model_path)
    base = len(ranks)
    config = {"added_tokens_decoder": control_names(base), "bos_token": "[BOS]", "eos_token": "[EOS]"}
    named = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(base, base + RESERVED)}
    enc = tiktoken.Encoding(name="kimi", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    cases = []
    for text in TEXTS:
        ids = enc.encode(text, allowed_special="all")
        assert enc.decode(ids) == text, text
        cases.append({"text": text, "ids": ids})
    return {
        "producer": f"tiktoken {tiktoken.__version__}",
        "tiktoken_model_sha256": hashlib.sha256(data).hexdigest(),
        "ranks": base,
        "pattern": PATTERN,
        "tokenizer_config": config,
        "cases": cases,
    }


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 1:
        sys.exit(__doc__)
    got = record(args[0])
    text = json.dumps(got, ensure_ascii=False, indent=1) + "\n"
    if check:
        want = RECORD.read_text(encoding="utf-8")
        if want != text:
            sys.exit(f"FAIL: tiktoken's ids differ from {RECORD.name} (re-run without --check and review)")
        print(f"kimi tokenizer: {len(got['cases'])} texts encoded by {got['producer']} as recorded")
    else:
        RECORD.write_text(text, encoding="utf-8")
        print(f"wrote {RECORD}")


if __name__ == "__main__":
    main()
