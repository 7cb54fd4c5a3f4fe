"""Form errors in plain words: pydantic's refusals become one sentence per form field, starting with the field's
label as the form shows it, never pydantic's own wording; the Estimate form keeps what was typed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from accelbench.domain.plan_query import EstimateQuery
from accelbench.web.form_errors import field_errors, plain_message
from accelbench.web.pages import ESTIMATE_LABELS, estimate_query


def _refusal(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        EstimateQuery(model="qwen2.5-7b-instruct", **values)  # type: ignore[arg-type]
    return info.value


def test_bounds_and_numbers_in_plain_words() -> None:
    errors = field_errors(
        _refusal(concurrency="0", input_len="-3", output_len="abc", max_cost="0"), ESTIMATE_LABELS
    )
    assert errors == {
        "concurrency": "Concurrency must be at least 1.",
        "input_len": "Input tokens must be at least 1.",
        "output_len": "Output tokens must be a whole number (you typed 'abc').",
        "max_cost": "Max $/h must be more than 0.",
    }
    assert not any("Input should" in e or "greater than" in e for e in errors.values())


def test_choices_and_a_models_own_refusal() -> None:
    errors = field_errors(_refusal(goal="fast", quantization="fp4"), ESTIMATE_LABELS)
    assert errors["goal"] == "Choose for must be one of cost or latency (you typed 'fast')."
    assert errors["quantization"].startswith("Quantization: unknown quantization 'fp4'; use one of")
    assert "Value error" not in errors["quantization"]


def test_an_error_on_no_form_field_is_the_forms_and_renamed_fields_land_on_theirs() -> None:
    errors = field_errors(_refusal(limit="0", concurrency="0"), {"concurrency": "Users"})
    assert errors == {"": "Limit must be at least 1.", "concurrency": "Users must be at least 1."}
    errors = field_errors(_refusal(concurrency="x"), {"users": "Users"}, {"concurrency": "users"})
    assert errors == {"users": "Users must be a whole number (you typed 'x')."}


def test_large_bounds_read_as_numbers() -> None:
    message = plain_message(
        {"type": "less_than_equal", "loc": ("x",), "msg": "", "input": "1", "ctx": {"le": 100_000.0}}, "Rows"
    )
    assert message == "Rows must be at most 100,000."


def test_estimate_form_keeps_quiet_until_a_model_is_given() -> None:
    typed = {"concurrency": "0", "input_len": "-3", "model": ""}
    query, errors = estimate_query(typed, alternatives=False)
    assert query is None and set(errors) == {"concurrency", "input_len"}  # no "model is required" yet
    query, errors = estimate_query({"model": " qwen2.5-7b-instruct ", "concurrency": "4"}, alternatives=True)
    assert errors == {} and query is not None
    assert (query.model, query.concurrency, query.alternatives, query.input_len) == (
        "qwen2.5-7b-instruct", 4, True, EstimateQuery.model_fields["input_len"].default,
    )  # fmt: skip


def test_fleet_form_says_nothing_until_asked_then_every_wrong_field() -> None:
    from accelbench.web.fleet_page import fleet_form_request

    request, errors = fleet_form_request({"percentile": "100", "interval": "0", "slo": ""})
    assert request is None
    assert errors == {
        "percentile": "Percentile must be less than 100.",
        "interval": "Interval (s) must be more than 0.",
    }
    request, errors = fleet_form_request({"traffic": "nowhere/at/all.jsonl", "model": "m", "slo": "ttft:1"})
    assert request is None and errors["traffic"].startswith("traffic 'nowhere/at/all.jsonl'")
