"""Intervals and verdicts from real HTTP: the in-repo streaming server answers each request at a per-request speed
drawn from a known distribution (a lognormal inter-token time, set by a directive in each prompt), and the
load generator's records give intervals that find a slower server slower and the same server not different."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from accelbench.bench import run_benchmark
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.report.tables import aggregate_results
from accelbench.report.verdicts import NO_DIFFERENCE, metric_verdict
from tests.support.stream_server import Script, StreamServer

ITL_MS, SIGMA, REQUESTS, REPEATS = 20.0, 0.25, 32, 3


def _prompts(path: Path, scale: float, seed: int) -> Path:
    """Prompts whose directives give each request its inter-token time: lognormal around ITL_MS x scale."""
    rng = np.random.default_rng(seed)
    itl = ITL_MS * scale * rng.lognormal(0.0, SIGMA, REQUESTS)
    lines = [
        json.dumps(
            {"prompt": f"Tell me a story #{i} [[fixture:{json.dumps({'itl_ms': round(float(x), 3)})}]]"}
        )
        for i, x in enumerate(itl)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _stored(run_id: str, repeat: int, s: BenchmarkSummary) -> ResultInfo:
    """The result as the store keeps it: key figures as columns, the summary (with its intervals) as JSON."""
    return ResultInfo(
        id=repeat,
        run_id=run_id,
        input_len=s.config.input_len,
        concurrency=s.config.max_concurrency or 0,
        repeat=repeat,
        status=CellStatus.completed,
        completed=s.completed,
        tpot_p50_ms=s.tpot_ms.p50,
        output_throughput=s.output_throughput,
        summary=json.loads(s.model_dump_json(exclude={"requests", "telemetry_samples"})),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def _config(data: Path) -> BenchConfig:
    return BenchConfig(
        dataset="jsonl", dataset_path=str(data), num_prompts=REQUESTS, max_concurrency=8, output_len=6,
        scrape_metrics=False,
    )  # fmt: skip


def _runs(server: StreamServer, tok_dir: Path, data: dict[str, Path]) -> dict[str, list[ResultInfo]]:
    """REPEATS repeats of each run (its id: its prompts). The runs take turns repeat by repeat: the load on a
    shared machine changes over seconds, and run after run one of two runs of the same server could get more of
    it than the other, a real difference to the intervals though not the server's."""
    endpoint = Endpoint(base_url=server.base_url, served_model=server.model, tokenizer=str(tok_dir))
    tokenizer = LocalTokenizer(tok_dir)
    configs = {run_id: _config(path) for run_id, path in data.items()}
    out: dict[str, list[ResultInfo]] = {run_id: [] for run_id in data}
    for i in range(REPEATS):
        for run_id, config in configs.items():
            out[run_id].append(_stored(run_id, i, run_benchmark(endpoint, config, tokenizer=tokenizer)))
    return out


def test_real_records_find_a_slower_server_slower_and_the_same_server_not_different(
    tmp_path: Path, tok_dir: Path
) -> None:
    same = _prompts(tmp_path / "a.jsonl", 1.0, seed=1)
    slower = _prompts(tmp_path / "b.jsonl", 1.5, seed=1)
    with StreamServer(Script(ttft_ms=5, itl_ms=ITL_MS), tokenizer_dir=tok_dir) as server:
        runs = _runs(server, tok_dir, {"a": same, "again": same, "b": slower})
    a, again, b = runs["a"], runs["again"], runs["b"]
    first = a[0].summary["tpot_ms"]
    # every statistic carries its interval, and the median's contains the figure
    assert first["median_ci95"][0] <= first["median"] <= first["median_ci95"][1]
    cells = {c.run_id: c for c in aggregate_results([*a, *again, *b])}
    tpot = cells["a"].tpot_p50_ms
    assert tpot is not None and tpot.ci95 is not None and tpot.ci95_basis == "repeats and requests"
    assert tpot.ci95[0] <= tpot.mean <= tpot.ci95[1]
    assert ITL_MS * 0.8 < tpot.mean < ITL_MS * 1.5
    worse = metric_verdict(cells["a"], cells["b"], "tpot_p50_ms", "TPOT p50 (ms)", False)
    assert worse is not None and worse.verdict == "worse" and worse.ratio_ci95 is not None
    assert worse.ratio_ci95[0] > 1.2
    alike = metric_verdict(cells["a"], cells["again"], "tpot_p50_ms", "TPOT p50 (ms)", False)
    assert alike is not None and alike.verdict == NO_DIFFERENCE
