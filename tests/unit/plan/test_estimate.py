"""The speed and cost model: roofline decode and prefill, batching, queueing, TP, CPUs, costs, the catalog
table and SLOs. Checked against the model's own stated formulas and against physical monotonicity."""

from __future__ import annotations

import math

import pytest

from accelbench.catalog import get_catalog
from accelbench.domain.estimate import SLO, EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate, estimate_catalog, estimate_local, parse_slo
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.context import PlanContext
from accelbench.plan.hardware import Hardware, hardware_for, pcie_allreduce_gbps
from accelbench.plan.memory import native_format, weight_bytes
from accelbench.plan.perf_model import neuron_bucket
from accelbench.plan.ranking import CatalogFilters
from tests.support.plan_data import LOCAL_ENVIRONMENT

F = EfficiencyFactors(
    bandwidth_efficiency=0.8,
    compute_efficiency=0.5,
    step_overhead_ms=1.0,
    per_sequence_overhead_ms=0.0,
    request_overhead_ms=10.0,
    prefill_interference=0.5,
    allreduce_latency_us=10.0,
)


def m(name: str) -> ModelSpec:
    return load_model_spec(name)


def test_batch_one_decode_is_weights_over_bandwidth() -> None:
    model = m("llama-3.1-8b-instruct")
    e = estimate(model, "p5.4xlarge", PlanQuery(input_len=128, output_len=128, concurrency=1, factors=F))
    assert e.feasible and e.times is not None
    wb = weight_bytes(model, native_format(model)).total
    read = wb - model.parameters.embedding * 2  # one embedding row per token, not the table
    expected_ms = read / (3350e9 * 0.8) * 1000
    assert e.times.decode_weights_ms == pytest.approx(expected_ms, rel=1e-6)
    assert e.times.decode_bound == "memory"
    assert e.tpot_ms == pytest.approx(
        e.times.decode_weights_ms + e.times.decode_kv_ms + e.times.decode_overhead_ms, rel=1e-6
    )
    assert not e.calibrated and any("given by the caller" in n for n in e.notes)
    plain = estimate(model, "p5.4xlarge", PlanQuery(input_len=128, output_len=128, concurrency=1))
    assert not plain.calibrated and any("Uncalibrated" in n for n in plain.notes)


def test_tpot_grows_with_concurrency_and_ttft_with_input() -> None:
    model = m("llama-3.1-8b-instruct")
    tpots = [
        estimate(model, "g6e.xlarge", PlanQuery(input_len=512, output_len=256, concurrency=c)).tpot_ms
        for c in (1, 4, 16, 64)
    ]
    assert tpots == sorted(tpots) and tpots[-1] > tpots[0]
    ttfts = [
        estimate(model, "g6e.xlarge", PlanQuery(input_len=n, output_len=64, concurrency=1)).ttft_ms
        for n in (128, 1024, 8192)
    ]
    assert ttfts == sorted(ttfts)
    tps = [
        estimate(
            model, "g6e.xlarge", PlanQuery(input_len=512, output_len=256, concurrency=c)
        ).output_tokens_per_s
        for c in (1, 4, 16)
    ]
    assert tps == sorted(tps)  # batching raises throughput


def test_prefill_is_compute_bound_for_long_prompts_and_memory_bound_for_tiny_ones() -> None:
    model = m("llama-3.1-70b-instruct")
    long = estimate(model, "p5.48xlarge", PlanQuery(input_len=4096, output_len=16, concurrency=1, factors=F))
    tiny = estimate(model, "p5.48xlarge", PlanQuery(input_len=2, output_len=16, concurrency=1, factors=F))
    assert long.times is not None and tiny.times is not None
    assert long.times.prefill_bound == "compute"
    assert tiny.times.prefill_bound == "memory"
    assert long.times.ridge_flops_per_byte == pytest.approx(989 / 3.35, rel=1e-3)  # FLOP/s / bytes/s per rank


