"""The one rule for which latency percentiles the human views show."""

from __future__ import annotations

import pytest

from accelbench.domain.bench_summary import MetricStats
from accelbench.errors import UserInputError
from accelbench.report.percentiles import DEFAULT, label, parse_percentiles, value, values


def test_default_is_p50_p90_p99(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELBENCH_PERCENTILES", raising=False)
    assert parse_percentiles(None) == (50, 90, 99) == DEFAULT
    assert parse_percentiles("  ") == DEFAULT


def test_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_PERCENTILES", "p95,50")
    assert parse_percentiles(None) == (50, 95)
    assert parse_percentiles("99") == (99,)  # an explicit choice wins over the environment


def test_spellings_sorted_and_unique() -> None:
    assert parse_percentiles("99, p50,50,P90") == (50, 90, 99)
    assert parse_percentiles([95, 50]) == (50, 95)


@pytest.mark.parametrize("bad", ["75", "p999", "fast", "50,100"])
def test_unstored_percentile_is_refused_with_the_choices(bad: str) -> None:
    with pytest.raises(UserInputError) as exc:
        parse_percentiles(bad)
    assert "50, 90, 95, 99" in (exc.value.hint or "")


def test_values_read_model_or_dict_and_none_without_requests() -> None:
    stats = MetricStats(count=3, p50=1.0, p90=2.0, p95=2.5, p99=3.0)
    assert values(stats, (50, 99)) == [1.0, 3.0]
    assert value(stats.model_dump(), 90) == 2.0
    assert value(MetricStats(), 50) is None
    assert value(None, 50) is None
    assert label(99) == "p99"
