"""The fleet use case on a real store: a measured capacity run of the same model, instance, SLO and lengths is
used before the planner's prediction, stored deployments' ready_s set the cold start, a bad traffic file is
refused before anything is read or written, and the JSON carries the agreed keys ranked cheapest first."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.domain.capacity import CapacityResult, CapacitySLO, Probe
from accelbench.domain.run import RunStatus
from accelbench.errors import UserInputError
from accelbench.services.fleet_plan import fleet_request, plan_fleet
from accelbench.store import Store

MODEL = "smollm2-135m-instruct"
SLO = CapacitySLO(targets={"ttft": 2000.0, "tpot": 100.0}, percentile=90.0, attainment=0.95)
PROFILE = "input_tokens: 256\noutput_tokens: 64\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.5, 0.5, 3, 6, 3, 0.5)
)


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "day.yaml"
    path.write_text(PROFILE)
    return path


def _store_measured(store: Store, rps: float) -> str:
    result = CapacityResult(
        load="request_rate",
        slo=SLO,
        max_load=rps,
        max_load_range=[rps * 0.8, rps * 1.2],
        requests_per_s_at_max=rps,
        probes=[Probe(level=rps, requests=50, requests_per_s=rps, met=True, why="meets the SLO")],
    )
    run = store.create_run(
        kind="capacity",
        model=MODEL,
        instance_type="m8i.2xlarge",
        accelerator_type="cpu",
        spec={"capacity": {"load": "request_rate", "input_len": 250, "output_len": 60}},
        extra={"capacity": result.model_dump(mode="json"), "deployment": {"ready_s": 42.0}},
    )
    store.set_status(run.id, RunStatus.completed)
    return run.id


def test_measured_capacity_and_ready_s_come_from_the_store(store: Store, tmp_path: Path) -> None:
    run_id = _store_measured(store, 2.0)
    request = fleet_request(
        traffic=str(_profile(tmp_path)),
        model=MODEL,
        slo="ttft:2000,tpot:100",
        instances=["m8i.2xlarge", "m8i.4xlarge"],
    )
    plan = plan_fleet(store, request)
    got = {c.instance: c for c in plan.candidates}
    measured = got["m8i.2xlarge"]
    assert measured.capacity.source == "measured" and measured.capacity.run_id == run_id
    assert measured.capacity.requests_per_s == 2.0
    # the search's 90% confidence range: at its low end (1.6 req/s) the 6 req/s interval needs 5 servers, not 4
    assert (measured.capacity.low, measured.capacity.high) == pytest.approx((1.6, 2.4))
    assert measured.slo_risk is not None and measured.slo_risk.intervals_short >= 1
    assert measured.cold_start.ready_s == 42.0 and "stored deployment" in measured.cold_start.ready_source
    # 0.99 quantiles of Poisson(60 x rate) per 60 s window: 212/60 and 405/60 req/s at 3 and 6 req/s, over 2 each
    assert [i.servers for i in measured.intervals] == [1, 1, 2, 4, 2, 1]
    if "m8i.4xlarge" in got:
        assert got["m8i.4xlarge"].capacity.source == "predicted"
    data = plan.public_json()
    costs = [c["usd_per_day"] for c in data["candidates"]]
    assert costs == sorted(costs)
    for c in data["candidates"]:
        assert {
            "instance",
            "hourly_usd",
            "usd_per_day",
            "usd_per_million_tokens",
            "idle_share",
            "capacity_source",
        } <= set(c)
        assert c["capacity_source"] in ("measured", "predicted")
        for i in c["intervals"]:
            assert {"start_s", "seconds", "requests_per_s", "servers"} <= set(i)


def test_another_slo_is_not_the_measured_capacity(store: Store, tmp_path: Path) -> None:
    _store_measured(store, 2.0)
    request = fleet_request(
        traffic=str(_profile(tmp_path)), model=MODEL, slo="ttft:500", instances=["m8i.2xlarge"]
    )
    try:
        plan = plan_fleet(store, request)
    except UserInputError:
        return  # the planner finds no load meeting the tighter SLO: refused, which is also not the measured run
    assert plan.candidates[0].capacity.source == "predicted"


def test_bad_traffic_changes_nothing_stored(store: Store, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("input_tokens: 5\noutput_tokens: 5\nintervals:\n  - requests_per_s: lots\n")
    before = store.list_runs(limit=100)[1]
    with pytest.raises(UserInputError, match=r"bad\.yaml:4: requests_per_s must be a number"):
        plan_fleet(
            store, fleet_request(traffic=str(bad), model=MODEL, slo="ttft:2000", instances=["m8i.2xlarge"])
        )
    assert store.list_runs(limit=100)[1] == before


def test_request_fields_are_checked() -> None:
    with pytest.raises(UserInputError, match="peak_quantile"):
        fleet_request(traffic="x.yaml", model=MODEL, slo="ttft:1", peak_quantile=1.5)
    with pytest.raises(UserInputError, match="Unknown SLO metric"):
        fleet_request(traffic="x.yaml", model=MODEL, slo="speed:1").target()


def test_reserved_discount_is_an_assumption_said_as_such(tmp_path: Path) -> None:
    request = fleet_request(
        traffic=str(_profile(tmp_path)), model=MODEL, slo="ttft:2000,tpot:100", instances=["m8i.2xlarge"],
        reserved_discount=0.4,
    )  # fmt: skip
    plan = plan_fleet(None, request)
    c = plan.candidates[0]
    assert c.hourly_usd is not None and c.reserved_hourly_usd == pytest.approx(c.hourly_usd * 0.6)
    assert "assumed 40% below on demand" in (c.reserved_price_source or "")
    assert c.usd_per_day_reserved is not None and c.usd_per_day is not None
    assert c.usd_per_day_reserved <= c.usd_per_day