def test_tensor_parallel_adds_all_reduce_and_pcie_is_slower_than_nvlink() -> None:
    model = m("llama-3.1-70b-instruct")
    nv = estimate(
        model, "p4d.24xlarge", PlanQuery(input_len=512, output_len=64, concurrency=1, factors=F)
    )  # NVLink
    pcie = estimate(
        model, "g6e.12xlarge", PlanQuery(input_len=512, output_len=64, concurrency=1, factors=F)
    )  # PCIe
    assert nv.times is not None and pcie.times is not None
    assert nv.tensor_parallel_size == 8 and pcie.tensor_parallel_size == 4
    per_nv = nv.times.decode_allreduce_ms / (2 * model.num_layers)
    per_pcie = pcie.times.decode_allreduce_ms / (2 * model.num_layers)
    # the 10 us factor dominates a 1-token message; synchronising 8 ranks costs (1 + log2 8) / 2 of it
    assert per_nv == pytest.approx(0.010 * (1 + 3) / 2, rel=0.05)
    assert per_pcie >= 0.030  # PCIe floor from the data file
    one = estimate(
        m("qwen2.5-7b-instruct"),
        "g6e.xlarge",
        PlanQuery(input_len=512, output_len=64, concurrency=1, factors=F),
    )
    assert one.times is not None and one.times.decode_allreduce_ms == 0


def test_a_pcie_ring_of_eight_gets_less_bus_bandwidth_than_one_of_four_and_gen5_twice_gen4() -> None:
    catalog = get_catalog()

    def hw(name: str) -> Hardware:
        return hardware_for(catalog.instance(name), catalog.accelerator_for(name))

    l40s = hw("g6e.48xlarge")
    assert not l40s.nvlink and l40s.spec.pcie_gen == 4
    assert l40s.allreduce_gbps(8) < l40s.allreduce_gbps(4) == l40s.allreduce_gbps(2)
    assert l40s.link_gbps == l40s.allreduce_gbps(8)  # the instance's whole ring
    assert pcie_allreduce_gbps(5, 8) == pytest.approx(2 * pcie_allreduce_gbps(4, 8))
    assert pcie_allreduce_gbps(None, 8) == pcie_allreduce_gbps(4, 8)  # generation unknown: the oldest's
    nv = hw("p4d.24xlarge")
    assert nv.allreduce_gbps(8) == nv.allreduce_gbps(2) == nv.link_gbps  # NVLink: the device link
    # TP 4 on the 8-GPU size runs a ring of 4: the same all-reduce time as the 4-GPU size
    model = m("llama-3.1-70b-instruct")
    q = PlanQuery(
        input_len=1024,
        output_len=128,
        concurrency=32,
        factors=F,
        engine_settings=EngineSettings(tensor_parallel_size=4),
    )
    four = estimate(model, "g6e.24xlarge", q).times
    of_eight = estimate(model, "g6e.48xlarge", q).times
    assert four is not None and of_eight is not None
    assert of_eight.decode_allreduce_ms == pytest.approx(four.decode_allreduce_ms, rel=1e-6)


def test_moe_decode_reads_only_the_routed_experts() -> None:
    model = m("mixtral-8x7b-instruct-v0.1")
    one = estimate(model, "p5.48xlarge", PlanQuery(input_len=256, output_len=64, concurrency=1, factors=F))
    many = estimate(model, "p5.48xlarge", PlanQuery(input_len=256, output_len=64, concurrency=64, factors=F))
    assert one.times is not None and many.times is not None
    tp = one.tensor_parallel_size or 1
    full = weight_bytes(model, native_format(model)).total / tp / (3350e9 * 0.8) * 1000
    assert one.times.decode_weights_ms < 0.45 * full  # 2 of 8 experts per layer at batch 1
    assert many.times.decode_weights_ms > 2 * one.times.decode_weights_ms  # a big batch touches every expert


