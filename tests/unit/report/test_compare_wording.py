"""Ratios are said one way everywhere: a factor of at least 1 with the direction in words, against
the baseline that was given, never a ratio below 1 beside its inverse."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from accelbench.cli.compare import render_comparison
from accelbench.report.compare_runs import build_comparison
from accelbench.report.comparison import advantage_phrase, cost_versus, decode_versus, throughput_versus
from accelbench.report.side_by_side import pair_rows, side_by_side_rows
from tests.support.report_data import run_data
from tests.unit.report.test_compare import PRICE_A, two_runs

_BELOW_ONE = re.compile(r"(?<![\d.])0\.\d+x")


def test_versus_states_a_factor_of_at_least_one_with_the_direction() -> None:
    assert str(decode_versus(10.0, 25.0)) == "2.50x faster"  # TPOT 10 ms against the baseline's 25 ms
    assert str(decode_versus(25.0, 10.0)) == "2.50x slower"
    assert str(throughput_versus(250.0, 100.0)) == "2.50x higher"
    assert str(throughput_versus(100.0, 130.0)) == "1.30x lower"
    assert str(cost_versus(1.0, 2.0, digits=1)) == "2.0x cheaper"
    assert str(cost_versus(2.6, 2.0, digits=1)) == "1.3x more expensive"
    same = decode_versus(10.0, 10.04)
    assert same is not None and same.better is None and str(same) == "on par"
    assert decode_versus(None, 10.0) is None and throughput_versus(0.0, 10.0) is None
    slower = decode_versus(25.0, 10.0)
    assert slower is not None and slower.factor == pytest.approx(2.5) and slower.better is False


@pytest.mark.parametrize("b_first", [False, True])
def test_the_baseline_is_the_one_given_and_no_ratio_is_below_one(b_first: bool) -> None:
    (a, ra), (b, rb) = two_runs()
    runs = [run_data(a, ra, price=PRICE_A), run_data(b, rb)]
    cmp = build_comparison(runs[::-1] if b_first else runs)
    base, other = ("B", "A") if b_first else ("A", "B")
    assert cmp.run(cmp.baseline).name == base
    decode = next(f for f in cmp.findings if f.kind == "decode_speedup")
    word = "faster" if b_first else "slower"  # A's TPOT is 9.0 ms, B's 27.9 ms
    assert decode.text.startswith(
        f"At input 128 and concurrency 1, {other} decodes 3.1x {word} than the baseline {base}"
    )
    (pair,) = pair_rows(cmp)
    assert pair[1:3] == [other, base] and pair[4] == f"3.10x {word}"
    lead = "A ahead; its lead grows from 2.0x (c1) to 4.1x (c16)"
    assert advantage_phrase(cmp.pairs[0], base, other) == lead
    buf = io.StringIO()
    render_comparison(cmp, Console(file=buf, width=400, color_system=None))
    printed = "\n".join(
        [buf.getvalue(), *(f.text for f in cmp.findings), *("|".join(r) for r in side_by_side_rows(cmp))]
    )
    assert not _BELOW_ONE.search(printed), _BELOW_ONE.search(printed)
    # every "N.NNx" printed says which way it goes
    for m in re.finditer(r"(\d+\.\d+)x (\w+)", printed):
        assert float(m.group(1)) >= 1.0
        assert m.group(2) in {"faster", "slower", "higher", "lower", "cheaper", "more"}, m.group(0)
    assert "gap" not in buf.getvalue().lower()  # the old unexplained "gap: holds" column is gone
