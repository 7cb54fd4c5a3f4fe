"""Queueing distributions the speed model and the capacity prediction share: the M/D/1 wait of the prefill path
(Pollaczek-Khinchine), the M/M/c probability of waiting (Erlang C) and Poisson counts."""

from __future__ import annotations

import math
from dataclasses import dataclass

WAIT_CAP = 0.98  # a closed loop regulates itself: its prefill path never runs at 100%


def md1(rho: float, service: float) -> tuple[float, float]:
    """(probability of waiting, mean wait when waiting) of an M/D/1 queue at utilisation ``rho``: the
    Pollaczek-Khinchine mean wait rho x S / (2 (1 - rho)), read as an atom at zero and an exponential tail."""
    if rho <= 0 or service <= 0:
        return 0.0, 0.0
    rho = min(rho, WAIT_CAP)
    return rho, service / (2 * (1 - rho))


def md1_median(rho: float, service: float) -> float:
    """The median wait of ``md1``: zero while at most half the arrivals wait, else m x ln(2 rho)."""
    waits, mean = md1(rho, service)
    return mean * math.log(2 * waits) if waits > 0.5 else 0.0


@dataclass(frozen=True)
class Wait:
    """A sum of independent waits, each zero with probability 1 - p and else exponential with mean m: the
    M/D/1 and M/D/c waiting times (an atom at zero for those that find the server free, an exponential tail)."""

    parts: tuple[tuple[float, float], ...] = ()  # (probability of waiting, mean wait when waiting)

    def cdf(self, t: float) -> float:
        if t < 0:
            return 0.0
        parts = [(p, m) for p, m in self.parts if p > 0 and m > 0]
        assert len(parts) <= 2, "at most two waits in a sum"
        if not parts:
            return 1.0
        if len(parts) == 1:
            p, m = parts[0]
            return 1.0 - p * math.exp(-t / m)
        (p1, m1), (p2, m2) = parts[0], parts[1]
        f1 = 1.0 - math.exp(-t / m1)
        f2 = 1.0 - math.exp(-t / m2)
        if abs(m1 - m2) <= 1e-9 * max(m1, m2):
            f12 = 1.0 - math.exp(-t / m1) * (1.0 + t / m1)
        else:  # the sum of two exponentials (hypoexponential)
            f12 = 1.0 - (m1 * math.exp(-t / m1) - m2 * math.exp(-t / m2)) / (m1 - m2)
        return (1 - p1) * (1 - p2) + (1 - p1) * p2 * f2 + p1 * (1 - p2) * f1 + p1 * p2 * f12

    def quantile(self, q: float) -> float:
        if self.cdf(0.0) >= q:
            return 0.0
        hi = max((m for _, m in self.parts), default=1.0) or 1.0
        while self.cdf(hi) < q:
            hi *= 2
        lo = 0.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if self.cdf(mid) >= q:
                hi = mid
            else:
                lo = mid
        return hi


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (Erlang C), ``offered`` = rate x service time."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):  # Erlang B by its stable recursion
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho * (1 - b))


def poisson(mean: float) -> list[tuple[int, float]]:
    """(count, probability) of a Poisson count, over the counts that carry all but ~1e-9 of it."""
    if mean <= 1e-12:
        return [(0, 1.0)]
    spread = 7 * math.sqrt(mean) + 7
    lo, hi = max(0, int(mean - spread)), int(mean + spread) + 1
    out = []
    for k in range(lo, hi + 1):
        w = math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))
        if w > 1e-10:
            out.append((k, w))
    total = sum(w for _, w in out)
    return [(k, w / total) for k, w in out]


def count_quantile(pmf: list[tuple[int, float]], q: float) -> int:
    acc = 0.0
    for k, w in pmf:
        acc += w
        if acc >= q - 1e-12:
            return k
    return pmf[-1][0]