def test_cpu_bandwidth_is_min_of_socket_measured_read_and_cores() -> None:
    model = m("qwen2.5-1.5b-instruct")
    small = estimate(
        model, "r8g.xlarge", PlanQuery(input_len=128, output_len=64, concurrency=1, factors=F)
    )  # 4 cores
    big = estimate(
        model, "r8g.24xlarge", PlanQuery(input_len=128, output_len=64, concurrency=1, factors=F)
    )  # 96 cores
    x86 = estimate(
        model, "m7i.4xlarge", PlanQuery(input_len=128, output_len=64, concurrency=1, factors=F)
    )  # 16 vCPU = 8 cores
    assert small.times is not None and big.times is not None and x86.times is not None
    # vLLM CPU binds every core but the one it keeps for its scheduler process (plan/cpu_topology.py);
    # Graviton4 per core: 37 GB/s, Arm's single-core measurement on a c8g.16xlarge (catalog): 3 cores pull
    # 111 GB/s, just above the 111 GB/s read on an r8g.xlarge with every vCPU reading (catalog, measured)
    assert small.times.achievable_bandwidth_gbps == pytest.approx(min(3 * 37, 111) * 0.8 / 0.70)
    # 96 cores: the socket's channel peak binds (the measured 493 GB/s is above what the model scales to)
    assert big.times.achievable_bandwidth_gbps == pytest.approx(537.6 * 0.8)
    # Xeon-SPR per core: 12.4 GB/s (catalog, measured on the 1- and 2-core sizes), so 7 cores would pull 87
    # GB/s; an m7i.4xlarge reads 78 GB/s with all 16 vCPUs (catalog, measured)
    assert x86.times.achievable_bandwidth_gbps == pytest.approx(78 * 0.8 / 0.70)
    assert small.tpot_ms > big.tpot_ms
    # a 4-core slice reaches far more than 4/96 of the socket
    assert small.times.achievable_bandwidth_gbps > 537.6 * 0.8 * 4 / 96


def test_cpu_compute_peak_follows_the_isa() -> None:
    model = m("qwen2.5-1.5b-instruct")
    amx = estimate(model, "m7i.4xlarge", PlanQuery(input_len=1024, output_len=16, concurrency=1, factors=F))
    sve = estimate(model, "m7g.4xlarge", PlanQuery(input_len=1024, output_len=16, concurrency=1, factors=F))
    assert amx.times is not None and sve.times is not None
    # AMX on 7 of 8 cores, BFMMLA on 15 of 16: vLLM CPU keeps one for its scheduler process
    assert amx.times.achievable_tflops == pytest.approx(7 * 2457.6 / 1000 * 0.5, rel=1e-6)
    assert sve.times.achievable_tflops == pytest.approx(15 * 166.4 / 1000 * 0.5, rel=1e-6)
    assert amx.times.prefill_ms < sve.times.prefill_ms


def test_queueing_above_the_batch_limit() -> None:
    from accelbench.domain.run import EngineSettings

    model = m("qwen2.5-1.5b-instruct")
    es = EngineSettings(max_num_seqs=4)
    at = estimate(
        model,
        "g6.xlarge",
        PlanQuery(input_len=256, output_len=64, concurrency=4, engine_settings=es, factors=F),
    )
    over = estimate(
        model,
        "g6.xlarge",
        PlanQuery(input_len=256, output_len=64, concurrency=16, engine_settings=es, factors=F),
    )
    assert over.batch == 4 and over.times is not None and over.times.queue_ms > 0
    assert over.ttft_ms is not None and at.ttft_ms is not None and over.ttft_ms > 3 * at.ttft_ms
    assert over.output_tokens_per_s == pytest.approx(
        at.output_tokens_per_s, rel=0.02
    )  # the engine is saturated
    assert any("queue" in n for n in over.notes)


