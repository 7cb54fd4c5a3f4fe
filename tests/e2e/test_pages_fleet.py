"""The Fleet page in a real headless Chromium: the ranked table in the service's order, the sentences, the chart of
servers over the day (one line per candidate), a bad traffic file's refusal naming file, line and field; no
console error and no request leaving the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.services.fleet_plan import fleet_request, plan_fleet
from tests.e2e import pages
from tests.e2e.pages import Tab

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser

PROFILE = "input_tokens: 512\noutput_tokens: 128\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.2, 0.2, 1.0, 2.5, 1.5, 0.4)
)
INSTANCES = "g6.xlarge,g6e.xlarge,inf2.8xlarge"


def test_fleet_page_shows_the_plan_and_its_chart(tab: Tab, tmp_path: Path, artifacts_dir: Path) -> None:
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    want = plan_fleet(
        None,
        fleet_request(
            traffic=str(traffic),
            model="llama-3.1-8b-instruct",
            slo="ttft:2000,tpot:100",
            instances=INSTANCES.split(","),
        ),
    )
    tab.goto(
        f"/fleet?traffic={traffic}&model=llama-3.1-8b-instruct&slo=ttft:2000,tpot:100&instances={INSTANCES}"
    )
    p = tab.page
    names = p.locator("#fleet > tbody > tr > td:nth-child(2)").all_inner_texts()
    assert names == [c.instance for c in want.candidates]
    assert "Cheapest: " + want.candidates[0].instance in p.inner_text(".fleet-lines")
    first = p.locator("#fleet-servers > tbody > tr > td:nth-child(4)").all_inner_texts()
    assert [int(x) for x in first] == [i.servers for i in want.candidates[0].intervals]
    p.wait_for_selector("#fleet-chart .main-svg")
    traces = p.evaluate("() => document.getElementById('fleet-chart').data.map(t => t.name)")
    assert traces == names
    p.screenshot(path=str(artifacts_dir / "fleet.png"), full_page=True)
    tab.assert_clean()


def test_fleet_page_refuses_a_bad_traffic_file(tab: Tab, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("requests_per_s,input_tokens,output_tokens\n1,100,10\n-1,100,10\n")
    tab.goto(f"/fleet?traffic={bad}&model=llama-3.1-8b-instruct&slo=ttft:2000")
    assert "bad.csv:3: requests_per_s must be at least 0" in tab.page.inner_text(".alert.error")
    tab.assert_clean()
