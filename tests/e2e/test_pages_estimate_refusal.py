"""The Estimate page for one instance that cannot serve the model, in a real headless Chromium: the reason is
shown open (not folded, not a row of dashes), then the cheapest instances that fit with their predicted
speed and cost, and the changes of the reader's own settings that would make the instance work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import pages
from tests.e2e.pages import Tab

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser


def test_an_infeasible_estimate_shows_its_reason_and_the_instances_that_fit(
    tab: Tab, artifacts_dir: Path
) -> None:
    tab.goto("/estimate?model=llama-3.1-70b-instruct&instance_type=g6.xlarge")
    p = tab.page
    refusal = p.locator("#estimate-refusal")
    assert refusal.is_visible()
    reason = refusal.locator(".reason")
    assert reason.is_visible() and "does not fit g6.xlarge" in reason.inner_text()
    assert p.locator("#estimate").count() == 0  # no ranked table with a row of dashes
    assert "No change of your own settings" in p.locator("#refusal-no-change").inner_text()
    rows = p.locator("#refusal-alternatives tbody tr")
    assert rows.count() >= 2
    first = rows.first.locator("td").all_inner_texts()
    assert first[1].startswith("GPU")  # the kind asked for first
    tpot, tok_s, usd = first[7], first[8], first[9]
    assert float(tpot.replace(",", "")) > 0 and float(tok_s.replace(",", "")) > 0 and usd.startswith("$")
    p.screenshot(path=str(artifacts_dir / "estimate-refusal.png"), full_page=True)
    p.set_viewport_size({"width": 1024, "height": 900})
    assert refusal.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the refusal overflows at 1024 px"
    p.screenshot(path=str(artifacts_dir / "estimate-refusal-1024.png"), full_page=True)
    # a context asked for that does not fit: the change that would make it work is offered, as a choice
    tab.goto(
        "/estimate?model=llama-3.1-8b-instruct&instance_type=g6.xlarge&quantization=none&min_context=131072"
    )
    changes = p.locator("#refusal-changes li")
    assert changes.count() >= 1 and "--max-model-len 16384" in changes.first.inner_text()
    assert "your choice" in p.locator("#estimate-refusal").inner_text()
    tab.assert_clean()