def test_costs_follow_the_price() -> None:
    e = estimate(
        m("qwen2.5-7b-instruct"), "g6.xlarge", PlanQuery(input_len=512, output_len=128, concurrency=8)
    )
    assert e.hourly_usd == get_catalog().instance("g6.xlarge").on_demand_usd
    assert e.usd_per_million_output_tokens == pytest.approx(
        e.hourly_usd / (e.output_tokens_per_s * 3600) * 1e6
    )
    assert e.usd_per_request == pytest.approx(e.hourly_usd / (e.requests_per_s * 3600))
    assert e.total_tokens_per_s == pytest.approx(e.requests_per_s * 640)
    other = estimate(
        m("qwen2.5-7b-instruct"),
        "g6.xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=8),
        PlanContext(prices={"g6.xlarge": 2 * e.hourly_usd}),
    )
    assert other.usd_per_million_output_tokens == pytest.approx(2 * e.usd_per_million_output_tokens)


def test_infeasible_estimate_says_why() -> None:
    e = estimate(
        m("llama-3.1-70b-instruct"),
        "g5.xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=1, quantization="none"),
    )
    assert not e.feasible and e.tpot_ms is None and "does not fit" in e.explanation


def test_local_machine_from_a_captured_environment() -> None:
    e = estimate_local(
        m("smollm2-135m-instruct"),
        PlanQuery(input_len=128, output_len=32, concurrency=1),
        environment=LOCAL_ENVIRONMENT,
    )
    assert e.feasible and e.instance == "local" and e.accelerator_name == "local:AMD EPYC"
    assert e.engine == "vllm-cpu" and e.hourly_usd is None
    assert e.times is not None
    # 2 usable CPUs, of which vLLM CPU binds 1 (the other kept for its scheduler process) x the x86 per-core
    # default, AVX512-BF16: 64 FLOP/cycle x 2.596 GHz
    assert e.times.achievable_bandwidth_gbps == pytest.approx(
        1 * 12
    )  # a core's achieved rate, not scaled again
    assert e.times.achievable_tflops == pytest.approx(1 * 64 * 2.5961 / 1000 * 0.35, rel=1e-3)


def test_a_local_machine_with_smt_is_planned_on_its_physical_cores() -> None:
    from accelbench.plan.hardware import local_machine

    cpu = {**LOCAL_ENVIRONMENT["cpu"], "physical_cores": 4, "logical_cpus": 8, "usable_cpus": 8}
    smt = {**LOCAL_ENVIRONMENT, "cpu": cpu}
    instance, spec = local_machine(smt)
    assert (instance.vcpus, instance.physical_cores, instance.threads_per_core) == (8, 4, 2)
    assert spec.cores_per_socket == 4  # SMT siblings share a core's matrix unit
    e = estimate_local(
        m("smollm2-135m-instruct"), PlanQuery(input_len=128, output_len=32, concurrency=1), environment=smt
    )
    assert e.times is not None and e.topology is not None
    # vLLM CPU binds one logical CPU per physical core, less one for its scheduler process: 3 cores pull memory
    assert e.times.achievable_bandwidth_gbps == pytest.approx(3 * 12)
    assert "8 vCPUs = 4 cores x 2 threads" in e.topology and "binds 3 threads" in e.topology
    # an affinity mask leaves 6 of the 8: which are siblings is not known, each counts as a core
    masked = {**LOCAL_ENVIRONMENT, "cpu": {**cpu, "usable_cpus": 6}}
    instance, _ = local_machine(masked)
    assert (instance.vcpus, instance.physical_cores) == (6, None)


def test_calibration_is_applied_and_said() -> None:
    model = m("qwen2.5-7b-instruct")
    rows = [
        {
            "id": 7,
            "accelerator": "L4",
            "engine": "vllm",
            "factors": {"bandwidth_efficiency": 0.4, "step_overhead_ms": 5.0},
            "n_points": 12,
            "error_before": {"tpot_mape_pct": 30.0},
            "error_after": {"tpot_mape_pct": 5.0},
            "created_at": None,
        }
    ]
    cal = CalibrationSet.from_rows(rows)
    plain = estimate(model, "g6.xlarge", PlanQuery(input_len=512, output_len=128, concurrency=1))
    tuned = estimate(
        model,
        "g6.xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=1),
        PlanContext(calibrations=cal),
    )
    assert tuned.calibrated and tuned.calibration is not None and tuned.calibration.id == 7
    assert tuned.factors is not None and tuned.factors.bandwidth_efficiency == 0.4
    assert tuned.tpot_ms is not None and plain.tpot_ms is not None and tuned.tpot_ms > 1.5 * plain.tpot_ms
    assert any("Calibrated" in n and "30% -> 5%" in n for n in tuned.notes)
    # other accelerators are untouched
    other = estimate(
        model,
        "g6e.xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=1),
        PlanContext(calibrations=cal),
    )
    assert not other.calibrated


