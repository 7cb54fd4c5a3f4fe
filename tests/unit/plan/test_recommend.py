"""The recommender's rules: every TP choice, fallback, refusal and warning, on GPU, Neuron and CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from accelbench.catalog import get_catalog
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.model import ModelSource, ModelSpec
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.recommendation import RefusalCode, Verdict
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.modelspec import load_model_spec, spec_from_config
from accelbench.plan import recommend
from accelbench.plan.cpu_topology import described_instance
from accelbench.plan.memory import GIB, native_format, overhead_bytes, seed_cpu_kv_space_gib, weight_bytes
from accelbench.plan.recommend.cpu import cpu_tp_degrees


def m(name: str) -> ModelSpec:
    return load_model_spec(name)


def custom(**over: object) -> ModelSpec:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
    }
    cfg.update(over)
    return spec_from_config(cfg, name="custom", source=ModelSource.config_dir, ref="custom")


def cpu_instance(
    memory_gib: float, *, vcpus: int = 16, numa: int = 1, family: str = "r8g", name: str | None = None
) -> InstanceType:
    return InstanceType(
        name=name or f"{family}.test",
        family=family,
        vcpus=vcpus,
        memory_gib=memory_gib,
        arch="arm64",
        numa_nodes=numa,
        accelerator_type=AcceleratorType.cpu,
        accelerator_name="Graviton4",
        cpu_generation="Graviton4",
        cpu_isa=["sve", "bf16"],
    )


# --------------------------------------------------------------------------------------------- GPU
def test_gpu_kv_cache_is_the_model_dtype_by_default_and_fp8_only_when_asked() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "g6.xlarge")  # 1 x L4 (FP8 hardware)
    assert r.fits and r.settings is not None and r.memory is not None
    s = r.settings
    assert s.engine == "vllm" and s.tensor_parallel_size == 1
    assert s.gpu_memory_utilization == 0.90 and s.kv_cache_dtype == "auto"  # vLLM's default
    assert s.kv_cache_space_gib is None and s.dtype == "bfloat16"
    # 16-bit KV: 72k tokens in the 21.96 GiB CUDA reports of an L4 hold the full 32k context but not 4
    # sequences of it, so the length is halved twice
    assert s.max_model_len == 8192 and r.verdict == Verdict.clamped
    usable = 21.96 * 0.90
    assert r.memory.usable_gib == pytest.approx(usable, abs=0.01)
    model = m("qwen2.5-7b-instruct")
    kv_budget = usable * GIB - weight_bytes(model, native_format(model)).total - overhead_bytes(model)
    assert r.memory.kv_cache_gib == pytest.approx(kv_budget / GIB, abs=0.01)
    assert r.memory.kv_bytes_per_token == 57_344  # 16-bit KV
    fp8 = recommend(m("qwen2.5-7b-instruct"), "g6.xlarge", FitQuery(kv_cache_dtype="fp8"))
    assert fp8.settings is not None and fp8.settings.kv_cache_dtype == "fp8" and fp8.memory is not None
    assert fp8.memory.kv_bytes_per_token == 57_344 // 2
    assert fp8.memory.kv_cache_tokens == pytest.approx(2 * r.memory.kv_cache_tokens, rel=0.01)
    assert fp8.settings.max_model_len == 16384 and any("FP8" in x for x in fp8.reasons)


def test_gpu_without_fp8_uses_16_bit_kv_and_warns_when_fp8_is_forced() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "g5.xlarge")  # A10G: no FP8 hardware
    assert r.settings is not None and r.settings.kv_cache_dtype == "auto"
    forced = recommend(m("llama-3.1-8b-instruct"), "g5.xlarge", FitQuery(kv_cache_dtype="fp8"))
    assert forced.settings is not None and forced.settings.kv_cache_dtype == "fp8"
    assert any("no FP8 hardware" in w for w in forced.warnings)


@pytest.mark.parametrize(
    ("model", "instance", "tp"),
    [
        ("llama-3.1-8b-instruct", "g6e.12xlarge", 1),  # smallest TP that fits, although 4 GPUs are there
        ("llama-3.1-70b-instruct", "g6e.12xlarge", 4),  # 131 GiB over 43.2 GiB usable -> ceil = 4
        ("qwen2.5-72b-instruct", "p5.48xlarge", 4),  # ceil(135/72) = 2, but 4 leaves a useful context
        ("llama-3.1-70b-instruct", "p4d.24xlarge", 8),  # TP 4 would leave a 2k context; 8 gives 64k
        ("deepseek-v3", "p5e.48xlarge", 8),  # FP8 checkpoint, 627 GiB over 8 x H200
    ],
)
def test_gpu_tensor_parallel_choice(model: str, instance: str, tp: int) -> None:
    r = recommend(m(model), instance)
    assert r.fits and r.settings is not None
    assert r.settings.tensor_parallel_size == tp
    spec = m(model)
    assert spec.num_attention_heads % tp == 0
    assert spec.mla is not None or spec.num_kv_heads % tp == 0
    assert any(x.startswith(f"Tensor parallel {tp}") for x in r.reasons)


def test_gpu_tp_must_divide_attention_and_kv_heads() -> None:
    # 20 heads / 4 KV heads on 8 GPUs: 8 divides neither, so TP 8 is never chosen
    big = custom(
        hidden_size=6400,
        intermediate_size=24576,
        num_hidden_layers=80,
        num_attention_heads=20,
        num_key_value_heads=4,
    )
    r = recommend(big, "p4d.24xlarge")
    assert r.fits and r.settings is not None
    assert r.settings.tensor_parallel_size in (1, 2, 4)
    assert any("valid on 8 GPU(s): 1, 2, 4)" in x for x in r.reasons)
    # 12 heads / 2 KV heads: 1 and 2 only
    r2 = recommend(custom(num_attention_heads=12, num_key_value_heads=2), "g6e.12xlarge")
    assert any("valid on 4 GPU(s): 1, 2)" in x for x in r2.reasons)


def test_gpu_fallback_fp8_on_fp8_gpus() -> None:
    r = recommend(m("qwen2.5-32b-instruct"), "g6e.xlarge")  # 61 GiB BF16 on one 48 GiB L40S
    assert r.fits and r.settings is not None
    assert r.settings.quantization == "fp8" and r.settings.weight_format == "fp8"
    assert [a.weight_format for a in r.attempts] == ["bf16", "fp8"]
    assert not r.attempts[0].fits and r.attempts[1].fits
    assert any("does not fit in BF16" in w and "FP8" in w for w in r.warnings)


def test_gpu_fallback_skips_fp8_without_fp8_hardware() -> None:
    r = recommend(m("qwen2.5-14b-instruct"), "g5.xlarge")  # A10G
    assert r.fits and r.settings is not None
    assert r.settings.quantization == "int8"
    assert [a.weight_format for a in r.attempts] == ["bf16", "int8"]


def test_gpu_fallback_goes_down_to_int4() -> None:
    r = recommend(m("llama-3.1-70b-instruct"), "g6e.4xlarge")  # one L40S for a 70B model
    assert r.settings is not None and r.settings.quantization == "int4"
    assert [a.weight_format for a in r.attempts] == ["bf16", "fp8", "int8", "int4"]


def test_gpu_explicit_quantization_has_no_fallback() -> None:
    r = recommend(m("qwen2.5-32b-instruct"), "g6e.xlarge", FitQuery(quantization="none"))
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.does_not_fit
    assert [a.weight_format for a in r.attempts] == ["bf16"]
    assert any("Leave quantization unset" in w for w in r.refusal.way_forward)


def test_gpu_nothing_fits_suggests_the_cheapest_larger_instances() -> None:
    r = recommend(m("llama-3.1-70b-instruct"), "g5.xlarge")
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.does_not_fit
    assert r.alternatives, "a larger instance must be suggested"
    cat = get_catalog()
    natives = [
        a for a in r.alternatives if a.accelerator_type == AcceleratorType.gpu and a.quantization is None
    ]
    assert natives
    best = natives[0]
    # it is really the cheapest GPU instance that fits natively
    cheaper = [
        i
        for i in cat.filter(accelerator_type="gpu")
        if i.on_demand_usd is not None and best.hourly_usd is not None and i.on_demand_usd < best.hourly_usd
    ]
    for inst in cheaper:
        rr = recommend(
            m("llama-3.1-70b-instruct"), inst, FitQuery(quantization="none"), suggest_alternatives=False
        )
        assert not rr.fits, inst.name
    assert any("Cheapest instances that fit" in w for w in r.refusal.way_forward)


def test_gpu_pre_quantized_checkpoint_keeps_its_method(tmp_path: Path) -> None:
    d = tmp_path / "awq"
    d.mkdir()
    from accelbench.modelspec.presets import preset_document

    config = dict(preset_document("qwen2.5-32b-instruct")["config"])
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}
    (d / "config.json").write_text(json.dumps(config))
    model = load_model_spec(str(d))
    r = recommend(model, "g6e.xlarge")
    assert r.fits and r.settings is not None
    assert r.settings.quantization is None  # vLLM reads the checkpoint's own quantization_config
    assert r.settings.checkpoint_quantization == "awq" and r.settings.weight_bits == 4
    assert [a.weight_format for a in r.attempts] == ["awq-4bit"]
    # re-quantizing a quantized checkpoint is refused
    bad = recommend(model, "g6e.xlarge", FitQuery(quantization="fp8"))
    assert (
        not bad.fits and bad.refusal is not None and bad.refusal.code == RefusalCode.unsupported_quantization
    )


def test_gpu_context_is_rounded_down_and_halved_for_concurrency() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "g5.xlarge")
    assert r.settings is not None
    # 25.6k KV tokens in the 21.98 GiB CUDA reports of an A10G fit one sequence -> 16384, then halved until 4
    # full-length sequences fit
    assert r.settings.max_model_len == 4096 and r.verdict == Verdict.clamped
    assert r.settings.concurrency_at_max_len >= 4
    assert any("halved" in x for x in r.reasons)


def test_gpu_requested_context_that_cannot_fit_is_refused() -> None:
    r = recommend(
        m("llama-3.1-70b-instruct"),
        "g6e.12xlarge",
        FitQuery(max_model_len=131072, quantization="none", kv_cache_dtype="auto"),
    )
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.context_does_not_fit


def test_gpu_host_ram_warning() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "g5.xlarge")  # 16 GiB host, 15 GiB of weights
    assert any("Host RAM is tight" in w for w in r.warnings)
    ok = recommend(m("llama-3.1-8b-instruct"), "g5.4xlarge")  # 64 GiB host
    assert not any("Host RAM is tight" in w for w in ok.warnings)


def test_mla_kv_is_replicated_across_ranks() -> None:
    r = recommend(m("deepseek-v3"), "p5e.48xlarge", FitQuery(kv_cache_dtype="fp8"))
    assert r.settings is not None and r.memory is not None
    assert r.settings.checkpoint_quantization == "fp8" and r.settings.quantization is None
    assert any("replicated on every rank" in x for x in r.reasons)
    assert r.memory.kv_bytes_per_token == 35_136  # FP8 KV on H200


# --------------------------------------------------------------------------------------------- Neuron
def test_neuron_uses_every_neuroncore_by_default_and_a_given_tp_when_asked() -> None:
    r = recommend(m("mixtral-8x7b-instruct-v0.1"), "inf2.48xlarge")  # 24 NeuronCores of 16 GiB
    assert r.fits and r.settings is not None and r.memory is not None
    assert r.settings.engine == "vllm-neuron" and r.settings.dtype == "bfloat16"
    tp = r.settings.tensor_parallel_size
    # what Neuron deployments run: all 24 cores (32 heads padded to 48; 8 KV heads replicated to 24)
    assert tp == 24 and r.settings.neuron_cores == 24
    assert any("padded" in x for x in r.reasons)
    assert r.memory.utilization == 0.85 and r.memory.unit == "neuron_core"
    assert r.memory.unit_memory_gib == 16
    assert r.settings.gpu_memory_utilization is None and r.settings.kv_cache_dtype is None
    sixteen = recommend(
        m("mixtral-8x7b-instruct-v0.1"),
        "inf2.48xlarge",
        FitQuery(engine_settings=EngineSettings(tensor_parallel_size=16)),
    )
    assert sixteen.settings is not None and sixteen.memory is not None
    assert sixteen.settings.tensor_parallel_size == 16 and sixteen.memory.units == 16
    assert sixteen.memory.kv_cache_gib < r.memory.kv_cache_gib  # 16 cores hold less KV cache than 24
    too_many = recommend(
        m("mixtral-8x7b-instruct-v0.1"),
        "inf2.48xlarge",
        FitQuery(engine_settings=EngineSettings(tensor_parallel_size=32)),
    )
    assert not too_many.fits and too_many.refusal is not None
    assert too_many.refusal.code == RefusalCode.no_valid_tensor_parallel and "24" in too_many.refusal.reason


def test_neuron_needs_tp_two_for_grouped_kv_heads() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "inf2.8xlarge")
    assert r.settings is not None and r.settings.tensor_parallel_size == 2
    # SmolLM2: 9 heads admit only TP 1, which grouped KV heads forbid on Neuron
    s = recommend(m("smollm2-135m-instruct"), "inf2.8xlarge")
    assert not s.fits and s.refusal is not None and s.refusal.code == RefusalCode.no_valid_tensor_parallel


def test_neuron_trn2_logical_cores() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "trn2.3xlarge")  # 1 chip, 4 logical cores of 24 GiB (LNC=2)
    assert r.memory is not None and r.memory.unit_memory_gib == 24


def test_neuron_host_ram_minimum() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "inf2.xlarge")  # 16 GiB host
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.host_memory
    weights = 7_615_616_512 * 2 / GIB
    need = max(64, weights * 10 / math.log2(weights + 2) + 32)
    assert f"{need:.0f} GiB" in r.refusal.reason


def test_neuron_refuses_unsupported_architectures_and_quantization() -> None:
    r = recommend(m("deepseek-v3"), "trn1.32xlarge")
    assert r.refusal is not None and r.refusal.code == RefusalCode.unsupported_architecture
    q = recommend(m("llama-3.1-8b-instruct"), "inf2.8xlarge", FitQuery(quantization="int4"))
    assert q.refusal is not None and q.refusal.code == RefusalCode.unsupported_quantization
    assert "INT8 weights" in q.refusal.reason
    # INT8 weight-only (NxD Inference) is planned and predicted, and said not to be deployed
    i8 = recommend(m("llama-3.1-8b-instruct"), "inf2.8xlarge", FitQuery(quantization="int8"))
    assert i8.fits and i8.settings is not None and i8.settings.weight_format == "int8"
    assert any("not deployed" in w for w in i8.warnings)


# --------------------------------------------------------------------------------------------- CPU
@pytest.mark.parametrize(
    ("host", "space"), [(96, 30), (128, 41), (256, 82), (398, 128), (768, 128), (32, 9), (16, 4)]
)
def test_seed_cpu_kv_space(host: float, space: int) -> None:
    assert seed_cpu_kv_space_gib(host) == space


@pytest.mark.parametrize(
    ("instance", "space"),
    [("c7g.12xlarge", 30), ("r7g.4xlarge", 41), ("r8g.8xlarge", 82), ("r8g.24xlarge", 128)],
)
def test_cpu_kv_space_is_the_exact_deployment_value(instance: str, space: int) -> None:
    r = recommend(m("qwen2.5-7b-instruct"), instance)
    assert r.fits and r.settings is not None
    assert r.settings.kv_cache_space_gib == space
    assert r.settings.engine_settings().kv_cache_space_gib == float(space)
    assert any(f"KV-cache space {space} GiB" in x for x in r.reasons)


def test_cpu_kv_space_never_exceeds_what_the_weights_leave() -> None:
    inst = cpu_instance(20)  # 20 x 0.85 = 17 GiB allocatable; 14.2 GiB weights + 1.7 GiB overhead
    r = recommend(m("qwen2.5-7b-instruct"), inst)
    assert r.fits and r.settings is not None and r.memory is not None
    assert r.settings.kv_cache_space_gib == 1 < seed_cpu_kv_space_gib(20)
    assert (
        r.memory.weights_gib + r.memory.overhead_gib + r.memory.kv_cache_gib <= r.memory.host_allocatable_gib
    )
    assert any("Only 1 GiB is left" in w for w in r.warnings)


def test_cpu_model_that_does_not_fit_host_memory() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "m7i.xlarge")  # 16 GiB host
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.does_not_fit
    assert "exceed" in r.refusal.reason
    assert r.bandwidth is not None  # the advisory comes with every CPU answer


def test_cpu_settings_are_cpu_only() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "r8g.4xlarge", FitQuery(kv_cache_dtype="fp8"))
    assert r.settings is not None
    s = r.settings
    assert s.engine == "vllm-cpu" and s.dtype == "bfloat16"
    assert s.gpu_memory_utilization is None and s.kv_cache_dtype is None
    assert s.omp_threads_bind == "auto"
    es = s.engine_settings()
    assert es.gpu_memory_utilization is None and es.kv_cache_dtype is None
    assert any("GPU-only" in w for w in r.warnings)


def test_cpu_fp16_is_served_as_bf16() -> None:
    r = recommend(m("qwen2.5-1.5b-instruct"), "r8g.xlarge", FitQuery(quantization="fp16"))
    assert r.settings is not None and r.settings.dtype == "bfloat16"
    assert any("FP16 is unstable" in w for w in r.warnings)


def test_cpu_tp_is_numa_nodes() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "r8g.48xlarge")  # two sockets
    assert r.settings is not None and r.settings.tensor_parallel_size == 2
    assert r.memory is not None and r.memory.kv_cache_gib == 2 * r.settings.kv_cache_space_gib  # per rank
    one = recommend(m("qwen2.5-7b-instruct"), "r8g.24xlarge")
    assert one.settings is not None and one.settings.tensor_parallel_size == 1


def test_cpu_heads_that_do_not_split_over_sockets_fall_back_to_one_rank() -> None:
    r = recommend(m("smollm2-135m-instruct"), "r8g.48xlarge")  # 9 heads, 2 NUMA nodes
    assert r.settings is not None and r.settings.tensor_parallel_size == 1
    assert any("do not split over 2 NUMA nodes" in w for w in r.warnings)


def test_cpu_dense_above_13b_is_refused_with_w8a8_w4a8_alternatives() -> None:
    r = recommend(m("qwen2.5-14b-instruct"), "r8g.16xlarge")  # 512 GiB: memory is not the issue
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.dense_too_large_for_cpu
    text = " ".join(r.refusal.way_forward)
    assert "W8A8" in text and "W4A8" in text and "compressed-tensors" in text
    assert r.bandwidth is not None and r.bandwidth.tpot_floor_ms > 0
    # with int8 (a W8A8 checkpoint) it is served
    q = recommend(m("qwen2.5-14b-instruct"), "r8g.16xlarge", FitQuery(quantization="int8"))
    assert q.fits and q.settings is not None and q.settings.quantization == "int8"
    assert q.settings.weight_bits == 8
    assert any("W8A8 compressed-tensors checkpoint" in w for w in q.warnings)


def test_cpu_8_to_13b_dense_is_warned() -> None:
    r = recommend(m("llama-3.1-8b-instruct"), "r8g.4xlarge")
    assert r.fits
    assert any("heavy for a CPU" in w for w in r.warnings)
    small = recommend(m("qwen2.5-7b-instruct"), "r8g.4xlarge")
    assert not any("heavy for a CPU" in w for w in small.warnings)


def test_cpu_moe_is_judged_by_active_parameters() -> None:
    r = recommend(m("mixtral-8x7b-instruct-v0.1"), "r8g.16xlarge")  # 46.7 B total, 12.9 B active
    assert r.fits
    assert any("12.88 B parameters" in w and "heavy" in w for w in r.warnings)


def test_cpu_refuses_fp8_and_gpu_only_checkpoints() -> None:
    r = recommend(m("qwen2.5-7b-instruct"), "r8g.4xlarge", FitQuery(quantization="fp8"))
    assert r.refusal is not None and r.refusal.code == RefusalCode.unsupported_quantization
    ds = recommend(m("deepseek-v3"), "r8g.48xlarge")  # an FP8 checkpoint
    assert ds.refusal is not None and ds.refusal.code == RefusalCode.unsupported_quantization


def test_cpu_bandwidth_advisory_numbers() -> None:
    small = recommend(m("qwen2.5-7b-instruct"), cpu_instance(128, vcpus=4))  # 4 Graviton4 cores
    big = recommend(m("qwen2.5-7b-instruct"), "r8g.24xlarge")  # a whole socket
    assert small.bandwidth is not None and big.bandwidth is not None
    # vLLM CPU binds 3 of the 4 cores (one kept for its scheduler process): 3 of them pull memory, 37 GB/s each
    assert small.bandwidth.limited_by == "cores" and small.bandwidth.cores_bandwidth_gbps == 3 * 37
    assert big.bandwidth.limited_by == "socket" and big.bandwidth.socket_bandwidth_gbps == 537.6
    for adv in (small.bandwidth, big.bandwidth):
        assert adv.tpot_floor_ms == pytest.approx(
            adv.bytes_per_token / (adv.achievable_bandwidth_gbps * 1e9) * 1000, rel=1e-3
        )
        assert "TPOT cannot go below" in adv.message
    assert small.bandwidth.tpot_floor_ms > big.bandwidth.tpot_floor_ms
    assert any("memory-bandwidth-bound" in w for w in big.warnings)


def test_a_measured_read_bandwidth_below_the_socket_peak_is_the_ceiling() -> None:
    # a c8i.16xlarge holds 32 cores of a 96-core Granite Rapids socket (one sub-NUMA cluster): Spare Cores read
    # 202 GB/s from it with every vCPU, against the socket's 768 GB/s channel peak and 31 x 24.6 GB/s of cores
    adv = recommend(m("llama-3.1-8b-instruct"), "c8i.16xlarge", FitQuery(quantization="none")).bandwidth
    assert adv is not None and adv.limited_by == "measured" and adv.measured_read_gbps == 202
    assert adv.achievable_bandwidth_gbps == pytest.approx(202, rel=1e-3)  # x 0.70 of the peak it scales to
    assert "202 GB/s of DRAM reads measured on c8i.16xlarge" in adv.message
    # a type nobody measured keeps the socket's peak (and says so)
    c9g = recommend(m("qwen2.5-1.5b-instruct"), "c9g.48xlarge").bandwidth
    assert c9g is not None and c9g.measured_read_gbps is None and c9g.limited_by != "measured"
    # a guest described by its user is not the type measured: its cores and sockets bound it, not the catalog
    guest = described_instance(get_catalog().instance("m8i.2xlarge"), cores=8, smt=1)
    assert guest.memory_read_gbps is None and guest.memory_read_source is None


def test_cpu_tensor_parallel_takes_the_most_sub_numa_nodes_the_heads_split_over() -> None:
    # Xeon 6's 96xlarge has 6 sub-NUMA nodes: Llama's 32 heads / 8 KV heads split over 2 of them, not 3 or 6
    six = recommend(m("llama-3.1-8b-instruct"), "m8i.96xlarge", FitQuery(quantization="none"))
    assert six.settings is not None and six.settings.tensor_parallel_size == 2
    assert any("do not split over 6 NUMA nodes: serving on 2 nodes (TP 2)" in w for w in six.warnings)
    # 3 nodes on a 48xlarge: one rank, on one node of 32 cores, and the bandwidth floor reads that node's share
    three = recommend(m("llama-3.1-8b-instruct"), "m8i.48xlarge", FitQuery(quantization="none"))
    assert three.settings is not None and three.settings.tensor_parallel_size == 1
    assert three.bandwidth is not None and "1 of its 3 NUMA nodes' 256 GB/s" in three.bandwidth.message
    # a model whose heads split three ways takes all three nodes
    r = recommend(custom(num_key_value_heads=6), "m8i.48xlarge", FitQuery(quantization="none"))
    assert r.settings is not None and r.settings.tensor_parallel_size == 3
    assert cpu_tp_degrees(custom(num_key_value_heads=6), 6) == [1, 2, 3, 6]


def test_cpu_accelerator_name_from_the_family() -> None:
    cat = get_catalog()
    inst = cpu_instance(64, family="c9g").model_copy(update={"accelerator_name": ""})
    r = recommend(m("qwen2.5-1.5b-instruct"), inst, spec=cat.accelerator("Graviton5"))
    assert r.accelerator_name == "Graviton5"
    assert recommend(m("qwen2.5-1.5b-instruct"), "m8g.xlarge").accelerator_name == "Graviton4"


# --------------------------------------------------------------------------------------------- common
def test_non_generative_models_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "bert"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["BertModel"],
                "model_type": "bert",
                "hidden_size": 384,
                "num_hidden_layers": 6,
                "num_attention_heads": 12,
                "intermediate_size": 1536,
                "vocab_size": 30522,
            }
        )
    )
    for inst in ("g6.xlarge", "r8g.xlarge", "inf2.8xlarge"):
        r = recommend(load_model_spec(str(d)), inst)
        assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.non_generative
        assert "not a text-generation model" in r.refusal.reason and "embedding" in r.refusal.reason
        assert r.refusal.way_forward


def test_unknown_quantization_and_instance() -> None:
    with pytest.raises(UserInputError, match="Unknown quantization"):
        recommend(m("qwen2.5-7b-instruct"), "g6.xlarge", FitQuery(quantization="int3"))
    from accelbench.errors import NotFoundError

    with pytest.raises(NotFoundError, match="Did you mean"):
        recommend(m("qwen2.5-7b-instruct"), "g6.xlarg")


def test_recommendation_json_has_fits_settings_reasons() -> None:
    data = json.loads(recommend(m("qwen2.5-7b-instruct"), "g6.xlarge").model_dump_json())
    assert data["fits"] is True
    for key in (
        "tensor_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "max_num_seqs",
        "dtype",
        "quantization",
    ):
        assert key in data["settings"]
    assert data["reasons"] and isinstance(data["warnings"], list)


def test_the_cheapest_instances_that_fit_are_listed_by_price() -> None:
    r = recommend(m("llama-3.1-70b-instruct"), "g6.xlarge")
    assert not r.fits and len(r.alternatives) >= 2
    prices = [a.hourly_usd if a.hourly_usd is not None else math.inf for a in r.alternatives]
    assert prices == sorted(prices)
    assert r.refusal is not None
    (line,) = [w for w in r.refusal.way_forward if w.startswith("Cheapest instances that fit")]
    assert line.index(r.alternatives[0].instance) < line.index(r.alternatives[1].instance)
