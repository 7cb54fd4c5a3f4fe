"""A sweep process killed with SIGKILL in the middle of its run, then resumed by two processes at once: the run
is claimed by compare-and-set of its owner, so one resume measures exactly the missing cells and the other is
refused; the cells finished before the kill are kept; ``accelbench serve`` on the same store lists the run
and serves throughout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from accelbench.store import Store
from tests.faults.service import Service, completions, service_env, services, wait
from tests.support.stream_server import StreamServer

CELLS = 8  # concurrency 1..4 x 2 repeats, one request per concurrency level


def _sweep(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "accelbench.cli.main", "sweep", *args, "--format", "json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_a_killed_sweep_resumed_twice_at_once_is_measured_once(
    db_url: str, tmp_path: Path, slow_server: StreamServer, tokenizer: Path
) -> None:
    env = service_env(db_url, tmp_path / "data")
    service = Service(env, tmp_path / "serve.log", worker=False)
    store = Store(db_url)
    with services(service.start()):
        first = _sweep(env, "--base-url", slow_server.base_url, "--model", "smol", "--tokenizer", str(tokenizer),
                       "--input-lens", "64", "--concurrency", "1,2,3,4", "--repeats", "2",
                       "--prompts-per-concurrency", "1", "--output-len", "16", "--num-warmups", "0",
                       "--label", "killed")  # fmt: skip
        try:
            run_id = wait(
                lambda: (
                    (runs := store.list_runs(kind="sweep")[0])
                    and store.get_results(runs[0].id)
                    and runs[0].id
                ),
                120,
                "the first cell of the sweep",
            )
        finally:
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=30)
        kept = {r.id for r in store.get_results(run_id)}
        assert 1 <= len(kept) < CELLS
        assert run_id in service.run_ids()
        sent_before = completions(slow_server.records)

        resumes = [_sweep(env, "--resume", run_id) for _ in range(2)]
        outs = [p.communicate(timeout=180) for p in resumes]
        codes = sorted(p.returncode for p in resumes)
        assert codes[0] == 0 and codes[1] != 0, [
            (p.returncode, o[1][-600:]) for p, o in zip(resumes, outs, strict=True)
        ]
        refused = next(err for p, (_, err) in zip(resumes, outs, strict=True) if p.returncode)
        assert "being measured right now" in refused or "just taken over" in refused, refused[-600:]

        final = store.get_run(run_id)
        assert final.status.value == "completed" and final.error is None
        results = store.get_results(run_id)
        assert len(results) == CELLS and kept <= {r.id for r in results}  # the finished cells are kept
        # the missing cells were measured once: the request count of exactly the cells not kept (a cut cell
        # in flight at the kill is measured again in full)
        missing = [c for c in (1, 2, 3, 4) for _ in range(2)]
        for r in store.get_results(run_id):
            if r.id in kept:
                missing.remove(r.concurrency)
        time.sleep(0.5)
        assert completions(slow_server.records) - sent_before == sum(missing)
        service.assert_serving({run_id})
        assert service.detail(run_id)["run"]["status"] == "completed"
    store.dispose()
