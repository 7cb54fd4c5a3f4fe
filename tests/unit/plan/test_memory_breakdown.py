"""``memory_breakdown``: where GPU / NeuronCore memory goes, its verdicts, and the CPU refusal."""

from __future__ import annotations

import pytest

from accelbench.errors import GuardError
from accelbench.modelspec import load_model_spec
from accelbench.plan import memory_breakdown, recommend
from accelbench.plan.memory import GIB, block_table_bytes


def items(b: object) -> dict[str, float]:
    return {i.name: i.gib_per_unit for i in b.items}  # type: ignore[attr-defined]


def test_gpu_breakdown_adds_up_to_the_device() -> None:
    b = memory_breakdown(load_model_spec("qwen2.5-7b-instruct"), "g6.xlarge", kv_cache_dtype="fp8")
    got = items(b)
    # the 21.96 GiB CUDA reports of an L4 (sold as 24 GB) leave 3.9 GiB of KV: 32k contexts no longer fit
    # KV_PLAN_SHARE's sequences, so the context is clamped to 16k
    assert b.unit == "gpu" and b.units == 1 and b.verdict == "clamps" and b.max_model_len == 16384
    total = sum(got.values())
    assert total == pytest.approx(21.96, abs=0.01)  # every GiB CUDA reports is accounted for
    assert got["headroom"] == pytest.approx(2.196, abs=0.001)  # outside gpu_memory_utilization 0.90
    assert got["weights"] == pytest.approx(7_615_616_512 * 2 / GIB, abs=0.001)
    assert got["kv_cache"] > 0 and b.kv_cache_dtype == "fp8"
    assert got["block_table"] == pytest.approx(
        block_table_bytes(b.concurrency, b.max_model_len) / GIB, abs=1e-3
    )
    assert b.used_gib_per_unit == pytest.approx(b.usable_gib_per_unit, abs=0.01)


def test_gpu_breakdown_clamps_and_quantization_metadata() -> None:
    b = memory_breakdown(load_model_spec("qwen2.5-14b-instruct"), "g5.xlarge")  # int8 fallback on A10G
    assert b.verdict == "clamps" and b.weight_format == "int8"
    meta = items(b)["quantization_metadata"]
    model = load_model_spec("qwen2.5-14b-instruct")
    assert meta == pytest.approx(model.parameters.decoder_linear / 128 * 2 / GIB, abs=1e-3)  # +2 B per 128
    assert b.quantization["scale_bytes_per_128"] == 2.0
    int4 = memory_breakdown(model, "g5.xlarge", quantization="int4")
    assert int4.quantization["scale_bytes_per_128"] == 4.0
    assert items(int4)["quantization_metadata"] == pytest.approx(
        model.parameters.decoder_linear / 128 * 4 / GIB, abs=1e-3
    )


def test_gpu_breakdown_infeasible() -> None:
    b = memory_breakdown(load_model_spec("llama-3.1-70b-instruct"), "g5.xlarge", quantization="none")
    assert b.verdict == "infeasible"
    assert items(b)["kv_cache"] == 0
    assert b.free_gib_per_unit < 0
    assert any("Infeasible" in r for r in b.reasons)


def test_neuron_breakdown_per_core() -> None:
    b = memory_breakdown(load_model_spec("llama-3.1-8b-instruct"), "inf2.8xlarge")
    assert b.unit == "neuron_core" and b.units == 2 and b.utilization == 0.85
    assert sum(items(b).values()) == pytest.approx(16.0, abs=0.01)
    rec = recommend(load_model_spec("llama-3.1-8b-instruct"), "inf2.8xlarge")
    assert rec.settings is not None and b.max_model_len == rec.settings.max_model_len


def test_cpu_instances_are_refused_with_a_pointer_to_recommend() -> None:
    with pytest.raises(GuardError) as err:
        memory_breakdown(load_model_spec("qwen2.5-7b-instruct"), "r8g.4xlarge")
    assert "CPU instance" in err.value.message
    assert err.value.hint and "accelbench recommend" in err.value.hint
    assert err.value.status_code == 400


@pytest.mark.parametrize(
    ("name", "instance"),
    [("llama-3.1-70b-instruct", "p4d.24xlarge"), ("mixtral-8x7b-instruct-v0.1", "g6.12xlarge"),
     ("qwen2.5-32b-instruct", "p4d.24xlarge"), ("llama-3.1-8b-instruct", "g6.xlarge")],
)  # fmt: skip
def test_the_table_and_the_reasons_count_the_same_sequences(name: str, instance: str) -> None:
    """One rule for "sequences that fit at max_model_len": the kv_cache row says what the reasons say (issue
    16: the table said 7, the reasons 6, on llama-3.1-70b / p4d.24xlarge)."""
    b = memory_breakdown(load_model_spec(name), instance)
    rec = recommend(load_model_spec(name), instance, suggest_alternatives=False)
    assert rec.settings is not None
    n = rec.settings.concurrency_at_max_len
    (kv,) = [i for i in b.items if i.name == "kv_cache"]
    assert f"holds {n} sequence(s) of {b.max_model_len:,} tokens" in kv.detail
    assert any(f"; {n:,} at the full {b.max_model_len:,} tokens" in r for r in b.reasons)
