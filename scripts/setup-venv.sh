#!/usr/bin/env bash
# The tool's virtual environment for `make setup`: accelbench installed editable with its dev tools. pip is
# quiet here, so on a fresh machine (about a minute and a half) each stage says what it is doing and the time so
# far instead of nothing at all; when pip fails, the end of its output is shown.
#   usage: scripts/setup-venv.sh PYTHON VENV   (SETUP_HEARTBEAT_S: seconds of silence before "still ...", 30)
set -euo pipefail
PYTHON=${1:-python3}
VENV=${2:-.venv}
cd "$(dirname "$0")/.."

start=$SECONDS
say() { printf '%s (%d s)\n' "$*" $((SECONDS - start)); }

say "Creating $VENV with the newest pip"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
say "Installing accelbench and its dev tools into $VENV (about a minute and a half the first time)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$VENV/bin/pip" install --progress-bar off -e '.[dev]' 2>&1 | tee "$log" | {
    n=0
    stage="finding packages"
    while true; do
        if IFS= read -r -t "${SETUP_HEARTBEAT_S:-30}" line; then
            case $line in
            Collecting*)
                n=$((n + 1))
                if ((n % 25 == 0)); then say "  $n packages found"; fi
                ;;
            "Installing collected packages"*)
                stage="installing $n packages"
                say "  $n packages found; installing them"
                ;;
            esac
        elif (($? > 128)); then # a while without a line: pip is still at it (unpacking, compiling bytecode)
            say "  still $stage"
        else
            break
        fi
    done
}; then
    tail -n 30 "$log" >&2
    say "pip failed (its last lines above)" >&2
    exit 1
fi
say "Installed: $(tail -n 1 "$log" | cut -c1-100)"
