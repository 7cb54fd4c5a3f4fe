"""The fleet arithmetic: from arrival rates per interval and one server's capacity at the SLO to servers per
interval, $/day, $/1M tokens, utilisation, idle share and the SLO risk of an uncertain capacity.

The rules, in one place:

- **Peak within an interval.** A mean rate hides the minute that needs the most servers. The arrivals in one
  ``window_s`` window at mean rate r are taken as Poisson with mean m = r x window (burstiness D = 1), or, for
  a burstier interval (D = variance / mean > 1), negative binomial with the same mean and variance D x m. The
  interval's peak rate is that count's ``quantile`` (default 0.99) over the window, never below the mean.
- **Servers.** ceil(peak / capacity) in each interval, at least ``min_servers``.
- **Cost.** On demand: servers x hours x the hourly price. Reserved base + on-demand peak: the base b servers
  that minimises b x reserved price x the whole span + the servers above b at the on-demand price (every b
  from 0 to the most servers is tried). Costs are scaled to one day (x 86 400 / the traffic's span).
- **$/1M tokens**: the on-demand $/day over the output tokens served in a day (the tool's usual headline).
- **Utilisation**: requests that arrive / requests the paid servers could carry at the SLO; the **idle share**
  is the rest, 1 - utilisation.
- **SLO risk**: where the capacity has a range, the servers each interval would need at its low end; an
  interval planned with fewer is short, and the cost of covering it is said.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field
from scipy.stats import nbinom, poisson

from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError
from accelbench.fleet.traffic import Interval

DAY_S = 86_400.0
_EPS = 1e-9


class FleetInterval(StrictModel):
    """One interval of a candidate's plan."""

    start_s: float
    seconds: float
    requests_per_s: float = Field(description="Mean arrival rate.")
    peak_requests_per_s: float = Field(description="The within-interval peak the servers are sized for.")
    servers: int


class SloRisk(StrictModel):
    """What the low end of the capacity's range would do to the plan."""

    low_requests_per_s: float = Field(description="One server's capacity at the low end of its range.")
    intervals_short: int = Field(description="Intervals planned with fewer servers than the low end needs.")
    servers_short_max: int = Field(description="The most servers any interval would be short.")
    usd_per_day_to_cover: float = Field(
        description="What planning for the low end would add per day (on demand)."
    )


class Sizing(StrictModel):
    """One candidate's fleet before cold starts are priced."""

    intervals: list[FleetInterval]
    usd_per_day: float | None = Field(description="On demand, per day.")
    reserved_base_servers: int | None = None
    usd_per_day_reserved: float | None = Field(
        default=None, description="Reserved base + on-demand peak, per day."
    )
    usd_per_million_tokens: float | None = Field(description="On-demand $ per 1M output tokens served.")
    server_hours_per_day: float
    utilisation: float
    idle_share: float
    slo_risk: SloRisk | None = None


@dataclass(frozen=True)
class Rules:
    """How peaks are read and fleets bounded."""

    window_s: float = 60.0
    quantile: float = 0.99
    min_servers: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.quantile < 1:
            raise UserInputError(
                f"Peak quantile {self.quantile:g} is outside (0, 1).", hint="Give e.g. --peak-quantile 0.99."
            )
        if self.window_s <= 0:
            raise UserInputError("The peak window must be above 0 seconds.")
        if self.min_servers < 0:
            raise UserInputError("--min-servers must be 0 or more.")

    def describe(self) -> str:
        return (
            f"servers are sized for each interval's peak: the {self.quantile:.4g} quantile of arrivals in a "
            f"{self.window_s:g} s window (Poisson at the interval's mean rate, negative binomial where its "
            f"burstiness is above 1), at least {self.min_servers} server(s)"
        )


def peak_rate(rate: float, seconds: float, burstiness: float, rules: Rules) -> float:
    """The rate the servers of one interval are sized for (see the module docstring)."""
    if rate <= 0:
        return 0.0
    window = min(rules.window_s, seconds)
    mean = rate * window
    if burstiness <= 1.0 + _EPS:
        count = float(poisson.ppf(rules.quantile, mean))
    else:  # mean m, variance D m: n = m / (D - 1), p = 1 / D
        count = float(nbinom.ppf(rules.quantile, mean / (burstiness - 1.0), 1.0 / burstiness))
    return max(rate, count / window)


