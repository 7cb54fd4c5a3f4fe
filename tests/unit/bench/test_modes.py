"""Two modes in a latency distribution are found and described; one mode, however skewed, is not."""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.bench.metrics import compute_metrics
from accelbench.bench.modes import two_modes
from accelbench.domain.request_record import RequestRecord
from accelbench.report.failures import modes_sentence


def test_waves_give_two_modes_with_their_shares_and_medians() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(120.0, 8.0, 480), rng.normal(410.0, 20.0, 520)])
    found = two_modes(x)
    assert found is not None
    assert found["low_share"] == pytest.approx(0.48, abs=0.01)
    assert found["low_median_ms"] == pytest.approx(120.0, rel=0.03)
    assert found["high_median_ms"] == pytest.approx(410.0, rel=0.03)
    assert found["separation"] > 2
    text = modes_sentence("TTFT", found)
    assert text.startswith("TTFT has two modes: 48% of requests around 1") and "not of speed" in text


def test_one_mode_is_not_called_two() -> None:
    rng = np.random.default_rng(2)
    assert two_modes(rng.normal(100.0, 10.0, 1000)) is None
    assert two_modes(rng.lognormal(4.0, 0.8, 1000)) is None  # skewed, still one mode
    assert two_modes(np.concatenate([rng.normal(100, 5, 980), rng.normal(400, 5, 20)])) is None  # a 2% tail
    assert two_modes([100.0, 400.0] * 5) is None  # too few requests


def test_two_tight_clusters_a_millisecond_apart_are_not_called_two_modes() -> None:
    # a deterministic server: TTFT 80.5 or 81.5 ms with almost no spread is cleanly split, but a median flipping
    # between them moves it about 1%, which no one should read as a change of speed
    rng = np.random.default_rng(5)
    values = np.concatenate([80.5 + rng.normal(0, 0.01, 60), 81.5 + rng.normal(0, 0.01, 40)])
    assert two_modes(values) is None
    assert two_modes(np.concatenate([values[:60], 2 * values[60:]])) is not None  # twice as slow: two modes


def test_a_result_names_its_bimodal_metric() -> None:
    records = [
        RequestRecord(
            index=i,
            prompt_len=8,
            output_tokens=4,
            output_tokens_source="usage",
            success=True,
            ttft_s=0.1 if i % 2 else 0.4,
            itl_s=[0.01] * 3,
            latency_s=(0.1 if i % 2 else 0.4) + 0.03,
        )
        for i in range(60)
    ]
    m = compute_metrics(records, 5.0)
    assert set(m.modes) >= {"ttft"} and "tpot" not in m.modes
    assert m.modes["ttft"]["low_share"] == pytest.approx(0.5)


def test_each_cell_says_once_which_metric_has_two_modes() -> None:
    from datetime import UTC, datetime

    from accelbench.domain.results import ResultInfo
    from accelbench.domain.run import CellStatus
    from accelbench.report.failures import cell_warnings

    modes = {"ttft": {"low_share": 0.5, "low_median_ms": 100.0, "high_share": 0.5, "high_median_ms": 400.0}}
    results = [
        ResultInfo(
            id=i,
            run_id="r",
            input_len=128,
            concurrency=4,
            repeat=i,
            status=CellStatus.completed,
            summary={"modes": modes},
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        for i in range(3)
    ]
    [w] = cell_warnings(results)
    assert w.text.startswith(
        "TTFT (repeat 1) has two modes: 50% of requests around 100.0 ms, 50% around 400.0"
    )
