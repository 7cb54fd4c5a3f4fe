"""Sweep plots: the right lines (one per input length, or per run and input length), real PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import pytest

from accelbench.domain.run import CellStatus
from accelbench.report.plots import SWEEP_PLOTS, build_figure, build_series, write_sweep_plots
from accelbench.report.tables import aggregate_results
from tests.unit.report.test_tables import result


def _cells_one_run() -> list:
    rs = []
    for il in (128, 512):
        for c in (1, 4, 16):
            for rep in (0, 1):
                rs.append(
                    result(
                        il,
                        c,
                        rep,
                        tpot_p50_ms=20.0 + c + il / 128 + rep,
                        total_token_throughput=100.0 * c + rep,
                    )
                )
    return aggregate_results(rs)


def test_series_one_line_per_input_length() -> None:
    series = build_series(_cells_one_run(), "tpot_p50_ms")
    assert [s.label for s in series] == ["input 128", "input 512"]
    s128 = series[0]
    assert s128.x == [1, 4, 16]
    assert s128.y == pytest.approx([21.5 + 1, 21.5 + 4, 21.5 + 16])  # mean of rep 0 and 1 (+0, +1)
    assert s128.ymin == pytest.approx([22.0, 25.0, 37.0])
    assert s128.ymax == pytest.approx([23.0, 26.0, 38.0])


def test_several_runs_give_one_line_per_run_and_input_length() -> None:
    cpu = [
        result(il, c, 0, run_id="cpu", total_token_throughput=10.0 * c) for il in (128, 512) for c in (1, 4)
    ]
    gpu = [
        result(il, c, 0, run_id="gpu", total_token_throughput=100.0 * c) for il in (128, 512) for c in (1, 4)
    ]
    cells = aggregate_results(cpu + gpu)
    spec = SWEEP_PLOTS[1]
    fig = build_figure(cells, spec, run_names={"cpu": "c7i (CPU)", "gpu": "g6 (L4)"})
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "c7i (CPU) · input 128",
        "c7i (CPU) · input 512",
        "g6 (L4) · input 128",
        "g6 (L4) · input 512",
    ]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["g6 (L4) · input 512"].get_ydata()) == [100.0, 400.0]
    # the same run has the same colour on both input lengths; different runs differ
    assert lines["c7i (CPU) · input 128"].get_color() == lines["c7i (CPU) · input 512"].get_color()
    assert lines["c7i (CPU) · input 128"].get_color() != lines["g6 (L4) · input 128"].get_color()
    assert ax.get_xlabel().startswith("Concurrency")


def test_cells_without_the_metric_are_left_out() -> None:
    cells = aggregate_results(
        [
            result(128, 1, 0, tpot_p50_ms=None),
            result(128, 4, 0, tpot_p50_ms=30.0),
            result(128, 8, 0, status=CellStatus.failed, tpot_p50_ms=None),
        ]
    )
    (s,) = build_series(cells, "tpot_p50_ms")
    assert s.x == [4] and s.y == [30.0]


def test_write_sweep_plots_makes_real_pngs(tmp_path: Path) -> None:
    cells = _cells_one_run()
    paths = write_sweep_plots(cells, tmp_path / "plots", subtitle="SmolLM2-135M on test")
    assert [p.name for p in paths] == [s.filename for s in SWEEP_PLOTS]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 500
        # not a blank canvas: a line was drawn in some colour other than white/grey
        assert (img[..., :3].std(axis=2) > 0.1).any()


def test_wide_concurrency_range_uses_log_axis_with_exact_ticks() -> None:
    cells = aggregate_results([result(128, c, 0) for c in (1, 8, 64, 256)])
    ax = build_figure(cells, SWEEP_PLOTS[0]).axes[0]
    assert ax.get_xscale() == "log"
    assert [int(t) for t in ax.get_xticks()] == [1, 8, 64, 256]


def test_empty_input_still_writes_a_plot(tmp_path: Path) -> None:
    paths = write_sweep_plots([], tmp_path)
    assert all(p.stat().st_size > 1000 for p in paths)


def test_legend_keeps_series_order_with_error_bars() -> None:
    rs = [result(128, c, r, run_id="a", tpot_p50_ms=10.0 + r) for c in (1, 4) for r in (0, 1)]
    rs += [result(128, c, 0, run_id="b", tpot_p50_ms=5.0) for c in (1, 4)]
    ax = build_figure(aggregate_results(rs), SWEEP_PLOTS[0]).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a · input 128", "b · input 128"]