def servers_for(peak: float, capacity: float, min_servers: int) -> int:
    """Servers that carry ``peak`` requests/s at ``capacity`` each (a hair's rounding error is not a server)."""
    if capacity <= 0:
        raise UserInputError("One server's capacity must be above 0 requests/s.")
    need = math.ceil(peak / capacity - _EPS) if peak > 0 else 0
    return max(min_servers, need)


def reserved_split(
    servers: Sequence[int], seconds: Sequence[float], on_demand: float, reserved: float
) -> tuple[int, float]:
    """(base, $ over the span): the reserved base that costs least with the rest on demand."""
    span_h = sum(seconds) / 3600.0
    best: tuple[float, int] | None = None
    for base in range(0, max(servers, default=0) + 1):
        cost = base * reserved * span_h
        cost += sum(max(0, s - base) * t / 3600.0 * on_demand for s, t in zip(servers, seconds, strict=True))
        if best is None or cost < best[0] - _EPS:
            best = (cost, base)
    assert best is not None
    return best[1], best[0]


def _risk(
    intervals: Sequence[Interval],
    planned: Sequence[FleetInterval],
    low: float,
    rules: Rules,
    hourly: float | None,
) -> SloRisk:
    need = [servers_for(p.peak_requests_per_s, low, rules.min_servers) for p in planned]
    short = [n - p.servers for n, p in zip(need, planned, strict=True)]
    extra_h = sum(max(0, s) * i.seconds / 3600.0 for s, i in zip(short, intervals, strict=True))
    span = sum(i.seconds for i in intervals)
    return SloRisk(
        low_requests_per_s=low,
        intervals_short=sum(1 for s in short if s > 0),
        servers_short_max=max([0, *short]),
        usd_per_day_to_cover=(extra_h * hourly * DAY_S / span) if hourly is not None else 0.0,
    )


def size_fleet(
    intervals: Sequence[Interval],
    capacity: float,
    rules: Rules,
    *,
    hourly: float | None,
    reserved_hourly: float | None = None,
    low: float | None = None,
) -> Sizing:
    """Servers per interval and what they cost (see the module docstring). ``capacity`` is one server's
    requests/s at the SLO; ``low`` the low end of its range, when it has one."""
    if not intervals:
        raise UserInputError("The traffic has no intervals.")
    planned = []
    for i in intervals:
        peak = peak_rate(i.requests_per_s, i.seconds, i.burstiness, rules)
        planned.append(
            FleetInterval(
                start_s=i.start_s,
                seconds=i.seconds,
                requests_per_s=i.requests_per_s,
                peak_requests_per_s=peak,
                servers=servers_for(peak, capacity, rules.min_servers),
            )
        )
    span = sum(i.seconds for i in intervals)
    per_day = DAY_S / span
    server_s = sum(p.servers * p.seconds for p in planned)
    requests = sum(i.requests for i in intervals)
    out_tokens = sum(i.requests * i.output_tokens for i in intervals)
    usd = server_s / 3600.0 * hourly * per_day if hourly is not None else None
    base = reserved_usd = None
    if hourly is not None and reserved_hourly is not None:
        base, over_span = reserved_split(
            [p.servers for p in planned], [p.seconds for p in planned], hourly, reserved_hourly
        )
        reserved_usd = over_span * per_day
    carried = server_s * capacity
    util = requests / carried if carried > 0 else 0.0
    return Sizing(
        intervals=planned,
        usd_per_day=usd,
        reserved_base_servers=base,
        usd_per_day_reserved=reserved_usd,
        usd_per_million_tokens=(usd / (out_tokens * per_day / 1e6))
        if usd is not None and out_tokens > 0
        else None,
        server_hours_per_day=server_s / 3600.0 * per_day,
        utilisation=util,
        idle_share=max(0.0, 1.0 - util),
        slo_risk=_risk(intervals, planned, low, rules, hourly)
        if low is not None and 0 < low < capacity
        else None,
    )
