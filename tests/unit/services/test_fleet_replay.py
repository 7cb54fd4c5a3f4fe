"""What `fleet --validate` replays: one server's share of the interval with the highest load per server, a trace
thinned by its server count (its own timing kept), a profile drawn as Poisson arrivals at the per-server rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.errors import UserInputError
from accelbench.fleet.result import Candidate, ServerCapacity
from accelbench.fleet.sizing import Rules, size_fleet
from accelbench.fleet.traffic import read_traffic
from accelbench.services.fleet_validate import busiest, replay_options, replay_rows


def _candidate(traffic, capacity: float) -> Candidate:
    from accelbench.fleet.cold_start import cold_start_cost

    sizing = size_fleet(traffic.intervals, capacity, Rules(window_s=10), hourly=None)
    cold = cold_start_cost(
        sizing.intervals, capacity, hourly=None, provision=(0, "given"), ready=(0, "given")
    )
    servers = [p.servers for p in sizing.intervals]
    return Candidate(instance="local", tier="cpu", hourly_usd=None, min_servers=min(servers),
                     max_servers=max(servers), capacity=ServerCapacity(requests_per_s=capacity, source="measured",
                     detail="test"), cold_start=cold, **sizing.model_dump())  # fmt: skip


def test_a_trace_is_thinned_to_one_servers_share_of_the_busiest_interval(tmp_path: Path) -> None:
    # 100 s at 1 request/s, then 100 s at 4 requests/s (every 0.25 s)
    times = [i * 1.0 for i in range(100)] + [100 + i * 0.25 for i in range(400)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": t * 1000, "input_length": 50, "output_length": 5}) + "\n"
                            for t in times))  # fmt: skip
    traffic = read_traffic(path, interval_s=100, window_s=10)
    cand = _candidate(traffic, capacity=1.5)
    j = busiest(cand)
    assert j == 1 and cand.intervals[1].servers >= 3
    rows, how = replay_rows(traffic, cand, 10_000, seed=1)
    share = len(rows) / 400
    assert share == pytest.approx(1 / cand.intervals[1].servers, abs=0.08)
    assert "probability 1/" in how
    assert all(0 <= r["timestamp"] < 100_000 for r in rows)  # from the interval's start, in ms
    assert all(r["timestamp"] % 250 == 0 for r in rows)  # the trace's own send times, thinned
    assert len(replay_rows(traffic, cand, 20, seed=1)[0]) == 20


def test_a_profile_is_drawn_as_poisson_at_the_per_server_rate(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("interval_s: 600\ninput_tokens: 300\noutput_tokens: 30\nintervals:\n"
                    "  - requests_per_s: 1\n  - requests_per_s: 9\n")  # fmt: skip
    traffic = read_traffic(path)
    cand = _candidate(traffic, capacity=4.0)
    j = busiest(cand)
    rate = traffic.intervals[j].requests_per_s / cand.intervals[j].servers
    rows, how = replay_rows(traffic, cand, 2000, seed=3)
    span = (rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1000
    assert (len(rows) - 1) / span == pytest.approx(rate, rel=0.1)
    assert {(r["input_length"], r["output_length"]) for r in rows} == {(300, 30)}
    assert "Poisson" in how


def test_replay_count_is_bounded() -> None:
    with pytest.raises(UserInputError, match="--validate-requests 1 is outside"):
        replay_options(1)
