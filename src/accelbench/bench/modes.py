"""Whether a latency metric's distribution is bimodal, with the share and median of each mode.

A closed loop that starts all its streams at once runs in waves: one request's TTFT is short or long by which
wave it fell in, and the median lands on one mode or the other by how a run's waves lined up. A median that
flips between modes is not a change of speed, so every result says when a metric has two modes.

The test: the values (in log space: latencies are skewed) are split in two where the within-group sum of
squares is least (the exact 1-D two-means split, from cumulative sums over the sorted values); the split is
called two modes when each side holds at least ``MIN_SHARE`` of the requests and Ashman's D, the distance
between the two means over their pooled spread, ``sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2)``, is above ``MIN_D``
(2 is the textbook bound for a clean separation of two normal components), and the values thin out between
the two sides (fewer than half as many near the split as near either side's median: a single mode cut in two
is densest at the cut, which the distance alone would not reveal), and the upper mode's median is at least
``MIN_RATIO`` times the lower's (two tight clusters 1 ms apart, as a deterministic server gives, are cleanly
separated yet no median flipping between them could be read as a change of speed). At least ``MIN_REQUESTS``
values are needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MIN_SHARE = 0.1
MIN_D = 2.0
MIN_REQUESTS = 20
DIP = 0.5
#: the least ratio of the two modes' medians worth saying: below it a median's flip moves it under 10%
MIN_RATIO = 1.1


def two_modes(values_ms: Sequence[float] | np.ndarray) -> dict[str, float] | None:
    """``{"low_share", "low_median_ms", "high_share", "high_median_ms", "separation"}`` when the values have
    two modes; None otherwise."""
    x = np.sort(np.asarray(values_ms, dtype=np.float64))
    x = x[x > 0]
    n = x.size
    if n < MIN_REQUESTS:
        return None
    y = np.log(x)
    c1, c2 = np.cumsum(y), np.cumsum(y * y)
    k = np.arange(1, n)  # left group: the first k values
    left_ss = c2[:-1] - c1[:-1] ** 2 / k
    right_ss = (c2[-1] - c2[:-1]) - (c1[-1] - c1[:-1]) ** 2 / (n - k)
    lo_k = max(1, math.ceil(MIN_SHARE * n))
    allowed = (k >= lo_k) & (n - k >= lo_k)
    if not allowed.any():
        return None
    total = np.where(allowed, left_ss + right_ss, np.inf)
    split = int(np.argmin(total)) + 1
    a, b = y[:split], y[split:]
    spread = math.sqrt(float(np.var(a)) + float(np.var(b)))
    if spread == 0:
        return None
    d = math.sqrt(2.0) * abs(float(b.mean()) - float(a.mean())) / spread
    if d <= MIN_D or not _dips(y, split):
        return None
    low, high = float(np.median(x[:split])), float(np.median(x[split:]))
    if high < MIN_RATIO * low:
        return None
    return {
        "low_share": split / n,
        "low_median_ms": low,
        "high_share": (n - split) / n,
        "high_median_ms": high,
        "separation": d,
    }


def _dips(y: np.ndarray, split: int) -> bool:
    """Whether the sorted log values thin out between the two groups: fewer than ``DIP`` times as many values
    near the split point as near the emptier group's median (windows a sixth of the distance between the group
    means wide). A single mode, cut in two, is densest at the cut."""
    a, b = y[:split], y[split:]
    half = (float(b.mean()) - float(a.mean())) / 12.0
    if half <= 0:
        return False

    def near(p: float) -> int:
        return int(np.searchsorted(y, p + half, side="right") - np.searchsorted(y, p - half, side="left"))

    cut = (float(y[split - 1]) + float(y[split])) / 2.0
    return near(cut) < DIP * min(near(float(np.median(a))), near(float(np.median(b))))
