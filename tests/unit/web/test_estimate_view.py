"""The Estimate page's view of a ranked estimate: the SLO verdict in words (which target is missed
and by how much), the measured badge, the sort keys, and the cost vs latency chart's data."""

from __future__ import annotations

from typing import Any

from accelbench.domain.estimate import SLO
from accelbench.domain.plan_query import EstimateQuery
from accelbench.services.planning import estimate
from accelbench.web.estimate_view import chart_metric, estimate_page_view, measured_text, slo_verdict


def _row(**kw: Any) -> dict[str, Any]:
    base = {"instance": "g6.xlarge", "accelerator_type": "gpu", "feasible": True, "ttft_ms": 300.0,
            "tpot_ms": 20.0, "e2e_ms": 3000.0, "usd_per_million_output_tokens": 2.5, "hourly_usd": 0.8,
            "slo_met": True, "max_concurrency_meeting_slo": 16}  # fmt: skip
    return base | kw


def test_a_missed_slo_names_each_target_missed_and_by_how_much() -> None:
    slo = SLO(ttft_ms=500, tpot_ms=40)
    v = slo_verdict(_row(ttft_ms=750.0, tpot_ms=50.0, slo_met=False, max_concurrency_meeting_slo=2), slo, 8)
    assert v["state"] == "missed"
    assert [(m["metric"], round(m["over_pct"])) for m in v["misses"]] == [("TTFT", 50), ("TPOT", 25)]
    assert (
        v["text"]
        == "missed: TTFT 750 ms > 500 ms (+50%); TPOT 50.00 ms > 40 ms (+25%) (met up to 2 in flight)"
    )
    never = slo_verdict(_row(tpot_ms=44.0, slo_met=False, max_concurrency_meeting_slo=0), SLO(tpot_ms=40), 1)
    assert never["text"] == "missed: TPOT 44.00 ms > 40 ms (+10%) (even at 1 in flight)"
    assert 1 < never["sort"] < v["sort"]  # a smaller miss sorts before a larger one, both after every met row


def test_met_unfit_and_no_slo() -> None:
    slo = SLO(tpot_ms=40)
    met = slo_verdict(_row(), slo, 8)
    assert met == {"state": "met", "text": "met; up to 16 in flight", "misses": [], "sort": 0.0}
    assert slo_verdict(_row(max_concurrency_meeting_slo=8), slo, 8)["text"] == "met"
    assert slo_verdict(_row(feasible=False, slo_met=None), slo, 8)["state"] == "unfit"
    assert slo_verdict(_row(), None, 8)["state"] == "none"


def test_measured_badge_only_for_this_model() -> None:
    assert measured_text(_row(has_benchmark_data=True))["text"] == "measured"  # type: ignore[index]
    other = measured_text(_row(has_benchmark_data=False, measured_other_models=["llama-3.1-8b-instruct"]))
    assert other is not None and other["kind"] == "other"
    assert other["text"] == "other model measured here: llama-3.1-8b-instruct"
    assert measured_text(_row()) is None


def test_the_chart_follows_the_slo_target() -> None:
    assert chart_metric(None) == "tpot"
    assert chart_metric(SLO(ttft_ms=500)) == "ttft"
    assert chart_metric(SLO(ttft_ms=500, tpot_ms=40)) == "tpot"
    assert chart_metric(SLO(e2e_ms=5000)) == "tpot"