def test_catalog_table_is_ranked_and_filtered() -> None:
    tab = estimate_catalog(
        m("llama-3.1-8b-instruct"), PlanQuery(input_len=512, output_len=128, concurrency=8)
    )
    feasible = [r for r in tab.rows if r.feasible]
    costs = [r.usd_per_million_output_tokens for r in feasible if r.usd_per_million_output_tokens is not None]
    assert costs == sorted(costs)
    assert tab.summary.cheapest == feasible[0].instance
    assert tab.summary.feasible_native + tab.summary.feasible_quantized == len(feasible)
    assert tab.summary.infeasible == len(tab.rows) - len(feasible) > 0
    assert all(r.explanation for r in tab.rows if not r.feasible)
    kinds = {r.accelerator_type for r in feasible}
    assert kinds == {AcceleratorType.gpu, AcceleratorType.cpu, AcceleratorType.neuron}
    gpu = estimate_catalog(
        m("llama-3.1-8b-instruct"),
        PlanQuery(input_len=512, output_len=128, concurrency=8),
        filters=CatalogFilters(accelerator="gpu", max_cost=3.0),
    )
    assert gpu.rows and all(
        r.accelerator_type == AcceleratorType.gpu and (r.hourly_usd or 0) <= 3.0 for r in gpu.rows
    )
    ctx = estimate_catalog(
        m("llama-3.1-8b-instruct"),
        PlanQuery(input_len=512, output_len=128, concurrency=1, max_model_len=131072),
        filters=CatalogFilters(accelerator="gpu"),
    )
    assert all((r.max_model_len or 0) >= 131072 for r in ctx.rows if r.feasible)
    q = estimate_catalog(
        m("llama-3.1-70b-instruct"),
        PlanQuery(input_len=512, output_len=128, concurrency=1, quantization="int4"),
        filters=CatalogFilters(accelerator="gpu"),
    )
    assert all(r.weight_format == "int4" for r in q.rows if r.feasible)
    one = estimate_catalog(
        "llama-3.1-8b-instruct",
        PlanQuery(input_len=512, output_len=128, concurrency=1, slo=parse_slo("tpot:100")),
        filters=CatalogFilters(instance_type="g6.xlarge"),
    )
    assert [r.instance for r in one.rows] == ["g6.xlarge"]


def test_slo_finds_the_cheapest_instance_and_its_highest_concurrency() -> None:
    model = m("llama-3.1-8b-instruct")
    slo = SLO(ttft_ms=1000, tpot_ms=40)
    tab = estimate_catalog(
        model,
        PlanQuery(input_len=512, output_len=128, concurrency=8, slo=slo),
        filters=CatalogFilters(accelerator="gpu"),
    )
    choice = tab.summary.slo_choice
    assert choice is not None
    row = next(r for r in tab.rows if r.instance == choice)
    assert row.max_concurrency_meeting_slo is not None and row.max_concurrency_meeting_slo >= 8
    c = row.max_concurrency_meeting_slo
    at = estimate(model, choice, PlanQuery(input_len=512, output_len=128, concurrency=c))
    assert at.tpot_ms is not None and at.ttft_ms is not None and at.e2e_ms is not None
    assert slo.met(at.ttft_ms, at.tpot_ms, at.e2e_ms)
    above = estimate(model, choice, PlanQuery(input_len=512, output_len=128, concurrency=c + 1))
    assert above.tpot_ms is not None and above.ttft_ms is not None and above.e2e_ms is not None
    assert not slo.met(above.ttft_ms, above.tpot_ms, above.e2e_ms) or c + 1 > (
        above.recommendation.settings.max_num_seqs if above.recommendation.settings else 0
    )
    # nothing meeting the SLO is cheaper per token at its own highest concurrency
    for r in tab.rows:
        if (
            r.max_concurrency_meeting_slo
            and r.max_concurrency_meeting_slo >= 8
            and r.usd_per_million_output_tokens_at_slo is not None
        ):
            assert r.usd_per_million_output_tokens_at_slo >= row.usd_per_million_output_tokens_at_slo - 1e-9  # type: ignore[operator]


