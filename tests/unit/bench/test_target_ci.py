"""sweep --target-ci: a cell is repeated until its median TPOT and TTFT are known within the target, up to the
cap, and the run says which cells reached it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.bench.sweep import create_sweep_run, run_sweep
from accelbench.bench.target_ci import MIN_REPEATS, settled, summary_line
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import RunStatus, SweepSpec
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def server(tokenizer_dir: Path) -> Iterator[StreamServer]:
    # steps long beside the few milliseconds a busy machine can wake the client late, so the intervals reflect
    # the server's steady timing (with a 5 ms TTFT one late read widened a cell past +-60%)
    with StreamServer(Script(ttft_ms=30, itl_ms=10), tokenizer_dir=tokenizer_dir, model="smol") as s:
        yield s


def _spec(target: float, repeats: int) -> SweepSpec:
    return SweepSpec(
        input_lens=[48], concurrency=[1, 4], repeats=repeats, prompts_per_concurrency=6, output_len=4,
        num_warmups=0, scrape_metrics=False, target_ci=target,
    )  # fmt: skip


def _sweep(store: Store, server: StreamServer, tokenizer_dir: Path, spec: SweepSpec):  # type: ignore[no-untyped-def]
    ep = Endpoint(base_url=server.base_url, served_model="smol", tokenizer=str(tokenizer_dir))
    run = create_sweep_run(store, ep, spec, label="ci", environment={"command": "test"})
    return run, run_sweep(store, run.id, ep, spec)


def test_a_cell_stops_repeating_once_its_interval_is_within_the_target(
    store: Store, server: StreamServer, tokenizer_dir: Path
) -> None:
    run, outcome = _sweep(store, server, tokenizer_dir, _spec(60.0, 5))
    assert outcome.status == RunStatus.completed and not outcome.missing
    rec = store.get_run(run.id).extra["target_ci"]
    assert rec["target_pct"] == 60.0 and rec["cap"] == 5
    # the decision, exactly: each cell stopped at the first repeat, from the second on, whose interval was within
    # the target (how many that takes depends on the timing the machine delivered; a steady server needs two)
    results = store.get_results(run.id)
    for cell in rec["cells"]:
        reps = sorted((r for r in results if r.concurrency == cell["concurrency"]), key=lambda r: r.repeat)
        assert [r.repeat for r in reps] == list(range(cell["repeats"]))
        assert cell["repeats"] >= MIN_REPEATS and cell["reached"]
        assert [settled(reps[:k], 60.0) for k in range(1, cell["repeats"] + 1)] == [False] * (
            cell["repeats"] - 1
        ) + [True]
    assert [c["concurrency"] for c in rec["cells"]] == [1, 4]
    assert len(outcome.settled) == sum(5 - c["repeats"] for c in rec["cells"])  # the repeats not needed
    assert all(0 < c["tpot_p50_ci95_pct"] <= 60.0 for c in rec["cells"])
    assert summary_line(rec) == "target +-60%: 2 of 2 cells reached it"
    assert outcome.as_dict()["target_ci"] == rec


def test_a_cell_that_cannot_reach_the_target_stops_at_the_cap_and_says_so(
    store: Store, server: StreamServer, tokenizer_dir: Path
) -> None:
    run, outcome = _sweep(store, server, tokenizer_dir, _spec(0.01, 3))
    assert outcome.status == RunStatus.completed and not outcome.settled
    assert len(store.get_results(run.id)) == 2 * 3
    rec = outcome.target_ci
    assert rec is not None and not any(c["reached"] for c in rec["cells"])
    line = summary_line(rec)
    assert line.startswith(
        "target +-0.01%: 0 of 2 cells reached it; input 48 x concurrency 1 stopped at 3 of 3"
    )
