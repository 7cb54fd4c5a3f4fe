"""The planner graded on published measurements: rows predicted with their own settings, the load each row
describes, fits that start from the cited priors, and the measured error estimates quote."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from accelbench.domain.plan_query import PlanQuery
from accelbench.modelspec import load_model_spec
from accelbench.plan import accuracy as acc
from accelbench.plan import estimate
from accelbench.plan.error_records import is_moe_family, shipped_records
from accelbench.plan.hardware import default_factors, prior_factors
from accelbench.plan.public_data import PublicMeasurement, load_public_measurements
from accelbench.plan.range_grading import coverage
from accelbench.plan.ranges import _Rows, interval_for

RECORDS = shipped_records()


@pytest.fixture(scope="module")
def points() -> list[acc.PublicPoint]:
    pts, _ = acc.public_points(load_public_measurements().measurements)
    return pts


def _row(**over):
    base = {
        "id": "t1",
        "source": "s",
        "catalog_instance": "p5.48xlarge",
        "model": "llama-3.1-8b-instruct",
        "precision": "bf16",
        "engine": "vllm",
        "input_len": 1024,
        "output_len": 128,
        "lengths": "fixed",
        "load": "concurrency",
        "concurrency": 8,
        "tpot_ms": 10.0,
    }
    return base | over


def test_rows_are_predicted_with_their_own_settings_and_load() -> None:
    pts, skipped = acc.public_points(
        [
            _row(tensor_parallel_size=4),
            _row(id="t2", load="request_rate", request_rate=2.0, lengths="dataset"),
            _row(id="t3", load="request_rate", request_rate=math.inf, num_prompts=320),
            _row(id="t4", engine="tensorrt-llm"),
            _row(id="t5", model="no-such-model"),
            _row(id="t6", catalog_instance="not-an-instance"),
        ]
    )
    by = {p.id: p for p in pts}
    assert by["t1"].perf.tp == 4 and by["t1"].arrivals == "bursts" and by["t1"].modelled_engine
    assert by["t2"].arrivals == "steady" and by["t2"].request_rate == 2.0
    assert by["t3"].one_shot and by["t3"].concurrency == 320 and by["t3"].arrivals == "wave"
    assert not by["t4"].modelled_engine  # graded with vLLM's physics, reported apart, never fitted
    assert {s.id for s in skipped} == {"t5", "t6"}


def test_a_saturated_request_rate_has_no_ttft_and_is_not_graded_on_it(points) -> None:
    p = acc.public_points([_row(load="request_rate", request_rate=1e6, lengths="fixed", ttft_ms=100.0)])[0][0]
    f = default_factors("gpu", "vllm")
    pred = acc.predict_point(p, f)
    assert math.isinf(pred.ttft) and pred.out_tps > 0
    tpot, ttft, _ = acc.errors_of(p, f)
    assert tpot is None and ttft is None


def test_shipped_factors_do_better_than_the_cited_priors_on_the_public_data(points) -> None:
    modelled = [p for p in points if p.modelled_engine and p.kind == "gpu"]
    assert len({p.source for p in modelled}) >= 3
    priors = acc.grade(modelled, {"gpu": prior_factors("gpu", "vllm")})["gpu"]
    shipped = acc.grade(modelled)["gpu"]
    assert shipped.tpot_mape_pct is not None and priors.tpot_mape_pct is not None
    assert shipped.tpot_mape_pct < priors.tpot_mape_pct


def test_leave_one_source_out_fits_start_from_the_priors_not_the_shipped_values(points) -> None:
    neuron = [p for p in points if p.kind == "neuron"]
    held = neuron[0].source
    f = acc.fit_kind([p for p in neuron if p.source != held], acc._group_prior("neuron"))
    assert f != default_factors("neuron", "vllm-neuron")  # fitted without the held-out source
    assert acc._group_prior("neuron") == prior_factors("neuron", "vllm-neuron")
    loso = acc.leave_one_source_out(neuron)
    assert loso["neuron"].n_sources >= 2 and loso["neuron"].tpot_mape_pct is not None


def test_estimates_carry_80_percent_ranges_from_their_family_or_say_they_borrow() -> None:
    e = estimate(
        load_model_spec("llama-3.1-8b-instruct"),
        "p5.48xlarge",
        PlanQuery(input_len=512, output_len=64, concurrency=4),
    )
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s", "usd_per_million_output_tokens"):
        r = e.ranges[key]
        assert r.p10 < r.p90 and r.basis
    assert "H100/H200 x vllm" in e.ranges["tpot_ms"].basis and "sources" in e.ranges["tpot_ms"].basis
    assert "not validated" not in e.ranges["tpot_ms"].basis
    # too few published rows of vLLM CPU on Graviton: the range is borrowed from the pooled CPU error, widened,
    # and says so
    cpu = estimate(
        load_model_spec("qwen2.5-1.5b-instruct"),
        "c8g.4xlarge",
        PlanQuery(input_len=128, output_len=32, concurrency=1),
    )
    basis = cpu.ranges["tpot_ms"].basis
    assert basis.startswith("not validated on Graviton with this engine") and "widened" in basis
    # a family whose rows all come from one source says so, and its range is widened to hold the pool's
    xeon = estimate(
        load_model_spec("qwen2.5-1.5b-instruct"),
        "m7i.2xlarge",
        PlanQuery(input_len=128, output_len=32, concurrency=1, engine="llamacpp"),
    ).ranges["tpot_ms"]
    assert "Xeon AMX x llamacpp" in xeon.basis and "1 source" in xeon.basis and "widened" in xeon.basis
    # a borrowed range is the pooled CPU decode-bound error (dense models' rows), widened
    borrowed = interval_for(
        RECORDS, "tpot", family="Graviton", engine="vllm-cpu", regime="decode-bound", kind="cpu"
    )
    pooled = [r for r in RECORDS if r.kind == "cpu" and r.regime == "decode-bound" and r.tpot]
    lo, hi = _Rows(tuple(r for r in pooled if not is_moe_family(r.family)), "tpot").deciles()
    assert borrowed is not None and math.log(borrowed.hi / borrowed.lo) > hi - lo


def test_cpu_rows_run_with_their_threads_and_llamacpp_multiplies_in_int8() -> None:
    """A llama.cpp row with -t 2 on an 8-core Graviton is predicted on 2 cores' compute and bandwidth, and
    llama.cpp's 4-bit formats run its integer dot products (the INT8 rate), not a weight-only BF16 kernel."""
    row = _row(catalog_instance="c7g.2xlarge", precision="int4", input_len=16, output_len=64, load="batch")
    row |= {"batch": 1, "concurrency": None}
    pts, skipped = acc.public_points(
        [
            row | {"id": "cpp-t2", "engine": "llama.cpp", "units": 2},
            row | {"id": "cpp-t8", "engine": "llama.cpp", "units": 8},
            row | {"id": "vllm-t8", "engine": "vllm-cpu", "units": 8},
        ]
    )
    assert not skipped
    by = {p.id: p.perf for p in pts}
    assert by["cpp-t2"].flops_peak == pytest.approx(by["cpp-t8"].flops_peak / 4)
    assert by["cpp-t2"].bw_peak < by["cpp-t8"].bw_peak
    assert not by["cpp-t8"].weight_only and by["vllm-t8"].weight_only
    assert by["cpp-t8"].flops_peak == pytest.approx(2 * by["vllm-t8"].flops_peak)


