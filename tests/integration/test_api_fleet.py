"""POST /api/v1/fleet: the same ranked plan as the CLI's JSON, a traffic file outside the data roots refused,
a bad traffic file a 400 naming file, line and field, and nothing stored either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.services.fleet_plan import fleet_request, plan_fleet
from accelbench.store import Store
from tests.support.api_app import api_for

PROFILE = "input_tokens: 512\noutput_tokens: 128\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.2, 0.2, 1.0, 2.5, 1.5, 0.4)
)
BODY = {
    "model": "llama-3.1-8b-instruct",
    "slo": "ttft:2000,tpot:100",
    "instances": ["g6.xlarge", "g6e.xlarge", "inf2.8xlarge"],
}


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def test_the_api_answers_the_cli_plan(api, store: Store, tmp_path: Path) -> None:
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    r = api.client.post("/api/v1/fleet", json={**BODY, "traffic": str(traffic)})
    assert r.status_code == 200, r.text
    got = r.json()
    want = plan_fleet(store, fleet_request(traffic=str(traffic), **BODY)).public_json()
    assert [c["instance"] for c in got["candidates"]] == [c["instance"] for c in want["candidates"]]
    assert [c["usd_per_day"] for c in got["candidates"]] == pytest.approx(
        [c["usd_per_day"] for c in want["candidates"]]
    )
    first = got["candidates"][0]
    assert [i["servers"] for i in first["intervals"]] == [
        i["servers"] for i in want["candidates"][0]["intervals"]
    ]
    assert store.list_runs(limit=10)[1] == 0


def test_bad_traffic_is_a_400_and_stores_nothing(api, store: Store, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("input_tokens: 5\noutput_tokens: 5\nintervals:\n  - requests_per_s: lots\n")
    r = api.client.post("/api/v1/fleet", json={**BODY, "traffic": str(bad)})
    assert r.status_code == 400
    assert "bad.yaml:4: requests_per_s must be a number" in r.text
    r = api.client.post("/api/v1/fleet", json={**BODY, "traffic": "/etc/passwd"})
    assert r.status_code == 400 and "data roots" in r.text
    assert store.list_runs(limit=10)[1] == 0