def test_impossible_slo_is_reported() -> None:
    tab = estimate_catalog(
        m("llama-3.1-8b-instruct"),
        PlanQuery(input_len=512, output_len=128, concurrency=8, slo=SLO(tpot_ms=0.01)),
        filters=CatalogFilters(accelerator="neuron"),
    )
    assert tab.summary.slo_choice is None and any("No instance meets" in n for n in tab.notes)


def test_parse_slo() -> None:
    assert parse_slo("ttft:500,tpot:50") == SLO(ttft_ms=500, tpot_ms=50)
    assert parse_slo("e2e:2000ms").e2e_ms == 2000
    for bad in ("", "ttft", "latency:5", "tpot:abc", "tpot:-1"):
        with pytest.raises(UserInputError):
            parse_slo(bad)


def test_inputs_are_checked() -> None:
    with pytest.raises(UserInputError):
        estimate(m("qwen2.5-7b-instruct"), "g6.xlarge", PlanQuery(input_len=0, output_len=1, concurrency=1))


def test_request_longer_than_any_context_is_infeasible() -> None:
    e = estimate(
        m("smollm2-135m-instruct"), "g6.xlarge", PlanQuery(input_len=9000, output_len=100, concurrency=1)
    )
    assert not e.feasible and math.isfinite(len(e.explanation))


def test_bursts_travel_in_waves_while_a_wave_fits_one_step_and_steady_arrivals_interleave() -> None:
    """bursts: one request prefills alone, the other B - 1 together after it, as long as their prefills fit
    one scheduler step (2,048 tokens on an L4); longer waves spread out and run as steady arrivals do."""
    model = m("qwen2.5-1.5b-instruct")

    def est(inp: int, c: int, arrivals: str = "bursts"):
        return estimate(
            model,
            "g6.xlarge",
            PlanQuery(input_len=inp, output_len=64, concurrency=c, factors=F, arrivals=arrivals),
        )

    one, four = est(512, 1), est(512, 4)  # 3 x 512 = 1,536 tokens: one step
    steady = est(512, 4, "steady")
    assert one.times is not None and four.times is not None and steady.times is not None
    p1 = one.times.prefill_ms
    # TTFT of most requests in a wave of 4: the first one's prefill, then the other three together
    assert four.ttft_ms is not None and four.ttft_ms > F.request_overhead_ms + 2.5 * p1
    # their TPOT is pure decode at batch 4
    assert four.tpot_ms == pytest.approx(four.times.decode_step_ms, rel=1e-9)
    assert four.arrivals == "bursts" and steady.arrivals == "steady"
    # steady: shorter TTFT, TPOT with the others' prefills
    assert steady.ttft_ms is not None and steady.ttft_ms < four.ttft_ms
    assert steady.tpot_ms is not None and steady.tpot_ms > steady.times.decode_step_ms
    # 3 x 1,024 tokens need two steps: the waves spread out into groups of the prompts one step prefills
    # (one of 1,024 tokens here), each finishing and coming back together: a group arrives while the step
    # after the one that finished it runs and waits all of it, not half a step as a random arrival does
    spread, spread_steady = est(1024, 4), est(1024, 4, "steady")
    # (the longer cycle lets slightly fewer other prefills land in a decode)
    assert spread.times is not None and spread.tpot_ms == pytest.approx(spread_steady.tpot_ms, rel=0.01)
    half_step = 0.5 * spread.times.decode_step_ms
    assert spread.ttft_ms == pytest.approx(spread_steady.ttft_ms + half_step, rel=0.01)
    with pytest.raises(UserInputError, match="arrivals"):
        estimate(model, "g6.xlarge", PlanQuery(input_len=8, output_len=8, concurrency=1, arrivals="poisson"))