def test_a_llamacpp_row_run_with_dot_product_kernels_is_predicted_slower_where_compute_decides() -> None:
    """The same Q4_0 weights run as downloaded (per-row dot products, ``kernel: dot``) prefill at the dot
    kernels' share of the repacked GEMM rate; decode at 2 threads slows too, since it is compute-bound there."""
    row = _row(catalog_instance="c7g.2xlarge", precision="int4", input_len=16, output_len=64, load="batch")
    row |= {"batch": 1, "concurrency": None, "engine": "llama.cpp", "units": 2}
    pts, skipped = acc.public_points([row | {"id": "gemm"}, row | {"id": "dot", "kernel": "dot"}])
    assert not skipped
    by = {p.id: p.perf for p in pts}
    assert by["dot"].dot_kernel and not by["gemm"].dot_kernel
    f = default_factors("cpu", "llamacpp")
    assert f.dot_kernel_efficiency < 1
    gemm_prefill, _ = by["gemm"].prefill(f, 16)
    dot_prefill, _ = by["dot"].prefill(f, 16)
    assert dot_prefill == pytest.approx(gemm_prefill / f.dot_kernel_efficiency, rel=0.25)
    assert by["dot"].decode_step(f, 1, 32)[0] > by["gemm"].decode_step(f, 1, 32)[0]
    with pytest.raises(ValueError, match="kernel"):
        PublicMeasurement.model_validate(
            row | {"id": "x", "kernel": "gemv", "quote": "q", "lengths": "fixed"}
        )


