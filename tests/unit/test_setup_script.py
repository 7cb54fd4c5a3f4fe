"""``make setup`` (scripts/setup-venv.sh) says what it is doing while pip works quietly: each stage with the time
so far, the packages found as pip finds them, and pip's own last lines when it fails. A stand-in Python whose
``-m venv`` makes a stand-in pip plays the install."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-venv.sh"

FAKE_PYTHON = """#!/usr/bin/env bash
# python -m venv DIR: a venv whose pip plays an install of 60 packages (exit status $FAKE_PIP_RC)
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<'PIP'
#!/usr/bin/env bash
case "$*" in *--upgrade*) exit 0 ;; esac
for i in $(seq 1 60); do echo "Collecting pkg$i"; echo "  Using cached pkg$i-1.0-py3-none-any.whl"; done
if [ "${FAKE_PIP_RC:-0}" != 0 ]; then echo "ERROR: No matching distribution found for pkg61"; exit "$FAKE_PIP_RC"; fi
echo "Installing collected packages: pkg1, pkg2"
sleep "${FAKE_PIP_INSTALL_S:-0}"
echo "Successfully installed pkg1-1.0 pkg2-1.0"
PIP
chmod +x "$3/bin/pip"
"""


def run_setup(tmp_path: Path, rc: int, **env_vars: str) -> subprocess.CompletedProcess[str]:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "FAKE_PIP_RC": str(rc), **env_vars}
    return subprocess.run(
        [str(SCRIPT), str(python), str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_each_stage_says_what_it_does_with_the_time_so_far(tmp_path: Path) -> None:
    done = run_setup(tmp_path, 0)
    assert done.returncode == 0, done.stderr
    said = [line.rsplit(" (", 1)[0] for line in done.stdout.splitlines()]
    assert said[0] == f"Creating {tmp_path / 'venv'} with the newest pip"
    assert said[1].startswith("Installing accelbench and its dev tools")
    assert said[2:5] == ["  25 packages found", "  50 packages found", "  60 packages found; installing them"]
    assert said[5] == "Installed: Successfully installed pkg1-1.0 pkg2-1.0"
    assert all(line.endswith(" s)") for line in done.stdout.splitlines())


@pytest.mark.parametrize("rc", [1, 2])
def test_a_failed_pip_shows_its_last_lines_and_fails(tmp_path: Path, rc: int) -> None:
    done = run_setup(tmp_path, rc)
    assert done.returncode == 1
    assert "ERROR: No matching distribution found for pkg61" in done.stderr
    assert "pip failed" in done.stderr and "Installed" not in done.stdout


def test_a_long_silent_install_is_visibly_alive(tmp_path: Path) -> None:
    """pip prints nothing while it unpacks and compiles (over a minute on a fresh machine): a line says it is
    still at it after each quiet spell."""
    done = run_setup(tmp_path, 0, SETUP_HEARTBEAT_S="1", FAKE_PIP_INSTALL_S="2.5")
    assert done.returncode == 0, done.stderr
    said = [line.rsplit(" (", 1)[0] for line in done.stdout.splitlines()]
    start = said.index("  60 packages found; installing them")
    assert said[start + 1 : start + 3] == ["  still installing 60 packages"] * 2
    assert said[-1].startswith("Installed: Successfully installed")