def test_llamacpp_serves_one_request_at_a_time_and_the_rest_queue() -> None:
    # llama-cpp-python's server decodes one request at a time: concurrency adds queueing, not batching
    model = m("qwen2.5-0.5b-instruct")
    one, four = (
        estimate(
            model,
            "m8i.2xlarge",
            PlanQuery(input_len=128, output_len=32, concurrency=c, factors=F, engine="llamacpp"),
        )
        for c in (1, 4)
    )
    assert four.tpot_ms == pytest.approx(one.tpot_ms)
    assert four.output_tokens_per_s == pytest.approx(one.output_tokens_per_s, rel=1e-6)
    # the 4th user waits for the 3 requests ahead of it, each a full E2E
    assert four.ttft_ms == pytest.approx(one.ttft_ms + 3 * one.e2e_ms, rel=1e-6)
    vllm = estimate(model, "m8i.2xlarge", PlanQuery(input_len=128, output_len=32, concurrency=4, factors=F))
    assert vllm.output_tokens_per_s > 2 * four.output_tokens_per_s  # continuous batching does batch


@pytest.mark.parametrize("engine", ["llamacpp", "vllm-cpu"])
@pytest.mark.parametrize(
    ("name", "instance"),
    [("llama-3.1-8b-instruct", "c7i.4xlarge"), ("qwen2.5-7b-instruct", "c8g.4xlarge"),
     ("mistral-7b-instruct-v0.3", "c7i.4xlarge"), ("mixtral-8x7b-instruct-v0.1", "r7i.8xlarge"),
     ("qwen2.5-0.5b-instruct", "c7i.2xlarge")],
)  # fmt: skip
def test_the_bandwidth_floor_is_never_above_the_predicted_tpot(name: str, instance: str, engine: str) -> None:
    """The floor reads the bytes the prediction reads (one row of an untied embedding, not the table; the KV
    of the prompt, the smallest context a step sees): "TPOT cannot go below" never exceeds the TPOT beside it
    (the case that showed it: 376.69 ms typical beside a 390.4 ms floor, llama.cpp on an untied-embedding model)."""
    e = estimate(m(name), instance, PlanQuery(input_len=512, output_len=128, concurrency=1, engine=engine))
    assert e.feasible and e.tpot_ms is not None and e.recommendation is not None
    adv = e.recommendation.bandwidth
    assert adv is not None and adv.tpot_floor_ms <= e.tpot_ms
    assert f"cannot go below {adv.tpot_floor_ms:.1f} ms" in adv.message


def test_neuron_buckets_follow_nxd_inference() -> None:
    # NxD Inference's autobucketing: powers of two from 128 below 2 ** round(log2(max)), then max itself
    assert [neuron_bucket(n, 12800) for n in (100, 129, 5000, 8192, 8193, 10000)] == [
        128,
        256,
        8192,
        8192,
        12800,
        12800,
    ]
    # 4096 is no bucket under a 5,000-token limit (round(log2(5000)) = 12): 3,000 tokens run the 5,000 graph
    assert neuron_bucket(3000, 5000) == 5000 and neuron_bucket(2000, 5000) == 2048
    assert neuron_bucket(10000) == 16384  # no limit known: the next power of two


def test_neuron_prefill_runs_the_compiled_limit_not_the_next_power_of_two() -> None:
    model = m("llama-3.1-8b-instruct")
    capped = estimate(
        model,
        "trn1.32xlarge",
        PlanQuery(input_len=10000, output_len=16, concurrency=1, factors=F, max_model_len=12800),
    )
    pow2 = estimate(
        model,
        "trn1.32xlarge",
        PlanQuery(input_len=10000, output_len=16, concurrency=1, factors=F, max_model_len=16384),
    )
    assert capped.ttft_ms < pow2.ttft_ms
