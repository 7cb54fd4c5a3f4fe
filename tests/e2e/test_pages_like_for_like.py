"""Like for like in a real headless Chromium: the Compare page says first that two runs are not like for like and
names the difference, and a run's page shows what it served and its quality probe's score."""

from __future__ import annotations

import pytest

from accelbench.bench.quality import make_tasks, tally
from tests.e2e import pages
from tests.e2e.pages import Tab, seed

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser


def test_the_compare_page_and_the_run_page_say_what_was_served(tab: Tab) -> None:
    store = tab.server.store
    ids = seed(store)
    for name, dtype in (("cpu", "bf16"), ("gpu", "fp16")):
        served = {"weights_dtype": {"value": dtype, "source": "launch command"},
                  "max_model_len": {"value": 2048, "source": "/v1/models"}}  # fmt: skip
        store.merge_run_extra(ids[name], served=served)
    tasks = make_tasks(0, 10)
    quality = tally(tasks, [t.expected for t in tasks[:7]] + ["?"] * 3, [None] * 10) | {"source": "probe"}
    store.merge_run_extra(ids["cpu"], quality=quality)

    tab.goto(f"/compare?runs={ids['cpu']}&runs={ids['gpu']}")
    p = tab.page
    p.wait_for_selector("#comparison")
    verdict = p.inner_text("#like-for-like")
    assert "Like for like: no" in verdict and "gpu-l4 serves fp16 weights, cpu-sweep bf16" in verdict
    assert "Left out of the ratios and findings: gpu-l4" in verdict
    assert p.locator("#compare-pairs").count() == 0  # no ratio ranks the mismatched run

    tab.goto(f"/runs/{ids['cpu']}")
    assert "7 of 10 right (70%" in p.inner_text("#quality")
    served_text = p.inner_text("#served")
    assert "Weights dtype" in served_text and "launch command" in served_text and "unknown" in served_text
    tab.assert_clean()
