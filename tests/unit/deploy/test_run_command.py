"""`accelbench run` as a process, stopped by SIGTERM or Ctrl-C in the middle of a sweep: the run is marked
interrupted with its finished cells, the exit code says so, and the engine's processes are all gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.run import RunStatus
from accelbench.store import get_store

pytestmark = pytest.mark.usefixtures("fixture_engine")

DRIVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from tests.unit.deploy.conftest import FixtureServerRuntime, TOY_RECIPE
    from accelbench.runtimes.runtime import RUNTIMES
    from accelbench.deploy import engines
    RUNTIMES.add("fixture", FixtureServerRuntime())
    engines.ENGINES.add("fixture", engines.EngineRecipe(**{{**TOY_RECIPE.__dict__, "name": "fixture", "package": "fixture"}}))
    from accelbench.cli.main import main
    sys.argv = ["accelbench", "run", sys.argv[1]]
    main()
    """
)

SPEC = """
model: {model}
engine:
  name: fixture
  version: "1.0"
  settings:
    env:
      FIXTURE_SCRIPT: '{{"ttft_ms": 5, "itl_ms": 40}}'
target:
  kind: local
  startup_timeout_s: 60
sweep:
  input_lens: [48]
  concurrency: [1]
  repeats: 10
  output_len: 10
  prompts_per_concurrency: 2
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stopping_accelbench_run_mid_sweep(
    fixture_model_dir: Path, tmp_path: Path, sig: int, code: int
) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(SPEC.format(model=fixture_model_dir))
    root = str(Path(__file__).resolve().parents[3])
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(root=root), str(spec)],
        env={**os.environ, "COLUMNS": "160"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = get_store()
    try:
        deadline = time.monotonic() + 90
        run = None
        while time.monotonic() < deadline:
            runs, _ = store.list_runs()
            if runs and store.get_results(runs[0].id) and "deployment" in store.get_run(runs[0].id).extra:
                run = runs[0]
                break
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.1)
        assert run is not None, "the sweep never stored a cell"
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    final = store.get_run(run.id)
    assert proc.returncode == code, err[-3000:]
    assert final.status == RunStatus.interrupted, final.error
    assert 1 <= len(store.get_results(run.id)) < 10
    assert processes_in_group(final.extra["deployment"]["pid"]) == []
    assert "Traceback" not in err
