"""Form errors on the form in a real headless Chromium: a wrong value is said in plain words beside its field,
what was typed stays in the fields, and the page is the form, not an error page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import pages
from tests.e2e.pages import Tab

pytestmark = pytest.mark.browser

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab


def field_error(tab: Tab, name: str) -> str:
    """The sentence beside a field: the element its input names in aria-describedby."""
    field = tab.page.locator(f"[name={name}]")
    assert field.get_attribute("aria-invalid") == "true"
    described = field.get_attribute("aria-describedby")
    return str(tab.page.inner_text(f"#{described}"))


def test_estimate_errors_beside_their_fields_with_the_typed_values_kept(
    tab: Tab, artifacts_dir: Path
) -> None:
    response = tab.goto("/estimate?concurrency=0&input_len=-3")
    p = tab.page
    assert response.status == 200
    assert p.inner_text("h1") == "Estimate" and "Something is not right" not in p.content()
    assert field_error(tab, "concurrency") == "Concurrency must be at least 1."
    assert field_error(tab, "input_len") == "Input tokens must be at least 1."
    assert p.input_value("[name=concurrency]") == "0" and p.input_value("[name=input_len]") == "-3"
    # the error sits inside the field's own label, not in a banner above the form
    label = p.locator("label", has=p.locator("[name=concurrency]"))
    assert "Concurrency must be at least 1." in label.inner_text()
    assert p.locator("[name=output_len]").get_attribute("aria-invalid") is None
    p.screenshot(path=str(artifacts_dir / "estimate-form-errors.png"), full_page=True)

    # with a model and a wrong choice: the model is kept, the estimate is not run, the choice is named
    tab.goto("/estimate?model=qwen2.5-7b-instruct&goal=fast&concurrency=2")
    assert field_error(tab, "goal") == "Choose for must be one of cost or latency (you typed 'fast')."
    assert p.input_value("#model") == "qwen2.5-7b-instruct" and p.input_value("[name=concurrency]") == "2"
    assert p.locator("#estimate").count() == 0
    # corrected, the same form estimates
    p.select_option("[name=goal]", "cost")
    p.click("#estimate-form button[type=submit]")
    p.wait_for_selector("#estimate")
    assert p.locator(".field-error").count() == 0
    tab.assert_clean()


def test_fleet_compare_and_runs_errors_beside_their_fields(tab: Tab) -> None:
    p = tab.page
    tab.goto("/fleet?percentile=100&interval=0&instances=g6.xlarge")
    assert p.inner_text("h1") == "Fleet"
    assert field_error(tab, "percentile") == "Percentile must be less than 100."
    assert field_error(tab, "interval") == "Interval (s) must be more than 0."
    assert p.input_value("[name=percentile]") == "100" and p.input_value("#instances") == "g6.xlarge"
    assert (
        p.locator("[name=traffic]").get_attribute("aria-invalid") is None
    )  # not filled in yet: no complaint

    tab.goto("/compare?tier=gold&percentiles=50,77")
    assert p.inner_text("h1") == "Compare runs"
    assert field_error(tab, "tier").startswith("Price tier 'gold' is not one of on_demand")
    assert field_error(tab, "percentiles").startswith("Percentile '77' is not one accelbench stores.")
    assert p.input_value("#compare-percentiles") == "50,77"

    # a filter that is not one of its choices: said beside it, the other filter still applied
    tab.server.store.create_run(
        kind="run", label="on a gpu", model="m", accelerator_type="gpu", target="local"
    )
    tab.goto("/runs?status=bogus&accelerator_type=cpu")
    assert p.inner_text("h1") == "Runs"
    assert field_error(tab, "status").startswith("Status 'bogus' is not one of pending, ")
    assert p.input_value("[name=accelerator_type]") == "cpu" and "on a gpu" not in p.inner_text("main")
    tab.assert_clean()