def test_an_fp8_row_with_unfused_dequantisation_pays_its_passes_per_token_processed() -> None:
    """An FP8 row whose vLLM build applied the scales in separate passes (``kernel: unfused-fp8-dequant``)
    moves 24 extra bytes per linear-layer output element: per decode step that grows with the batch, per
    prefill with the prompt's tokens, at the bandwidth the weights stream at."""
    row = _row(catalog_instance="g6e.xlarge", precision="fp8", input_len=512, output_len=128)
    pts, skipped = acc.public_points(
        [row | {"id": "fused"}, row | {"id": "unfused", "kernel": "unfused-fp8-dequant"}]
    )
    assert not skipped
    by = {p.id: p.perf for p in pts}
    assert by["fused"].unfused_dequant_bytes == 0
    # Llama-3.1-8B: 32 layers of (32 + 2 x 8) x 128 + 2 x 4096 + 2 x 14336 outputs, 24 bytes each
    assert by["unfused"].unfused_dequant_bytes == pytest.approx(24 * 32 * (48 * 128 + 2 * 4096 + 2 * 14336))
    f = default_factors("gpu", "vllm")
    bw = by["unfused"].bw_peak * f.bandwidth_efficiency
    for batch in (1, 64):
        extra = by["unfused"].decode_step(f, batch, 600)[0] - by["fused"].decode_step(f, batch, 600)[0]
        assert extra == pytest.approx(batch * by["unfused"].unfused_dequant_bytes / bw)
    extra_prefill = by["unfused"].prefill(f, 512)[0] - by["fused"].prefill(f, 512)[0]
    assert extra_prefill == pytest.approx(512 * by["unfused"].unfused_dequant_bytes / bw)


def test_mixture_of_experts_rows_are_graded_but_never_fitted() -> None:
    """The hardware's factors are fitted to dense models' rows only; an MoE row is graded in its own stratum."""
    pts, skipped = acc.public_points(
        [
            _row(id="dense", catalog_instance="p5en.48xlarge", tensor_parallel_size=8),
            _row(
                id="moe",
                catalog_instance="p5en.48xlarge",
                tensor_parallel_size=8,
                model="deepseek-v3",
                precision="fp8",
            ),
        ]
    )
    assert not skipped
    assert [p.id for p in acc._fit_points(pts)] == ["dense"]
    recs = {r.id: r for r in acc.out_of_source_records(pts)}
    assert recs["moe"].family == "H100/H200 MoE" and recs["dense"].family == "H100/H200"


def test_held_out_records_owe_nothing_to_the_held_out_source(points, monkeypatch) -> None:
    """The ranges that grade source S are built from records whose factors were fitted without S as well as
    without their own source: no fit behind them saw S's rows."""
    trained_on: list[frozenset[str]] = []

    def fit(pts, prior):  # each fit is known by its number, which the prediction carries
        trained_on.append(frozenset(p.source for p in pts))
        return len(trained_on) - 1

    def predict(p, f):
        return SimpleNamespace(ttft=1.0 + f, tpot=1.0 + f, e2e=2.0, queue=0.0, prefill=0.0, out_tps=1.0)

    monkeypatch.setattr(acc, "fit_kind", fit)
    monkeypatch.setattr(acc, "predict_point", predict)
    neuron = [p for p in points if p.kind == "neuron" and p.modelled_engine]
    by_id = {p.id: p for p in neuron}
    held = acc.held_out_records(neuron)
    assert set(held) == {p.source for p in neuron}  # each source held out
    for source, recs in held.items():
        assert recs and source not in {r.source for r in recs}
        for r in recs:
            point = by_id[r.id]  # a row measures TPOT or TTFT or both; either names the fit
            if r.tpot is not None:
                fit_no = round(point.tpot_ms / (r.tpot * 1000) - 1)
            else:
                fit_no = round(point.ttft_ms / (r.ttft * 1000) - 1)
            assert source not in trained_on[fit_no] and r.source not in trained_on[fit_no]


def test_shipped_ranges_hold_where_the_data_has_several_sources(points) -> None:
    """The public data set's own out-of-source check, as the benchmark grades it: strata with rows from three
    or more sources keep 60-100% of their held-out measurements inside the range built from records that
    owe nothing to the held-out source (the benchmark prints the figures). One known exception, named so that
    any other fails: DeepSeek-R1's TTFT in closed loops of 128 on 8 x H200 (dstack's rows), where the engines
    admitted 50-90 sequences and the planner's memory model admits all 128 (docs/estimate-accuracy.md)."""
    known = {("H100/H200 MoE x vllm x decode-bound", "ttft")}
    modelled = [p for p in points if p.modelled_engine]
    held = acc.held_out_records(modelled, train=points)
    checked, short = 0, set()
    for c in coverage(acc.out_of_source_records(modelled, train=points), held.__getitem__):
        if c.n >= 8 and c.sources >= 3:
            checked += 1
            if not 0.6 <= c.share_inside <= 1.0:
                short.add((c.stratum, c.metric))
    assert short <= known, short - known
    assert checked >= 3
