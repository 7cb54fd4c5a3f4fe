#!/usr/bin/env bash
# Everything the tests need that pip cannot install into the venv. Idempotent; each step says what it does.
set -euo pipefail
BIN=${1:-.venv/bin}
echo "test prerequisites: nothing else yet"
