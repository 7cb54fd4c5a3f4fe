"""The Estimate and Catalog pages in a real headless Chromium: an SLO's meeting rows first with the
SLO column and the cost vs latency chart, sortable columns, "measured" only for the model measured, the
catalog's search, sort and per-instance detail, and the 404 page for an unknown instance; no console error
and no request leaving the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelbench.catalog import get_catalog
from accelbench.domain.instance_types import Price
from accelbench.domain.run import RunStatus
from tests.e2e import pages
from tests.e2e.pages import Tab
from tests.support.live_server import LiveServer

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser

MODEL = "qwen2.5-7b-instruct"


def _money(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def _numbers(texts: list[str]) -> list[float]:
    return [float(t.replace(",", "")) for t in texts if t.strip() not in ("", "-")]


def test_estimate_with_an_slo_puts_meeting_rows_first(tab: Tab, artifacts_dir: Path) -> None:
    store = tab.server.store
    other = store.create_run(kind="run", model="llama-3.1-8b-instruct", instance_type="g6e.xlarge",
                             accelerator_type="gpu", engine="vllm")  # fmt: skip
    store.set_status(other.id, RunStatus.completed)
    own = store.create_run(kind="run", model="Qwen/Qwen2.5-7B-Instruct", instance_type="g6.xlarge",
                           accelerator_type="gpu", engine="vllm")  # fmt: skip
    store.set_status(own.id, RunStatus.completed)
    tab.goto(f"/estimate?model={MODEL}&slo=tpot:40&concurrency=4&limit=200")
    p = tab.page
    rows = p.locator("#estimate > tbody > tr")
    assert rows.count() == 200
    states = rows.evaluate_all("rs => rs.map(r => r.dataset.slo)")
    met = states.count("met")
    assert 0 < met < 200 and states[:met] == ["met"] * met and "met" not in states[met:]
    # the SLO column says which target a row misses and by how much; meeting rows by cost
    missed = p.locator("#estimate > tbody > tr[data-slo=missed]").first
    assert "missed: TPOT" in missed.locator("td.slo").inner_text() and "> 40 ms (+" in missed.inner_text()
    meeting_costs = [_money(t) for t in p.locator("#estimate > tbody > tr[data-slo=met] > td:nth-child(13)").all_inner_texts() if t != "-"]  # fmt: skip
    assert meeting_costs == sorted(meeting_costs)
    assert p.locator("#estimate thead th[data-key=slo]").inner_text().startswith("SLO")
    assert "meet TPOT <= 40 ms" in p.inner_text("#estimate-count")
    # measured only where this model was: g6.xlarge (its hub id), not g6e.xlarge (another model)
    assert p.locator("#estimate tr[data-instance='g6.xlarge'] .badge-measured").count() == 1
    g6e = p.locator("#estimate tr[data-instance='g6e.xlarge']")
    assert g6e.locator(".badge-measured").count() == 0
    assert "other model measured here: llama-3.1-8b-instruct" in g6e.inner_text()
    # the chart: a trace per verdict, the x axis the targeted TPOT, a point per priced feasible row
    p.wait_for_selector("#estimate-chart .main-svg")
    chart = p.evaluate(
        "() => { const d = document.getElementById('estimate-chart').data;"
        " return d.map(t => ({name: t.name, n: (t.x || []).length, text: t.text || []})); }"
    )
    names = [t["name"] for t in chart]
    assert names[:2] == ["meets the SLO", "misses the SLO"] and "TPOT target 40 ms" in names
    assert chart[0]["n"] > 0 and any("g6.xlarge" in t for t in chart[0]["text"] + chart[1]["text"])
    assert "predicted TPOT p50 (ms)" in p.inner_text("#estimate-chart")
    p.screenshot(path=str(artifacts_dir / "estimate-slo.png"), full_page=True)
    tab.assert_clean()


def test_sorting_a_column_reorders_the_rows(tab: Tab) -> None:
    tab.goto(f"/estimate?model={MODEL}&concurrency=4&limit=200")
    p = tab.page
    head = p.locator("#estimate thead th[data-key=tpot_ms]")
    tpot = "#estimate > tbody > tr > td:nth-child(8)"
    before = p.locator("#estimate > tbody > tr > td:nth-child(2)").all_inner_texts()
    head.locator("button").click()
    assert head.get_attribute("aria-sort") == "ascending"
    assert p.get_attribute("#estimate thead th[data-key=rank]", "aria-sort") == "none"
    up = _numbers(p.locator(tpot).all_inner_texts())
    assert up == sorted(up) and len(up) > 10
    assert p.locator("#estimate > tbody > tr > td:nth-child(2)").all_inner_texts() != before
    # blanks (rows that do not fit) stay last either way
    assert p.locator("#estimate > tbody > tr").last.get_attribute("data-feasible") == "no"
    head.locator("button").press("Enter")  # keyboard: the header is a button
    assert head.get_attribute("aria-sort") == "descending"
    down = _numbers(p.locator(tpot).all_inner_texts())
    assert down == sorted(down, reverse=True)
    assert p.locator("#estimate > tbody > tr").last.get_attribute("data-feasible") == "no"
    # back to the planner's rank
    p.locator("#estimate thead th[data-key=rank] button").click()
    assert p.locator("#estimate > tbody > tr > td:nth-child(2)").all_inner_texts() == before
    tab.assert_clean()


# ------------------------------------------------------------------------------------------- the catalog
VISIBLE = "#catalog > tbody > tr:not([hidden])"


def _prices(tab: Tab) -> list[float]:
    """The visible rows' on-demand prices in page order (an estimate's "est." tag dropped, blanks left out)."""
    cells = tab.page.locator(f"{VISIBLE} > td:nth-child(10)").all_inner_texts()
    return [_money(t.split()[0]) for t in cells if t.strip() != "-"]


def test_catalog_search_tiers_and_sort_are_kept_in_the_address(tab: Tab, artifacts_dir: Path) -> None:
    cat = get_catalog()
    l40s = [i.name for i in cat.instances if i.accelerator_name == "L40S"]
    tab.goto("/catalog")
    p = tab.page
    total = p.locator("#catalog > tbody > tr").count()
    assert total == len(cat.instances)
    assert p.inner_text("#catalog-count") == f"{total} of {total} instance types"
    p.keyboard.press("/")  # the shortcut to the search box
    p.keyboard.type("L40S")
    assert p.inner_text("#catalog-count") == f"{len(l40s)} of {total} instance types"
    assert p.locator(VISIBLE).evaluate_all("rs => rs.map(r => r.dataset.instance)") == l40s
    devices = set(p.locator(f"{VISIBLE} > td:nth-child(3)").all_inner_texts())
    assert devices and all(d.endswith(" x L40S") for d in devices), devices
    assert p.url.endswith("/catalog?q=L40S")
    # every word must match: two words narrow the rows
    p.fill("#catalog-q", "graviton4 metal")
    names = p.locator(VISIBLE).evaluate_all("rs => rs.map(r => r.dataset.instance)")
    assert names and all(".metal" in n and n.split(".")[0].endswith("8g") for n in names), names
    # with the CPU chip, ISA words: AMX rows only, their price ascending then descending on a header click
    p.fill("#catalog-q", "amx")
    p.click(".chip[data-tier='cpu']")
    amx = [i.name for i in cat.instances if i.accelerator_type.value == "cpu" and "amx" in i.cpu_isa]
    assert p.inner_text("#catalog-count") == f"{len(amx)} of {total} instance types"
    assert set(p.locator(f"{VISIBLE} > td:nth-child(2)").all_inner_texts()) == {"CPU"}
    price = p.locator("#catalog thead th[data-key=price]")
    price.locator("button").click()
    assert price.get_attribute("aria-sort") == "ascending"
    up = _prices(tab)
    assert len(up) == len(amx) and up == sorted(up) and up[0] < up[-1]
    price.locator("button").press("Enter")  # the header is a button: the keyboard sorts too
    assert price.get_attribute("aria-sort") == "descending"
    assert _prices(tab) == sorted(up, reverse=True)
    assert p.url.endswith("/catalog?accelerator_type=cpu&q=amx&sort=price&dir=desc")
    gpu_chip = p.get_attribute(".chip[data-tier='gpu']", "href")
    assert gpu_chip == "/catalog?accelerator_type=gpu&q=amx&sort=price&dir=desc"  # a chip keeps the view
    p.screenshot(path=str(artifacts_dir / "catalog-search.png"), full_page=False)
    # the link is the same view, drawn by the server (filter, order, aria-sort, count) before any script runs
    link = p.url
    tab.goto("/catalog?accelerator_type=cpu&q=amx&sort=price&dir=desc")
    assert p.url == link and p.input_value("#catalog-q") == "amx"
    assert p.get_attribute("#catalog thead th[data-key=price]", "aria-sort") == "descending"
    assert _prices(tab) == sorted(up, reverse=True)
    # no match: the count says so and a line tells why the table is empty
    p.fill("#catalog-q", "no-such-accelerator")
    assert p.inner_text("#catalog-count") == f"0 of {total} instance types"
    assert p.locator("#catalog-empty").is_visible()
    tab.assert_clean()


def test_catalog_without_script_filters_on_the_server(browser: Any, server: LiveServer) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(server.url + "/catalog?q=l40s&sort=price")
        rows = page.locator(VISIBLE)
        names = [t.strip() for t in rows.locator("td:nth-child(1)").all_inner_texts()]
        l40s = sorted(
            (i for i in get_catalog().instances if i.accelerator_name == "L40S"),
            key=lambda i: (i.on_demand_usd is None, i.on_demand_usd or 0.0),
        )
        assert names == [i.name for i in l40s]
        total = len(get_catalog().instances)
        assert page.inner_text("#catalog-count") == f"{len(l40s)} of {total} instance types"
        # the form submits the search as ?q=, keeping the tier
        page.goto(server.url + "/catalog?accelerator_type=neuron")
        page.fill("#catalog-q", "inf2")
        page.press("#catalog-q", "Enter")
        page.wait_for_url("**/catalog?q=inf2&accelerator_type=neuron")
        shown = [t.strip() for t in page.locator(f"{VISIBLE} > td:nth-child(1)").all_inner_texts()]
        assert shown and all(n.startswith("inf2.") for n in shown)
    finally:
        context.close()


def test_catalog_detail_has_specs_sources_and_dated_prices(tab: Tab, artifacts_dir: Path) -> None:
    # a refreshed price, newer than the shipped snapshot: the one used, both listed with their dates
    refreshed = Price(instance_type="g6.xlarge", region="us-east-1", usd_per_hour=0.7512,
                      effective_date="2026-03-02", source="aws-pricing-api")  # fmt: skip
    tab.server.store.upsert_prices([refreshed])
    tab.goto("/catalog?q=g6.xlarge")
    p = tab.page
    link = p.locator("#catalog a[href='/catalog/g6.xlarge']")
    link.focus()  # reachable by keyboard: the instance name is a link
    p.keyboard.press("Enter")
    p.wait_for_url(f"{tab.server.url}/catalog/g6.xlarge")
    assert p.title().startswith("g6.xlarge")
    assert p.get_attribute("header.top a[href='/catalog']", "class") == "active"
    assert "1 x L4" in p.inner_text("#instance-summary") and "$0.751/h" in p.inner_text("#instance-summary")
    specs = dict(
        zip(
            p.locator("#accelerator-facts th").all_inner_texts(),
            p.locator("#accelerator-facts td").all_inner_texts(),
            strict=True,
        )
    )
    assert specs["Device"] == "L4" and specs["Count"] == "1"
    assert specs["Memory bandwidth per device"] == "300 GB/s"
    assert specs["BF16 per device"].startswith("121 TFLOPS")
    assert specs["FP8 per device"].startswith("242 TFLOPS")
    assert specs["Interconnect per device"].startswith("-")
    instance = p.inner_text("#instance-facts")
    assert "Physical cores\t2" in instance and "Threads per core\t2" in instance
    source = p.locator("#instance-sources a[href='https://www.nvidia.com/en-us/data-center/l4/']")
    assert source.count() == 1 and "read 2026-11-30" in source.locator("xpath=..").inner_text()
    prices = p.locator("#instance-prices tbody tr")
    assert prices.count() == 2
    used = p.locator("#instance-prices tbody tr.chosen")
    assert used.count() == 1
    assert used.locator(".price-date").inner_text() == "2026-03-02"
    assert used.locator(".price-source").inner_text() == "aws-pricing-api"
    snapshot = prices.nth(1)
    assert snapshot.locator(".price-date").inner_text() == "2026-01-19"
    assert "aws-price-list snapshot" in snapshot.inner_text() and "$0.805" in snapshot.inner_text()
    # the other sizes of the family, this one marked
    assert p.locator("#instance-family tbody tr").count() == 8
    assert p.locator("#instance-family tr[aria-current=page]").inner_text().startswith("g6.xlarge")
    p.screenshot(path=str(artifacts_dir / "catalog-detail.png"), full_page=True)
    # a CPU instance shows its topology and ISA, AMX named
    tab.goto("/catalog/m7i.2xlarge")
    cpu = p.inner_text("#instance-facts")
    assert "Physical cores\t4" in cpu and "AMX\tyes" in cpu and "amx_bf16" in cpu
    assert "Cores per socket\t48" in p.inner_text("#cpu-facts")
    assert p.locator("#accelerator-facts").count() == 0
    tab.assert_clean()
    resp = tab.goto("/catalog/g6.nosuchsize")
    assert resp.status == 404 and "Unknown instance type 'g6.nosuchsize'" in p.inner_text(".alert.error")