def test_the_page_view_of_a_real_ranked_estimate() -> None:
    query = EstimateQuery(model="qwen2.5-7b-instruct", slo="ttft:400", concurrency=4, limit=200)
    result = estimate(None, query)
    view = estimate_page_view(result, slo_text=query.slo, concurrency=4)
    rows = view["rows"]
    assert len(rows) == 200 and [r["rank"] for r in rows] == list(range(1, 201))
    states = [r["slo"]["state"] for r in rows]
    met, missed = states.count("met"), states.count("missed")
    assert (
        met
        and missed
        and view["counts"] == {"met": met, "missed": missed, "unfit": states.count("unfit"), "none": 0}
    )
    assert states == ["met"] * met + ["missed"] * missed + ["unfit"] * (
        200 - met - missed
    )  # the planner's order
    assert all("TTFT" in r["slo"]["text"] for r in rows if r["slo"]["state"] == "missed")
    chart = view["chart"]
    assert chart["x_title"] == "predicted TTFT p50 (ms)" and chart["target"] == 400
    by_state = {t["state"]: t for t in chart["traces"]}
    assert set(by_state) == {"met", "missed"}
    assert all(x <= 400 for x in by_state["met"]["x"]) and all(x > 400 for x in by_state["missed"]["x"])
    first = next(r for r in rows if r["slo"]["state"] == "met" and r["usd_per_million_output_tokens"])
    assert first["instance"] in by_state["met"]["text"][0]
    assert float(first["sort"]["usd_per_million_output_tokens"]) == first["usd_per_million_output_tokens"]
    assert next(r for r in rows if not r["feasible"])["sort"]["tpot_ms"] == ""  # blank: sorted last


def test_no_slo_has_one_trace_and_no_verdicts() -> None:
    view = estimate_page_view(
        estimate(None, EstimateQuery(model="qwen2.5-7b-instruct", accelerator_type="gpu"))
    )
    assert view["slo"] is None and view["chart"]["target"] is None
    assert [t["state"] for t in view["chart"]["traces"]] == ["none"]
    assert view["chart"]["x_title"] == "predicted TPOT p50 (ms)"


def test_each_row_shows_its_80_percent_ranges_and_the_overlaps_of_its_cost_range() -> None:
    ranges = {
        "tpot_ms": {"p10": 16.0, "p90": 26.5, "basis": "out-of-source error on L4 x vllm x decode-bound"},
        "usd_per_million_output_tokens": {"p10": 2.0, "p90": 3.25, "basis": "hourly price"},
    }
    view = estimate_page_view({"rows": [_row(ranges=ranges, range_overlaps=["g5.xlarge"]), _row()]})
    first, bare = view["rows"]
    assert first["range_text"] == {
        "tpot_ms": "80% range 16.00-26.50 ms",
        "usd_per_million_output_tokens": "80% range $2.00-$3.25",
    }
    assert first["range_summary"] == (
        "80% ranges: TPOT 16.00-26.50 ms, $/1M output tok $2.00-$3.25 (out-of-source error on L4 x vllm x "
        "decode-bound). Cost range overlaps g5.xlarge: the order between them is not certain."
    )
    assert bare["range_text"] == {} and bare["range_summary"] == ""
    ranges["ttft_ms"] = {"p10": 90.0, "p90": 300.0, "basis": "borrowed from L40S x vllm x decode-bound"}
    (apart,) = estimate_page_view({"rows": [_row(ranges=ranges)]})["rows"]
    assert apart["range_summary"].endswith(
        "(TPOT: out-of-source error on L4 x vllm x decode-bound; TTFT: borrowed from L40S x vllm x decode-bound)."
    )


def test_one_refused_instance_is_shown_as_its_refusal_with_priced_alternatives() -> None:
    from accelbench.web.estimate_view import refusal_view

    query = EstimateQuery(model="llama-3.1-70b-instruct", instance_type="g6.xlarge")
    view = estimate_page_view(estimate(None, query))
    x = view["refusal"]
    assert x is not None and "does not fit g6.xlarge" in x["reason"]
    assert x["alternatives"] and x["alternatives"][0]["tier_label"] == "GPU"
    assert all(
        a["tpot_ms"] and a["output_tokens_per_s"] and a["usd_per_million_output_tokens"]
        for a in x["alternatives"]
    )
    assert x["predicted_for"] == "512 in / 128 out tokens, 1 in flight"
    assert (
        refusal_view(estimate(None, EstimateQuery(model="qwen2.5-7b-instruct", instance_type="g6.xlarge")))
        is None
    )
