#!/usr/bin/env bash
# Install the system Chromium that the browser tests drive through Playwright (Playwright never downloads a
# browser of its own here). Idempotent: does nothing when `chromium` is already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "chromium: already installed ($(command -v chromium))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not found and apt-get is not available; install Chromium so that \`chromium\` is on PATH" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "chromium: installing needs root (or sudo)" >&2
    exit 1
  fi
fi

echo "chromium: installing the distribution package"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
command -v chromium >/dev/null 2>&1 || { echo "chromium: installed, but not on PATH" >&2; exit 1; }
echo "chromium: installed ($(command -v chromium))"
