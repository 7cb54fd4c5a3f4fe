"""The fleet arithmetic against a case computed by hand.

Three one-hour intervals at 0, 0.05 and 1/60 requests/s, 100 output tokens each, one server carrying 0.05
requests/s at the SLO, $2/h on demand, $1.2/h reserved, scale to zero allowed, a 60 s peak window at the 0.99
quantile:

- arrivals per window are Poisson with mean 0, 3 and 1. Poisson(3)'s CDF: 0.0498, 0.1991, 0.4232, 0.6472,
  0.8153, 0.9161, 0.9665, 0.9881 (7), 0.9962 (8), so its 0.99 quantile is 8 and the peak 8/60 req/s; Poisson(1):
  0.3679, 0.7358, 0.9197, 0.9810 (3), 0.9963 (4): 4, so 4/60 req/s;
- servers: 0; ceil((8/60)/0.05) = ceil(2.67) = 3; ceil((4/60)/0.05) = ceil(1.33) = 2;
- 5 server-hours in 3 h, so 40 a day and $80/day on demand;
- 180 + 60 = 240 requests in 3 h: 1,920 a day, 192,000 output tokens: $80 / 0.192 = $416.67 per 1M;
- utilisation 240 / (5 h x 3600 x 0.05) = 240 / 900 = 26.7%, idle 73.3%;
- reserved base: b=0 $10, b=1 3.6 + 3 x 2 = $9.6, b=2 7.2 + 1 x 2 = $9.2, b=3 $10.8 per 3 h: b=2, $73.6/day;
- at the low end 0.04 req/s: ceil(3.33) = 4 and ceil(1.67) = 2 servers: one interval one short, one
  server-hour per 3 h: $16/day;
- cold start: 180 s + 120 s = 300 s lead; one rise (0 -> 3): 3 x 300 s at $2/h = $0.50 per 3 h, $4/day; the new
  rate 0.05 is above what 0 servers carry, so 0.05 x 300 = 15 requests per 3 h miss: 120 a day.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.fleet.cold_start import cold_start_cost
from accelbench.fleet.sizing import Rules, peak_rate, reserved_split, servers_for, size_fleet
from accelbench.fleet.traffic import read_traffic

PROFILE = """\
interval_s: 3600
input_tokens: 500
output_tokens: 100
intervals:
  - requests_per_s: 0
  - requests_per_s: 0.05
  - requests_per_s: 0.0166666666666666667
"""


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "day.yaml"
    path.write_text(PROFILE)
    return path


def test_hand_computed_case(profile: Path) -> None:
    traffic = read_traffic(profile)
    rules = Rules(window_s=60, quantile=0.99, min_servers=0)
    sizing = size_fleet(traffic.intervals, 0.05, rules, hourly=2.0, reserved_hourly=1.2, low=0.04)
    assert [p.servers for p in sizing.intervals] == [0, 3, 2]
    assert [p.peak_requests_per_s for p in sizing.intervals] == pytest.approx([0, 8 / 60, 4 / 60])
    assert sizing.server_hours_per_day == pytest.approx(40)
    assert sizing.usd_per_day == pytest.approx(80)
    assert sizing.usd_per_million_tokens == pytest.approx(80 / 0.192)
    assert sizing.utilisation == pytest.approx(240 / 900)
    assert sizing.idle_share == pytest.approx(1 - 240 / 900)
    assert sizing.reserved_base_servers == 2
    assert sizing.usd_per_day_reserved == pytest.approx(73.6)
    risk = sizing.slo_risk
    assert risk is not None
    assert (risk.intervals_short, risk.servers_short_max) == (1, 1)
    assert risk.usd_per_day_to_cover == pytest.approx(16)
    cold = cold_start_cost(
        sizing.intervals, 0.05, hourly=2.0, provision=(180, "given"), ready=(120, "measured")
    )
    assert (cold.lead_s, cold.rises, cold.servers_added) == (300, 1, 3)
    assert cold.usd_per_day == pytest.approx(4)
    assert cold.late_misses_per_day == pytest.approx(120)
    (step,) = cold.steps
    assert (step.start_at_s, step.rise_at_s, step.add, step.late_misses) == (3300, 3600, 3, pytest.approx(15))


def test_burstier_traffic_needs_more_headroom() -> None:
    rules = Rules(window_s=60, quantile=0.99)
    poisson = peak_rate(1.0, 3600, 1.0, rules)
    bursty = peak_rate(1.0, 3600, 4.0, rules)
    assert 1.0 < poisson < bursty
    assert peak_rate(0.0, 3600, 1.0, rules) == 0.0


def test_servers_and_reserved_edges() -> None:
    assert servers_for(0.3, 0.1, 1) == 3  # 0.3 / 0.1 is 2.9999999999999996 in floating point: still 3
    assert servers_for(0.0, 0.1, 1) == 1
    assert reserved_split([2, 2], [3600, 3600], on_demand=2.0, reserved=1.0) == (2, pytest.approx(4.0))
    assert reserved_split([0, 4], [3600, 3600], on_demand=2.0, reserved=1.5)[0] == 0  # a peak half the time


def test_rules_refuse_nonsense() -> None:
    from accelbench.errors import UserInputError

    with pytest.raises(UserInputError, match="quantile"):
        Rules(quantile=1.0)
    with pytest.raises(UserInputError, match="min-servers"):
        Rules(min_servers=-1)
