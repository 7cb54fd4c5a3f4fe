"""Every line of a chart has its own look: a (colour, dash) pair no other line has, in the rule and in the
latency CDFs both report renderers draw."""

from __future__ import annotations

import pytest

from accelbench.report.document import CellLatencies
from accelbench.report.html_figures import cdf_figure
from accelbench.report.series_styles import SeriesStyle, series_styles
from tests.unit.report.test_html import _report


@pytest.mark.parametrize(
    ("groups", "members", "colours", "dashes"),
    [(6, 2, 8, 6), (1, 1, 8, 4), (8, 4, 8, 4), (12, 2, 8, 6), (6, 7, 8, 6), (9, 1, 8, 4), (5, 5, 10, 4)],
)
def test_every_series_gets_its_own_pair_up_to_the_palettes(
    groups: int, members: int, colours: int, dashes: int
) -> None:
    styles = series_styles(groups, members, colours, dashes)
    flat = [s for row in styles for s in row]
    assert len(flat) == groups * members
    assert len(set(flat)) == len(flat)
    assert all(0 <= s.colour < colours and 0 <= s.dash < dashes for s in flat)


def test_colour_tells_the_group_and_dash_the_member_while_both_fit() -> None:
    styles = series_styles(6, 2, 8, 6)
    assert styles[4] == [SeriesStyle(4, 0), SeriesStyle(4, 1)]
    # one member: every group solid, in its own colour
    assert [row[0] for row in series_styles(5, 1, 8, 4)] == [SeriesStyle(g, 0) for g in range(5)]


def test_no_palette_is_refused() -> None:
    with pytest.raises(ValueError):
        series_styles(2, 2, 0, 4)


def _cells(runs: tuple[str, ...], lens: tuple[int, ...], concs: tuple[int, ...]) -> list[CellLatencies]:
    return [
        CellLatencies(run, il, c, ttft_ms=[10.0, 20.0], tpot_ms=[1.0, 2.0], e2e_ms=[50.0, 60.0])
        for run in runs
        for il in lens
        for c in concs
    ]


def test_the_cdf_lines_of_two_runs_of_six_cells_all_look_different() -> None:
    data = _report()
    data.latencies = _cells(("ra", "rb"), (128, 512), (1, 2, 4))
    fig = cdf_figure(data)
    assert fig is not None
    legend = [t for t in fig.data if t.showlegend]
    assert len(legend) == 12
    looks = {(t.line.color, t.line.dash) for t in legend}
    assert len(looks) == 12, sorted(looks)
    by_name = {t.name: (t.line.color, t.line.dash) for t in legend}
    # the two the page drew alike
    assert by_name["gpu · input 128 · c=1"] != by_name["gpu · input 512 · c=2"]
    # each panel draws a series as its legend entry does
    for t in fig.data:
        assert (t.line.color, t.line.dash) == by_name[t.name]
