"""One look per line of a chart: a (colour, dash) pair no other line of the chart has.

A chart of runs x cells (the latency CDFs: two runs of six cells are twelve lines in each panel) runs out of
colours or dashes when each is cycled on its own: with four dashes the first and fifth cell of a run drew alike.
So the pair is chosen for the whole chart at once: colour by group and dash by member while both fit their
palettes (what a reader can decode from the legend), else each line in turn takes the next colour, and the next
dash each time the colours run out. Palettes are indices, so the plotly and matplotlib renderers share the rule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeriesStyle:
    """A line's look, as positions in the renderer's own palettes."""

    colour: int
    dash: int


def series_styles(groups: int, members: int, colours: int, dashes: int) -> list[list[SeriesStyle]]:
    """``styles[g][m]``: the look of group ``g``'s member ``m`` (e.g. cell ``g`` of run ``m``), every pair
    distinct for up to ``colours x dashes`` lines; beyond that they repeat, as nothing else is left to vary."""
    if colours < 1 or dashes < 1:
        raise ValueError("a chart needs at least one colour and one dash")
    if groups <= colours and members <= dashes:
        return [[SeriesStyle(g, m) for m in range(members)] for g in range(groups)]
    return [
        [SeriesStyle(n % colours, (n // colours) % dashes) for n in range(g * members, (g + 1) * members)]
        for g in range(groups)
    ]
